"""The frontier's memory bound: queued URLs live in the SQLite store, memory holds each host's queue head
and a bounded window, and the crawl is the one the all-in-memory frontier makes."""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest
from hostcrawl_cli import hostcrawl

from crawler.bench.audit import audit_test_web
from crawler.bench.replay import SimulatedCrawl
from crawler.run.crawl_config import ConfigError, load_config
from crawler.testweb import TestWebConfig, TestWebProcess
from crawler.testweb.model import SiteModel
from scheduler.core import HostFrontier
from scheduler.frontier_limits import FrontierLimits
from scheduler.groups import domain_group
from scheduler.lease import Lease
from scheduler.policies import PolicyConfig, make_policy
from scheduler.resume import load_frontier
from scheduler.sqlite_store import APPLICATION_ID, SCHEMA_VERSION, FrontierError, SQLiteFrontier
from scheduler.urls import canonical, url_shape

ALL_IN_MEMORY = {"memory_urls": 0}
TINY = {"memory_head": 1, "memory_urls": 16}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make_frontier(path: Path, policy: str, **limits: int) -> tuple[HostFrontier, Clock]:
    clock = Clock()
    frontier = HostFrontier(
        SQLiteFrontier(path),
        make_policy(policy, PolicyConfig()),
        FrontierLimits(budget=10**6, **limits),
        clock,
    )
    return frontier, clock


def enqueue(frontier: HostFrontier, hosts: int, pages: int) -> None:
    """Links as a crawl finds them: every host's next page, host after host, in three sections each."""
    for page in range(pages):
        for host in range(hosts):
            assert frontier.add(f"http://h{host}.example/s{page % 3}/p{page}.html", 1) is None


def urls_in_memory(frontier: HostFrontier) -> int:
    return sum(len(record.queue.items) for record in frontier.hosts.values())


def drain(
    frontier: HostFrontier, clock: Clock, leases: int, after_each: Callable[[], None] = lambda: None
) -> list[str]:
    """Fetch and score pages, one per host per second, in the order the frontier hands them out."""
    handed: list[str] = []
    while len(handed) < leases and frontier.has_pending():
        lease = frontier.next()
        if lease is None:
            clock.now = frontier.next_ready_at() or clock.now + 1.0
            continue
        after_each()
        handed.append(lease.url)
        frontier.fetch_ended(lease, True, clock.now + 1.0)
        frontier.observe(lease, 0.9 if len(lease.url) % 3 else 0.1)
    return handed


def test_bounded_frontier_holds_queue_heads_and_one_window_while_the_rest_waits_on_disk(
    tmp_path: Path,
) -> None:
    hosts, pages, head, window = 300, 40, 2, 200
    frontier, clock = make_frontier(tmp_path / "f.sqlite3", "adaptive", memory_head=head, memory_urls=window)
    enqueue(frontier, hosts, pages)
    bound = head * hosts + window
    assert urls_in_memory(frontier) <= bound < hosts * pages // 10
    assert sum(len(record.queue) for record in frontier.hosts.values()) == hosts * pages

    def check() -> None:
        assert urls_in_memory(frontier) == frontier.windows.in_memory <= bound

    handed = drain(frontier, clock, 3000, check)
    assert len(handed) == len(set(handed)) == 3000  # every URL handed out once
    queued = sum(len(record.queue) for record in frontier.hosts.values())
    assert queued == hosts * pages - 3000
    assert frontier.store.db.execute("SELECT count(*) FROM queue WHERE state=0").fetchone()[0] == queued
    # samples and deepening picks read the queues back from disk: every host's, beyond its head (a head
    # read alone pages in the head only, so this counts fewer rows than leases: 2,400 for these 3,000)
    assert frontier.windows.paged_in > hosts * head
    # a URL queued long ago, whose host's window has been trimmed since, is still known
    assert frontier.add("http://h7.example/s1/p37.html", 1) == "duplicate"
    assert frontier.add("http://h7.example/s1/p40.html", 1) is None

    everything, _ = make_frontier(tmp_path / "all.sqlite3", "adaptive", **ALL_IN_MEMORY)
    enqueue(everything, hosts, pages)
    assert urls_in_memory(everything) == hosts * pages  # the bound above is the bounded frontier's doing


