"""A model cleaner's batch as three pool calls, so parsing and the model run in different processes:

    prepare_pages   a CPU worker: sanitise, parse and simplify each page as the model reads it
    label_pages     the one model process: one labeller call for the batch (tokenise, forward/generate)
    finish_pages    a CPU worker: render the labelled blocks (or the fallback's text), language, scores

Chained, they give what `process_pages` gives for the batch in one call (tests/test_model_stages.py checks
they agree page for page), with the same counters and reasons. The model process never parses HTML, so an
accelerator is fed the next batch while the CPU workers parse the one after
(crawler/pages/staged_pool.py chains the calls). Every value passed between them pickles: pages as
prepared, labels, and a labeller's exceptions as LabelFailure.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cleaner.base import Extracted, check_texts, failed, init_failed, sanitise_batch
from cleaner.labeller import LabelFailure, LabellerCleaner, NoLabels
from cleaner.pipeline import (
    WARM_UP_PAGE,
    PageResult,
    cached_cleaner,
    cached_identifier,
    finish_extracted,
)
from cleaner.quality.langid import DEFAULT_LANGID

LOGGER = logging.getLogger(__name__)

WARM_UP_URL = "http://warm-up.invalid/"


@dataclass(slots=True)
class PreparedBatch:
    """A batch after its CPU preparation: one Extracted per page (the reason of the pages that need no
    model already set) and the pages the model labels, by index."""

    urls: list[str]
    out: list[Extracted]
    pages: list[tuple[int, Any]]
    inputs: list[Any]  # what the model reads of each of `pages` (LabellerCleaner.model_input), in order
    seconds: float = 0.0  # time spent on the batch so far, in every process


def labeller_cleaner(name: str) -> LabellerCleaner[Any, Any]:
    """The worker's cleaner `name`, which must label with a model (the cleaners a staged pool runs)."""
    cleaner = cached_cleaner(name)
    if not isinstance(cleaner, LabellerCleaner):
        raise TypeError(f"cleaner {name!r} has no model stage; run it with process_pages")
    return cleaner


def prepare_pages(pages: Sequence[tuple[str, str]], cleaner_name: str) -> PreparedBatch:
    """Sanitise and prepare (html, url) pages; never raises, never loads the model."""
    started = time.perf_counter()
    urls = [url for _, url in pages]
    try:
        cleaner = labeller_cleaner(cleaner_name)
    except Exception as exc:
        out = [Extracted(error=init_failed(exc)) for _ in pages]
        return PreparedBatch(urls, out, [], [], time.perf_counter() - started)
    try:
        out, todo = sanitise_batch([html for html, _ in pages])
        prepared = cleaner.prepare_each(todo, out)
    except Exception as exc:  # a bug above must cost this batch its text, not the crawl its batch
        LOGGER.exception("preparing a batch of %d pages failed", len(pages))
        out, prepared = [Extracted(error=failed("cleaner", exc)) for _ in pages], []
    inputs = [cleaner.model_input(page) for _, page in prepared]
    return PreparedBatch(urls, out, prepared, inputs, time.perf_counter() - started)


def label_pages(pages: Sequence[Any], cleaner_name: str) -> tuple[list[Any], float]:
    """The model's answer for each prepared page (NoLabels or LabelFailure where it has none), and the
    seconds it took; never raises for a page."""
    started = time.perf_counter()
    try:
        labels: list[Any] = labeller_cleaner(cleaner_name).label_sendable(pages)
    except Exception as exc:
        labels = [LabelFailure(init_failed(exc)) for _ in pages]
    return labels, time.perf_counter() - started


def finish_pages(
    batch: PreparedBatch,
    labels: Sequence[Any],
    label_seconds: float,
    cleaner_name: str,
    scorer_names: tuple[str, ...],
    langid: str | None = DEFAULT_LANGID,
) -> list[PageResult]:
    """Render each labelled page, then language and scores: the batch's PageResults."""
    started = time.perf_counter()
    try:
        labeller_cleaner(cleaner_name).render_each(batch.pages, labels, batch.out)
        check_texts(batch.out)
    except Exception as exc:
        LOGGER.exception("rendering a batch of %d pages failed", len(batch.out))
        for i, _ in batch.pages:
            batch.out[i] = Extracted(error=failed("cleaner", exc))
    seconds = batch.seconds + label_seconds
    return finish_extracted(batch.out, batch.urls, cleaner_name, scorer_names, langid, started, seconds)


def warm_up_prepare(
    cleaner_name: str, scorer_names: tuple[str, ...], langid: str | None = DEFAULT_LANGID
) -> None:
    """A CPU worker's start-up: the cleaner's preparation and fallback, scorers and language id, run once
    (no model). finish_pages loads the scorers on every page, text or not; language id only runs on a
    page with text, which a cleaner without a fallback does not give here, so it is loaded on its own."""
    batch = prepare_pages([(WARM_UP_PAGE, WARM_UP_URL)], cleaner_name)
    finish_pages(batch, [NoLabels("warm_up")] * len(batch.pages), 0.0, cleaner_name, scorer_names, langid)
    if langid is not None:
        cached_identifier(langid).identify(WARM_UP_PAGE)


def warm_up_model(cleaner_name: str) -> None:
    """The model process's start-up: load the model and label one page."""
    batch = prepare_pages([(WARM_UP_PAGE, WARM_UP_URL)], cleaner_name)
    label_pages(batch.inputs, cleaner_name)
