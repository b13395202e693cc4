"""kill -9 at random moments, then --resume: nothing discovered or archived is lost, little fetched twice."""

from __future__ import annotations

import os
import random
import re
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import polars as pl
import pytest
from hostcrawl_cli import HOSTCRAWL
from warcio.checker import Checker

from crawler.audit import audit_test_web
from crawler.sinks import PAGES_SPOOL, read_text_shards
from crawler.testweb import SiteModel, TestWebConfig, TestWebProcess
from scheduler.urls import TrapGuard, canonical, fingerprint

pytestmark = pytest.mark.slow

KILLS = 3
CONCURRENCY = 8
BUDGET = 500
HREF = re.compile(rb'href="([^"]+)"')


def crawl_command(*args: str) -> list[str]:
    return [*HOSTCRAWL, "crawl", "--no-progress", *args]


def recorded_pages(run: Path) -> int:
    spool = run / PAGES_SPOOL
    return spool.read_bytes().count(b"\n") if spool.exists() else 0


def run_and_kill(command: list[str], run: Path, after: float) -> None:
    """Kill `after` seconds into the crawl proper: once it records its first page, not counting the
    start-up (imports, robots, warming the cleaning workers), whose length depends on the machine."""
    before = recorded_pages(run)
    process = subprocess.Popen(
        command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 120
    while process.poll() is None and recorded_pages(run) == before and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(after)
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)  # the crawler and its cleaning workers, no goodbyes
    process.wait(timeout=30)


def test_crawl_killed_three_times_resumes_without_losing_anything(tmp_path: Path) -> None:
    rng = random.Random(20261129)
    web_config = TestWebConfig(n_hosts=40, seed=5)
    web_dir = tmp_path / "web"
    web_dir.mkdir()
    run = tmp_path / "run"
    with TestWebProcess(web_config, web_dir) as web:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(web.seed_urls) + "\n")
        first = crawl_command(
            "--seeds", str(seeds), "--out", str(run), "--proxy", web.proxy_url, "--allow-private",
            "--min-delay", "0.05", "--max-pages", str(BUDGET), "--concurrency", str(CONCURRENCY),
            "--policy", "adaptive", "--timeout", "5",
        )  # fmt: skip
        run_and_kill(first, run, rng.uniform(1.0, 4.0))
        for _ in range(KILLS - 1):
            run_and_kill(crawl_command("--resume", str(run)), run, rng.uniform(0.5, 3.0))
        final = subprocess.run(
            crawl_command("--resume", str(run)), capture_output=True, text=True, timeout=300
        )
    assert final.returncode == 0, final.stderr[-3000:]

    # every WARC file is closed, complete and valid
    warcs = sorted((run / "warc").glob("*"))
    assert warcs and all(p.name.endswith(".warc.gz") for p in warcs), [p.name for p in warcs]
    checker = Checker(cmd=type("Args", (), {"inputs": [str(p) for p in warcs], "verbose": False}))
    assert checker.process_all() == 0

    pages = pl.read_parquet(run / "pages.parquet")
    fetched = pages.filter(pl.col("status").is_not_null())
    assert read_text_shards(run / "text"), "curated text unreadable after the crashes"

    # no URL discovered on a recorded page is lost: its fingerprint is in the frontier
    db = sqlite3.connect(run / "frontier.sqlite3")
    seen = {row[0] for row in db.execute("SELECT fp FROM seen")}
    model, guard = SiteModel(web_config), TrapGuard()
    hostile = set(pl.read_parquet(web_dir / "hosts.parquet").drop_nulls("hostile")["host"].to_list())
    checked = 0
    for row in fetched.filter((pl.col("status") == 200) & ~pl.col("host").is_in(hostile)).iter_rows(
        named=True
    ):
        host, _, path = row["url"].removeprefix("http://").partition("/")
        for href in HREF.findall(model.render(host, "/" + path).body):
            url = canonical(href.decode())
            if url.startswith("http") and guard.reason(url) is None:
                assert fingerprint(url) in seen, f"{url} (linked from {row['url']}) was lost"
                checked += 1
    assert checked > 100

    # pages fetched twice are at most those in flight at the kills (requeued by each resume)
    log_text = (run / "crawl.log").read_text()
    requeued = sum(int(n) for n in re.findall(r"frontier: \d+ hosts, (\d+) requeued", log_text))
    assert requeued > 0, "no kill landed mid-crawl"
    twice = fetched.filter(pl.col("status") == 200).group_by("url").len().filter(pl.col("len") > 1).height
    assert twice <= requeued, f"{twice} pages fetched twice, only {requeued} were in flight"

    # the budget holds across the restarts and politeness held in every segment
    assert fetched.height >= BUDGET * 0.9
    _, audit = audit_test_web(web_dir, model, 0.05, "hostcrawl")
    assert audit.overlapping == 0 and audit.too_fast == 0 and audit.disallowed == 0, audit.examples


def test_resume_of_a_foreign_database_is_refused_clearly(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.toml").write_text('seeds = ["http://a.example/"]\n')
    (run / "frontier.sqlite3").write_bytes(b"SQLite format 3\x00" + b"\x07" * 4000)
    result = subprocess.run(crawl_command("--resume", str(run)), capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "frontier" in result.stderr and "Traceback" not in result.stderr
