"""A run's outputs plug into the tools users already have: every page row and every CDXJ line leads to its
archived response with one seek, datatrove reads the curated text as is, and Scrapy options pass through."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
from datatrove.pipeline.readers import JsonlReader
from hostcrawl_cli import hostcrawl

from crawler.archive.warc_files import cdxj_path, read_cdxj, read_record
from crawler.pages.outcomes import OUTCOMES
from crawler.pages.sinks import read_text_shards
from crawler.pages.tables import PAGE_KINDS
from crawler.testweb import TestWebConfig, TestWebProcess

pytestmark = pytest.mark.slow

DENIED = "/travel/"


@dataclass
class Run:
    dir: Path
    seeds: list[str]
    process: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    base = tmp_path_factory.mktemp("outputs")
    run_dir = base / "run"
    with TestWebProcess(TestWebConfig(n_hosts=12, seed=5), base / "web") as web:
        process = hostcrawl(
            "crawl", *web.seed_urls,
            "--out", str(run_dir),
            "--proxy", web.proxy_url,
            "--allow-private",
            "--min-delay", "0.05",
            "--max-pages", "150",
            "--timeout", "3",
            "--policy", "bfs",
            "--deny", DENIED,
            "-s", "LOG_LEVEL=WARNING",
            "--no-progress",
        )  # fmt: skip
        seeds = web.seed_urls
    assert process.returncode == 0, process.stderr[-3000:]
    yield Run(run_dir, seeds, process)


def test_every_archived_page_row_leads_to_its_response_record(run: Run) -> None:
    pages = pl.read_parquet(run.dir / "pages.parquet")
    archived = pages.filter(pl.col("warc_record_id").is_not_null())
    assert archived.height >= 50
    assert archived.select(pl.col("warc_filename", "warc_offset", "warc_length").is_null().any()).row(0) == (
        False,
        False,
        False,
    )
    for row in archived.iter_rows(named=True):
        record = read_record(run.dir / "warc", row["warc_filename"], row["warc_offset"], row["warc_length"])
        assert record.rec_type == "response"
        assert record.rec_headers.get_header("WARC-Record-ID") == row["warc_record_id"]
        assert record.rec_headers.get_header("WARC-Target-URI") == row["url"]
        assert len(record.content_stream().read()) == row["bytes"] or row["truncated"]


def test_outcome_says_what_became_of_each_url(run: Run) -> None:
    pages = pl.read_parquet(run.dir / "pages.parquet")
    assert set(pages["outcome"].unique()) <= set(OUTCOMES)
    with_response = pages.filter(pl.col("status").is_not_null())
    refused_decoded = pl.col("error") == "too_large_decoded"  # archived as received, refused decoded
    assert set(with_response.filter(~refused_decoded)["outcome"].unique()) <= {"fetched", "http_error"}
    assert (with_response.filter(refused_decoded)["outcome"] == "failed").all()
    without = pages.filter(pl.col("status").is_null())
    assert not without["outcome"].is_in(["fetched", "http_error"]).any(), "a refused URL counted as fetched"
    robots = pages.filter(pl.col("error") == "robots_forbidden")
    assert (robots["outcome"] == "robots_refused").all()
    assert not pages["error"].is_in(PAGE_KINDS).any(), "sitemap/binary_as_html are page kinds, not errors"
    assert set(with_response["kind"].unique()) <= {"html", *PAGE_KINDS}
    assert (pages.filter(pl.col("kind") == "html")["outcome"] != "failed").all()


def test_cdxj_index_beside_each_warc_finds_every_response(run: Run) -> None:
    warcs = sorted((run.dir / "warc").glob("*.warc.gz"))
    assert warcs and all(cdxj_path(w).is_file() for w in warcs)
    lines = [entry for w in warcs for entry in read_cdxj(cdxj_path(w))]
    keys = [(key, ts) for key, ts, _ in lines]
    assert keys == sorted(keys), "a CDXJ file must be sorted for binary search"
    located = {(f["filename"], int(f["offset"]), int(f["length"])): f for _, _, f in lines}
    pages = pl.read_parquet(run.dir / "pages.parquet").filter(pl.col("warc_record_id").is_not_null())
    for row in pages.iter_rows(named=True):
        entry = located[(row["warc_filename"], row["warc_offset"], row["warc_length"])]
        assert entry["url"] == row["url"] and int(entry["status"]) == row["status"]
    _, _, first = next(entry for entry in lines if entry[2].get("status") == "200")
    record = read_record(run.dir / "warc", first["filename"], int(first["offset"]), int(first["length"]))
    assert record.rec_headers.get_header("WARC-Target-URI") == first["url"]
    assert record.http_headers.get_statuscode() == "200"


def test_index_command_rebuilds_the_indexes_of_an_old_run(run: Run) -> None:
    warcs = sorted((run.dir / "warc").glob("*.warc.gz"))
    before = {w: cdxj_path(w).read_bytes() for w in warcs}
    for w in warcs:
        cdxj_path(w).unlink()
    result = hostcrawl("index", str(run.dir))
    assert result.returncode == 0, result.stderr
    assert {w: cdxj_path(w).read_bytes() for w in warcs} == before


def test_datatrove_reads_the_curated_text_without_a_converter(run: Run) -> None:
    docs = list(JsonlReader(str(run.dir / "text"), glob_pattern="*.jsonl.zst").run())
    pages = pl.read_parquet(run.dir / "pages.parquet")
    assert docs and len(docs) == int(pages["curated"].sum())
    curated = dict(pages.filter(pl.col("curated")).select("url", "warc_record_id").iter_rows())
    for doc in docs:
        assert doc.text.strip() and doc.id
        meta = doc.metadata
        assert curated[meta["url"]] == meta["warc_record_id"]
        assert meta["source"] == "hostcrawl" and meta["added"] and meta["created"]
        assert meta["scores"] and meta["cleaner"] and meta["policy"] and meta["host"]
    raw = read_text_shards(run.dir / "text")[0]
    assert set(raw) == {"id", "text", "source", "added", "created", "metadata"}, "dolma's top-level fields"


def test_deny_regex_keeps_links_out_and_scrapy_settings_pass_through(run: Run) -> None:
    pages = pl.read_parquet(run.dir / "pages.parquet")
    followed = pages.filter(~pl.col("url").is_in(run.seeds))
    assert followed.height >= 50
    assert not followed["url"].str.contains(DENIED, literal=True).any()
    stats = json.loads((run.dir / "stats.json").read_text())
    assert stats.get("links/filtered/deny", 0) > 0
    config = tomllib.loads((run.dir / "config.toml").read_text())
    assert config["scrapy"] == {"LOG_LEVEL": "WARNING"} and config["fetch"]["deny"] == [DENIED]
    assert " INFO: " not in (run.dir / "crawl.log").read_text(), "-s LOG_LEVEL=WARNING did not reach Scrapy"


def test_the_end_line_the_report_and_stats_give_each_count_one_number(run: Run) -> None:
    """The end line said "N responses" (robots.txt, redirects and retries too) beside a progress line at
    the budget and a report of page rows: three numbers under one word. Each count has its own name now."""
    stats = json.loads((run.dir / "stats.json").read_text())
    said = re.search(r"done: (\d+) pages fetched \((\d+) responses", " ".join(run.process.stderr.split()))
    assert said is not None, run.process.stderr[-2000:]
    assert int(said[1]) == stats["frontier/fetched"] == 150  # the budget, as the progress line counts
    assert int(said[2]) == stats["response_received_count"] > 150  # robots.txt answers too
    report = (run.dir / "report.md").read_text()
    rows = pl.read_parquet(run.dir / "pages.parquet").height
    assert f"| pages fetched (what the budget counts) | {stats['frontier/fetched']} |" in report
    assert f"| page rows (pages.parquet: every URL's outcome) | {rows} |" in report
