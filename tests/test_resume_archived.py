"""A kill after a response is archived and before its page is committed: the resumed run reads the
page back from its WARC record instead of fetching it again, and the page gets its row and its text.

The kill lands in that window every time: the crawl runs in a process whose pipeline kills its own
process group as the chosen page reaches it (what `kill -9` at that moment does); everything else is
the product as shipped, over real sockets to a server that counts its requests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from hostcrawl_cli import hostcrawl
from hostile_server import (
    HostileServer,
    answer,
    hostile_server_fixture,  # noqa: F401  (registers the fixture)
    html_page,
)
from warcio.archiveiterator import ArchiveIterator

from crawler.pages.sinks import read_text_shards

pytestmark = pytest.mark.slow

HTML = "text/html; charset=utf-8"
HOST = "archive.test"
VICTIM = "/victim.html"
# The crawl with its pipeline patched: the victim page's item kills the crawler before its commit.
KILL_AT_VICTIM = """
import os, signal, sys
import crawler.pages.store_pipeline as pipeline
original = pipeline.CleanScoreStorePipeline.process_item
async def process_item(self, item, spider=None):
    if item.get("url", "").endswith(sys.argv[1]):
        os.killpg(0, signal.SIGKILL)
    return await original(self, item, spider)
pipeline.CleanScoreStorePipeline.process_item = process_item
from crawler.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _responses(run: Path, url: str) -> list[str]:
    ids = []
    for path in sorted((run / "warc").glob("*.warc.gz")):
        with path.open("rb") as fh:
            for record in ArchiveIterator(fh):
                headers = record.rec_headers
                if record.rec_type == "response" and headers.get_header("WARC-Target-URI") == url:
                    ids.append(headers.get_header("WARC-Record-ID"))
    return ids


def test_a_page_archived_just_before_a_kill_is_read_back_not_fetched_again(
    server: HostileServer, tmp_path: Path
) -> None:
    links = [VICTIM, "/a.html", "/b.html"]
    server.route(HOST, "/robots.txt", answer(200, "User-agent: *\nAllow: /\n", Content_Type="text/plain"))
    server.route(HOST, "*", answer(200, html_page("Rivers and their valleys", links), Content_Type=HTML))
    hosts = tmp_path / "hosts"
    hosts.write_text(f"127.0.0.1 {HOST}\n")
    config = tmp_path / "crawl.toml"
    config.write_text(f'[politeness]\nhosts_file = "{hosts}"\n')
    run = tmp_path / "run"
    args = [
        "crawl", f"http://{HOST}:{server.port}/", "--out", str(run), "--config", str(config),
        "--allow-private", "--min-delay", "0.1", "--max-pages", "4", "--no-progress", "--policy", "bfs",
        "--workers", "1", "--threshold", "0",
    ]  # fmt: skip
    killed = subprocess.run(
        [sys.executable, "-c", KILL_AT_VICTIM, VICTIM, *args],
        capture_output=True, text=True, timeout=120, start_new_session=True,
    )  # fmt: skip
    assert killed.returncode == -9, killed.stderr[-2000:]
    victim = f"http://{HOST}:{server.port}{VICTIM}"
    archived = _responses(run, victim) if (run / "warc").exists() else []
    assert not archived  # still in the open file, its name ends in .open
    assert len([h for h in server.requests_to(HOST) if h.path == VICTIM]) == 1

    resumed = hostcrawl("crawl", "--resume", str(run), "--no-progress", timeout=120)
    assert resumed.returncode == 0, resumed.stderr[-2000:]

    # fetched once, archived once, and that record is the page's row and its document
    assert len([h for h in server.requests_to(HOST) if h.path == VICTIM]) == 1
    (record_id,) = _responses(run, victim)
    pages = pl.read_parquet(run / "pages.parquet").filter(pl.col("url") == victim)
    assert pages.height == 1 and pages["status"].to_list() == [200], pages
    assert pages["warc_record_id"].to_list() == [record_id]
    assert pages["warc_offset"].to_list()[0] is not None and pages["curated"].to_list() == [True]
    docs = [d for d in read_text_shards(run / "text") if d["metadata"]["url"] == victim]
    assert [d["metadata"]["warc_record_id"] for d in docs] == [record_id]
    # the victim's links were found again from the record: its three links are all fetched
    fetched = set(pl.read_parquet(run / "pages.parquet")["url"].to_list())
    assert {f"http://{HOST}:{server.port}{p}" for p in links} <= fetched
    stats = (run / "stats.json").read_text()
    assert '"resume/read_back_from_warc": 1' in stats
