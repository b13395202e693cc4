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
from redis_server import redis_server_fixture  # noqa: F401  (registers the fixture)

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


@pytest.mark.parametrize("frontier", ["sqlite", "redis"])
def test_a_sitemap_index_is_read_before_its_hosts_pages_and_its_entries_go_in_batches(
    tmp_path: Path, frontier: str, request: pytest.FixtureRequest
) -> None:
    """Hosts of 1,500-2,500 pages: the test web serves each a sitemap index (1,000 URLs per sitemap). Its
    entries are sitemaps and reach the frontier in one batch, in front of the host's pages, as robots.txt's
    sitemap does; the entries of the sitemaps they name are the host's pages, sent in one batch each. The
    embedded frontier and one worker on Redis alike."""
    run = tmp_path / "run"
    shared: tuple[str, ...] = ()
    if frontier == "redis":
        server = request.getfixturevalue("redis_server")
        shared = ("--frontier", server.url, "--run", "sitemaps", "--worker-id", "w0", "--workers", "1")
    config = TestWebConfig(
        n_hosts=3, seed=2, hostile_share=0.0, crawl_delay_share=0.0, directives_share=0.0,
        robots_missing_share=0.0, pages_median=2000.0, pages_sigma=0.1, pages_range=(1500, 2500),
    )  # fmt: skip
    with TestWebProcess(config, tmp_path / "web") as web:
        done = hostcrawl(
            "crawl", *web.seed_urls, "--out", str(run), "--proxy", web.proxy_url, "--allow-private",
            "--min-delay", "0.02", "--max-pages", "45", "--timeout", "3", "--policy", "bfs", "--no-progress",
            *shared,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    stats = json.loads((run / "stats.json").read_text())
    pages = pl.read_parquet(run / "pages.parquet").filter(pl.col("status").is_not_null()).sort("fetched_at")
    children = 0
    for (host,), rows in pages.group_by("host"):
        urls = rows["url"].to_list()
        sitemaps = [i for i, url in enumerate(urls) if "/sitemap-" in url]
        assert len(sitemaps) >= 2, f"{host}: its sitemap index's sitemaps were not fetched: {urls[:8]}"
        # the seed (home page), robots.txt's sitemap.xml, then every sitemap it names, before any other page;
        # on Redis one page may come first: the host is free again once sitemap.xml's answer is in, and a
        # claim may reach Redis before the sitemap's entries do (what the Request per entry did too)
        between = sitemaps[-1] - 1 - len(sitemaps)
        assert between <= (1 if frontier == "redis" else 0), f"{host}: {urls[: 4 + len(sitemaps)]}"
        children += len(sitemaps)
    assert stats["sitemap/batches"] == 3 + children  # every sitemap's entries in one batch: none one by one
    assert stats["sitemap/urls"] >= 3 * 1500
