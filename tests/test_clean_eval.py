"""`hostcrawl clean eval|gate`: the WCXB metric, per-type report, predictions, and the CI quality gate."""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import pytest
from shared_data import require_shared_data

from cleaner.blocks_files import DEFAULT_MODEL
from cleaner.blocks_model import BlocksModel
from cleaner.clean_cli import add_clean_commands
from cleaner.evaluate import evaluate
from cleaner.gate import load_gate
from cleaner.registry import get_cleaner
from cleaner.wcxb import heldout_ids, iter_pages, page_ids, snippet_hits, word_f1

ARTICLE = "The harbour master said the new quay will open in May after two years of work on the old pier."


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="hostcrawl")
    add_clean_commands(parser.add_subparsers())
    args = parser.parse_args(argv)
    return int(args.func(args))


def _write_dataset(root: Path) -> Path:
    """A two-page folder in the WCXB layout."""
    (root / "html").mkdir(parents=True)
    (root / "ground-truth").mkdir()
    pages = {
        "0001": ("article", f"<nav><a href='/'>Home</a> <a href='/x'>Shop</a></nav><article><p>{ARTICLE}</p>"
                            f"<p>{ARTICLE}</p></article><footer>Copyright Harbour Times</footer>"),
        "0002": ("forum", "<div><p>Only snippets are known for this page, with a reply by Ann.</p></div>"),
    }  # fmt: skip
    files = {}
    for file_id, (page_type, body) in pages.items():
        (root / "html" / f"{file_id}.html.gz").write_bytes(
            gzip.compress(f"<html><body>{body}</body></html>".encode())
        )
        truth = {
            "url": f"https://site{file_id}.example/",
            "ground_truth": {
                "main_content": f"{ARTICLE}\n{ARTICLE}" if file_id == "0001" else None,
                "with": ["harbour master said"] if file_id == "0001" else ["reply by Ann"],
                "without": ["Copyright Harbour Times"],
            },
        }
        (root / "ground-truth" / f"{file_id}.json").write_text(json.dumps(truth))
        files[file_id] = {"page_type": page_type, "domain": f"site{file_id}.example"}
    (root / "metadata.json").write_text(json.dumps({"name": "tiny", "files": files}))
    return root


def test_word_f1_is_the_bag_of_words_metric() -> None:
    assert word_f1("The cat, the CAT!", "the cat the cat") == (1.0, 1.0, 1.0)
    precision, recall, f1 = word_f1("a b c d", "a b")
    assert (precision, recall) == (0.5, 1.0) and f1 == pytest.approx(2 / 3)
    assert word_f1("", "anything") == (0.0, 0.0, 0.0)
    assert snippet_hits("Hello   World, again", ["hello world", "absent", " "]) == 1


def test_evaluate_reports_per_type_f1_snippets_and_skips_snippet_only_pages(tmp_path: Path) -> None:
    root = _write_dataset(tmp_path / "data")
    report = evaluate(get_cleaner("resiliparse_v1"), iter_pages(root))
    assert len(report.pages) == 2
    assert set(report.per_type()) == {"article", "all"}  # the forum page has no main_content
    assert report.macro_f1 > 0.9
    article = report.per_type()["article"]
    assert article.pages == 1 and article.precision > 0.9 and article.recall > 0.9
    assert report.with_share == 1.0 and report.without_share == 1.0
    assert report.pages_per_second > 0


def test_eval_cli_writes_one_prediction_per_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _write_dataset(tmp_path / "data")
    out = tmp_path / "pred.jsonl"
    code = _run(["clean", "eval", "--data", str(root), "--cleaner", "blocks_v1", "--predictions", str(out),
                 "--json"])  # fmt: skip
    assert code == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["id"] for line in lines] == ["0001", "0002"]
    assert "harbour master" in lines[0]["text"]
    report = json.loads(capsys.readouterr().out)
    assert report["cleaner"] == "blocks_v1" and report["pages"] == 2
    assert set(report["per_type"]["article"]) == {"pages", "precision", "recall", "f1"}


