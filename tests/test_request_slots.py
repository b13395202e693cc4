"""--concurrency N is N requests on the network, no more, even though a host's first page no longer holds a
request slot while it waits for its host's delay after robots.txt (it goes back to the frontier), and
robots.txt and tdmrep.json fetches no longer take slots from pages (benchmarks/network_bound.py measures the
speed). Checked from the server's side on a wide crawl: every page a new host's first."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from hostcrawl_cli import hostcrawl
from redis_server import (
    RedisServer,
    redis_server_fixture,  # noqa: F401  (registers the fixture)
)

from crawler.bench.audit import audit_test_web
from crawler.testweb import SiteModel, TestWebConfig, TestWebProcess

pytestmark = pytest.mark.slow

CONCURRENCY = 4
MIN_DELAY = 0.5
LATENCY_S = 0.3
HOSTS = 40
USER_AGENT = "hostcrawl-slots/1.0"
POLICY_FILES = ["/robots.txt", "/.well-known/tdmrep.json"]


# The test web notes a request's end after it has handed the response to the socket, so a client can have
# read it and sent its next request a few milliseconds before that (3.5 ms once on a loaded CI machine, in
# Redis mode, whose next lease is claimed ahead). An overlap shorter than this is that lag, not a request
# more; one request too many would overlap for about the test web's latency (LATENCY_S)
LOG_LAG_S = 0.05


def most_in_flight(log: pl.DataFrame) -> int:
    """The most requests the server had in flight at one instant (each ending LOG_LAG_S early)."""
    ends = [t - LOG_LAG_S for t in log["ts_end"].to_list()]
    events = sorted(
        [(t, 1) for t in log["ts_start"].to_list()] + [(t, -1) for t in ends],
        key=lambda e: (e[0], e[1]),  # an answer that ends as another arrives frees its slot first
    )
    current = peak = 0
    for _, change in events:
        current += change
        peak = max(peak, current)
    return peak


@pytest.mark.parametrize("frontier", ["sqlite", "redis"])
def test_a_wide_crawl_keeps_to_its_concurrency_and_hands_waiting_pages_back(
    tmp_path: Path, frontier: str, request: pytest.FixtureRequest
) -> None:
    """On both frontiers: a Redis worker's host is handed back to Redis, which must not hand it out again
    before its delay (each claim restores the host's timing; a gate that read it would hand back for ever)."""
    extra: tuple[str, ...] = ()
    if frontier == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        extra = ("--frontier", server.url, "--run", f"slots{tmp_path.name}", "--worker-id", "w0")
    web_config = TestWebConfig(n_hosts=HOSTS, seed=3, latency_s=LATENCY_S, hostile_share=0.0)
    web_dir, run_dir = tmp_path / "web", tmp_path / "run"
    with TestWebProcess(web_config, web_dir) as web:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(web.seed_urls) + "\n")
        done = hostcrawl(
            "crawl", "--seeds", str(seeds), "--out", str(run_dir), "--proxy", web.proxy_url,
            "--allow-private", "--min-delay", str(MIN_DELAY), "--max-pages", str(HOSTS),
            "--concurrency", str(CONCURRENCY), "--policy", "bfs", "--user-agent", USER_AGENT,
            "--no-progress", *extra, timeout=180,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    log, audit = audit_test_web(web_dir, SiteModel(web_config), MIN_DELAY, USER_AGENT, USER_AGENT)
    assert audit.clean, audit.as_dict()  # one request at a time per host, its delay kept
    assert log.height >= 2 * HOSTS  # each host's robots.txt and page at least: a wide crawl
    assert most_in_flight(log) <= CONCURRENCY
    stats = json.loads((run_dir / "stats.json").read_text())
    assert stats["politeness/handed_back"] >= CONCURRENCY  # pages that waited for a robots.txt went back
    # ... and each was fetched once, its budget spent once
    pages = pl.read_parquet(run_dir / "pages.parquet").filter(pl.col("status").is_not_null())
    assert pages["url"].n_unique() == pages.height == stats["frontier/fetched"] == HOSTS
    served = log.filter(~pl.col("path").is_in(POLICY_FILES))
    assert served.group_by("host", "path").len()["len"].max() == 1
    # a host's tdmrep.json goes out before its first page, which waits for it holding no request slot (it
    # used to be fetched after that page, whose slot then waited through the host's delay and the fetch)
    asked = log.sort("ts_start").group_by("host", maintain_order=True).agg(pl.col("path"))
    first_page = {
        host: next((i for i, path in enumerate(paths) if path not in POLICY_FILES), None)
        for host, paths in asked.iter_rows()
    }
    wrong = {
        host: paths[: first_page[host] + 1]
        for host, paths in asked.iter_rows()
        if first_page[host] is not None and POLICY_FILES[1] not in paths[: first_page[host]]
    }
    assert not wrong, wrong
    assert sum(page is not None for page in first_page.values()) > HOSTS // 2  # (the budget ends some first)
