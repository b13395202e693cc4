"""heuristic_v3 scores pages in every language by that language's own statistics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from cleaner.quality import DEFAULT_SCORER, HIGH_QUALITY_THRESHOLD, get_scorer
from cleaner.quality.heuristic_stats import text_stats
from cleaner.quality.language_profiles import LanguageThresholds, profile
from cleaner.quality.segment import segment
from crawler.run.crawl_config import ConfigError, load_config
from crawler.run.run_report import language_scores
from crawler.testweb.config import TestWebConfig
from crawler.testweb.model import SiteModel
from crawler.testweb.text import ALL_LANGUAGES, LANGUAGES

PAGES_PER_LANGUAGE = 24


def _auc(scores: list[float], labels: list[bool]) -> float:
    good = [s for s, label in zip(scores, labels, strict=True) if label]
    junk = [s for s, label in zip(scores, labels, strict=True) if not label]
    wins = sum((g > j) + 0.5 * (g == j) for g in good for j in junk)
    return wins / (len(good) * len(junk))


@pytest.fixture(scope="module")
def pages() -> dict[str, tuple[list[str], list[bool]]]:
    """Good and junk main texts per language from a multilingual test web (seed 2; the lists were
    written looking at seed 0)."""
    model = SiteModel(TestWebConfig(n_hosts=200, seed=2, languages=ALL_LANGUAGES, hostile_share=0.0))
    out: dict[str, tuple[list[str], list[bool]]] = {lang: ([], []) for lang in ALL_LANGUAGES}
    for spec in model.hosts:
        texts, labels = out[spec.language]
        for j in range(min(spec.n_pages, 4)):
            if len(texts) < PAGES_PER_LANGUAGE:
                r = model.render(spec.name, spec.page_path(j))
                texts.append(r.main_text)
                labels.append(bool(r.label))
    return out


def test_the_default_scorer_ranks_and_keeps_good_pages_in_every_language(
    pages: dict[str, tuple[list[str], list[bool]]],
) -> None:
    scorer = get_scorer(DEFAULT_SCORER)
    assert DEFAULT_SCORER == "heuristic_v3"
    aucs = {}
    for language, (texts, labels) in pages.items():
        assert len(texts) == PAGES_PER_LANGUAGE and any(labels) and not all(labels), language
        scores = scorer.score_batch(texts)
        aucs[language] = _auc(scores, labels)
        kept = np.array(scores) > HIGH_QUALITY_THRESHOLD
        good = np.array(labels)
        assert kept[good].mean() >= 0.9, (language, np.array(scores)[good])
        assert not kept[~good].any(), (language, np.array(scores)[~good])
    assert all(aucs["en"] - auc <= 0.05 for auc in aucs.values()), aucs


def test_english_rules_kept_chinese_and_russian_prose_out_and_v3_lets_it_in(
    pages: dict[str, tuple[list[str], list[bool]]],
) -> None:
    v2, v3 = get_scorer("heuristic_v2"), get_scorer("heuristic_v3")
    for language in ("zh", "ru", "ar", "ja", "th"):
        texts, labels = pages[language]
        good = [t for t, label in zip(texts, labels, strict=True) if label]
        assert max(v2.score_batch(good)) < HIGH_QUALITY_THRESHOLD, language  # the symptom
        assert min(v3.score_batch(good)) > HIGH_QUALITY_THRESHOLD, language


def test_segmentation_turns_chinese_japanese_and_thai_runs_into_words() -> None:
    zh = segment("我们的团队支持城市里的新项目。", "zh").split()
    assert "团队" in zh and "项目。" in zh  # a sentence mark stays on its word
    assert "博物館" in "".join(segment("東京の博物館を訪れました。", "ja").split())
    assert len(segment("ทีมงานของเราสนับสนุนโครงการใหม่", "th").split()) >= 4
    assert segment("The river. Le fleuve.", "en") == "The river. Le fleuve."


def test_combining_marks_stay_inside_words_for_v3() -> None:
    hindi = "हैं किताब"  # vowel signs and nasalisation are combining marks
    assert len(text_stats(hindi, marks=True).word_ids) == 2
    assert len(text_stats(hindi).word_ids) > 2  # v1/v2 cut words at them (their numbers are kept)


def test_thresholds_follow_each_language_statistics() -> None:
    en, zh, ar, th = profile("en"), profile("zh"), profile("ar"), profile("th")
    assert en.mean_word_len == pytest.approx((3.0, 10.0), rel=1e-9)
    assert zh.mean_word_len[0] < 1.5 < zh.mean_word_len[1] < 4  # Chinese words are 1-2 characters
    assert zh.short_line_chars < 15 < en.short_line_chars
    assert ar.min_stop_share < en.min_stop_share  # Arabic glues articles and prepositions to words
    assert not th.punct_rule and en.punct_rule  # Thai ends sentences with a space
    unknown = profile("xx")
    assert unknown.stop_ids is None and unknown.stop_share(np.ones(3, np.uint64)) is None


def test_the_default_test_web_keeps_its_four_languages() -> None:
    model = SiteModel(TestWebConfig(n_hosts=300, seed=0, robots_dir=""))
    languages = [h.language for h in model.hosts]
    assert set(languages) == set(LANGUAGES) and languages.count("en") > 150


def test_a_language_threshold_is_set_in_the_config_and_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "crawl.toml"
    path.write_text("[cleaning]\nthreshold = 0.5\nlanguage_thresholds = { zh = 0.4, ja = 0.45 }\n")
    config = load_config(path)
    assert config.cleaning.language_thresholds == {"zh": 0.4, "ja": 0.45}
    again = tmp_path / "again.toml"
    again.write_text(config.to_toml())
    assert load_config(again).cleaning.language_thresholds == {"zh": 0.4, "ja": 0.45}
    path.write_text("[cleaning]\nlanguage_thresholds = { zh = 1.5 }\n")
    with pytest.raises(ConfigError, match="language_thresholds"):
        load_config(path)
    path.write_text('[cleaning]\nlanguage_thresholds = { zh = "low" }\n')
    with pytest.raises(ConfigError, match=r"crawl\.toml:2"):
        load_config(path)


def test_a_page_clears_its_own_language_bar_on_the_scale_the_scheduler_reads() -> None:
    thresholds = LanguageThresholds(0.5, {"zh": 0.4})
    assert thresholds.of("zh") == 0.4 and thresholds.of("en") == 0.5 and thresholds.of(None) == 0.5
    for score in (0.0, 0.3, 0.39, 0.41, 0.7, 1.0):
        mapped = thresholds.on_default_scale(score, "zh")
        assert mapped is not None and (mapped > 0.5) == (score > 0.4) and 0.0 <= mapped <= 1.0
    assert thresholds.on_default_scale(0.45, "en") == 0.45 and thresholds.on_default_scale(None, "zh") is None


def test_the_run_report_shows_score_distributions_per_language() -> None:
    pages = pl.DataFrame(
        {
            "language": ["en", "en", "zh", "zh", "zh", None],
            "score_heuristic_v3": [0.9, 0.1, 0.8, 0.7, 0.2, None],
            "curated": [True, False, True, True, False, False],
        }
    )
    table = language_scores(pages, "score_heuristic_v3", 0.5).splitlines()
    assert table[0].startswith("| language | pages | mean")
    assert table[2].startswith("| zh | 3 | 0.567") and table[3].startswith("| en | 2 | 0.500")


def test_a_page_language_is_identified_once_for_the_crawl_and_the_scorer() -> None:
    from cleaner.pipeline import process_page
    from cleaner.quality.langid import _classify

    html = "<html><body><article><p>" + "Наша команда поддерживает новый проект в городе. " * 20
    html += "</p></article></body></html>"
    before = _classify.cache_info()
    result = process_page(html, "http://ru.example/", "trafilatura_v1", ("heuristic_v3",))
    after = _classify.cache_info()
    assert result.language == "ru" and result.scores["heuristic_v3"] > 0.0
    assert after.misses - before.misses == 1 and after.hits - before.hits == 1