def traced_bytes(path: Path, hosts: int, pages: int, **limits: int) -> int:
    """Python memory the frontier holds once `hosts` x `pages` URLs are queued."""
    canonical.cache_clear()
    url_shape.cache_clear()
    tracemalloc.start()
    try:
        frontier, _ = make_frontier(path, "adaptive", **limits)
        enqueue(frontier, hosts, pages)
        canonical.cache_clear()  # the URL caches are the same in both modes: not the frontier's
        url_shape.cache_clear()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    frontier.store.close()
    return held


def test_bounded_frontier_holds_a_fraction_of_what_the_all_in_memory_one_holds(tmp_path: Path) -> None:
    bounded = traced_bytes(tmp_path / "bounded.sqlite3", 100, 200)
    everything = traced_bytes(tmp_path / "all.sqlite3", 100, 200, **ALL_IN_MEMORY)
    # 20,000 URLs: ~330 bytes each in memory (URL object and dedup fingerprint), against 100 host records
    assert bounded < everything / 4, f"bounded {bounded} bytes, all in memory {everything} bytes"


def test_a_host_queued_but_not_fetched_costs_under_2_kb(tmp_path: Path) -> None:
    # the host table is what stays in memory at a million hosts (100M queued URLs): at the 3.0 KB a host it
    # took here (an empty deque per queue, a set per politeness group, a Counter and lists per host, four
    # URLs of head; 3.4 KB of RSS), 1M hosts alone took 3 GB; the target is 2 GB for the whole frontier.
    # Now about 1.5 KB.
    domain_group("warm.example")  # the suffix list's trie is built once, not per host: before the count
    per_host = traced_bytes(tmp_path / "f.sqlite3", 6000, 3) / 6000
    assert per_host < 2000, f"{per_host:.0f} bytes per host"


def test_a_score_reaches_its_own_host_only_also_after_a_resume(tmp_path: Path) -> None:
    # hosts never scored share one empty container (scheduler/hosts.py NO_SCORES): a score must not
    # reach the others, and a resumed host (its scores restored, its URL shapes not) must take new ones
    frontier, clock = make_frontier(tmp_path / "run.sqlite3", "adaptive")
    enqueue(frontier, 8, 6)
    first = drain(frontier, clock, 4)
    scored = {url.split("/")[2] for url in first}
    untouched = [r for name, r in frontier.hosts.items() if name not in scored]
    assert untouched and all(not r.scores and not r.shapes for r in untouched)
    assert all(frontier.hosts[name].scores for name in scored)
    frontier.commit()
    frontier.store.close()
    resumed, clock = make_frontier(tmp_path / "run.sqlite3", "adaptive")
    load_frontier(resumed)
    before = {name: len(r.scores) for name, r in resumed.hosts.items()}
    assert sum(before.values()) == 4
    more = drain(resumed, clock, 10)
    after = {name: len(r.scores) for name, r in resumed.hosts.items()}
    assert sum(after.values()) == 14
    for name in after:
        assert after[name] - before[name] == sum(url.split("/")[2] == name for url in more)


class RecordedCrawl(SimulatedCrawl):
    """The replay of the test web's model, remembering what was handed out, in order."""

    handed: list[str]

    def complete(self, lease: Lease) -> None:
        self.handed.append(lease.url)
        super().complete(lease)


def replayed(model: SiteModel, policy: str, limits: dict[str, int]) -> tuple[list[str], int]:
    budget = int(sum(h.n_pages for h in model.hosts) * 0.3)
    with tempfile.TemporaryDirectory() as tmp:
        sim = RecordedCrawl(model, policy, budget, 8, Path(tmp) / "f.sqlite3", {}, FrontierLimits(**limits))
        sim.handed = []
        sim.run()
        sim.frontier.store.close()
    return sim.handed, sim.frontier.windows.paged_in


