"""A disk that fills up or turns read-only stops the crawl at its last commit, says so in one line,
and `--resume` finishes the run once there is room: nothing committed lost, every file valid."""

from __future__ import annotations

import collections
import json
import os
import subprocess
from pathlib import Path

import polars as pl
import pytest
from hostcrawl_cli import HOSTCRAWL
from small_disk import small_disk
from test_warc import fetch, make_writer
from warcio.archiveiterator import ArchiveIterator
from warcio.checker import Checker

from crawler.archive.warc import StorageError, recover_open_files
from crawler.archive.warc_files import cdxj_path
from crawler.errors import EXIT_STORAGE
from crawler.pages.sinks import read_text_shards
from crawler.testweb import TestWebConfig, TestWebProcess

BUDGET = 300
CONCURRENCY = 8
FULL_KIB = 640  # a 300-page crawl of this web takes ~2 MB: the disk fills about a third of the way in
ROOMY_KIB = 64 * 1024


def warc_records(path: Path) -> list[str]:
    with path.open("rb") as fh:
        return [record.rec_type for record in ArchiveIterator(fh)]


def test_a_full_disk_leaves_the_warc_whole_and_refuses_every_later_write(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", 256) as disk:
        writer = make_writer(disk.path)
        written = 0
        with pytest.raises(StorageError, match="No space left on device") as refused:
            while True:
                writer.write_fetch(fetch(f"http://a.example/{written}", payload=os.urandom(20_000)))
                written += 1
        assert ".warc.gz.open" in str(refused.value)  # names the file
        assert written > 3
        with pytest.raises(StorageError):  # at once, not after filling the last bytes of the disk
            writer.write_metadata("http://a.example/0", "<urn:uuid:x>", {"k": 1})
        writer.close()
        (partial,) = disk.path.iterdir()
        assert partial.name.endswith(".open")  # a failed file is not published as finished
        # the refused exchange was cut off again: the file holds whole records only, readable now
        assert warc_records(partial) == ["warcinfo"] + ["response", "request"] * written
        disk.resize(4096)
        (final,) = recover_open_files(disk.path)
        assert warc_records(final) == ["warcinfo"] + ["response", "request"] * written
        assert cdxj_path(final).exists()


def crawl(*args: str) -> subprocess.CompletedProcess[str]:
    command = [*HOSTCRAWL, "crawl", "--no-progress", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=400)


def assert_storage_stop(result: subprocess.CompletedProcess[str], run: Path) -> None:
    assert result.returncode == EXIT_STORAGE, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    (line,) = [ln for ln in result.stderr.splitlines() if "disk refused a write" in ln]
    assert str(run) in line and f"hostcrawl crawl --resume {run}" in line, line


@pytest.mark.slow
def test_a_crawl_stopped_by_a_full_then_read_only_disk_resumes_to_a_whole_run(tmp_path: Path) -> None:
    web_dir = tmp_path / "web"
    web_dir.mkdir()
    with (
        TestWebProcess(TestWebConfig(n_hosts=30, seed=7), web_dir) as web,
        small_disk(tmp_path / "disk", FULL_KIB) as disk,
    ):
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(web.seed_urls) + "\n")
        run = disk.path / "run"
        full = crawl(
            "--seeds", str(seeds), "--out", str(run), "--proxy", web.proxy_url, "--allow-private",
            "--min-delay", "0.05", "--max-pages", str(BUDGET), "--concurrency", str(CONCURRENCY),
            "--timeout", "5",
        )  # fmt: skip
        assert_storage_stop(full, run)
        # whichever file asked first: a WARC, the text, the log (OSError), or the frontier (SQLite's words)
        assert any(why in full.stderr for why in ("No space left on device", "database or disk is full"))
        # nothing more went onto the refusing disk: no tables, no report
        assert not (run / "report.md").exists() and not (run / "pages.parquet").exists()
        log = (run / "crawl.log").read_text(errors="replace")
        assert "stopping: the disk refused a write" in log

        # still refusing (read-only now): the resume says so the same way and changes nothing
        before = {p: p.stat().st_size for p in run.rglob("*") if p.is_file()}
        disk.resize(ROOMY_KIB)
        disk.read_only()
        refused = crawl("--resume", str(run))
        assert_storage_stop(refused, run)
        assert "frontier.sqlite3: attempt to write a readonly database" in refused.stderr
        assert {p: p.stat().st_size for p in run.rglob("*") if p.is_file()} == before

        disk.writable()
        final = crawl("--resume", str(run))
        assert final.returncode == 0, final.stderr[-3000:]
        audit_whole_run(run)


def audit_whole_run(run: Path) -> None:
    # every WARC closed, valid and indexed
    files = sorted((run / "warc").glob("*"))
    warcs = [p for p in files if p.name.endswith(".warc.gz")]
    assert warcs and {p.name for p in files} == {n for p in warcs for n in (p.name, cdxj_path(p).name)}
    checker = Checker(cmd=type("Args", (), {"inputs": [str(p) for p in warcs], "verbose": False}))
    assert checker.process_all() == 0

    # every curated page in text/ exactly once, and nothing else there
    pages = pl.read_parquet(run / "pages.parquet")
    curated = pages.filter(pl.col("curated").fill_null(False))
    docs = read_text_shards(run / "text")
    ids = [d["metadata"]["warc_record_id"] for d in docs]
    assert len(ids) == len(set(ids)) == curated.height > 0
    assert set(ids) == set(curated["warc_record_id"].to_list())

    # every archived 200 response of a page has its row; the budget was spent
    responses: collections.Counter[str] = collections.Counter()
    for path in warcs:
        with path.open("rb") as fh:
            for record in ArchiveIterator(fh):
                if record.rec_type == "response" and record.http_headers.get_statuscode() == "200":
                    url = record.rec_headers.get_header("WARC-Target-URI")
                    if not url.endswith(("/robots.txt", "/.well-known/tdmrep.json")):
                        responses[url] += 1
    rows = pages.filter(pl.col("status") == 200)
    assert set(responses) <= set(rows["url"].to_list())
    assert rows["warc_record_id"].n_unique() == rows.height
    # fetched twice: at most what was in flight when the disk refused
    assert sum(n - 1 for n in responses.values()) <= CONCURRENCY
    stats = json.loads((run / "stats.json").read_text())
    assert stats["hostcrawl/attempts"] == 2  # the refused resume crawled nothing and changed nothing
    assert stats["page/recorded"] == pages.height
    assert pages.filter(pl.col("status").is_not_null()).height >= BUDGET * 0.9
