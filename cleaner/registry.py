"""Versioned cleaner names -> classes, imported late so `import cleaner` stays light."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Sequence

from cleaner.base import CleanedPage, Cleaner, Extracted, empty

# Cleaning switched off: pages are fetched and stored, no text is extracted (the crawl's baseline).
NO_CLEANER = "none"

# name -> "module:Class"; the name is written into every output record, so bump it on any
# change that alters the text a cleaner produces.
CLEANERS: dict[str, str] = {
    "trafilatura_v1": "cleaner.trafilatura_cleaner:TrafilaturaCleaner",
    "resiliparse_v1": "cleaner.resiliparse_cleaner:ResiliparseCleaner",
    "blocks_v1": "cleaner.blocks_model:BlocksCleaner",
    "decoder_v2": "cleaner.decoder:DecoderCleaner",
    "encoder_v2": "cleaner.encoder:EncoderCleaner",
    "rescraper_v1": "cleaner.rescraper.rescraper_cleaner:RescraperCleaner",
    NO_CLEANER: "cleaner.registry:NoCleaner",
}

# Cleaners whose model belongs on one accelerator: the crawl gives them one worker process (the GPU
# worker) fed large batches, instead of a copy of the model per core.
ACCELERATOR_CLEANERS = frozenset({"decoder_v2", "encoder_v2", "rescraper_v1"})
ACCELERATOR_BATCH_PAGES = 64
# The modules of optional extras (pyproject.toml) each cleaner's model code imports.
CLEANER_MODULES: dict[str, tuple[str, ...]] = {
    "encoder_v2": ("torch", "transformers", "tokenizers"),
    "decoder_v2": ("torch", "transformers"),  # vLLM (the `vllm` extra) only on a GPU
    "rescraper_v1": ("torch", "transformers", "bs4"),  # vLLM too on a GPU, when installed
}


def missing_module(name: str) -> str | None:
    """A module cleaner `name` needs that is not installed here, or None when nothing is missing."""
    return next((m for m in CLEANER_MODULES.get(name, ()) if importlib.util.find_spec(m) is None), None)


class NoCleaner(Cleaner):
    """Extracts nothing, so a crawl can be measured without the cost of cleaning."""

    name = NO_CLEANER

    def extract(self, html: str, url: str | None = None) -> CleanedPage | None:
        return None

    def extract_prepared(
        self, todo: list[tuple[int, str]], urls: Sequence[str], out: list[Extracted]
    ) -> None:
        for i, _ in todo:
            out[i].error = empty("disabled")


def cleaner_names() -> tuple[str, ...]:
    """Known cleaner names, for CLI help and config validation."""
    return tuple(sorted(CLEANERS))


def get_cleaner(name: str) -> Cleaner:
    """Build the cleaner registered under `name`; unknown names list the known ones."""
    target = CLEANERS.get(name)
    if target is None:
        raise ValueError(f"unknown cleaner {name!r}; known cleaners: {', '.join(cleaner_names())}")
    module_name, class_name = target.split(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls()