@pytest.mark.parametrize("policy", ["adaptive", "sample_deepen", "bfs"])
def test_bounded_frontier_crawls_the_test_web_in_the_order_the_all_in_memory_one_does(policy: str) -> None:
    model = SiteModel(TestWebConfig(n_hosts=30, seed=5, robots_dir=""))
    bounded, paged_in = replayed(model, policy, TINY)
    everything, _ = replayed(model, policy, ALL_IN_MEMORY)
    assert paged_in > 100  # the tiny window made it read the queues back from disk
    assert len(bounded) == len(everything) > 100
    first_difference = next(
        (i for i, (a, b) in enumerate(zip(bounded, everything, strict=True)) if a != b), None
    )
    assert first_difference is None, f"fetch {first_difference}: {bounded[first_difference or 0]}"


def crawl_with_sitemaps_and_retries(frontier: HostFrontier, clock: Clock) -> list[str]:
    """Three sitemaps per host go to the front of its queue; every p3.html fails once and is retried."""
    for host in range(20):
        for n in range(3):
            frontier.add(f"http://h{host}.example/sitemap{n}.xml", 0, discover=True)
    handed: list[str] = []
    while frontier.has_pending():
        lease = frontier.next()
        if lease is None:
            clock.now = frontier.next_ready_at() or clock.now + 1.0
            continue
        frontier.fetch_ended(lease, True, clock.now + 1.0)
        if lease.url.endswith("/p3.html") and lease.url not in handed:
            frontier.retire(lease)
            assert frontier.add(lease.url, lease.depth, force=True, after=lease) is None
        else:
            frontier.observe(lease, 0.5)
        handed.append(lease.url)
    return handed


def test_sitemaps_and_retries_keep_their_place_in_a_queue_paged_in_from_disk(tmp_path: Path) -> None:
    orders = []
    for name, limits in (("bounded", TINY), ("all", ALL_IN_MEMORY)):
        frontier, clock = make_frontier(tmp_path / f"{name}.sqlite3", "bfs", **limits)
        enqueue(frontier, 20, 15)
        orders.append(crawl_with_sitemaps_and_retries(frontier, clock))
    bounded, everything = orders
    assert bounded == everything
    h0 = [url.removeprefix("http://h0.example/") for url in bounded if url.startswith("http://h0.")]
    assert h0[:3] == ["sitemap2.xml", "sitemap1.xml", "sitemap0.xml"]  # the latest sitemap first
    assert h0[3:] == [f"s{p % 3}/p{p}.html" for p in (0, 1, 2, 3, 3, *range(4, 15))]  # a retry comes next


def test_a_resumed_bounded_frontier_fetches_what_was_in_flight_first_then_the_rest_in_order(
    tmp_path: Path,
) -> None:
    frontier, clock = make_frontier(tmp_path / "run.sqlite3", "bfs", **TINY)
    enqueue(frontier, 20, 15)
    drain(frontier, clock, 40)
    clock.now += 10.0
    in_flight = [frontier.next(), frontier.next()]  # the process dies with these handed out
    assert all(in_flight)
    frontier.store.close()
    orders = []
    for name, limits in (("bounded", TINY), ("all", ALL_IN_MEMORY)):
        shutil.copy(tmp_path / "run.sqlite3", tmp_path / f"{name}.sqlite3")
        resumed, clock = make_frontier(tmp_path / f"{name}.sqlite3", "bfs", **limits)
        assert load_frontier(resumed) == 2
        if name == "bounded":
            assert urls_in_memory(resumed) <= 20 + 16  # a head per host and the window: the rest on disk
        orders.append(drain(resumed, clock, 10**6))
    bounded, everything = orders
    assert bounded == everything
    assert {bounded[0], bounded[1]} == {lease.url for lease in in_flight if lease}
    assert len(bounded) == len(set(bounded)) == 20 * 15 - 40


