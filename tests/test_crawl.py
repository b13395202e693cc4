"""A real crawl of the local test web over real sockets, checked from the server's side and on disk."""

from __future__ import annotations

import hashlib
import json
import subprocess
from base64 import b32encode
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
from hostcrawl_cli import hostcrawl
from warcio.archiveiterator import ArchiveIterator
from warcio.checker import Checker

from crawler.archive.warc_files import read_record
from crawler.bench.audit import audit_test_web, read_request_log
from crawler.pages.sinks import read_text_shards
from crawler.testweb import SiteModel, TestWebConfig, TestWebProcess
from crawler.testweb.hostile import HUGE_BYTES

pytestmark = pytest.mark.slow

MIN_DELAY = 0.2
USER_AGENT = "hostcrawl-test/1.0"
MAX_PAGE_BYTES = 2**20
HOSTILE_KINDS = {
    "slow",
    "error5xx",
    "ratelimit",
    "reset",
    "redirect_loop",
    "calendar",
    "huge",
    "gzip_bomb",
    "bad_charset",
    "binary",
    "malformed",
}


@dataclass
class Crawl:
    run_dir: Path
    web_dir: Path
    web_config: TestWebConfig
    process: subprocess.CompletedProcess[str]
    stats: dict[str, object]


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Crawl]:
    base = tmp_path_factory.mktemp("crawl")
    web_config = TestWebConfig(n_hosts=60, seed=11)
    web_dir = base / "web"
    web_dir.mkdir()
    run_dir = base / "run"
    with TestWebProcess(web_config, web_dir) as web:
        seeds = base / "seeds.txt"
        seeds.write_text("\n".join(web.seed_urls) + "\n")
        # 1 MiB page cap: the huge bodies are cut well inside the 3 s timeout, however busy the machine
        config = base / "crawl.toml"
        config.write_text(f"[fetch]\nmax_page_bytes = {MAX_PAGE_BYTES}\n")
        process = hostcrawl(
            "crawl",
            "--config", str(config),
            "--seeds", str(seeds),
            "--out", str(run_dir),
            "--proxy", web.proxy_url,
            "--allow-private",
            "--min-delay", str(MIN_DELAY),
            "--max-pages", "800",
            "--timeout", "3",
            "--user-agent", USER_AGENT,
            "--policy", "bfs",
            "--no-progress",
        )  # fmt: skip
    stats = json.loads((run_dir / "stats.json").read_text()) if process.returncode == 0 else {}
    yield Crawl(run_dir, web_dir, web_config, process, stats)


def test_crawl_finishes_and_writes_the_run_directory(crawl: Crawl) -> None:
    assert crawl.process.returncode == 0, crawl.process.stderr[-3000:]
    run = crawl.run_dir
    for name in ("config.toml", "pages.parquet", "hosts.parquet", "stats.json", "report.md"):
        assert (run / name).is_file(), name
    assert list((run / "warc").glob("*.warc.gz"))
    assert not list((run / "warc").glob("*.open")), "WARC files left open after the crawl"
    pages = pl.read_parquet(run / "pages.parquet")
    assert pages.height >= 300
    assert pages["host"].n_unique() >= 40
    docs = read_text_shards(run / "text")
    assert docs, "no curated text written"
    assert all(d["text"].strip() and d["metadata"]["cleaner"] and d["metadata"]["scores"] for d in docs)
    assert len(docs) == int(pages["curated"].sum())
    assert "![Quality scores](scores.png)" in (run / "report.md").read_text()
    # a user reads crawl.log for what went wrong: Scrapy's notice of a setting we pass is not that
    assert "ScrapyDeprecationWarning" not in (run / "crawl.log").read_text(errors="replace")


