"""Language id: the packaged identifier needs no download; lid.176-style models load from a path."""

from __future__ import annotations

from pathlib import Path

import pytest

from cleaner.quality import get_language_identifier, get_scorer, langid_batch, primary_language
from cleaner.quality.langid import BATCH_WALK_MIN, MAX_LANGID_CHARS, FastTextIdentifier, PackagedIdentifier
from cleaner.quality.langid_batch import BatchClassifier
from cleaner.quality.train import fit_supervised
from crawler.testweb.config import TestWebConfig
from crawler.testweb.model import SiteModel
from crawler.testweb.text import ALL_LANGUAGES

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


def _pages_in_eleven_languages() -> list[str]:
    model = SiteModel(TestWebConfig(n_hosts=60, seed=5, languages=ALL_LANGUAGES, hostile_share=0.0))
    texts = [model.render(spec.name, spec.page_path(j)).main_text for spec in model.hosts for j in range(2)]
    return [t for t in texts if t]


def test_a_batch_of_pages_gets_the_verdicts_py3langid_gives_each_page(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """langid_batch.py steps py3langid's DFA for all pages at once from its private tables: every
    language and confidence must be the model's own, to the last bit."""
    model = PackagedIdentifier().model
    pages = _pages_in_eleven_languages()
    odd = ["", "x", "ABC DEF GHI JKL MNO PQR STU VWX", "!!! ... ???", "東京", "Ünïcödé " * 40, "a\ud800b"]
    texts = [page[:MAX_LANGID_CHARS] for page in pages] + odd
    assert len({model.classify(t)[0] for t in pages}) >= 10
    assert BatchClassifier(model).classify(texts) == [model.classify(t) for t in texts]
    monkeypatch.setattr(langid_batch, "HEADS_PER_WALK", 7)  # walks of 7 heads, the last one shorter
    assert BatchClassifier(model).classify(texts) == [model.classify(t) for t in texts]
    # through the identifier: batches take the batch walk, single pages the remembered verdicts
    assert len(pages) >= BATCH_WALK_MIN
    assert PackagedIdentifier().identify_batch(pages) == [PackagedIdentifier().identify(t) for t in pages]


def test_heuristic_v3_scores_a_batch_exactly_as_it_scores_each_page_alone() -> None:
    pages = _pages_in_eleven_languages()
    scorer = get_scorer("heuristic_v3")
    assert scorer.score_batch(pages) == [scorer.score_one(page) for page in pages]
