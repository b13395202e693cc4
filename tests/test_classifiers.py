"""fastText scorers read tiny models with the published label schemes exactly as they read the real ones."""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import fasttext
import pytest

from cleaner import process_page
from cleaner.cli import register_cli
from cleaner.quality import ScorerSpec, ScorerSpecError, get_scorer, scorer_column
from cleaner.quality.ensemble import N_BUCKETS, EnsembleCalibration, calibrate
from cleaner.quality.fasttext_scorer import FastTextScorer
from cleaner.quality.train import auc, fit_supervised
from crawler.testweb.text import high_content, load_lexicons, low_content

LOW_TYPES = ("keyword_spam", "word_salad", "seo_list", "link_farm")
TINY = {"dim": 16, "bucket": 20_000, "epoch": 25, "lr": 0.1, "wordNgrams": 2, "minCount": 1, "verbose": 0}


def corpus(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """(high, low) documents with one paragraph per line, as a cleaner would hand them over."""
    rng = random.Random(seed)
    lexicons = load_lexicons()
    high, low = [], []
    for i in range(n):
        lex = lexicons["en" if i % 2 else rng.choice(sorted(lexicons))]
        kind = rng.choice(sorted(lex.topics))
        high.append(high_content(rng, lex, kind).text().replace("\n\n", "\n"))
        low_type = LOW_TYPES[i % len(LOW_TYPES)]
        low.append(low_content(rng, lex, kind, low_type, ["/x"]).text().replace("\n\n", "\n"))
    return high, low


def train_tiny(path: Path, rows: list[tuple[str, str]]) -> Path:
    """Train with the fastText library directly, as the published models were trained."""
    data = path.with_suffix(".txt")
    data.write_text("".join(f"__label__{label} {' '.join(text.split())}\n" for text, label in rows))
    fit_supervised({"input": str(data), "seed": 1, "thread": 1, **TINY}, path)
    return path


@pytest.fixture(scope="module")
def texts() -> tuple[list[str], list[str]]:
    return corpus(120)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory, texts: tuple[list[str], list[str]]) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    high, low = texts
    binary = [(t, "hq") for t in high] + [(t, "cc") for t in low]
    # A user's ordinal model: 0..5; prose is 4-5, junk 0-1
    ordinal = [(t, str(4 + i % 2)) for i, t in enumerate(high)] + [(t, str(i % 2)) for i, t in enumerate(low)]
    return {
        "dclm": train_tiny(root / "dclm.bin", binary),
        "ordinal": train_tiny(root / "edu.bin", ordinal),
        # GneissWeb's science model names its positive class after the topic, its negative __label__cc
        "science": train_tiny(root / "sci.bin", [(t, "science") for t in high] + [(t, "cc") for t in low]),
        "good_bad": train_tiny(root / "gb.bin", [(t, "good") for t in high] + [(t, "bad") for t in low]),
        "keep_drop": train_tiny(root / "kd.bin", [(t, "keep") for t in high] + [(t, "drop") for t in low]),
    }


def raw_probs(path: Path, line: str) -> dict[str, float]:
    labels, probs = fasttext.FastText._FastText(model_path=str(path)).predict(line, k=-1)
    return {lab: float(p) for lab, p in zip(labels, probs, strict=True)}


def test_dclm_scorer_is_probability_of_hq_on_lines_joined_with_spaces(models: dict[str, Path]) -> None:
    scorer = get_scorer(f"dclm={models['dclm']}")
    text = "  The harbour opened in spring.\nBoats came from the north.\n\nThe market followed.  "
    expected = raw_probs(
        models["dclm"], "The harbour opened in spring. Boats came from the north.  The market followed."
    )
    assert scorer.name == "dclm"
    assert scorer.score_one(text) == pytest.approx(min(1.0, expected["__label__hq"]), abs=1e-6)
    assert scorer.describe()["scheme"] == "P(__label__hq)"


def test_a_user_ordinal_model_scores_its_expected_label_over_the_top_label(models: dict[str, Path]) -> None:
    scorer = get_scorer(f"edu5={models['ordinal']}")
    text = "Bees dance.\nThe angle gives the direction."
    probs = raw_probs(models["ordinal"], "Bees dance. The angle gives the direction.")
    expected = sum(int(label.removeprefix("__label__")) * p for label, p in probs.items()) / 5
    assert scorer.score_one(text) == pytest.approx(min(1.0, expected), abs=1e-6)


def test_gneissweb_presets_score_one_minus_p_cc_on_newline_joined_text(models: dict[str, Path]) -> None:
    text = "Cells divide.\nEach daughter cell gets a copy."
    for name, model in [("gneissweb_science", "science"), ("gneissweb_quality", "dclm")]:
        scorer = get_scorer(f"{name}={models[model]}")
        probs = raw_probs(models[model], text.replace("\n", " "))
        assert scorer.score_one(text) == pytest.approx(1.0 - probs["__label__cc"], abs=1e-4)
        assert "1 - P(__label__cc)" in scorer.describe()["description"]
    with pytest.raises(ValueError, match="expects a binary model with __label__cc"):
        get_scorer(f"gneissweb_medical={models['keep_drop']}")


