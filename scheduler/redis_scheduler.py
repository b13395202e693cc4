"""The Scrapy scheduler of a worker in a distributed run: the frontier lives in Redis, shared by every worker.

SCHEDULER = "scheduler.redis_scheduler.RedisHostScheduler", with REDIS_URL (scrapy-redis's connection
settings, REDIS_PARAMS too), HOSTCRAWL_REDIS_RUN and HOSTCRAWL_WORKER_ID. It keeps HostScheduler's
settings, policy and signals; what differs is where the queues, politeness clocks and host estimates
are: in Redis (scheduler/redis_frontier.py), reached only through one thread (scheduler/redis_link.py).

How the policy works across workers (scheduler/shared_policy.py): each host's record (samples, scores,
state) is one Redis key that a worker updates after each scored page (optimistic WATCH/MULTI), and the
worker's policy turns it into the host's rank in the shared `eligible` set (or `dormant`, for a host it
dropped); every worker hands out the best-ranked ready host. A worker's policy picks the URL within a
host. The run's host means, URL-shape counts and explore fetches are shared through Redis; the evidence
bar is each worker's own, learnt from the pages it scored.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Self

import redis
from scrapy import Request
from scrapy.utils.defer import deferred_from_coro
from scrapy_redis.connection import get_redis_from_settings

from scheduler.frontier_limits import ScorePipe
from scheduler.groups import domain_group
from scheduler.host_priors import apply_prior
from scheduler.hosts import HostRecord, Phase
from scheduler.lease import Lease, ScoreLag
from scheduler.queue_window import QueuedUrl
from scheduler.redis_link import RedisLink, tell
from scheduler.redis_outbox import ENQUEUE_BATCH
from scheduler.redis_requests import Claimed, NewUrl, QueuedRequest
from scheduler.redis_shards import open_frontier
from scheduler.scrapy_scheduler import (
    DISCOVER_META,
    KEPT_META,
    LATER_META,
    LEASE_META,
    POLICY_META,
    HostScheduler,
    host_discovered,
    politeness_restored,
)
from scheduler.shared_policy import UNRANKED, SharedPolicy
from scheduler.urls import canonical, screen

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

CLOSE_FLUSH_S = 30.0  # at close, how long the outbox may take to reach Redis
FAILED_STAT = "frontier/redis_failed"  # why Redis could not go on being the frontier (RedisLink.failure)
INBOX = 8  # claimed leases waiting for the downloader, at most (claims are 50 ms apart)


def _call_from_thread(f: Callable[..., Any], *args: Any) -> None:
    """Runs f(*args) on the reactor's thread, from the link thread."""
    from twisted.internet import reactor

    reactor.callFromThread(f, *args)


