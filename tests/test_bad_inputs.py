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
