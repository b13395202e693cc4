"""`hostcrawl study` and `hostcrawl report` as a user runs them, including the inputs they must refuse."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from analytics.cli import EXIT_OK, EXIT_USAGE, main
from analytics.study_inputs import STUDY_ORDER


@pytest.fixture(scope="module")
def synth_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "synth"
    assert main(["study", "synth", "--hosts", "3000", "--page-hosts", "2000", "--out", str(out)]) == EXIT_OK
    return out


def _linked_images_exist(report: Path) -> list[str]:
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", report.read_text())
    assert links
    return [link for link in links if not (report.parent / link).is_file()]


def test_study_all_then_report_writes_every_section_with_its_plots(synth_dir: Path) -> None:
    assert main(["study", "all", "--data", str(synth_dir)]) == EXIT_OK
    for name in STUDY_ORDER:
        folder = synth_dir / "studies" / name
        assert (folder / "section.md").is_file() and (folder / "study.json").is_file()
        assert list(folder.glob("*.parquet")) and list(folder.glob("*.png"))
    assert main(["report", str(synth_dir / "studies")]) == EXIT_OK
    report = synth_dir / "studies" / "report.md"
    text = report.read_text()
    assert [text.index(f'id="{name}"') for name in STUDY_ORDER] == sorted(
        text.index(f'id="{n}"') for n in STUDY_ORDER
    )
    assert _linked_images_exist(report) == []


def _crawl_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    rows = []
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for h in range(60):
        for i in range(8):
            score = None if i == 7 else ((h % 5) / 5 + i / 40)  # one non-HTML page per host has no score
            fetched_at = start + timedelta(seconds=h * 10 + i)
            url, host = f"http://site-{h}.example/{i}", f"site-{h}.example"
            rows.append({"url": url, "host": host, "score_heuristic_v1": score, "fetched_at": fetched_at})
    pages = pl.DataFrame(rows)
    pages.write_parquet(run / "pages.parquet")
    pages.group_by("host").agg(fetched=pl.len(), first_fetch=pl.col("fetched_at").min()).write_parquet(
        run / "hosts.parquet"
    )
    (run / "report.md").write_text("# Crawl report: run\n")
    return run


def test_report_on_a_crawl_run_keeps_the_crawlers_report(tmp_path: Path) -> None:
    run = _crawl_run(tmp_path)
    assert main(["report", str(run)]) == EXIT_OK
    assert (run / "report.md").read_text() == "# Crawl report: run\n"
    report = run / "study-report.md"
    text = report.read_text()
    assert "ICC1" in text and "depth simulation" in text
    assert "this crawl's own order" in text  # the yield study used hosts.parquet's first fetches
    assert not (run / "studies" / "language").exists()  # no language column, no ranks
    assert _linked_images_exist(report) == []


def test_missing_column_is_named_with_its_expected_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pl.DataFrame({"url": ["http://a/"], "score_q": [0.5]}).write_parquet(tmp_path / "p.parquet")
    assert (
        main(["study", "icc", "--pages", str(tmp_path / "p.parquet"), "--out", str(tmp_path)]) == EXIT_USAGE
    )
    err = capsys.readouterr().err
    assert "p.parquet" in err and "missing column 'host'" in err and "string" in err


def test_mistyped_score_column_is_named_with_its_expected_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pl.DataFrame({"url": ["http://a/"], "host": ["a"], "score_q": ["high"]}).write_parquet(
        tmp_path / "p.parquet"
    )
    assert (
        main(["study", "depth", "--pages", str(tmp_path / "p.parquet"), "--out", str(tmp_path)]) == EXIT_USAGE
    )
    err = capsys.readouterr().err
    assert "column 'score_q' has type large_string, expected number (double)" in err


def _index_part(folder: Path, name: str, frame: pl.DataFrame) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    frame.write_parquet(folder / name)


def _index_rows(surts: list[str], **extra: list[object]) -> pl.DataFrame:
    n = len(surts)
    base = {
        "surt_host_name": surts,
        "url_host_tld": ["com"] * n,
        "nutch_numRecords": [10] * n,
        "nutch_fetched": list(range(1, n + 1)),
        "nutch_fetched_pct": pl.Series([10 * (i + 1) for i in range(n)], dtype=pl.Int8),
        "nutch_unfetched": [10 - i - 1 for i in range(n)],
        "fetch_200": [1] * n,
    }
    return pl.DataFrame({**base, **extra})


def test_host_index_partitions_with_different_schemas_are_read_by_column_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    crawl = tmp_path / "hi" / "crawl=CC-MAIN-2024-10"
    _index_part(crawl, "a.parquet", _index_rows(["com,a", "com,b", "com,c"], robots_200=[1, 1, 1]))
    # The second file lacks robots_200, has a column the first lacks, and orders its columns differently.
    second = _index_rows(["com,d", "com,e"], fetch_3xx=[0, 2])
    _index_part(crawl, "b.parquet", second.select(list(reversed(second.columns))))
    notes = tmp_path / "ann" / "crawl=CC-MAIN-2024-10"
    surts = ["com,a", "com,b", "com,c", "com,d", "com,e"]
    _index_part(
        notes,
        "n.parquet",
        pl.DataFrame({"surt_host_name": surts, "gneissweb_education": [0.1, 0.2, 0.3, 0.4, 0.5]}),
    )
    args = ["study", "coverage", "--host-index", str(tmp_path / "hi"), "--annotations", str(tmp_path / "ann")]
    assert main([*args, "--out", str(tmp_path / "st")]) == EXIT_OK
    summary = pl.read_parquet(tmp_path / "st" / "coverage" / "coverage_summary.parquet").row(0, named=True)
    assert summary["hosts"] == 5 and summary["crawl"] == "CC-MAIN-2024-10"
    # A second crawl makes the choice explicit.
    _index_part(tmp_path / "hi" / "crawl=CC-MAIN-2024-18", "a.parquet", _index_rows(["com,a"]))
    assert main([*args, "--out", str(tmp_path / "st")]) == EXIT_USAGE
    assert "--crawl" in capsys.readouterr().err
    assert main([*args, "--crawl", "CC-MAIN-2024-10", "--out", str(tmp_path / "st")]) == EXIT_OK


def test_mistyped_host_index_column_names_file_column_and_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    crawl = tmp_path / "hi" / "crawl=CC-MAIN-2024-10"
    _index_part(
        crawl, "a.parquet", _index_rows(["com,a"]).with_columns(pl.col("nutch_fetched_pct").cast(pl.String))
    )
    _index_part(
        tmp_path / "ann",
        "n.parquet",
        pl.DataFrame({"surt_host_name": ["com,a"], "gneissweb_education": [0.1]}),
    )
    args = ["study", "coverage", "--host-index", str(tmp_path / "hi"), "--annotations", str(tmp_path / "ann")]
    assert main([*args, "--out", str(tmp_path / "st")]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "a.parquet" in err and "'nutch_fetched_pct' has type large_string, expected integer (int8)" in err


def test_unknown_quality_column_is_refused_with_the_available_ones(
    synth_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "study",
        "coverage",
        "--data",
        str(synth_dir),
        "--quality",
        "gw_pages / fetch_200",
        "--out",
        str(tmp_path),
    ]
    assert main(args) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "gw_pages" in err and "gneissweb_education" in err


def test_synth_refuses_an_impossible_truth(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["study", "synth", "--hosts", "100", "--icc", "1.5", "--out", str(tmp_path)]) == EXIT_USAGE
    assert "--icc" in capsys.readouterr().err


def test_synth_interrupted_leaves_nothing_a_study_would_read(tmp_path: Path) -> None:
    """An interrupted `study synth` used to leave a host index that `study all` read as complete."""
    out = tmp_path / "synth"
    command = [sys.executable, "-m", "crawler.cli", "study", "synth", "--hosts", "2000000"]
    process = subprocess.Popen(
        [*command, "--page-hosts", "1000", "--out", str(out)], stderr=subprocess.PIPE, text=True
    )
    assert process.stderr is not None
    first = process.stderr.readline()  # "hosts 500,000/..." once the first chunk is on disk
    assert first.startswith("hosts "), first
    process.send_signal(signal.SIGINT)
    rest = process.communicate(timeout=120)[1]
    assert process.returncode == 130, rest
    assert "interrupted: nothing was written" in rest and "Traceback" not in rest
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_synth_of_a_second_crawl_keeps_the_first_crawls_partition(tmp_path: Path) -> None:
    out = tmp_path / "synth"
    for crawl in ("CC-MAIN-2024-10", "CC-MAIN-2024-18"):
        argv = ["study", "synth", "--hosts", "300", "--crawl", crawl, "--out", str(out)]
        assert main(argv) == EXIT_OK
    parts = sorted(p.name for p in (out / "host_index").iterdir())
    assert parts == ["crawl=CC-MAIN-2024-10", "crawl=CC-MAIN-2024-18"]
    assert (out / "truth.json").is_file() and not (tmp_path / ".synth.partial").exists()


@pytest.mark.parametrize("command", ["study", "plan"])
def test_a_memory_limit_too_small_is_one_line_naming_the_setting(
    synth_dir: Path, tmp_path: Path, command: str
) -> None:
    """DuckDB's out-of-memory error (a 100M-row host index under 2 GB did this) used to be a traceback, or
    for the recrawl plan 'the --quality expression cannot be computed'."""
    out = tmp_path / "out"
    args = ["study", "coverage", "--data", str(synth_dir), "--out", str(out)]
    if command == "plan":
        args = ["recrawl", "plan", "--data", str(synth_dir), "--out", str(out / "plan.parquet")]
    env = {**os.environ, "HOSTCRAWL_DUCKDB_MEMORY": "1MB"}
    done = subprocess.run(
        [sys.executable, "-m", "crawler.cli", *args], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == EXIT_USAGE, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "HOSTCRAWL_DUCKDB_MEMORY" in lines[0] and "(1MB)" in lines[0], lines
    assert not out.exists()  # "nothing was written": not even an empty folder (DuckDB's spill was in it)


@pytest.mark.parametrize("command", ["study", "plan", "synth"])
def test_a_memory_limit_that_is_not_a_size_is_one_line_before_any_work(
    synth_dir: Path, tmp_path: Path, command: str
) -> None:
    """The setting the out-of-memory line names: a value DuckDB cannot parse was a ParserException
    traceback (and `study synth` would have found out only after writing every row)."""
    out = tmp_path / "out"
    args = {
        "study": ["study", "coverage", "--data", str(synth_dir), "--out", str(out)],
        "plan": ["recrawl", "plan", "--data", str(synth_dir), "--out", str(out / "plan.parquet")],
        "synth": ["study", "synth", "--hosts", "100", "--out", str(out)],
    }[command]
    env = {**os.environ, "HOSTCRAWL_DUCKDB_MEMORY": "lots"}
    done = subprocess.run(
        [sys.executable, "-m", "crawler.cli", *args], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == EXIT_USAGE, done.stderr[-2000:]
    lines = [line for line in done.stderr.strip().splitlines() if line.startswith("error")]
    expected = "error: HOSTCRAWL_DUCKDB_MEMORY='lots': give a size such as 4GB, 512MB or 80%"
    assert lines == [expected], done.stderr
    assert "Traceback" not in done.stderr and not out.exists()
