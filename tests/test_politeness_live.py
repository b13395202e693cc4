"""Politeness on the real web's terms, through a real crawl of the test web without --allow-private:
robots.txt that answers 429 or 503, times out or disallows everything, an hour or two days of
Retry-After, pages that always time out, redirects to private and CGNAT addresses. Checked from the
server's side (its request log) and in the stats."""

from __future__ import annotations

import itertools
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
from hostcrawl_cli import hostcrawl

from crawler.bench.audit import audit_test_web, read_request_log
from crawler.testweb import SiteModel, TestWebConfig, TestWebProcess
from crawler.testweb.politeness_hosts import (
    ADDRESSES_FILE,
    POLITENESS_KINDS,
    RETRY_DAYS_S,
    RETRY_HOUR_S,
    ROBOTS_429_RETRY_AFTER,
    ROBOTS_429_TIMES,
)

pytestmark = pytest.mark.slow

# with 400 pages the crawl outlasts robots_timeout's three attempts (about 9 s) even on a fast machine
MIN_DELAY = 0.4
USER_AGENT = "hostcrawl-polite/1.0"
ROBOTS_ATTEMPTS = ROBOTS_429_TIMES + 1
SHARED = 3  # hosts on one address, and hosts of one registered domain
BREAKER = 3  # page_timeout's timeouts in a row before its host is blocked
BACKOFF_BASE = 1.0


@dataclass
class Crawl:
    run_dir: Path
    web_dir: Path
    web_config: TestWebConfig
    process: subprocess.CompletedProcess[str]
    stats: dict[str, int]
    log: pl.DataFrame
    kinds: dict[str, str]  # politeness kind -> host

    def requests_to(self, kind: str) -> pl.DataFrame:
        return self.log.filter(pl.col("host") == self.kinds[kind]).sort("ts_start")


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Crawl]:
    base = tmp_path_factory.mktemp("polite")
    web_config = TestWebConfig(
        n_hosts=19,
        seed=7,
        hostile_share=0.0,
        politeness_hosts=POLITENESS_KINDS,
        shared_ip_hosts=SHARED,
        farm_hosts=SHARED,
    )
    web_dir, run_dir = base / "web", base / "run"
    web_dir.mkdir()
    with TestWebProcess(web_config, web_dir) as web:
        config = base / "crawl.toml"
        config.write_text(
            "[politeness]\n"
            f'hosts_file = "{web_dir / ADDRESSES_FILE}"\n'
            f"robots_attempts = {ROBOTS_ATTEMPTS}\n"  # robots_429 gets through, robots_timeout does not
            f"backoff_base = {BACKOFF_BASE}\n"
            f"breaker_failures = {BREAKER}\n"
        )
        seeds = base / "seeds.txt"
        seeds.write_text("\n".join(web.seed_urls) + "\n")
        process = hostcrawl(
            "crawl", "--config", str(config), "--seeds", str(seeds), "--out", str(run_dir),
            "--proxy", web.proxy_url, "--min-delay", str(MIN_DELAY), "--max-pages", "400",
            "--timeout", "2", "--user-agent", USER_AGENT, "--policy", "bfs", "--no-progress",
        )  # fmt: skip
    stats = json.loads((run_dir / "stats.json").read_text()) if process.returncode == 0 else {}
    _, audit = audit_test_web(web_dir, SiteModel(web_config), MIN_DELAY, USER_AGENT, USER_AGENT)
    log = audit_test_web(web_dir, SiteModel(web_config), MIN_DELAY, USER_AGENT, USER_AGENT)[0]
    kinds = {kind: SiteModel(web_config).hosts[i].name for i, kind in enumerate(POLITENESS_KINDS)}
    crawl = Crawl(run_dir, web_dir, web_config, process, stats, log, kinds)
    crawl.stats["_audit_clean"] = int(audit.clean)
    crawl.stats["_shared_groups"] = audit.shared_groups
    crawl.stats["_audit"] = audit.as_dict()  # type: ignore[assignment]
    yield crawl


def test_crawl_without_allow_private_finishes_and_its_audit_is_clean(crawl: Crawl) -> None:
    assert crawl.process.returncode == 0, crawl.process.stderr[-3000:]
    assert crawl.stats["_audit_clean"], crawl.stats["_audit"]
    assert crawl.log.filter(~pl.col("host").is_in(list(crawl.kinds.values()))).height >= 40


