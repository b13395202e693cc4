"""`crawl --previous RUN`: conditional GETs to the test web, WARC/1.1 revisit records, checked by warcio."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from hostcrawl_cli import hostcrawl
from warcio.archiveiterator import ArchiveIterator
from warcio.checker import Checker

from crawler.archive.revisit import (
    IDENTICAL,
    REVISIT_PROFILES,
    PreviousCapture,
    payload_digest,
    write_revisit,
)
from crawler.archive.warc import FetchRecord, WarcWriter
from crawler.archive.warc_files import read_record
from crawler.bench.audit import read_request_log
from crawler.pages.sinks import read_text_shards
from crawler.testweb import TestWebConfig, TestWebProcess
from crawler.testweb.revisions import revisions

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # three real crawls

WEB = TestWebConfig(n_hosts=12, seed=5, hostile_share=0, directives_share=0)
COMMON = ("--allow-private", "--min-delay", "0.05", "--timeout", "3", "--no-progress", "--policy", "bfs")
COMMON += ("--workers", "1")
EPOCH_1 = TestWebConfig(n_hosts=12, seed=5, hostile_share=0, directives_share=0, epoch=1, change_share=0.3)


@dataclass
class Crawl:
    run: Path
    web: Path
    process: subprocess.CompletedProcess[str]


def _crawl(base: Path, name: str, cfg: TestWebConfig, *args: str) -> Crawl:
    web_dir = base / f"web-{name}"
    with TestWebProcess(cfg, web_dir) as web:
        seeds = base / "seeds.txt"
        seeds.write_text("\n".join(web.seed_urls) + "\n")
        process = hostcrawl("crawl", "--out", str(base / name), "--proxy", web.proxy_url, *COMMON, *args)
    return Crawl(base / name, web_dir, process)


@pytest.fixture(scope="module")
def crawls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Crawl]:
    base = tmp_path_factory.mktemp("revisit")
    first = _crawl(base, "first", WEB, "--seeds", str(base / "seeds.txt"), "--max-pages", "60")
    assert first.process.returncode == 0, first.process.stderr[-3000:]
    # The previous pages are the seeds; the budget leaves room for the new pages they link to as well.
    fetched = pl.read_parquet(first.run / "pages.parquet").filter(pl.col("status").is_not_null()).height
    again = ("--previous", str(first.run), "--max-pages", str(3 * fetched), "--same-host")
    same = _crawl(base, "same", WEB, *again)
    changed = _crawl(base, "changed", EPOCH_1, *again)
    return {"first": first, "same": same, "changed": changed}


def _records(run: Path) -> list[tuple[str, dict[str, str], str | None]]:
    out = []
    for path in sorted((run / "warc").glob("*.warc.gz")):
        with path.open("rb") as fh:
            for record in ArchiveIterator(fh):
                status = record.http_headers.get_statuscode() if record.http_headers else None
                out.append((record.rec_type, dict(record.rec_headers.headers), status))
    return out


def _warcs_pass_check(run: Path) -> None:
    files = [str(p) for p in sorted((run / "warc").glob("*.warc.gz"))]
    assert files
    checker = Checker(cmd=type("Args", (), {"inputs": files, "verbose": False}))
    assert checker.process_all() == 0


def test_unchanged_web_is_revisited_without_fetching_a_body_twice(crawls: dict[str, Crawl]) -> None:
    first, same = crawls["first"], crawls["same"]
    assert same.process.returncode == 0, same.process.stderr[-3000:]
    before = pl.read_parquet(first.run / "pages.parquet").filter(pl.col("status") == 200)
    after = pl.read_parquet(same.run / "pages.parquet")
    urls = set(before["url"])
    # Every page fetched before is answered 304 and recorded as a revisit.
    revisited = after.filter(pl.col("url").is_in(list(urls)))
    assert set(revisited["url"]) == urls
    assert (revisited["status"] == 304).all() and (revisited["revisit"] == "server-not-modified").all()
    # From the server's side: each of them was asked for once, and no body was sent.
    log = read_request_log(same.web / "requests.jsonl")
    log = log.with_columns(url=pl.lit("http://") + pl.col("host") + pl.col("path"))
    asked = log.filter(pl.col("url").is_in(list(urls)))
    assert asked.height == len(urls)
    assert (asked["status"] == 304).all() and (asked["bytes"] == 0).all()
    # In the WARC: a revisit record for each, pointing to the earlier capture; no new response record.
    earlier = {h["WARC-Target-URI"]: h for t, h, s in _records(first.run) if t == "response" and s == "200"}
    records = _records(same.run)
    revisits = {h["WARC-Target-URI"]: h for t, h, _s in records if t == "revisit"}
    assert urls <= set(revisits)
    responses = {h["WARC-Target-URI"] for t, h, _s in records if t == "response"}
    assert not urls & responses
    for url in urls:
        h = revisits[url]
        assert h["WARC-Profile"] == REVISIT_PROFILES["server-not-modified"]
        assert h["WARC-Refers-To-Target-URI"] == url
        assert h["WARC-Refers-To-Date"] == earlier[url]["WARC-Date"]
        assert h["WARC-Refers-To"] == earlier[url]["WARC-Record-ID"]
    # Each revisit row locates its revisit record with one seek, as a response row does its response.
    for row in revisited.iter_rows(named=True):
        where = (row["warc_filename"], row["warc_offset"], row["warc_length"])
        assert None not in where, row["url"]
        record = read_record(same.run / "warc", *where)
        assert record.rec_type == "revisit" and record.rec_headers.get_header("WARC-Target-URI") == row["url"]
        assert record.rec_headers.get_header("WARC-Record-ID") == row["warc_record_id"]
    # The revisited pages were still cleaned and scored, but their text is not curated a second time.
    assert revisited["n_words"].sum() > 0
    texts = [d["metadata"]["url"] for d in read_text_shards(same.run / "text")]
    assert not urls & set(texts)
    assert len(texts) == len(set(texts))
    _warcs_pass_check(first.run)
    _warcs_pass_check(same.run)


def test_changed_pages_are_ordinary_responses(crawls: dict[str, Crawl]) -> None:
    first, changed = crawls["first"], crawls["changed"]
    assert changed.process.returncode == 0, changed.process.stderr[-3000:]
    before = pl.read_parquet(first.run / "pages.parquet").filter(pl.col("status") == 200)
    after = pl.read_parquet(changed.run / "pages.parquet").filter(
        pl.col("url").is_in(before["url"].to_list())
    )
    truth = {
        u: html == "text/html" and revisions(EPOCH_1, h, "/" + u.split("/", 3)[3]) > 0
        for u, h, html in before.select("url", "host", "content_type").iter_rows()
    }
    assert 0 < sum(truth.values()) < len(truth)
    for url, status, revisit in after.select("url", "status", "revisit").iter_rows():
        if truth[url]:
            assert (status, revisit) == (200, None), url
        else:
            assert (status, revisit) == (304, "server-not-modified"), url
    responses = {h["WARC-Target-URI"] for t, h, s in _records(changed.run) if t == "response" and s == "200"}
    assert {u for u, c in truth.items() if c} <= responses
    _warcs_pass_check(changed.run)


def test_identical_payload_digest_revisit_record(tmp_path: Path) -> None:
    body = b"<html><body><p>same as before</p></body></html>"
    capture = PreviousCapture(
        "http://a.example/x.html", "<urn:uuid:1>", "2025-01-01T00:00:00Z", payload_digest(body),
        None, None, tmp_path / "old.warc.gz", 0,
    )  # fmt: skip
    rec = FetchRecord(
        "http://a.example/x.html", "GET", [("User-Agent", "t")], "HTTP/1.1", 200, "OK",
        [("Content-Type", "text/html"), ("Content-Length", str(len(body)))], body, datetime.now(UTC),
    )  # fmt: skip
    with WarcWriter(tmp_path / "warc", crawl_host="t") as writer:
        write_revisit(writer, rec, capture, IDENTICAL)
    records = _records(tmp_path)
    assert [t for t, _h, _s in records] == ["warcinfo", "revisit", "request"]
    h = records[1][1]
    assert h["WARC-Profile"] == REVISIT_PROFILES[IDENTICAL]
    assert h["WARC-Payload-Digest"] == payload_digest(body)
    assert h["WARC-Refers-To-Target-URI"] == capture.url and h["WARC-Refers-To-Date"] == capture.date
    _warcs_pass_check(tmp_path)


def test_a_server_without_validators_is_revisited_by_payload_digest(tmp_path: Path) -> None:
    plain = TestWebConfig(n_hosts=6, seed=5, hostile_share=0, directives_share=0, validators_share=0.0)
    first = _crawl(tmp_path, "first", plain, "--seeds", str(tmp_path / "seeds.txt"), "--max-pages", "30")
    assert first.process.returncode == 0, first.process.stderr[-3000:]
    before = pl.read_parquet(first.run / "pages.parquet").filter(pl.col("status") == 200)
    urls = set(before["url"])
    again = _crawl(tmp_path, "again", plain, "--previous", str(first.run), "--max-pages", "60", "--same-host")
    assert again.process.returncode == 0, again.process.stderr[-3000:]
    # No validators to send: every page comes back whole, with the payload it had
    log = read_request_log(again.web / "requests.jsonl")
    log = log.with_columns(url=pl.lit("http://") + pl.col("host") + pl.col("path"))
    asked = log.filter(pl.col("url").is_in(list(urls)))
    assert asked.height == len(urls) and (asked["status"] == 200).all()
    after = pl.read_parquet(again.run / "pages.parquet").filter(pl.col("url").is_in(list(urls)))
    assert (after["revisit"] == IDENTICAL).all() and after.height == len(urls)
    # ... and is archived as an identical-payload-digest revisit of the earlier capture, not a response
    earlier = {h["WARC-Target-URI"]: h for t, h, s in _records(first.run) if t == "response" and s == "200"}
    records = _records(again.run)
    revisits = {h["WARC-Target-URI"]: h for t, h, _s in records if t == "revisit"}
    assert urls <= set(revisits)
    assert not urls & {h["WARC-Target-URI"] for t, h, _s in records if t == "response"}
    for url in urls:
        assert revisits[url]["WARC-Profile"] == REVISIT_PROFILES[IDENTICAL]
        assert revisits[url]["WARC-Payload-Digest"] == earlier[url]["WARC-Payload-Digest"]
        assert revisits[url]["WARC-Refers-To"] == earlier[url]["WARC-Record-ID"]
    assert not urls & {d["metadata"]["url"] for d in read_text_shards(again.run / "text")}
    _warcs_pass_check(again.run)


def test_previous_must_be_a_run_directory(tmp_path: Path) -> None:
    out = tmp_path / "run"
    process = hostcrawl("crawl", "--previous", str(tmp_path), "--out", str(out), "--no-progress")
    assert process.returncode == 2 and "not a hostcrawl run directory" in process.stderr
    assert str(tmp_path) in process.stderr and not out.exists()