class RedisHostScheduler(HostScheduler):
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        settings = crawler.settings
        self.worker = settings["HOSTCRAWL_WORKER_ID"]
        self.frontier_store = open_frontier(  # the run's shards, as the worker that seeded it chose
            get_redis_from_settings(settings),
            settings["HOSTCRAWL_REDIS_RUN"],
            settings.getfloat("HOSTCRAWL_LEASE_SECONDS", 60.0),
            self.limits.concurrency_per_group,
            self.limits.park_horizon,
        )
        self.grouped: set[str] = set()  # hosts whose domain group this worker has told Redis
        self.inbox: list[Claimed] = []
        # claimed by the link thread, not yet in the inbox (it reaches the reactor a turn later)
        self.in_transit = 0
        self.transit_lock = threading.Lock()
        self.to_reactor: Callable[..., Any] = _call_from_thread
        self.leases: dict[int, Lease] = {}  # handed to Scrapy, not yet recorded
        self.claimed_records: dict[int, HostRecord] = {}  # the host as it was when leased, until fetched
        self.fetching = 0
        self.score_lag = ScoreLag()  # this worker's fetches between a page's and its score
        bound = self.limits.max_unscored if self.policy.learns_from_scores else 0
        self.pipe = ScorePipe(bound, time.monotonic(), self._count_in_link)  # asked by the link thread
        self.ready_at: dict[str, float] = {}  # politeness: host -> monotonic time (host_ready_at)
        self.gauges: dict[str, Any] = {}  # the crawler's cleaning and politeness gauges (set on the reactor)
        self.shared = SharedPolicy(
            self.policy, self.limits, self.priors, self.frontier_store, self._run_explored
        )
        self.progress = self.shared.progress
        self.link = RedisLink(
            self.frontier_store,
            self.worker,
            self.limits.budget,
            self._want,
            self._claimed,
            self._info,
            self.shared.observe,
            self.shared.shared,
            self.shared.pick,
            self._claim_limits,
        )

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    # -- open / close -------------------------------------------------------------------------------

    def open(self, spider: Any) -> None:
        self.spider = spider
        self.stats.set_value("hostcrawl/policy", self.policy.name)
        self.stats.set_value("frontier/worker", self.worker)
        self.link.start()

    def close(self, reason: str) -> None:
        if self.wakeup is not None and self.wakeup.active():
            self.wakeup.cancel()
        for lease in list(self.leases.values()):  # never fetched (closing): back to the run
            if not lease.ended:
                self._end(lease, fetched=lease.fetched)
        if not self.link.stop(CLOSE_FLUSH_S):
            unsent = self.link.unsent()
            logger.warning("redis: %d operations not sent at close", unsent)
            self.stats.set_value("frontier/unsent_at_close", unsent)
            if self.link.state.paused:
                tell(
                    f"hostcrawl worker {self.worker}: Redis still unreachable; stopping without it. "
                    f"{unsent} updates were not sent: the pages they concern are fetched again by the "
                    "next worker once their leases expire, so nothing is lost"
                )
        for key, value in {**self.link.state.counts, **self.score_lag.stats()}.items():
            self.stats.set_value(key, value)
        self.stats.set_value("frontier/redis_reconnects", self.link.state.reconnects)
        if self.link.state.paused or self.link.state.failure:  # a heartbeat now could only fail or wait
            return
        try:
            # its crawl is over; its tables are written next (crawler/run/worker_merge.py WRITING)
            self.frontier_store.heartbeat(self.worker, {**self._info(), "finished": True, "writing": True})
        except redis.RedisError:
            logger.warning("redis: could not mark worker %s finished", self.worker)

    def __len__(self) -> int:
        return len(self.inbox)

    def has_pending_requests(self) -> bool:
        state = self.link.state
        if self.inbox or self.leases or self.link.unsent() or state.paused:
            return True
        return state.pending and not state.draining

    # -- the link thread's side ---------------------------------------------------------------------

    def _want(self) -> int:
        """Leases to claim now: few beyond what the downloader can start (a claimed host waits for us),
        and none beyond `max_unscored` pages of this worker leased and unscored (see FrontierLimits)."""
        want = max(0, min(self.free_slots(), INBOX) - len(self.inbox) - self.in_transit)
        room = self.pipe.room(len(self.leases) + len(self.inbox) + self.in_transit, time.monotonic())
        return want if room < 0 else min(want, room)

    def _claim_limits(self) -> tuple[int, bool, int]:
        """SharedPolicy.claim_limits, without the run's unscored bound once this worker has had no score for
        SCORE_WAIT_LIMIT_S: lost scores (leases that never end) must not stall the run, as in one process."""
        fill_hosts, exploring, unscored = self.shared.claim_limits()
        if unscored and self.pipe.stalled(time.monotonic()):
            unscored = 0
        return fill_hosts, exploring, unscored

    def pages_in_flight(self) -> int:
        return self.fetching

    def _count_in_link(self, key: str) -> None:
        self.link.state.counts[key] += 1  # the link thread's counters reach the stats at close

    def _run_explored(self) -> int:
        return self.link.state.explore_fetches

    def _info(self) -> dict[str, Any]:
        return {
            "fetched": self.progress.fetched,
            "pid": _pid(),
            "paused": self.link.state.paused,
            "scores_pending": max(0, len(self.leases) - self.fetching),  # fetched, score not back yet
            "gauges": self.gauges,
        }

    def _claimed(self, claimed: list[Claimed], rows: list[tuple[str, str, dict[str, Any]]]) -> None:
        with self.transit_lock:
            self.in_transit += len(claimed)
        self.to_reactor(self._take, claimed, rows)

    def _take(self, claimed: list[Claimed], rows: list[tuple[str, str, dict[str, Any]]]) -> None:
        with self.transit_lock:
            self.in_transit -= len(claimed)
        if rows:  # what other workers learnt of these hosts: robots.txt, Crawl-delay, backoff
            self.crawler.signals.send_catch_log(signal=politeness_restored, rows=rows, claimed=True)
        self.inbox.extend(claimed)
        self._nudge()

    # -- handing out --------------------------------------------------------------------------------

    def next_request(self) -> Request | None:
        if self.link.state.failure is not None and not self.frozen:
            self._stop_for(self.link.state.failure)
        if self.frozen:  # stopping: the claimed leases go back to the run at close
            return None
        # _want bounds the claims, but from the link thread: leases it claimed reach the inbox a reactor
        # turn later, so a busy reactor could see more in the inbox than free slots (5 in flight at 4)
        if self.free_slots() <= 0:
            return None
        while self.inbox:
            claimed = self.inbox.pop(0)
            lease_id = int(claimed.lease_id)
            if claimed.request is None:
                self._skip(claimed)
                continue
            request = claimed.request
            record = self.shared.record(claimed.host, claimed.host_record)
            phase = self.shared.phase(record, request.url, request.discover)
            host, url, depth = claimed.host, request.url, request.depth
            lease = Lease(host, url, depth, lease_id, 0, phase, None, request.discover, paid=claimed.urgent)
            self.leases[lease_id] = lease
            self.claimed_records[lease_id] = record
            self.fetching += 1
            meta: dict[str, Any] = dict(request.meta)
            meta.update({"depth": request.depth, LEASE_META: lease, POLICY_META: self.policy.name})
            self.stats.inc_value(f"frontier/handed_out/{phase.value}")
            if phase is not Phase.DEEPEN:  # the run's explore share is spent by every worker's fetches
                self.shared.explored()
                self.link.send("count", "explore_fetches", 1)
            return Request(
                request.url,
                callback=self.spider.parse,
                errback=getattr(self.spider, "failed", None),
                meta=meta,
                dont_filter=True,
            )
        return None

    def _stop_for(self, failure: str) -> None:
        """Redis keeps refusing: stop as SIGTERM would (what is in flight ends, nothing new starts)."""
        self.frozen = True
        self.stats.set_value(FAILED_STAT, failure)
        logger.error("stopping: %s", failure)
        deferred_from_coro(self.crawler.stop_async())

    def _skip(self, claimed: Claimed) -> None:
        """A leased host with nothing to fetch: the lease ends at once, the host is free again."""
        reason = claimed.skipped or "gone"
        if reason == "invalid_payload":  # not JSON of ours: counted and skipped, never run
            self.stats.inc_value("frontier/invalid_payload")
            self.link.send("count", "invalid_payload", 1)
        elif reason == "only_bad_urls_left":
            self.link.send("drop", claimed.host, reason)
        self.stats.inc_value(f"frontier/skipped/{reason}")
        self.link.send("fetch_ended", claimed.lease_id, 0.0, False, False)
        self.link.send("done", claimed.lease_id, None)

    def enqueue_request(self, request: Request) -> bool:
        old: Lease | None = request.meta.get(LEASE_META)
        if old is not None:
            if not old.ended:  # a retry after a network error, or robots.txt said "not now"
                self._end(old, fetched=old.fetched)
            self._settle(old, None)  # a retry or redirect replaces it
        if self._redirect_loop(request, old):
            return False
        url = canonical(request.url)
        redirect = old is not None and url != canonical(old.url)
        force = request.dont_filter and not redirect
        kept = {k: request.meta[k] for k in KEPT_META if k in request.meta}
        discover = bool(request.meta.get(DISCOVER_META))
        front = (old is not None or discover) and not request.meta.get(LATER_META)
        queued = QueuedRequest(url, int(request.meta.get("depth", 0)), kept, discover)
        new = self._new_url(queued, front, force, {})
        if isinstance(new, str):
            self.stats.inc_value(f"frontier/dropped/{new}")
            return False
        new.urgent = old is not None and old.paid and not redirect
        self.link.send("enqueue", [new])
        if redirect:
            self.stats.inc_value("redirect/followed")
        return True

    def enqueue_links(self, urls: list[str], depth: int, discover: bool = False) -> None:
        """A page's links or a sitemap's entries (links_found): one ENQUEUE per batch of them, each host
        ranked once (`discover`: sitemaps, in front of their hosts' pages, as `enqueue_request` puts them)."""
        ranks: dict[str, float] = {}
        batch: list[NewUrl] = []
        for url in urls:
            new = self._new_url(QueuedRequest(canonical(url), depth, {}, discover), discover, False, ranks)
            if isinstance(new, str):
                self.stats.inc_value(f"frontier/dropped/{new}")
            else:
                batch.append(new)
        for start in range(0, len(batch), ENQUEUE_BATCH):  # one script run each (redis_link.py)
            self.link.send("enqueue", batch[start : start + ENQUEUE_BATCH])

    def _new_url(
        self, queued: QueuedRequest, front: bool, force: bool, ranks: dict[str, float]
    ) -> NewUrl | str:
        """What ENQUEUE sends for a canonical URL, or why it is not queued (a stats reason). `ranks`
        holds the ranks of hosts already seen in this batch."""
        screened = screen(queued.url, self.guard, force)
        if isinstance(screened, str):
            return screened
        url, host = queued.url, screened.host
        if host not in self.grouped:  # its politeness groups reach Redis before its first URL does
            self.grouped.add(host)
            self.link.send("join", host, domain_group(host))
            self.crawler.signals.send_catch_log(signal=host_discovered, host=host)  # (its address, if known)
        self.shared.seq += 1
        rank = ranks.get(host)
        if rank is None:
            record = HostRecord(host, budget=self.limits.per_host_budget)
            record.queue.append(QueuedUrl(url, queued.depth, self.shared.seq))
            apply_prior(record, None if self.priors is None else self.priors.lookup(host))
            ranked, _ = self.shared.rank(record)  # a host new to the run is unjudged (SharedPolicy._rank)
            rank = ranks[host] = UNRANKED if ranked is None else ranked
        return NewUrl(host, queued, front, force, rank)

    # -- results ------------------------------------------------------------------------------------

    def _end(self, lease: Lease, fetched: bool) -> None:
        if lease.ended:
            return
        lease.ended = True
        lease.fetched = fetched
        self.fetching = max(0, self.fetching - 1)
        delay = max(0.0, self.ready_at.get(lease.host, 0.0) - time.monotonic())
        self.link.send("fetch_ended", str(lease.row_id), delay, fetched, fetched and self._hold(lease))
        if fetched:
            self.progress.fetched += 1
            lease.fetch_number = self.progress.fetched
            self.stats.inc_value("frontier/fetched")

    def _hold(self, lease: Lease) -> bool:
        record = self.claimed_records.pop(lease.row_id, None)
        return record is not None and self.shared.hold(record)

    def _settle(self, lease: Lease, checkpoint: dict[str, str] | None) -> None:
        if lease.settled:
            return
        lease.settled = True
        self.leases.pop(lease.row_id, None)
        self.claimed_records.pop(lease.row_id, None)
        self.link.send("done", str(lease.row_id), checkpoint)

    def fetched(self, lease: Lease, page: dict[str, Any], html: str) -> None:
        """A worker that dies before recording the page loses its lease, and another fetches it again."""

    def scored(self, lease: Lease, score: float | None, checkpoint: dict[str, str] | None = None) -> None:
        if lease.settled or self.frozen:  # the disk refused a write: the lease runs out, the run refetches
            return
        if not lease.ended:  # a network error, or dropped before the network (robots.txt, private address)
            self._end(lease, fetched=lease.fetched)
        if lease.fetched:
            self.score_lag.add(self.progress.fetched - lease.fetch_number)
            self.pipe.outcome(time.monotonic())
            value = 0.0 if score is None else score
            sitemap = lease.sitemap and score is None
            self.link.send("observe", lease.host, lease.phase.value, lease.url, value, sitemap)
        self._settle(lease, {k: str(v) for k, v in (checkpoint or {}).items()})
        self._nudge()

    def host_timer(self, host: str, ready_at: float) -> None:
        self.ready_at[host] = max(self.ready_at.get(host, 0.0), ready_at)

    def host_blocked(self, host: str, reason: str) -> None:
        self.link.send("block", host, reason)

    def host_address(self, host: str, address: str) -> None:
        """Hosts on one IP address share a politeness group in the whole run (scheduler/redis_groups.py)."""
        self.link.send("join", host, f"ip:{address}")

    def politeness_changed(self, host: str, part: str, state: dict[str, Any]) -> None:
        self.link.send("save_politeness", host, part, json.dumps(state, separators=(",", ":")))


def _pid() -> int:
    import os

    return os.getpid()
