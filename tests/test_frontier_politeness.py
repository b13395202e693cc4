"""The frontier's side of politeness: blocked hosts hand out nothing, politeness groups share one slot,
and what the crawler stores about a host's politeness is read back as JSON."""

from __future__ import annotations

from pathlib import Path

from scheduler.core import HostFrontier
from scheduler.frontier_limits import FrontierLimits
from scheduler.hosts import HostState
from scheduler.lease import Lease
from scheduler.policies import PolicyConfig, make_policy
from scheduler.sqlite_store import SQLiteFrontier


def make_frontier(tmp_path: Path, **limits: int) -> tuple[HostFrontier, list[str]]:
    counted: list[str] = []
    tmp_path.mkdir(parents=True, exist_ok=True)
    store = SQLiteFrontier(tmp_path / "frontier.sqlite3")
    frontier = HostFrontier(
        store, make_policy("bfs", PolicyConfig()), FrontierLimits(budget=1000, **limits), lambda: 0.0,
        counted.append,
    )  # fmt: skip
    return frontier, counted


def drain(frontier: HostFrontier) -> list[Lease]:
    out = []
    while (lease := frontier.next()) is not None:
        out.append(lease)
    return out


def test_a_blocked_host_hands_out_nothing_and_drops_its_queue(tmp_path: Path) -> None:
    frontier, counted = make_frontier(tmp_path)
    for i in range(50):
        frontier.add(f"http://blocked.example/{i}.html", 1)
    frontier.add("http://open.example/", 0)
    frontier.block("blocked.example", "robots_disallow_all")
    leases = drain(frontier)
    assert [lease.host for lease in leases] == ["open.example"]
    assert counted.count("host/blocked/robots_disallow_all") == 1
    assert counted.count("frontier/dropped/host_blocked") == 50
    assert frontier.add("http://blocked.example/new.html", 1) == "host_blocked"
    assert frontier.add("http://blocked.example/new.html", 1) == "duplicate", "it was discovered: seen"
    frontier.commit()
    pending = {row.host for row in frontier.store.pending()}
    assert "blocked.example" not in pending, "the dropped URLs are gone from the store too"
    frontier.fetch_ended(leases[0], True, 0.0)
    frontier.observe(leases[0], 0.9)
    assert frontier.hosts["blocked.example"].state is HostState.BLOCKED


def test_hosts_on_one_address_take_turns(tmp_path: Path) -> None:
    frontier, _ = make_frontier(tmp_path)
    for host in ("a.example", "b.example", "c.example"):
        frontier.add(f"http://{host}/", 0)
        frontier.groups.join(host, "ip:45.0.0.1" if host != "c.example" else "ip:45.0.0.2")
    first = drain(frontier)
    assert sorted(lease.host for lease in first) in (["a.example", "c.example"], ["b.example", "c.example"])
    shared = next(lease for lease in first if lease.host != "c.example")
    frontier.fetch_ended(shared, True, 0.0)
    second = drain(frontier)
    assert [lease.host for lease in second] == [({"a.example", "b.example"} - {shared.host}).pop()]


def test_subdomains_of_one_registered_domain_share_a_group(tmp_path: Path) -> None:
    frontier, _ = make_frontier(tmp_path)
    for i in range(5):
        frontier.add(f"http://s{i}.farm.example/", 0)
    frontier.add("http://other.example/", 0)
    leases = drain(frontier)
    assert sorted(lease.host for lease in leases) == ["other.example", "s0.farm.example"]


def test_group_concurrency_is_configurable(tmp_path: Path) -> None:
    frontier, _ = make_frontier(tmp_path, concurrency_per_group=3)
    for i in range(5):
        frontier.add(f"http://s{i}.farm.example/", 0)
    assert len(drain(frontier)) == 3
    unlimited, _ = make_frontier(tmp_path / "u", concurrency_per_group=0)
    for i in range(5):
        unlimited.add(f"http://s{i}.farm.example/", 0)
    assert len(drain(unlimited)) == 5


def test_an_address_learned_while_in_flight_counts_at_once(tmp_path: Path) -> None:
    frontier, _ = make_frontier(tmp_path)
    frontier.add("http://a.example/", 0)
    (lease,) = drain(frontier)
    frontier.add("http://b.example/", 0)
    frontier.groups.join("b.example", "ip:45.0.0.9")
    frontier.groups.join("a.example", "ip:45.0.0.9")  # a's address arrives while its request is out
    assert drain(frontier) == []
    frontier.fetch_ended(lease, True, 0.0)
    assert [lease.host for lease in drain(frontier)] == ["b.example"]


def test_politeness_state_is_stored_as_json(tmp_path: Path) -> None:
    (tmp_path / "r").mkdir()
    store = SQLiteFrontier(tmp_path / "r" / "frontier.sqlite3")
    store.save_politeness("a.example", "timing", {"ready_at": 1.5e9, "crawl_delay": 20.0})
    store.save_politeness("a.example", "robots", {"body": "User-agent: *\nDisallow: /x\n"})
    store.save_politeness("a.example", "timing", {"ready_at": 1.6e9, "crawl_delay": 20.0})
    store.commit()
    store.close()
    again = SQLiteFrontier(tmp_path / "r" / "frontier.sqlite3")
    rows = sorted(again.politeness())
    assert rows == [
        ("a.example", "robots", {"body": "User-agent: *\nDisallow: /x\n"}),
        ("a.example", "timing", {"ready_at": 1.6e9, "crawl_delay": 20.0}),
    ]
