"""A policy that learns from scores does not fetch far ahead of them: FrontierLimits.max_unscored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hostcrawl_cli import hostcrawl

from crawler.bench.replay import REPLAY_CLEAN_WORKERS, SCORE_LAG, replay
from crawler.pages.batch_cleaner import UNSCORED_BUDGET_SHARE, UNSCORED_FLOOR, unscored_bound
from crawler.run.crawl_config import CleaningConfig
from crawler.testweb import TestWebConfig, TestWebProcess
from crawler.testweb.config import graded_config
from crawler.testweb.model import SiteModel
from scheduler.core import HostFrontier
from scheduler.frontier_limits import SCORE_WAIT_LIMIT_S, FrontierLimits
from scheduler.lease import Lease
from scheduler.policies import PolicyConfig, make_policy
from scheduler.sqlite_store import SQLiteFrontier


def bounded_frontier(tmp_path: Path, policy: str, bound: int) -> tuple[HostFrontier, list[str]]:
    counted: list[str] = []
    frontier = HostFrontier(
        SQLiteFrontier(tmp_path / "frontier.sqlite3"),
        make_policy(policy, PolicyConfig()),
        FrontierLimits(budget=1000, max_unscored=bound),
        lambda: 0.0,
        count=counted.append,
    )
    for i in range(40):
        frontier.add(f"http://h{i}.example/", 0)
    return frontier, counted


def lease_all(frontier: HostFrontier) -> list[Lease]:
    leases = []
    while (lease := frontier.next()) is not None:
        leases.append(lease)
    return leases


def test_adaptive_waits_for_scores_once_max_unscored_pages_are_fetched_or_in_flight(tmp_path: Path) -> None:
    frontier, counted = bounded_frontier(tmp_path, "adaptive", bound=6)
    leases = lease_all(frontier)
    assert len(leases) == 6  # 40 hosts eligible, 6 handed out
    for lease in leases[:4]:  # fetched, scores not back: they still count
        frontier.fetch_ended(lease, True, 0.0)
    assert lease_all(frontier) == []
    assert frontier.has_pending()  # the crawl stays open for the scores
    assert counted.count("frontier/waited_for_scores") == 1  # one wait, however often the engine asks
    frontier.observe(leases[0], 0.9)
    frontier.fetch_ended(leases[4], False, 0.0)  # never reached the network: frees its place too
    assert len(lease_all(frontier)) == 2
    assert counted.count("frontier/waited_for_scores") == 2


def test_a_page_whose_score_never_comes_holds_the_crawl_back_only_for_a_while(tmp_path: Path) -> None:
    frontier, counted = bounded_frontier(tmp_path, "adaptive", bound=6)
    now = [0.0]
    frontier.clock = lambda: now[0]
    for lease in lease_all(frontier):
        frontier.fetch_ended(lease, True, 0.0)  # fetched; their scores are lost
    now[0] = SCORE_WAIT_LIMIT_S - 1
    assert frontier.next() is None
    now[0] = SCORE_WAIT_LIMIT_S + 1
    assert frontier.next() is not None
    assert "frontier/score_wait_expired" in counted


def test_a_policy_blind_to_scores_is_not_held_back(tmp_path: Path) -> None:
    frontier, counted = bounded_frontier(tmp_path, "bfs", bound=6)
    assert len(lease_all(frontier)) == 40
    assert "frontier/waited_for_scores" not in counted


def test_the_default_bound_is_the_requests_in_flight_and_two_batches_per_cleaning_worker() -> None:
    assert unscored_bound(32, "blocks_v1", 2) == 32 + 2 * 2 * 16
    assert unscored_bound(32, "encoder_v2", 0) == 32 + 2 * 64  # one GPU worker, batches of 64
    assert unscored_bound(32, "blocks_v1", 2, budget=1_000_000) == 96


def test_a_small_budget_is_not_spent_ahead_of_its_scores() -> None:
    assert unscored_bound(32, "blocks_v1", 2, budget=400) == round(400 * UNSCORED_BUDGET_SHARE)
    assert unscored_bound(32, "blocks_v1", 2, budget=20) == UNSCORED_FLOOR
    web = SiteModel(graded_config(n_hosts=40, seed=3, robots_dir=""))
    small = replay(web, "adaptive", 0.05)  # 228 fetches, 23 of them ahead of their scores at most
    budget, bound = small.frontier.limits.budget, small.frontier.limits.max_unscored
    assert bound == unscored_bound(32, CleaningConfig().cleaner, REPLAY_CLEAN_WORKERS, budget) < SCORE_LAG
    assert small.frontier.score_lag.stats()["scheduler/score_lag_pages_max"] < bound
    assert len(small.hits) == budget


def test_a_cpu_starved_pool_leaves_the_replayed_crawl_no_further_behind_its_scores_than_the_bound() -> None:
    """Scores 160 pages late (the cleaning pool starved) would leave every decision 160 pages blind; the
    pool's bound keeps the crawl within it, and the budget is spent all the same."""
    web = SiteModel(graded_config(n_hosts=40, seed=3, robots_dir=""))
    bound = unscored_bound(32, CleaningConfig().cleaner, REPLAY_CLEAN_WORKERS)
    limits = FrontierLimits(max_unscored=bound)  # (a budget this small would have a bound of its own)
    quiet = replay(web, "adaptive", 0.3, limits=limits)
    starved = replay(web, "adaptive", 0.3, score_lag=4 * SCORE_LAG, limits=limits)
    quiet_lag = quiet.frontier.score_lag.stats()
    starved_lag = starved.frontier.score_lag.stats()
    assert quiet_lag["scheduler/score_lag_pages_max"] <= SCORE_LAG  # a quiet pool never meets the bound
    assert starved_lag["scheduler/score_lag_pages_max"] < bound < 4 * SCORE_LAG
    assert len(starved.hits) == starved.frontier.limits.budget == len(quiet.hits)
    # ahead of scores costs bfs nothing: it is not held to the bound, and its scores come the full lag
    # late (a score arrives 160 x 0.01 s after its fetch: about 160 pages at the replay's 100 pages/s)
    blind = replay(web, "bfs", 0.3, score_lag=4 * SCORE_LAG, limits=limits).frontier.score_lag.stats()
    assert blind["scheduler/score_lag_pages_max"] > bound
    assert blind["scheduler/score_lag_pages_mean"] == pytest.approx(4 * SCORE_LAG, rel=0.25)


@pytest.mark.slow
def test_a_live_crawl_with_one_cleaning_worker_waits_for_its_scores_instead_of_running_ahead(
    tmp_path: Path,
) -> None:
    """With no delay between requests, 32 in flight and one cleaning process, fetching outruns cleaning;
    the crawl keeps to --max-unscored pages ahead of its scores, and spends its budget all the same."""
    bound = 12
    with TestWebProcess(TestWebConfig(n_hosts=30, seed=5), tmp_path / "web") as web:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(web.seed_urls) + "\n")
        result = hostcrawl(
            "crawl", "--seeds", str(seeds), "--out", str(tmp_path / "run"), "--proxy", web.proxy_url,
            "--allow-private", "--min-delay", "0", "--max-pages", "250", "--workers", "1",
            "--max-unscored", str(bound), "--no-progress",
        )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    stats = json.loads((tmp_path / "run" / "stats.json").read_text())
    assert stats["frontier/waited_for_scores"] > 0  # fetching did outrun cleaning, and waited
    assert stats["scheduler/score_lag_pages_mean"] <= bound  # unbounded on this machine: 38
    assert stats["frontier/fetched"] == 250