@pytest.mark.parametrize("spec", ["dclm", "edu5", "gneissweb_quality"])
def test_model_scorers_rank_held_out_prose_above_junk(models: dict[str, Path], spec: str) -> None:
    model = models["ordinal" if spec == "edu5" else "dclm"]
    scorer = get_scorer(f"{spec}={model}")
    high, low = corpus(40, seed=99)  # not seen in training
    scores = scorer.score_batch(high + low)
    assert auc(scores, [True] * len(high) + [False] * len(low)) > 0.9
    assert all(0.0 <= s <= 1.0 for s in scores)


def test_empty_text_scores_zero_and_batch_equals_one_at_a_time(
    models: dict[str, Path], texts: tuple[list[str], list[str]]
) -> None:
    scorer = get_scorer(f"dclm={models['dclm']}")
    batch = ["", " \n ", *texts[0][:5], *texts[1][:5]]
    scores = scorer.score_batch(batch)
    assert scores[:2] == [0.0, 0.0]
    assert scores == pytest.approx([scorer.score_one(t) for t in batch], abs=1e-6)


def test_user_model_takes_the_named_positive_label_or_a_recognisable_one(models: dict[str, Path]) -> None:
    named = get_scorer(f"mine={models['keep_drop']}:keep")
    flipped = get_scorer(f"mine={models['keep_drop']}:__label__drop")
    guessed = get_scorer(f"mine={models['good_bad']}")
    prose = corpus(3, seed=5)[0][0]
    assert named.score_one(prose) == pytest.approx(1.0 - flipped.score_one(prose), abs=1e-4)
    assert isinstance(guessed, FastTextScorer) and guessed.positive == "__label__good"


def test_user_model_with_unrecognisable_labels_asks_for_the_positive_label(models: dict[str, Path]) -> None:
    with pytest.raises(ValueError, match=r"__label__drop.*__label__keep|__label__keep.*__label__drop") as err:
        get_scorer(f"mine={models['keep_drop']}")
    assert "mine=" in str(err.value) and ":LABEL" in str(err.value)
    with pytest.raises(ValueError, match=r"no label '__label__nope'"):
        get_scorer(f"mine={models['keep_drop']}:nope")


def test_missing_or_corrupt_model_files_are_named_in_the_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nowhere\.bin"):
        get_scorer(f"dclm={tmp_path / 'nowhere.bin'}")
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"not a model" * 100)
    with pytest.raises(ValueError, match=r"junk\.bin"):
        get_scorer(f"dclm={junk}")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("heuristic_v2", ScorerSpec("heuristic_v2")),
        ("dclm=/m/dclm.bin", ScorerSpec("dclm", "/m/dclm.bin")),
        ("mine=/m/a.b/x.bin:__label__ok", ScorerSpec("mine", "/m/a.b/x.bin", "__label__ok")),
        ("win=C:\\models\\x.bin", ScorerSpec("win", "C:\\models\\x.bin")),
    ],
)
def test_classifier_specs_parse_name_path_and_positive_label(text: str, expected: ScorerSpec) -> None:
    assert ScorerSpec.parse(text) == expected
    assert str(ScorerSpec.parse(text)) == text
    assert scorer_column(text) == expected.name


@pytest.mark.parametrize("text", ["1bad=/m.bin", "a b=/m.bin", "heuristic_v2=/m.bin", "dclm="])
def test_bad_classifier_specs_are_refused_with_the_syntax(text: str) -> None:
    with pytest.raises(ScorerSpecError, match=r"NAME=PATH|built-in"):
        ScorerSpec.parse(text)


def test_ensemble_buckets_each_member_by_percentiles_and_takes_the_max(tmp_path: Path) -> None:
    sample = {"a": [i / 100 for i in range(100)], "b": [10 * i for i in range(100)]}
    calibration = calibrate({"a": "heuristic_v2", "b": "heuristic_v1"}, sample)
    assert len(calibration.thresholds["a"]) == N_BUCKETS - 1
    buckets_a = [calibration.bucket("a", s) for s in sample["a"]]
    assert min(buckets_a) == 0 and max(buckets_a) == N_BUCKETS - 1
    assert all(4 <= buckets_a.count(b) <= 6 for b in range(N_BUCKETS))  # ~5% of the sample each
    assert calibration.combine({"a": 0.0, "b": 990}) == calibration.bucket("b", 990) == N_BUCKETS - 1
    assert calibration.combine({"a": 0.52, "b": 0}) == calibration.bucket("a", 0.52) == 10
    path = tmp_path / "ensemble.json"
    calibration.save(path)
    assert EnsembleCalibration.load(path) == calibration