def test_robots_429_means_not_now_and_is_retried_after_retry_after(crawl: Crawl) -> None:
    rows = crawl.requests_to("robots_429")
    robots = rows.filter(pl.col("path") == "/robots.txt")
    assert robots["status"].to_list()[: ROBOTS_429_TIMES + 1] == [429] * ROBOTS_429_TIMES + [200]
    starts, ends = robots["ts_start"].to_list(), robots["ts_end"].to_list()
    for i in range(ROBOTS_429_TIMES):
        assert starts[i + 1] - ends[i] >= ROBOTS_429_RETRY_AFTER - 0.05, "robots.txt retried too soon"
    pages = rows.filter(pl.col("path") != "/robots.txt")
    assert pages.height >= 1, "the host was never crawled once its robots.txt could be read"
    assert pages["ts_start"].min() >= ends[ROBOTS_429_TIMES], "a page was fetched while robots.txt said 429"
    assert crawl.stats.get("robotstxt/unavailable/http_429", 0) == ROBOTS_429_TIMES


def test_unreachable_robots_is_retried_then_the_host_is_parked(crawl: Crawl) -> None:
    rows = crawl.requests_to("robots_timeout")
    assert set(rows["path"].to_list()) == {"/robots.txt"}
    assert rows.height == ROBOTS_ATTEMPTS, "robots.txt is tried a few times, then the host is put aside"
    starts, ends = rows["ts_start"].to_list(), rows["ts_end"].to_list()
    assert all(b - a >= 0.9 for a, b in zip(ends, starts[1:], strict=False)), "retried without backoff"
    # parked beyond backoff_max (tried again later in a longer crawl), not blocked for the run
    assert crawl.stats.get("robotstxt/parked", 0) == 2  # this host and robots_5xx's
    assert "host/blocked/robots_unavailable" not in crawl.stats
    assert crawl.stats.get("robotstxt/unavailable/timeout", 0) == ROBOTS_ATTEMPTS


def test_robots_answering_503_means_not_now_then_the_host_is_given_up(crawl: Crawl) -> None:
    rows = crawl.requests_to("robots_5xx")
    assert set(rows["path"].to_list()) == {"/robots.txt"}, "a page was fetched while robots.txt said 503"
    assert rows.height == ROBOTS_ATTEMPTS and (rows["status"] == 503).all()
    starts, ends = rows["ts_start"].to_list(), rows["ts_end"].to_list()
    assert all(b - a >= 0.9 for a, b in zip(ends, starts[1:], strict=False)), "retried without backoff"
    assert crawl.stats.get("robotstxt/unavailable/http_503", 0) == ROBOTS_ATTEMPTS


def test_pages_that_always_time_out_back_the_host_off_then_trip_the_breaker(crawl: Crawl) -> None:
    rows = crawl.requests_to("page_timeout").filter(pl.col("path") != "/robots.txt")
    assert rows.height == BREAKER, "the host was not blocked after its timeouts in a row"
    starts = rows["ts_start"].to_list()
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    # each attempt waits out the 2 s timeout, then an exponential backoff: 1 s, then 2 s
    for i, gap in enumerate(gaps):
        assert gap >= 2.0 + BACKOFF_BASE * 2**i - 0.1, f"attempt {i + 2} came {gap:.1f}s after the last"
    assert crawl.stats.get("host/blocked/network_errors", 0) == 1
    # robots_timeout's robots.txt timeouts back its host off too (they are counted), but they trip no
    # breaker: robots.txt has its own attempt limit
    assert crawl.stats.get("politeness/backoff/timeout", 0) >= BREAKER + ROBOTS_ATTEMPTS


def test_a_retry_after_of_days_drops_the_host_with_its_reason(crawl: Crawl) -> None:
    rows = crawl.requests_to("retry_days").filter(pl.col("path") != "/robots.txt")
    assert rows.height == 1, "the host was asked again within its Retry-After"
    assert rows["retry_after"].to_list() == [RETRY_DAYS_S]
    assert crawl.stats.get("host/blocked/retry_after_too_long", 0) == 1


def test_robots_disallowing_everything_blocks_the_host_at_once(crawl: Crawl) -> None:
    rows = crawl.requests_to("robots_disallow_all")
    assert rows["path"].to_list() == ["/robots.txt"]
    assert crawl.stats.get("host/blocked/robots_disallow_all", 0) == 1
    pages = pl.read_parquet(crawl.run_dir / "pages.parquet")
    assert pages.filter(pl.col("host") == crawl.kinds["robots_disallow_all"]).height <= 1


def test_an_hour_of_retry_after_parks_the_host(crawl: Crawl) -> None:
    rows = crawl.requests_to("retry_hour").filter(pl.col("path") != "/robots.txt")
    assert rows.height == 1, "the host was asked again within its Retry-After"
    assert rows["retry_after"].to_list() == [RETRY_HOUR_S]
    assert crawl.stats.get("politeness/parked", 0) == 1


