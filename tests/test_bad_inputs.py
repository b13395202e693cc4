"""Bad input as a user gives it: one line naming the file, exit code 2, no traceback, nothing written."""

from __future__ import annotations

from pathlib import Path

from hostcrawl_cli import hostcrawl

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8


def _one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def test_index_of_a_folder_holding_a_png_named_like_a_warc_names_it_and_indexes_nothing(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "run" / "warc"
    folder.mkdir(parents=True)
    (folder / "a.warc.gz").write_bytes(PNG)
    done = hostcrawl("index", str(tmp_path / "run"), timeout=60)
    assert done.returncode == 2
    line = _one_line(done.stderr)
    assert "a.warc.gz" in line and "not a WARC file" in line
    assert sorted(p.name for p in folder.iterdir()) == ["a.warc.gz"]  # no index, no temporary file


def test_a_study_given_bytes_that_are_not_parquet_names_the_file(tmp_path: Path) -> None:
    pages = tmp_path / "pages.parquet"
    pages.write_bytes(b"PAR1" + PNG)
    out = tmp_path / "studies"
    done = hostcrawl("study", "icc", "--pages", str(pages), "--out", str(out), timeout=120)
    assert done.returncode == 2
    line = _one_line(done.stderr)
    assert str(pages) in line and "not a readable parquet file" in line
    assert not out.exists()


def test_crawl_flags_that_would_crawl_nothing_or_ignore_an_order_are_refused(tmp_path: Path) -> None:
    """`--per-host-budget -1` crawled nothing and exited 1 with "see crawl.log"; `--policy hc_depth`
    without `--priors` ran with no centrality at all, and no word about it."""
    for flags, expected in (
        (["--per-host-budget", "-1"], "per_host_budget must be >= 0"),
        (["--policy", "hc_depth"], "give --priors"),
        (["--keep-busy", "1.5"], "policy.keep_busy must be within [0, 1]"),
    ):
        run = tmp_path / "run"
        done = hostcrawl("crawl", "http://a.example/", "--out", str(run), *flags, timeout=60)
        assert done.returncode == 2, (flags, done.stderr)
        assert expected in _one_line(done.stderr)
        assert not run.exists()


def test_score_refuses_files_that_are_not_warcs_and_workers_below_one(tmp_path: Path) -> None:
    """An empty or non-WARC file used to exit 1 and leave a 0-row parquet; --workers 0 was taken."""
    empty, png = tmp_path / "empty.warc.gz", tmp_path / "image.warc.gz"
    empty.write_bytes(b"")
    png.write_bytes(PNG)
    out = tmp_path / "scores.parquet"
    for warc, extra, expected in (
        (empty, [], "not a WARC file (empty)"),
        (png, [], "not a WARC file"),
        (png, ["--workers", "0"], "--workers 0: must be at least 1"),
    ):
        done = hostcrawl("score", "--warc", str(warc), "--out", str(out), *extra, timeout=60)
        assert done.returncode == 2, done.stderr
        assert expected in _one_line(done.stderr)
        assert not out.exists()


def test_clean_commands_refuse_to_overwrite_a_model_and_a_limit_of_zero(tmp_path: Path) -> None:
    """`clean train` wrote over the model shipped in the package by default; `clean eval --limit 0`
    meant every page."""
    model = tmp_path / "mine.json.gz"
    model.write_bytes(b"an earlier model")
    done = hostcrawl("clean", "train", "--data", str(tmp_path), "--out", str(model), timeout=60)
    assert done.returncode == 2
    assert f"--out {model} exists; pass --force" in _one_line(done.stderr)
    assert model.read_bytes() == b"an earlier model"
    done = hostcrawl("clean", "train", "--data", str(tmp_path), timeout=60)
    assert done.returncode == 2 and "--out" in done.stderr  # no default: it must be named
    done = hostcrawl("clean", "eval", "--data", str(tmp_path), "--cleaner", "blocks_v1", "--limit", "0")
    assert done.returncode == 2
    assert "--limit 0: must be at least 1" in _one_line(done.stderr)
