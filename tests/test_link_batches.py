"""A page's links reach the frontier in one batch (crawler/fetch/link_gate.py), checked as Scrapy's spider
middlewares check a Request per link: `--max-depth` (Scrapy's DEPTH_LIMIT), `--deny`, each counted under the
same stats. Scrapy's own scheduler (`--policy scrapy`) takes no batches and still gets a Request per link.
Both run the same live crawl of the test web, so the two paths cannot drift apart."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from hostcrawl_cli import hostcrawl

from crawler.testweb import TestWebConfig, TestWebProcess

pytestmark = pytest.mark.slow

DENIED = "/travel/"
MAX_DEPTH = 1


@pytest.mark.parametrize("policy", ["bfs", "scrapy"])
def test_links_keep_to_max_depth_and_deny_on_both_paths(tmp_path: Path, policy: str) -> None:
    run = tmp_path / "run"
    with TestWebProcess(
        TestWebConfig(n_hosts=12, seed=5, hostile_share=0.0, crawl_delay_share=0.0), tmp_path / "web"
    ) as web:
        done = hostcrawl(
            "crawl", *web.seed_urls, "--out", str(run), "--proxy", web.proxy_url, "--allow-private",
            "--min-delay", "0.05", "--max-pages", "60", "--timeout", "3", "--policy", policy,
            "--max-depth", str(MAX_DEPTH), "--deny", DENIED, "--no-progress",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    stats = json.loads((run / "stats.json").read_text())
    pages = pl.read_parquet(run / "pages.parquet").filter(pl.col("status").is_not_null())
    assert pages.filter(pl.col("depth") == 1).height >= 20  # links were followed (a third of the budget)
    assert pages["depth"].max() == MAX_DEPTH
    assert not pages["url"].str.contains(DENIED, literal=True).any()
    assert stats["depth/request_ignored_count"] > 0 and stats["links/filtered/deny"] > 0
    assert stats["request_depth_max"] == MAX_DEPTH
    assert ("links/batches" in stats) == (policy != "scrapy")  # the frontier's own path, or Scrapy's