def test_server_log_shows_a_polite_crawl(crawl: Crawl) -> None:
    model = SiteModel(crawl.web_config)
    truth = pl.read_parquet(crawl.web_dir / "hosts.parquet")
    log, audit = audit_test_web(crawl.web_dir, model, MIN_DELAY, USER_AGENT, USER_AGENT)
    assert log.height >= 300
    delays = dict(truth.select("host", "crawl_delay").drop_nulls().iter_rows())
    assert audit.overlapping == 0, audit.examples
    assert audit.too_fast == 0, audit.examples
    assert audit.disallowed == 0, audit.examples
    assert audit.backoff_ignored == 0, audit.examples
    # the checks above must have had something to check
    visited = log.group_by("host").len()
    slow_hosts = visited.join(pl.DataFrame({"host": list(delays)}), on="host")
    assert slow_hosts.filter(pl.col("len") >= 3).height >= 2, "no Crawl-delay host seen 3 times"
    first = log.sort("ts_start").group_by("host").first()
    assert (first["path"] == "/robots.txt").all(), "a host was fetched before its robots.txt"
    robots_fetches = (
        log.filter(pl.col("path") == "/robots.txt")
        .group_by("host")
        .agg(n=pl.len(), readable=((pl.col("status") < 500) & ~pl.col("aborted")).first())
    )
    # robots.txt is fetched once per host; again only after the crawler found it unavailable (a timeout
    # on a busy machine, 429, 5xx), each time counted
    unavailable = sum(int(v) for k, v in crawl.stats.items() if k.startswith("robotstxt/unavailable/"))  # type: ignore[call-overload]
    refetched = (
        robots_fetches.filter(pl.col("readable"))["n"].sum()
        - robots_fetches.filter(pl.col("readable")).height
    )
    assert refetched <= unavailable, robots_fetches.filter(pl.col("n") > 1)
    assert (log["status"] == 429).sum() >= 1, "the rate-limited host never answered 429"
    assert all(USER_AGENT in ua and "+http" in ua for ua in log["user_agent"].to_list())


def _b32_sha1(data: bytes) -> str:
    return "sha1:" + b32encode(hashlib.sha1(data).digest()).decode()


def test_warc_files_read_back_and_hold_what_the_server_sent(crawl: Crawl) -> None:
    files = sorted((crawl.run_dir / "warc").glob("*.warc.gz"))
    checker = Checker(cmd=type("Args", (), {"inputs": [str(f) for f in files], "verbose": False}))
    assert checker.process_all() == 0
    model = SiteModel(crawl.web_config)
    responses: dict[str, str] = {}
    concurrent: list[str] = []
    refers: list[str] = []
    converted: list[str] = []
    compared = 0
    for path in files:
        with path.open("rb") as fh:
            records = list(ArchiveIterator(fh))
            assert records[0].rec_type == "warcinfo"
        with path.open("rb") as fh:
            for record in ArchiveIterator(fh):
                kind, headers = record.rec_type, record.rec_headers
                if kind == "response":
                    raw = record.raw_stream.read()
                    assert headers.get_header("WARC-Payload-Digest") == _b32_sha1(raw)
                    uri = headers.get_header("WARC-Target-URI")
                    responses[headers.get_header("WARC-Record-ID")] = uri
                    encoded = record.http_headers.get_header("Content-Encoding")
                    if record.http_headers.get_statuscode() == "200" and not encoded:
                        host, _, rest = uri.removeprefix("http://").partition("/")
                        page = model.render(host, "/" + rest)
                        if page.status == 200 and compared < 50:
                            assert raw == page.body, uri
                            compared += 1
                elif kind == "request":
                    concurrent.append(headers.get_header("WARC-Concurrent-To"))
                    assert record.http_headers.get_header("Host")
                elif kind == "metadata":
                    refers.append(headers.get_header("WARC-Refers-To"))
                    json.loads(record.content_stream().read())
                elif kind == "conversion":
                    converted.append(headers.get_header("WARC-Refers-To"))
                    assert record.content_stream().read().decode("utf-8").strip()
    assert compared >= 20
    assert set(concurrent) == set(responses)
    assert refers and set(refers) <= set(responses)
    assert converted and set(converted) <= set(refers), "cleaned text goes in WET-like conversion records"
    robots = [u for u in responses.values() if u.endswith("/robots.txt")]
    assert len(robots) >= 40, "robots.txt fetches are archived too"