def test_a_mass_of_zero_scores_stays_in_bucket_zero() -> None:
    calibration = calibrate({"a": "heuristic_v2"}, {"a": [0.0] * 60 + [0.5 + i / 100 for i in range(40)]})
    assert calibration.bucket("a", 0.0) == 0
    assert calibration.bucket("a", 0.95) > 15


def test_ensemble_spec_scores_through_its_members(tmp_path: Path, texts: tuple[list[str], list[str]]) -> None:
    high, low = texts
    member = get_scorer("heuristic_v2")
    calibration = calibrate(
        {"heuristic_v2": "heuristic_v2"}, {"heuristic_v2": member.score_batch(high + low)}
    )
    path = tmp_path / "nemotron.json"
    calibration.save(path)
    scorer = get_scorer(f"nemotron={path}")
    scores = scorer.score_batch(high[:10] + low[:10] + [""])
    assert scorer.name == "nemotron"
    assert all(s * (N_BUCKETS - 1) == pytest.approx(round(s * (N_BUCKETS - 1))) for s in scores)
    assert min(scores[:10]) > max(scores[10:20]) and scores[-1] == 0.0


def test_bad_calibration_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "cal.json"
    path.write_text('{"format": "hostcrawl-nemotron-ensemble/1",\n "members": ')
    with pytest.raises(ValueError, match=r"cal.json:2:\d+"):
        get_scorer(f"nemotron={path}")


def test_process_page_scores_with_a_model_spec_and_reports_language(models: dict[str, Path]) -> None:
    high, _ = corpus(4, seed=11)
    html = (
        "<html><body><article>"
        + "".join(f"<p>{p}</p>" for p in high[1].splitlines())
        + "</article></body></html>"
    )
    spec = f"dclm={models['dclm']}"
    result = process_page(html, "http://x.example/a", "trafilatura_v1", ("heuristic_v2", spec))
    assert result.error is None
    assert set(result.scores) == {"heuristic_v2", spec}
    assert result.scores[spec] > 0.5 and result.language == "en" and result.language_score > 0.5


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="hostcrawl")
    register_cli(parser.add_subparsers())
    args = parser.parse_args(argv)
    return int(args.func(args))


def test_classifier_train_writes_a_model_the_scorer_loads_and_prints_held_out_metrics(
    tmp_path: Path, texts: tuple[list[str], list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    high, low = texts
    data = tmp_path / "labelled.jsonl"
    rows = [{"text": t, "label": "hq"} for t in high] + [{"text": t, "label": "cc"} for t in low]
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "model.bin"
    argv = ["classifier", "train", "--data", str(data), "--out", str(out), "--positive-label", "hq"]
    assert run_cli([*argv, "--epoch", "25", "--lr", "0.1", "--dim", "16", "--bucket", "20000"]) == 0
    printed = capsys.readouterr().out
    assert "held-out evaluation" in printed and "accuracy" in printed
    assert "AUC of P(hq)" in printed
    reported_auc = float(printed.split("AUC of P(hq)")[1].split()[0])
    assert reported_auc > 0.9
    scorer = get_scorer(f"mine={out}")
    assert scorer.score_one(high[0]) > scorer.score_one(low[0])


def test_classifier_train_names_the_bad_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "bad.jsonl"
    data.write_text('{"text": "fine", "label": "hq"}\n{"text": "broken", "label": \n')
    assert run_cli(["classifier", "train", "--data", str(data), "--out", str(tmp_path / "m.bin")]) == 2
    assert f"{data}:2:" in capsys.readouterr().err.replace("\n", "")


def test_classifier_info_shows_labels_and_the_preset_rule(
    models: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["classifier", "info", str(models["ordinal"]), "--name", "edu5"]) == 0
    printed = capsys.readouterr().out
    assert "__label__5" in printed and "/ 5" in printed


def test_classifier_train_sizes_the_model_to_its_data(
    tmp_path: Path, texts: tuple[list[str], list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    """DCLM's fixed 2,000,000 hash rows wrote an 800 MB model for a few hundred documents; by default the
    rows follow the data's distinct n-grams, and the model still ranks as it did."""
    high, low = texts
    data = tmp_path / "labelled.jsonl"
    rows = [{"text": t, "label": "hq"} for t in high] + [{"text": t, "label": "cc"} for t in low]
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "model.bin"
    argv = ["classifier", "train", "--data", str(data), "--out", str(out), "--positive-label", "hq"]
    assert run_cli([*argv, "--epoch", "25", "--dim", "16"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    rows_used = int(printed.split(" n-gram hash rows")[0].rsplit(" ", 1)[1].replace(",", ""))
    assert 10_000 <= rows_used < 2_000_000
    assert out.stat().st_size < rows_used * 16 * 4 * 2 < 2_000_000 * 16 * 4
    assert float(printed.split("AUC of P(hq)")[1].split()[0]) > 0.9
    scorer = get_scorer(f"mine={out}")
    assert scorer.score_one(high[0]) > scorer.score_one(low[0])