def test_redirects_to_private_and_cgnat_addresses_are_refused(crawl: Crawl) -> None:
    rows = crawl.requests_to("redirect_private")
    go = rows.filter(pl.col("path").str.starts_with("/go/"))
    assert go.height == 3 and (go["status"] == 302).all(), "the redirecting pages were not crawled"
    hosts = set(crawl.log["host"].to_list())
    assert not hosts & {"100.100.100.200", "::ffff:169.254.169.254", "[::ffff:169.254.169.254]"}
    assert not any(h.startswith("internal-") for h in hosts), "a name on a private address was fetched"
    assert crawl.stats.get("fetch/refused/cgnat", 0) >= 1
    assert crawl.stats.get("fetch/refused/link_local", 0) >= 1
    assert crawl.stats.get("fetch/refused/private", 0) >= 1


def test_hosts_on_one_address_or_one_domain_get_one_request_at_a_time(crawl: Crawl) -> None:
    """The audit's group check (clean above) had two groups to check, and no group was starved."""
    assert crawl.stats["_shared_groups"] == 2
    hosts = [h.name for h in SiteModel(crawl.web_config).hosts]
    grouped = hosts[len(POLITENESS_KINDS) : len(POLITENESS_KINDS) + SHARED] + hosts[-SHARED:]
    assert all(h.endswith(".farm.example") for h in hosts[-SHARED:])
    visited = crawl.log.filter(pl.col("path") != "/robots.txt").group_by("host").len()
    counts = dict(visited.iter_rows())
    assert all(counts.get(h, 0) >= 2 for h in grouped), counts


def test_the_hosts_file_is_what_connections_resolve_with(tmp_path: Path) -> None:
    """No proxy: a name the hosts file puts on loopback is reached with --allow-private (the downloader
    resolves through the hosts file) and refused without it, before any byte is sent."""
    web_dir = tmp_path / "web"
    web_dir.mkdir()
    hosts = tmp_path / "hosts"
    with TestWebProcess(TestWebConfig(n_hosts=3, seed=1, hostile_share=0.0), web_dir) as web:
        name = web.seed_urls[0].split("/")[2]
        hosts.write_text(f"127.0.0.1 {name}\n")
        config = tmp_path / "crawl.toml"
        config.write_text(f'[politeness]\nhosts_file = "{hosts}"\n')
        url = f"http://{name}:{web.port}/"
        common = ["--config", str(config), "--min-delay", "0", "--max-pages", "3", "--no-progress"]
        refused = hostcrawl("crawl", url, "--out", str(tmp_path / "refused"), *common)
        assert read_request_log(web_dir / "requests.jsonl").height == 0, "a request reached loopback"
        allowed = hostcrawl("crawl", url, "--out", str(tmp_path / "allowed"), "--allow-private", *common)
    assert refused.returncode == 1, refused.stderr[-2000:]
    stats = json.loads((tmp_path / "refused" / "stats.json").read_text())
    assert stats.get("fetch/refused/loopback", 0) >= 1
    assert allowed.returncode == 0, allowed.stderr[-2000:]
    log = read_request_log(web_dir / "requests.jsonl")
    assert log.height >= 2 and set(log["host"].to_list()) == {name}


def test_a_cached_robots_txt_is_fetched_again_once_it_expires(tmp_path: Path) -> None:
    """RFC 9309 §2.4 (24 hours; here `robots_ttl` = 2 s): a long crawl reads robots.txt again."""
    web_config = TestWebConfig(
        n_hosts=2, seed=3, hostile_share=0.0, crawl_delay_share=0.0, real_robots_share=0.0
    )
    web_dir = tmp_path / "web"
    web_dir.mkdir()
    config = tmp_path / "crawl.toml"
    config.write_text("[politeness]\nrobots_ttl = 2.0\n")
    with TestWebProcess(web_config, web_dir) as web:
        result = hostcrawl(
            "crawl", *web.seed_urls, "--config", str(config), "--out", str(tmp_path / "run"),
            "--proxy", web.proxy_url, "--allow-private", "--min-delay", "0.5", "--max-pages", "14",
            "--user-agent", USER_AGENT, "--policy", "bfs", "--no-progress",
        )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    log = read_request_log(web_dir / "requests.jsonl", USER_AGENT).sort("ts_start")
    for host, rows in log.group_by("host"):
        starts = rows.filter(pl.col("path") == "/robots.txt")["ts_start"].to_list()
        span = rows["ts_start"].max() - rows["ts_start"].min()  # type: ignore[operator]
        assert len(starts) >= 2 or span < 2.5, f"{host}: robots.txt not read again in {span:.1f}s"
        assert all(b - a >= 2.0 - 0.05 for a, b in itertools.pairwise(starts)), "read too often"
    stats = json.loads((tmp_path / "run" / "stats.json").read_text())
    assert stats.get("robotstxt/refetched", 0) >= 1
    _, audit = audit_test_web(web_dir, SiteModel(web_config), 0.5, USER_AGENT, USER_AGENT)
    assert audit.clean, audit.examples
