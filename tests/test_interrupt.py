"""Ctrl-C (SIGINT to the process group) and SIGTERM: a graceful stop, exit 130, and a clean resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import polars as pl
import pytest
from hostcrawl_cli import HOSTCRAWL

from crawler.pages.sinks import PAGES_SPOOL, read_text_shards
from crawler.testweb import TestWebConfig, TestWebProcess

pytestmark = pytest.mark.slow

BUDGET = 160


def recorded_pages(run: Path) -> int:
    spool = run / PAGES_SPOOL
    return spool.read_bytes().count(b"\n") if spool.exists() else 0


@pytest.mark.parametrize(
    ("signum", "whole_group"),
    [(signal.SIGINT, True), (signal.SIGTERM, False)],
    ids=["ctrl-c-to-the-process-group", "sigterm-to-the-crawler"],
)
def test_a_signal_stops_the_crawl_gracefully_and_a_resume_finishes_it(
    tmp_path: Path, signum: signal.Signals, whole_group: bool
) -> None:
    web_dir, run = tmp_path / "web", tmp_path / "run"
    web_dir.mkdir()
    with TestWebProcess(TestWebConfig(n_hosts=20, seed=3), web_dir) as web:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(web.seed_urls) + "\n")
        command = [
            *HOSTCRAWL, "crawl", "--no-progress", "--seeds", str(seeds), "--out", str(run),
            "--proxy", web.proxy_url, "--allow-private", "--min-delay", "0.05", "--max-pages", str(BUDGET),
            "--concurrency", "8", "--timeout", "5",
        ]  # fmt: skip
        process = subprocess.Popen(
            command, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 120
        while process.poll() is None and recorded_pages(run) < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert process.poll() is None, "the crawl ended before it could be interrupted"
        if whole_group:
            os.killpg(process.pid, signum)  # what a terminal's Ctrl-C does: crawler and workers alike
        else:
            os.kill(process.pid, signum)
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 130, stderr[-3000:]
        assert "Traceback" not in stderr, stderr[-3000:]
        assert "interrupted" in stderr
        report = (run / "report.md").read_text()
        assert "Interrupted" in report and "--resume" in report
        pages = pl.read_parquet(run / "pages.parquet")
        assert 0 < pages.filter(pl.col("status").is_not_null()).height < BUDGET
        assert not pages.filter(pl.col("error").str.starts_with("cleaner/")).height, "failed by the signal"

        resumed = subprocess.run(
            [*HOSTCRAWL, "crawl", "--no-progress", "--resume", str(run)],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    pages = pl.read_parquet(run / "pages.parquet")
    assert not pages.filter(pl.col("error").str.starts_with("cleaner/")).height
    assert pages.filter(pl.col("status").is_not_null()).height >= BUDGET * 0.9
    curated = pages.filter(pl.col("curated").fill_null(False))
    assert len(read_text_shards(run / "text")) == curated.height
    stats = json.loads((run / "stats.json").read_text())
    assert stats["hostcrawl/attempts"] == 2 and stats["page/recorded"] == pages.height
    assert "Interrupted" not in (run / "report.md").read_text()
