"""The offline replay behind `bench yield`'s budget curve: the real frontier over the test web's model."""

from __future__ import annotations

import heapq
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from crawler.bench.demo import last_fifth_pace
from crawler.bench.replay import SimulatedCrawl, Timing, replay, tail_pace
from crawler.testweb import TestWebConfig
from crawler.testweb.model import SiteModel
from scheduler.lease import Lease


def test_replay_spends_the_budget_and_ranks_host_aware_policies_far_above_breadth_first() -> None:
    model = SiteModel(TestWebConfig(n_hosts=80, seed=1, robots_dir=""))
    budget = int(sum(h.n_pages for h in model.hosts) * 0.1)
    runs = {policy: replay(model, policy, 0.1) for policy in ("bfs", "adaptive")}
    for policy, sim in runs.items():
        assert len(sim.hits) == budget, policy
    bfs, adaptive = (sum(runs[p].hits) / budget for p in ("bfs", "adaptive"))
    assert adaptive >= 2 * bfs, f"adaptive {adaptive:.3f} vs bfs {bfs:.3f} high-quality pages per fetch"
    assert runs["adaptive"].by_phase["sample"][0] > 0, "adaptive samples hosts before deepening them"


def test_a_small_budget_is_spent_deepening_good_hosts_not_looking_at_every_host() -> None:
    """At 2% of the web (1.7 pages per host) adaptive stops looking at new hosts once explore_share of
    the budget has gone to first looks; looking at every host would leave nothing to deepen (before
    explore_share applied to adaptive it looked at 127 of 150 hosts here, 0.21 hq/fetch)."""
    model = SiteModel(TestWebConfig(n_hosts=150, seed=5, robots_dir=""))
    sim = replay(model, "adaptive", 0.02)
    looked_at = sum(1 for host in sim.frontier.hosts.values() if host.fetched)
    assert len(sim.hits) == sim.frontier.limits.budget
    assert looked_at < 75, f"looked at {looked_at} of 150 hosts with {len(sim.hits)} pages"
    assert sum(sim.hits) / len(sim.hits) >= 0.25


def _gaps(sim: SimulatedCrawl) -> dict[str, float]:
    """Each host's shortest time between two of its fetches' completions on the simulated clock."""
    last: dict[str, float] = {}
    shortest: dict[str, float] = {}
    for at, host in sim.done_at:
        if host in last:
            shortest[host] = min(shortest.get(host, float("inf")), at - last[host])
        last[host] = at
    return shortest


def test_the_simulated_clock_rests_each_host_and_counts_pages_per_hour() -> None:
    """A host rests max(min_delay, its Crawl-delay) after each fetch, so the same crawl takes longer on
    the clock with a 1 s floor, and its high-quality pages per hour are its hits over that time."""
    model = SiteModel(TestWebConfig(n_hosts=60, seed=2, robots_dir=""))
    fast = replay(model, "adaptive", 0.1)
    polite = replay(model, "adaptive", 0.1, timing=Timing(min_delay=1.0))
    assert len(polite.hits) == polite.frontier.limits.budget
    assert min(_gaps(polite).values()) >= 1.0
    delays = {h.name: h.crawl_delay for h in model.hosts if h.crawl_delay}
    rested = {host: gap for host, gap in _gaps(fast).items() if host in delays}
    assert rested, "some hosts with a Crawl-delay were fetched twice"
    assert all(gap >= delays[host] for host, gap in rested.items()), rested
    assert polite.clock > fast.clock
    ended = zip(polite.done_at, polite.hits, strict=True)
    by_then = sum(hit for (at, _), hit in ended if at <= polite.handed_out_at)
    assert 0 < polite.handed_out_at < polite.clock
    assert polite.hq_per_hour == pytest.approx(3600 * by_then / polite.handed_out_at)
    assert polite.hq_per_hour < fast.hq_per_hour
    assert 0.0 <= fast.idle_share <= 1.0 and 0.0 <= polite.idle_share <= 1.0


