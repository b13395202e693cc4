"""What a frontier may do: its budget, politeness concurrency, idle-capacity filling, score pipe, memory."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scheduler.queue_window import MEMORY_HEAD, MEMORY_URLS

# Share of the request slots a crawl keeps busy with hosts its policy would rather not fetch now, while the
# hosts it prefers rest between fetches (crawl --keep-busy): 0 is best pages per fetch, 1 best per hour.
# Chosen on the graded family's tuning seeds 101-102 (10% budget, 1 s min delay, README "the clock"):
# adaptive 0.378 hq/fetch and 22.9k hq/hour at 0.125 (the old fixed 1/8), 0.325 and 53.5k at 0.5, 0.278
# and 76.3k at 1; 0.5 is the highest share at which adaptive still beats sample_deepen per fetch on
# every web (1.05-1.20x; 0.90-1.04x at 1).
KEEP_BUSY = 0.5


# Scrapy's downloader slots per request slot of the crawl. A page whose host's robots.txt or tdmrep.json is
# being fetched waits for it inside the downloader, and Scrapy counts both; with one slot each, a wide crawl
# (every page a new host's first) kept a third of its slots on the network (benchmarks/network_bound.py).
# The frontier caps the pages in flight at the crawl's concurrency (`request_slots`); each brings at most one
# robots.txt or tdmrep.json fetch of its own host, while it waits off the network, so no more than
# `concurrency` requests are ever on the network.
DOWNLOADER_SLOTS_PER_REQUEST_SLOT = 2


def request_slots(settings: Any) -> int:
    """The crawl's concurrency: pages in flight over all hosts (HOSTCRAWL_CONCURRENCY; Scrapy's
    CONCURRENT_REQUESTS where a crawl did not set it)."""
    return max(1, settings.getint("HOSTCRAWL_CONCURRENCY") or settings.getint("CONCURRENT_REQUESTS"))


def fill_hosts(concurrency: int, keep_busy: float = KEEP_BUSY) -> int:
    """FrontierLimits.fill_hosts of a crawl with `concurrency` request slots: 0 for keep_busy 0 (never
    fill: what the policy ranks "not now" waits until nothing else is left), else at least one."""
    return 0 if keep_busy <= 0 else max(1, round(keep_busy * concurrency))


@dataclass(slots=True)
class FrontierLimits:
    budget: int = 1000  # pages fetched over the whole crawl
    per_host_budget: int = 0  # 0 = no cap
    per_host_queue: int = 50_000  # queued URLs kept per host
    concurrency_per_host: int = 1
    concurrency_per_group: int = 1  # hosts sharing an IP or a registered domain (scheduler/groups.py)
    threshold: float = 0.5  # a page counts as high quality above this score
    # Fewer hosts than this in flight: hosts the policy ranks "not now" may fill the idle capacity.
    # A polite crawl of one host at a time would take forever; this trades a little budget for time.
    fill_hosts: int = 4
    # Pages leased and not yet scored, at most (0: no bound), for a policy that learns from scores
    # (Policy.learns_from_scores): with a cleaning pool behind, the crawl would run ahead of its evidence
    # (scores 160 pages late instead of 40), and fetching faster than the pool cleans gains no time.
    max_unscored: int = 0
    # ... and over the whole run, for workers sharing one Redis (0: no bound): every worker's leased and
    # unscored pages together. A worker's own max_unscored bounds what its pipe and cleaning pool hold; the
    # budget's share (budget_unscored_bound) is the run's, so three workers do not fetch three times as far
    # ahead of their scores as one (benchmarks/distributed_crawl.py: no hq/fetch change beyond its noise).
    run_max_unscored: int = 0
    # What the frontier holds in memory (scheduler/queue_window.py): at most memory_head x hosts + memory_urls
    # queued URLs, the rest in the SQLite store; memory_urls 0 keeps every queued URL and every dedup
    # fingerprint in memory, as hostcrawl did before issue 13 (the memory benchmark's baseline).
    memory_head: int = MEMORY_HEAD
    memory_urls: int = MEMORY_URLS
    # With nothing else left to fetch, hosts told to wait longer than this (a Retry-After of hours, a
    # robots.txt unavailable for long) do not hold the crawl open: it ends, their queues stay for a
    # --resume, and hosts.parquet names them `parked` (the crawl's backoff_max).
    park_horizon: float = 600.0


SCORE_WAIT_LIMIT_S = 60.0  # a full pipe and no score for this long: go on (a lost score must not stall)


class ScorePipe:
    """Keeps at most `bound` pages leased and unscored (0: no bound); one per frontier or Redis worker.

    Counts `frontier/waited_for_scores` once per wait, not per call of the engine, and
    `frontier/score_wait_expired` when no outcome came for SCORE_WAIT_LIMIT_S while full."""

    def __init__(self, bound: int, now: float, count: Callable[[str], None]) -> None:
        self.bound = bound
        self.count = count
        self.full = False
        self.last_outcome_at = now  # when a fetched page last got its score (or was replaced)

    def outcome(self, now: float) -> None:
        self.last_outcome_at = now

    def stalled(self, now: float) -> bool:
        """No page got its score for SCORE_WAIT_LIMIT_S."""
        return now - self.last_outcome_at > SCORE_WAIT_LIMIT_S

    def room(self, pending: int, now: float) -> int:
        """Leases that may be handed out now, with `pending` pages leased and unscored (-1: any number)."""
        if self.bound <= 0:
            return -1
        room = self.bound - pending
        if room <= 0 and self.stalled(now):
            self.count("frontier/score_wait_expired")
            room = 1
        if room <= 0 and not self.full:
            self.count("frontier/waited_for_scores")
        self.full = room <= 0
        return max(0, room)
