"""A page's links go to the SQLite frontier in one batch (one dedup lookup, one insert per table): the
same links must be queued, refused for the same reasons and stored in the same order as if they had been
queued one by one, and a resumed run must go on numbering its queue rows after the old ones. (A batch ranks
each host once, with all of the page's links counted; one at a time ranked it at its first link. That can
reorder hosts the policy ties on, so the hand-out order is compared on a web where it does not.)"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from scheduler.core import HostFrontier
from scheduler.frontier_limits import FrontierLimits
from scheduler.policies import PolicyConfig, make_policy
from scheduler.resume import load_frontier
from scheduler.sqlite_store import SQLiteFrontier
from scheduler.urls import PathPatterns


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make(path: Path, memory_urls: int) -> tuple[HostFrontier, Clock]:
    clock = Clock()
    limits = FrontierLimits(budget=400, per_host_queue=25, memory_urls=memory_urls, memory_head=2)
    frontier = HostFrontier(SQLiteFrontier(path), make_policy("adaptive", PolicyConfig()), limits, clock)
    frontier.patterns = PathPatterns(cap=6)  # the 500 of a real crawl, small enough to reach here
    frontier.block("blocked.example", "robots_disallow_all")
    return frontier, clock


def pages(seed: int) -> list[tuple[list[str], int, bool]]:
    """Batches of links as pages and sitemaps yield them: repeats within a page and across pages, a
    blocked host, traps, a link without a host, one path pattern past its cap, a host's queue filling up,
    and a sitemap index's entries (discover: in front of their host's pages)."""
    rng = random.Random(seed)
    batches: list[tuple[list[str], int, bool]] = [([f"http://h{i}.example/" for i in range(6)], 0, False)]
    for page in range(40):
        host = f"h{rng.randrange(6)}.example"
        words = ["".join(rng.choice("abcdef") for _ in range(2)) for _ in range(12)]  # paths of no pattern
        links = [f"http://{host}/{word}.html" for word in words]
        links += [f"http://h{rng.randrange(6)}.example/b/{rng.choice('xyz')}" for _ in range(6)]
        links += [f"http://blocked.example/{page}", "http:///nohost", "http://h1.example/" + "x/" * 14]
        links += [f"http://p.example/item/{page}-{i}" for i in range(2)]  # one digits-masked pattern
        links.append(links[0])
        rng.shuffle(links)
        batches.append((links, 1 + page % 3, False))
        if page == 2:
            entries = [f"http://h3.example/sitemap-{i}.xml" for i in (1, 2, 3, 2)]
            batches.append((entries, 1, True))
    return batches


def drain(frontier: HostFrontier, clock: Clock) -> list[str]:
    """Hand out, fetch and score everything the budget allows; the URLs in the order handed out."""
    order: list[str] = []
    while frontier.has_pending():
        lease = frontier.next()
        if lease is None:
            ready = frontier.next_ready_at()
            if ready is None:
                break
            clock.now = max(clock.now + 0.01, ready)
            continue
        order.append(lease.url)
        frontier.fetch_ended(lease, True, clock.now + 1.0)
        frontier.observe(lease, 0.9 if hash(lease.url) % 3 else 0.1)
    return order


@pytest.mark.parametrize("memory_urls", [FrontierLimits().memory_urls, 0], ids=["store", "all_in_memory"])
def test_links_queued_in_one_batch_leave_the_frontier_as_if_queued_one_by_one(
    tmp_path: Path, memory_urls: int
) -> None:
    single, single_clock = make(tmp_path / "single.sqlite3", memory_urls)
    batched, batched_clock = make(tmp_path / "batched.sqlite3", memory_urls)
    reasons: Counter[str | None] = Counter()
    for links, depth, discover in pages(seed=7):
        one_by_one = [single.add(url, depth, discover=discover) for url in links]
        together = batched.add_links(links, depth, discover=discover)
        assert together == one_by_one, links
        reasons.update(together)
        single.commit()
        batched.commit()
    # every way of refusing a link happened, within one page and across pages
    for reason in (None, "duplicate", "host_blocked", "no_host", "trap/path_too_deep", "host_queue_full"):
        assert reasons[reason] > 0, (reason, reasons)
    assert reasons["trap/pattern_explosion"] > 0, reasons

    def rows(frontier: HostFrontier) -> list[tuple[str, str, int, int]]:
        query = "SELECT host, url, depth, discover FROM queue ORDER BY host, position"
        return list(frontier.store.db.execute(query))

    assert rows(batched) == rows(single)
    assert {h: len(r.queue) for h, r in batched.hosts.items()} == {
        h: len(r.queue) for h, r in single.hosts.items()
    }
    front = [url for host, url, _, discover in rows(batched) if host == "h3.example"][:3]
    assert front == [f"http://h3.example/sitemap-{i}.xml" for i in (3, 2, 1)], "in front, each once"
    order = drain(batched, batched_clock)
    assert len(order) > 50 and order == drain(single, single_clock)


def test_a_resumed_frontier_numbers_new_rows_after_the_old_ones(tmp_path: Path) -> None:
    path = tmp_path / "frontier.sqlite3"
    first, _ = make(path, FrontierLimits().memory_urls)
    assert first.add_links([f"http://a.example/{i}" for i in range(5)], 1) == [None] * 5
    first.commit()
    lease = first.next()
    assert lease is not None
    first.store.abandon()  # killed: what was in flight is owed, its row stays

    again, _ = make(path, FrontierLimits().memory_urls)
    load_frontier(again)
    reasons = again.add_links([f"http://a.example/{i}" for i in range(8)], 1)
    assert reasons == ["duplicate"] * 5 + [None] * 3, "the old links are still known, the new ones queued"
    again.commit()
    ids = [row_id for (row_id,) in again.store.db.execute("SELECT id FROM queue ORDER BY id")]
    assert len(ids) == len(set(ids)) == 8
    handed = []
    while (lease := again.next()) is not None:
        handed.append(lease.url)
        again.fetch_ended(lease, True, 0.0)
        again.observe(lease, 0.9)
    assert sorted(handed) == sorted(f"http://a.example/{i}" for i in range(8))
