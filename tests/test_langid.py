"""Language id: the packaged identifier needs no download; lid.176-style models load from a path."""

from __future__ import annotations

from pathlib import Path

import pytest

from cleaner.quality import get_language_identifier, primary_language
from cleaner.quality.langid import FastTextIdentifier, PackagedIdentifier
from cleaner.quality.train import fit_supervised

SAMPLES = {
    "en": "The committee voted to keep the library open on Sunday afternoons for another year.",
    "de": "Die Stadtbibliothek hat in diesem Jahr mehr Besucher gezählt als je zuvor, vor allem Familien.",
    "fr": "Le marché couvert de la ville a rouvert ses portes après deux ans de travaux importants.",
    "es": "El ayuntamiento ha presentado un plan para plantar más de dos mil árboles en los barrios.",
    "it": "Il consiglio comunale ha approvato il nuovo piano per le piste ciclabili del centro storico.",
    "nl": "De gemeenteraad heeft besloten om de bibliotheek op zondagmiddag langer open te houden.",
}


def test_packaged_identifier_names_the_language_of_each_sample_without_any_download() -> None:
    identifier = get_language_identifier()
    assert isinstance(identifier, PackagedIdentifier)
    found = identifier.identify_batch(list(SAMPLES.values()))
    assert [lang.code if lang else None for lang in found] == list(SAMPLES)
    assert all(lang is not None and 0.5 < lang.score <= 1.0 for lang in found)


def test_text_too_short_to_tell_gets_no_language() -> None:
    identifier = get_language_identifier()
    assert identifier.identify_batch(["", "OK", "12 34 56 78 90 !!", "Home | Login"]) == [None] * 4


@pytest.fixture(scope="module")
def lid_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model with lid.176's label scheme (`__label__<code>`)."""
    root = tmp_path_factory.mktemp("lid")
    lines = [f"__label__{code} {text}\n" for code, text in SAMPLES.items() for _ in range(20)]
    (root / "lid.txt").write_text("".join(lines))
    params = {"input": str(root / "lid.txt"), "dim": 16, "epoch": 60, "minn": 2, "maxn": 4, "bucket": 20_000}
    fit_supervised({**params, "thread": 1, "verbose": 0}, root / "lid.176.bin")
    return root / "lid.176.bin"


def test_fasttext_lid_model_from_a_path_reads_codes_from_its_labels(lid_model: Path) -> None:
    identifier = get_language_identifier(str(lid_model))
    assert isinstance(identifier, FastTextIdentifier)
    found = identifier.identify_batch([SAMPLES["de"] + "\nZweite Zeile.", SAMPLES["fr"], "x"])
    assert found[0] is not None and found[0].code == "de"
    assert found[1] is not None and found[1].code == "fr"
    assert found[2] is None


def test_missing_lid_model_is_named() -> None:
    with pytest.raises(FileNotFoundError, match=r"lid\.176\.ftz"):
        get_language_identifier("/nowhere/lid.176.ftz")


def test_host_primary_language_is_the_commonest_with_its_share() -> None:
    assert primary_language(["de", "de", "en", None]) == ("de", 0.5)
    assert primary_language(["fr", "en"]) == ("en", 0.5)  # ties resolve the same way every time
    assert primary_language([None, None]) == (None, 0.0)
    assert primary_language([]) == (None, 0.0)