class _SlowLastFetch(SimulatedCrawl):
    """The same crawl, but the fetch that spends the budget's last page takes `extra` seconds more."""

    extra = 0.0

    def start(self, lease: Lease) -> None:
        super().start(lease)
        if self.frontier.budget_left() <= 0 and self.extra:
            entry = next(e for e in self.in_flight if e[2] is lease)
            self.in_flight.remove(entry)
            self.in_flight.append((entry[0] + self.extra, entry[1], lease))
            heapq.heapify(self.in_flight)
            self.extra = 0.0


def test_a_slow_last_fetch_lengthens_the_drain_not_the_pages_per_hour(tmp_path: Path) -> None:
    """A slow fetch handed out last (light_tail, tuning seed 101: a 3.5 s sample) was a fifth of a 15 s
    replay's clock; a crawl of hours waits for it once. hq/hour is the rate until the last fetch is handed
    out, and the wait after it is the drain: here the last fetch takes 6 s more."""
    model = SiteModel(TestWebConfig(n_hosts=60, seed=2, robots_dir=""))
    budget = int(sum(h.n_pages for h in model.hosts) * 0.1)
    runs = []
    for extra in (0.0, 6.0):
        sim = _SlowLastFetch(model, "adaptive", budget, 32, tmp_path / f"{extra}.db", {})
        sim.extra = extra
        sim.run()
        sim.frontier.store.close()
        runs.append(sim)
    quick, slow = runs
    assert sorted(quick.hits) == sorted(slow.hits) and quick.handed_out_at == slow.handed_out_at
    assert slow.clock >= slow.handed_out_at + 6.0 > quick.clock
    assert slow.hq_per_hour == quick.hq_per_hour
    assert slow.drain_share > quick.drain_share
    assert slow.drain_share == pytest.approx(1 - slow.handed_out_at / slow.clock)


def test_keep_busy_trades_pages_per_fetch_for_pages_per_hour() -> None:
    """With a 1 s floor per host, adaptive keeping every request slot busy fetches its budget sooner and
    with fewer idle slots than adaptive that fills only when nothing is in flight."""
    model = SiteModel(TestWebConfig(n_hosts=80, seed=1, robots_dir=""))
    timing = Timing(min_delay=1.0)
    best_fetch = replay(model, "adaptive", 0.1, timing=timing, keep_busy=0.0)
    best_hour = replay(model, "adaptive", 0.1, timing=timing, keep_busy=1.0)
    assert best_hour.clock < best_fetch.clock
    assert best_hour.idle_share < best_fetch.idle_share
    assert best_hour.hq_per_hour > best_fetch.hq_per_hour
    print(f"hq/fetch {best_fetch.hq_per_fetch:.3f} -> {best_hour.hq_per_fetch:.3f}, hq/hour "
          f"{best_fetch.hq_per_hour:.0f} -> {best_hour.hq_per_hour:.0f}")  # fmt: skip


def test_the_pace_of_a_crawls_last_fifth_is_measured_against_its_mean(tmp_path: Path) -> None:
    """A crawl that keeps its pace scores 1.0; one whose last fifth of pages crawls along (hosts waiting out
    their delays) scores its slowdown, from the replay's clock or from a real run's pages.parquet."""
    steady = [float(i) for i in range(1, 1001)]
    assert tail_pace(steady, 0.0, 1000.0) == pytest.approx(1.0, rel=0.01)
    stalled = [float(i) for i in range(1, 81)] + [80.0 + 4.0 * i for i in range(1, 21)]  # 4x slower
    pace = tail_pace(stalled, 0.0, stalled[-1])
    assert pace == pytest.approx((20 / (160 - 84)) / (100 / 160)) and pace < 0.7
    start = datetime(2026, 12, 6, tzinfo=UTC)
    times = [start + timedelta(seconds=t) for t in [0.0, *stalled]]
    pages = tmp_path / "pages.parquet"
    pl.DataFrame({"fetched_at": times[::-1]}).write_parquet(pages)  # a run's column, in any order
    assert pl.read_parquet(pages)["fetched_at"].dtype == pl.Datetime("us", "UTC")  # as write_tables writes it
    assert last_fifth_pace(pages) == pytest.approx(tail_pace([0.0, *stalled], 0.0, stalled[-1]))
    assert last_fifth_pace(tmp_path / "none.parquet") is None
