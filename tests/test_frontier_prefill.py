"""benchmarks/frontier_at_scale.py measures a 100M-URL frontier it writes in SQL: that file must be the one
the frontier itself would have written, or the benchmark measures something no crawl runs on."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from benchmarks.frontier_at_scale import measure_resumed, new_links, prefill
from benchmarks.scheduler_cost import link_pages, urls
from scheduler.core import HostFrontier
from scheduler.frontier_limits import FrontierLimits
from scheduler.policies import PolicyConfig, make_policy
from scheduler.policy_base import HOME_SHAPES, linked_page
from scheduler.resume import load_frontier
from scheduler.sqlite_store import SQLiteFrontier
from scheduler.urls import url_shape

HOSTS, TOTAL = 7, 210  # 30 URLs a host: every one of the generator's 7 path sections, several times


def frontier(db: Path) -> HostFrontier:
    return HostFrontier(
        SQLiteFrontier(db), make_policy("adaptive", PolicyConfig()), FrontierLimits(), lambda: 0.0
    )


def written_by_the_frontier(db: Path) -> None:
    live = frontier(db)
    for page in link_pages(urls(HOSTS, TOTAL)):  # as benchmarks/scheduler_cost.py queues them
        assert live.add_links(page, 1) == [None] * len(page)
        live.commit()
    live.store.close()


def contents(db: Path) -> tuple[dict[str, list[tuple[object, ...]]], set[int], list[tuple[object, ...]]]:
    """Each host's queue in queue order (what a resume pages in), the dedup fingerprints, the host rows."""
    conn = sqlite3.connect(db)
    try:
        queues: dict[str, list[tuple[object, ...]]] = {}
        rows = (
            "SELECT host, url, depth, state, discover, extra, shape, page FROM queue ORDER BY host, position"
        )
        for host, *row in conn.execute(rows):
            queues.setdefault(host, []).append(tuple(row))
        seen = {fp for (fp,) in conn.execute("SELECT fp FROM seen")}
        hosts = list(conn.execute("SELECT host, record FROM hosts ORDER BY host"))
        indexes = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        assert "queue_host" in indexes  # the index a resume and every page-in read by
        return queues, seen, hosts
    finally:
        conn.close()


