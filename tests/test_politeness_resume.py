"""Host politeness survives a crash: after kill -9 and an immediate --resume, every host still waits its
Crawl-delay since its last request, and robots.txt is not fetched again (checked from the server's side)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import polars as pl
import pytest
from hostcrawl_cli import HOSTCRAWL

from crawler.bench.audit import audit_test_web, read_request_log
from crawler.testweb import SiteModel, TestWebConfig, TestWebProcess

pytestmark = pytest.mark.slow

USER_AGENT = "hostcrawl-resume/1.0"
MIN_DELAY = 0.2
CRAWL_DELAY = (20.0, 25.0)  # as on real hosts that ask for it: a resume must not cut it short
HOSTS = 6
PAGES_BEFORE_KILL = 8


def test_politeness_state_survives_kill_and_resume(tmp_path: Path) -> None:
    web_config = TestWebConfig(
        n_hosts=HOSTS, seed=4, hostile_share=0.0, crawl_delay_share=1.0, crawl_delay_range=CRAWL_DELAY,
        robots_missing_share=0.0, real_robots_share=0.0,
    )  # fmt: skip
    web_dir, run = tmp_path / "web", tmp_path / "run"
    web_dir.mkdir()
    with TestWebProcess(web_config, web_dir) as web:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(web.seed_urls) + "\n")
        first = [
            *HOSTCRAWL, "crawl", "--no-progress", "--seeds", str(seeds), "--out", str(run),
            "--proxy", web.proxy_url, "--allow-private", "--min-delay", str(MIN_DELAY),
            "--max-pages", "16", "--user-agent", USER_AGENT, "--policy", "bfs", "--timeout", "5",
        ]  # fmt: skip
        process = subprocess.Popen(first, start_new_session=True, stdout=subprocess.DEVNULL)
        log = web_dir / "requests.jsonl"
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and process.poll() is None:
            pages = [r for r in map(json.loads, log.read_text().splitlines()) if r["path"] != "/robots.txt"]
            if len(pages) >= PAGES_BEFORE_KILL:
                break
            time.sleep(0.1)
        assert process.poll() is None, "the crawl ended before it could be killed"
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        killed_at = time.time()
        with sqlite3.connect(run / "frontier.sqlite3") as db:
            parts = dict(db.execute("SELECT part, count(*) FROM politeness GROUP BY part").fetchall())
        assert parts.get("timing", 0) >= 1 and parts.get("robots", 0) >= 1, parts
        resumed = subprocess.run(
            [*HOSTCRAWL, "crawl", "--no-progress", "--resume", str(run)],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    requests = read_request_log(log, USER_AGENT)
    after = requests.filter(pl.col("ts_start") > killed_at)
    assert after.height >= 3, "the resumed crawl fetched nothing"
    assert after.filter(pl.col("path") == "/robots.txt").height == 0, "robots.txt was fetched again"
    _, audit = audit_test_web(web_dir, SiteModel(web_config), MIN_DELAY, USER_AGENT, USER_AGENT)
    assert audit.too_fast == 0 and audit.overlapping == 0, audit.examples
    stats = json.loads((run / "stats.json").read_text())
    assert stats.get("robotstxt/restored", 0) >= 1