def test_eval_cli_rejects_unknown_cleaner_and_names_the_broken_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _write_dataset(tmp_path / "data")
    assert _run(["clean", "eval", "--data", str(root), "--cleaner", "nope"]) == 2
    (root / "ground-truth" / "0002.json").write_text("{broken")
    assert _run(["clean", "eval", "--data", str(root), "--cleaner", "resiliparse_v1"]) == 2
    assert "0002.json:1:2" in capsys.readouterr().err.replace("\n", "")
    assert _run(["clean", "eval", "--data", str(tmp_path / "missing"), "--cleaner", "blocks_v1"]) == 2


def test_gate_refuses_to_lower_a_minimum_without_flag_and_reason(tmp_path: Path) -> None:
    root = _write_dataset(tmp_path / "data")
    gate = load_gate()
    report = evaluate(get_cleaner("resiliparse_v1"), iter_pages(root, ["0002"]))  # no F1 pages -> 0.0
    gate.minimum_f1["resiliparse_v1"] = 0.5
    assert gate.check(report) is not None
    with pytest.raises(ValueError, match="allow-lower"):
        gate.record(report, allow_lower=False, reason=None)
    gate.record(report, allow_lower=True, reason="resiliparse 3 changed its defaults")
    assert gate.history[-1]["reason"] == "resiliparse 3 changed its defaults"


def test_a_cleaner_with_no_recorded_minimum_fails_the_gate_instead_of_passing_by_default(
    tmp_path: Path,
) -> None:
    root = _write_dataset(tmp_path / "data")
    gate = load_gate()
    report = evaluate(get_cleaner("resiliparse_v1"), iter_pages(root, ["0001"]))
    del gate.minimum_f1["resiliparse_v1"]  # as encoder_v2 and decoder_v2 are: no model here to measure
    problem = gate.check(report)
    assert problem is not None and "no minimum is recorded" in problem and "--record" in problem


def test_every_cleaner_holds_its_recorded_minimum_on_the_gate_subset() -> None:
    root = require_shared_data("wcxb-dev")
    gate = load_gate()
    ids = gate.subset(page_ids(root))
    assert gate.minimum_f1, "no minima recorded in cleaner/quality_gate.json"
    failures = []
    for name in sorted(gate.minimum_f1):
        problem = gate.check(evaluate(get_cleaner(name), iter_pages(root, ids)))
        if problem:
            failures.append(problem)
    assert not failures, "; ".join(failures)


def test_gate_pages_are_held_out_sites_the_shipped_model_never_trained_on() -> None:
    heldout = heldout_ids()
    trained = set(BlocksModel.load(DEFAULT_MODEL).meta["page_ids"])
    assert len(trained) > 900 and len(heldout) > 250
    assert not trained & heldout
    root = require_shared_data("wcxb-dev")
    files = json.loads((root / "metadata.json").read_text())["files"]
    assert load_gate().subset(page_ids(root)) == sorted(heldout)
    # whole sites are held out: the model has seen no page of a gate page's domain
    assert not {files[i]["domain"] for i in trained} & {files[i]["domain"] for i in heldout}


def test_gate_cli_prints_precision_and_recall_per_type_for_each_cleaner(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _write_dataset(tmp_path / "data")
    gate = tmp_path / "gate.json"
    (tmp_path / "heldout.json").write_text(json.dumps({"ids": ["0001", "0002"]}))
    minima = {"resiliparse_v1": 0.5, "trafilatura_v1": 0.5}
    gate.write_text(json.dumps({"pages": "heldout.json", "minimum_f1": minima}))
    cleaners = ["--cleaner", "resiliparse_v1", "--cleaner", "trafilatura_v1"]
    assert _run(["clean", "gate", "--data", str(root), "--gate-file", str(gate), *cleaners]) == 0
    out = capsys.readouterr().out
    assert "resiliparse_v1: macro F1" in out and "precision / recall / F1" in out
    article = next(line for line in out.splitlines() if line.strip("│ ").startswith("article"))
    assert article.count("/") == 4  # precision / recall / F1 for both cleaners
    # a cleaner with no recorded minimum is not passed by default
    gate.write_text(json.dumps({"pages": "heldout.json", "minimum_f1": {"resiliparse_v1": 0.5}}))
    assert _run(["clean", "gate", "--data", str(root), "--gate-file", str(gate), *cleaners]) == 1
    assert "trafilatura_v1: macro F1 0.6667, but no minimum is recorded" in capsys.readouterr().out