def test_a_frontier_of_the_previous_schema_is_migrated_and_resumed_in_row_order(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA application_id={APPLICATION_ID}")
    db.executescript(
        """CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO meta VALUES ('schema_version', '2');
        CREATE TABLE queue (id INTEGER PRIMARY KEY, host TEXT NOT NULL, url TEXT NOT NULL,
            depth INTEGER NOT NULL, seq INTEGER NOT NULL, state INTEGER NOT NULL DEFAULT 0,
            discover INTEGER NOT NULL DEFAULT 0, extra BLOB, page TEXT, html BLOB);"""
    )
    for i in range(5):
        db.execute(
            "INSERT INTO queue (host, url, depth, seq) VALUES ('a.example', ?, 1, ?)",
            (f"http://a.example/{i}", i),
        )
    db.commit()
    db.close()
    frontier, clock = make_frontier(path, "bfs", **TINY)
    assert frontier.store.get_meta("schema_version") == str(SCHEMA_VERSION)
    load_frontier(frontier)
    assert drain(frontier, clock, 10) == [f"http://a.example/{i}" for i in range(5)]

    older = tmp_path / "older.sqlite3"
    shutil.copy(path, older)
    db = sqlite3.connect(older)
    db.execute("UPDATE meta SET value='1' WHERE key='schema_version'")
    db.commit()
    db.close()
    with pytest.raises(FrontierError, match=f"frontier schema 1 is not {SCHEMA_VERSION}"):
        SQLiteFrontier(older)


def test_a_frontier_of_schema_3_gets_its_url_shapes_and_crawls_as_before(tmp_path: Path) -> None:
    # schema 4 stores each queued URL's shape; a run queued by schema 3 has none, and is resumed the same
    for name in ("old", "new"):
        frontier, clock = make_frontier(tmp_path / f"{name}.sqlite3", "adaptive", **TINY)
        enqueue(frontier, 10, 12)
        frontier.commit()
        frontier.store.close()
    db = sqlite3.connect(tmp_path / "old.sqlite3")
    db.execute("ALTER TABLE queue DROP COLUMN shape")
    db.execute("UPDATE meta SET value='3' WHERE key='schema_version'")
    db.commit()
    db.close()
    orders = []
    for name in ("old", "new"):
        resumed, clock = make_frontier(tmp_path / f"{name}.sqlite3", "adaptive", **TINY)
        assert resumed.store.get_meta("schema_version") == str(SCHEMA_VERSION)
        load_frontier(resumed)
        items = [item for record in resumed.hosts.values() for item in record.queue]
        assert len(items) == 120 and all(item.shape == url_shape(item.url) for item in items)
        orders.append(drain(resumed, clock, 10**6))
    assert orders[0] == orders[1] and len(orders[0]) == 120


@pytest.mark.slow
def test_a_real_crawl_with_one_url_of_window_pages_its_queues_in_and_stays_polite(tmp_path: Path) -> None:
    config, web_dir, run = TestWebConfig(n_hosts=20, seed=4), tmp_path / "web", tmp_path / "run"
    web_dir.mkdir()
    with TestWebProcess(config, web_dir) as web:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(web.seed_urls) + "\n")
        process = hostcrawl(
            "crawl", "--seeds", str(seeds), "--out", str(run), "--proxy", web.proxy_url, "--allow-private",
            "--min-delay", "0.05", "--max-pages", "300", "--timeout", "3", "--policy", "adaptive",
            "--user-agent", "hostcrawl-test/1.0", "--no-progress", "--frontier-memory-urls", "1",
        )  # fmt: skip
    assert process.returncode == 0, process.stderr[-3000:]
    stats = json.loads((run / "stats.json").read_text())
    assert stats["frontier/queue_paged_in"] > 0
    pages = pl.read_parquet(run / "pages.parquet")
    assert pages.height >= 250
    fetched_twice = pages.filter(pl.col("status") == 200).group_by("url").len().filter(pl.col("len") > 1)
    assert fetched_twice.is_empty(), fetched_twice
    _, audit = audit_test_web(web_dir, SiteModel(config), 0.05, "hostcrawl-test/1.0", "hostcrawl-test/1.0")
    assert audit.overlapping == audit.too_fast == audit.disallowed == 0, audit.examples


def test_a_negative_memory_bound_in_a_config_is_refused_naming_the_key(tmp_path: Path) -> None:
    config = tmp_path / "crawl.toml"
    config.write_text("[fetch]\nfrontier_memory_urls = -1\n")
    with pytest.raises(ConfigError, match=r"crawl\.toml: fetch\.frontier_memory_urls must be >= 0"):
        load_config(config)