def test_a_huge_body_is_archived_cut_whether_chunked_or_of_declared_length(crawl: Crawl) -> None:
    """50 MB chunked, or with `Content-Length: 50 MB`: both kept to the page cap, marked truncated."""
    cut: dict[str, tuple[str, int]] = {}
    for path in sorted((crawl.run_dir / "warc").glob("*.warc.gz")):
        with path.open("rb") as fh:
            for record in ArchiveIterator(fh):
                uri = record.rec_headers.get_header("WARC-Target-URI") or ""
                if record.rec_type == "response" and uri.endswith(("/huge/stream", "/huge/length")):
                    truncated = record.rec_headers.get_header("WARC-Truncated")
                    cut[uri.rsplit("/", 1)[1]] = (truncated, len(record.raw_stream.read()))
    assert set(cut) == {"stream", "length"}, cut
    for truncated, size in cut.values():
        assert truncated == "length" and MAX_PAGE_BYTES <= size < HUGE_BYTES, cut


def test_every_hostile_host_is_survived_and_counted(crawl: Crawl) -> None:
    assert crawl.process.returncode == 0
    truth = pl.read_parquet(crawl.web_dir / "hosts.parquet")
    hostile = dict(truth.select("host", "hostile").drop_nulls().iter_rows())
    assert set(hostile.values()) >= HOSTILE_KINDS
    # visited = asked by us, as the server saw it: a slow host's page can still be waiting out its
    # timeout backoff when the budget runs out, so it need not have a page row
    seen = set(read_request_log(crawl.web_dir / "requests.jsonl")["host"].to_list())
    assert set(hostile) <= seen, "a hostile host was never visited"
    stats = crawl.stats

    def count(prefix: str) -> int:
        return sum(int(v) for k, v in stats.items() if k.startswith(prefix))  # type: ignore[call-overload]

    assert count("politeness/backoff/429") >= 1
    assert count("fetch/failed/redirect_loop") + count("frontier/dropped/redirect_loop") >= 1
    assert count("fetch/error/timeout") >= 1, "the slow host never timed out"
    assert count("fetch/error/connection_lost") + count("fetch/truncated/disconnect") >= 1
    assert count("fetch/truncated/length") + count("fetch/failed/too_large") >= 1
    assert count("fetch/failed/too_large_decoded") >= 1, "gzip bomb not stopped at the cap"
    assert count("page/skipped/binary_as_html") >= 1
    assert count("downloader/response_status_count/5") >= 1


def test_a_bomb_refused_when_decoded_keeps_its_archived_record_in_its_row(crawl: Crawl) -> None:
    """The bomb's response is archived as received (small, still gzipped), then refused at the decoded cap:
    its row said failed with no WARC location, so an archived 200 had no row to find it by."""
    pages = pl.read_parquet(crawl.run_dir / "pages.parquet")
    bombs = pages.filter(pl.col("error") == "too_large_decoded")
    assert bombs.height >= 1
    for row in bombs.iter_rows(named=True):
        assert row["status"] == 200 and row["outcome"] == "failed" and row["kind"] is None, row
        record = read_record(
            crawl.run_dir / "warc", row["warc_filename"], row["warc_offset"], row["warc_length"]
        )
        assert (
            record.rec_type == "response" and record.rec_headers.get_header("WARC-Target-URI") == row["url"]
        )
        assert record.rec_headers.get_header("WARC-Record-ID") == row["warc_record_id"]


def test_private_targets_are_refused_without_the_flag(tmp_path: Path) -> None:
    config = TestWebConfig(n_hosts=5, seed=3)
    web_dir = tmp_path / "web"
    web_dir.mkdir()
    with TestWebProcess(config, web_dir) as web:
        target = f"http://127.0.0.1:{web.port}/"
        result = hostcrawl("crawl", target, "--out", str(tmp_path / "run"), "--no-progress")
    assert result.returncode == 1
    stats = json.loads((tmp_path / "run" / "stats.json").read_text())
    assert stats.get("fetch/refused/loopback", 0) >= 1
    assert read_request_log(web_dir / "requests.jsonl").height == 0