def test_the_prefilled_file_is_what_the_frontier_writes_for_the_same_urls(tmp_path: Path) -> None:
    live, built = tmp_path / "live.sqlite3", tmp_path / "prefilled.sqlite3"
    written_by_the_frontier(live)
    assert prefill(built, HOSTS, TOTAL) == TOTAL
    live_queues, live_seen, live_hosts = contents(live)
    queues, seen, hosts = contents(built)
    assert len(live_queues) == HOSTS and all(len(q) == TOTAL // HOSTS for q in live_queues.values())
    assert queues == live_queues
    assert seen == live_seen and len(seen) == TOTAL
    assert hosts == live_hosts


def test_a_resumed_prefilled_frontier_hands_out_and_refuses_as_the_live_one(tmp_path: Path) -> None:
    live, built = tmp_path / "live.sqlite3", tmp_path / "prefilled.sqlite3"
    written_by_the_frontier(live)
    prefill(built, HOSTS, TOTAL)
    handed: list[list[str]] = []
    for db in (live, built):
        resumed = frontier(db)
        load_frontier(resumed)
        # a URL already queued is a duplicate; a new one is queued
        again = next(urls(HOSTS, TOTAL))
        assert resumed.add_links([again, "http://h0.example/s0/p999.html"], 1) == ["duplicate", None]
        order = []
        while (lease := resumed.next()) is not None:
            order.append(lease.url)
            resumed.fetch_ended(lease, True, 0.0)
            resumed.observe(lease, 0.7)
        handed.append(order)
        resumed.store.close()
    assert handed[0] == handed[1] and len(handed[0]) == TOTAL + 1


def test_the_measurement_queues_new_links_only_and_hands_out_what_it_is_asked(tmp_path: Path) -> None:
    db = tmp_path / "prefilled.sqlite3"
    prefill(db, HOSTS, TOTAL)
    pages = list(new_links(HOSTS, TOTAL // HOSTS, 250))
    assert [len(p) for p in pages] == [100, 100, 50]
    assert len({url for p in pages for url in p}) == 250
    assert {url for p in pages for url in p}.isdisjoint(urls(HOSTS, TOTAL))
    result = measure_resumed(db, HOSTS, TOTAL, 250, 100)
    assert result["hosts"] == HOSTS and result["refused"] == 0
    assert result["resume_s"] > 0 and result["enqueue"] > 0 and result["next"] > 0


def test_a_generator_whose_urls_have_several_shapes_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import benchmarks.frontier_at_scale as scale

    monkeypatch.setattr(
        scale, "urls", lambda hosts, total: iter(["http://h0.example/a/1.html", "http://h0.example/"])
    )
    with pytest.raises(ValueError, match="several shapes"):
        scale.prefill(tmp_path / "f.sqlite3", 1, 2)


def test_home_shapes_are_the_shapes_of_a_home_page_and_of_nothing_else() -> None:
    home = ["http://h.example", "http://h.example/", "http://h.example/?lang=en", "http://h.example?x=1"]
    assert {url_shape(url) for url in home} <= HOME_SHAPES
    linked = ["http://h.example/a", "http://h.example/0", "http://h.example/-/", "http://h.example/a/?q=1"]
    assert not {url_shape(url) for url in linked} & HOME_SHAPES


def test_a_resumed_frontier_ranks_its_hosts_paging_in_their_queue_heads_alone(tmp_path: Path) -> None:
    """Ranking a host not yet fetched asks whether a page besides its home page is queued. On a resume
    nothing is in memory: the head is paged in (it usually answers), the rest of the answer comes from the
    stored shapes, and it is the same as from the URLs."""
    db = tmp_path / "f.sqlite3"
    live = frontier(db)
    live.add("http://home.example/", 0)  # only its home page
    live.add_links(["http://deep.example/"] + [f"http://deep.example/s/p{i}.html" for i in range(70)], 1)
    live.add_links(["http://late.example/"] * 1 + [f"http://x{i}.example/" for i in range(3)], 0)
    live.add_links(
        [f"http://late.example/?page={i}" for i in range(80)] + ["http://late.example/s/a.html"], 1
    )
    answers = {name: linked_page(record) for name, record in live.hosts.items()}
    live.store.close()
    assert answers["deep.example"] and not answers["home.example"] and not answers["x0.example"]
    assert not answers["late.example"]  # its linked page is beyond the 64 URLs the policies look at
    resumed = frontier(db)
    load_frontier(resumed)
    assert {name: linked_page(record) for name, record in resumed.hosts.items()} == answers
    # the resume paged in each host's head and nothing more: the rest of 71 or 81 URLs stayed on disk
    head = resumed.windows.head
    assert {name: len(record.queue.items) for name, record in resumed.hosts.items()} == {
        name: min(head, len(record.queue)) for name, record in resumed.hosts.items()
    }
    assert resumed.windows.paged_in == sum(min(head, len(r.queue)) for r in resumed.hosts.values()) < 20


def test_a_link_to_a_resumed_host_reads_its_queue_head_alone(tmp_path: Path) -> None:
    """Queueing a link compares its depth with the host's first queued URL. Reading 64 URLs of each host
    for it (as a policy reading on does) left 64M URLs to trim when links reached a million resumed hosts:
    a 100M-URL frontier grew to 10 GB while it queued links. The resume's ranking pages each head in (a
    head read alone: 64 rows each without it), and the links then read nothing more."""
    db = tmp_path / "f.sqlite3"
    prefill(db, HOSTS, TOTAL)
    resumed = frontier(db)
    load_frontier(resumed)
    head = resumed.windows.head
    assert resumed.windows.paged_in == head * HOSTS
    for page in new_links(HOSTS, TOTAL // HOSTS, HOSTS):  # one new link to each host
        assert resumed.add_links(page, 1) == [None] * HOSTS
    assert resumed.windows.paged_in == resumed.windows.in_memory == head * HOSTS
    assert all(len(record.queue.items) == head for record in resumed.hosts.values())
    lease = resumed.next()  # and the crawl goes on from the queue it resumed
    assert lease is not None and lease.url in set(urls(HOSTS, TOTAL))
    resumed.store.close()
