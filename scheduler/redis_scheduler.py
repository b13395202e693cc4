"""The Scrapy scheduler of a worker in a distributed run: the frontier lives in Redis, shared by every worker.

SCHEDULER = "scheduler.redis_scheduler.RedisHostScheduler", with REDIS_URL (scrapy-redis's connection
settings, REDIS_PARAMS too), HOSTCRAWL_REDIS_RUN and HOSTCRAWL_WORKER_ID. It keeps HostScheduler's
settings, policy and signals; what differs is where the queues, politeness clocks and host estimates
are: in Redis (scheduler/redis_frontier.py), reached only through one thread (scheduler/redis_link.py).

How the policy works across workers: each host's record (samples, scores, state) is one Redis key that a
worker updates after each scored page (optimistic WATCH/MULTI), and the worker's policy turns it into
the host's rank in the shared `eligible` set; every worker hands out the best-ranked ready host. Within
a host, URLs are fetched in queue order (front: retries, redirects, sitemaps). Aspiration and URL-shape
statistics are each worker's own, learnt from the pages it scored.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urlsplit

import redis
from scrapy import Request, signals
from scrapy_redis.connection import get_redis_from_settings

from scheduler.host_scores import ScoreOutcome, next_in_host, record_score
from scheduler.hosts import HostRecord, HostState, Phase, host_state, restore_host
from scheduler.lease import Lease
from scheduler.policy_base import CrawlProgress
from scheduler.priors import apply_prior
from scheduler.queue_window import QueuedUrl
from scheduler.redis_frontier import (
    FILL_FLOOR,
    UNSCORED,
    Claimed,
    NewUrl,
    QueuedRequest,
    RedisFrontier,
)
from scheduler.redis_link import RedisLink, SharedUpdate
from scheduler.scrapy_scheduler import (
    DISCOVER_META,
    KEPT_META,
    LEASE_META,
    POLICY_META,
    HostScheduler,
    politeness_restored,
)
from scheduler.urls import TrapGuard, canonical, url_shape

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

CLOSE_FLUSH_S = 30.0  # at close, how long the outbox may take to reach Redis
INBOX = 8  # claimed leases waiting for the downloader, at most (claims are 50 ms apart)
UNRANKED = -1.0  # a host the policy says "not now" for: still fetched, after every ranked one


class RedisHostScheduler(HostScheduler):
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        settings = crawler.settings
        self.worker = settings["HOSTCRAWL_WORKER_ID"]
        self.frontier_store = RedisFrontier(
            get_redis_from_settings(settings),
            settings["HOSTCRAWL_REDIS_RUN"],
            settings.getfloat("HOSTCRAWL_LEASE_SECONDS", 60.0),
        )
        self.slots = max(1, settings.getint("CONCURRENT_REQUESTS"))
        self.progress = CrawlProgress(budget=self.limits.budget)
        self.guard = TrapGuard()
        self.policy_lock = threading.Lock()  # the policy is used by the reactor and by the link thread
        self.inbox: list[Claimed] = []
        self.leases: dict[int, Lease] = {}  # handed to Scrapy, not yet recorded
        self.claimed_records: dict[int, HostRecord] = {}  # the host as it was when leased, until fetched
        self.fetching = 0
        self.ready_at: dict[str, float] = {}  # politeness: host -> monotonic time (host_ready_at)
        self.seq = 0
        self.boost = 0.0
        self.gauges: dict[str, Any] = {}  # the crawler's cleaning and politeness gauges (set on the reactor)
        # A host is released when its response has passed the downloader middlewares, which may fetch
        # more of it first (tdmrep.json): from then on its delay runs, for every worker.
        crawler.signals.connect(self.response_received, signal=signals.response_received)
        self.link = RedisLink(
            self.frontier_store,
            self.worker,
            self.limits.budget,
            self._want,
            self._claimed,
            self._info,
            self._observe_in_thread,
            self._shared,
            self._pick,
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
            logger.warning("redis: %d operations not sent at close", self.link.unsent())
        for key, value in self.link.state.counts.items():
            self.stats.set_value(key, value)
        self.stats.set_value("frontier/redis_reconnects", self.link.state.reconnects)
        try:
            self.frontier_store.heartbeat(self.worker, {**self._info(), "finished": True})
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
        """Leases to claim now: few beyond what the downloader can start (a claimed host waits for us)."""
        return max(0, min(self.slots - self.fetching, INBOX) - len(self.inbox))

    def _claim_limits(self) -> tuple[int, bool]:
        """Hosts busy in the run below which fillers are claimed, and whether the run still explores (the
        policy's explore share, counted over every worker's fetches)."""
        self._sync_explored()
        exploring = getattr(self.policy, "exploring", None)
        with self.policy_lock:
            return self.limits.fill_hosts, True if exploring is None else bool(exploring(self.progress))

    def _sync_explored(self) -> None:
        self.progress.explore_fetches = max(self.progress.explore_fetches, self.link.state.explore_fetches)

    def _info(self) -> dict[str, Any]:
        return {
            "fetched": self.progress.fetched,
            "pid": _pid(),
            "paused": self.link.state.paused,
            "scores_pending": max(0, len(self.leases) - self.fetching),  # fetched, score not back yet
            "gauges": self.gauges,
        }

    def _claimed(self, claimed: list[Claimed], rows: list[tuple[str, str, dict[str, Any]]]) -> None:
        from twisted.internet import reactor

        reactor.callFromThread(self._take, claimed, rows)

    def _take(self, claimed: list[Claimed], rows: list[tuple[str, str, dict[str, Any]]]) -> None:
        if rows:  # what other workers learnt of these hosts: robots.txt, Crawl-delay, backoff
            self.crawler.signals.send_catch_log(signal=politeness_restored, rows=rows)
        self.inbox.extend(claimed)
        self._nudge()

    def _observe_in_thread(
        self, raw: str | None, host: str, phase: str, url: str, value: float, sitemap: bool
    ) -> tuple[str, tuple[float | None, bool], ScoreOutcome, SharedUpdate]:
        """The shared record with this page's score: (record JSON, rank, outcome, run-wide policy state)."""
        record = self._record(host, raw)
        record.fetched += 1
        record.settled += 1
        with self.policy_lock:
            outcome = record_score(
                record, self.policy, Phase(phase), url, value, self.limits.threshold, sitemap
            )
            if outcome.drop_reason and record.state not in (HostState.DROPPED, HostState.BLOCKED):
                record.state = HostState.DROPPED
                record.drop_reason = outcome.drop_reason
            rank, judged = self._rank(record)
            mean = getattr(self.policy, "means", {}).get(host)
        shared = SharedUpdate(url_shape(url), value > self.limits.threshold, mean)
        return json.dumps(host_state(record), separators=(",", ":")), (rank, judged), outcome, shared

    def _shared(self, means: dict[str, float], shapes: dict[str, list[int]]) -> None:
        """The whole run's host means (the aspiration level's input) and URL-shape counts replace this
        worker's, which saw only its own pages (from the link thread, every SHARED_EVERY_S)."""
        with self.policy_lock:
            own = getattr(self.policy, "means", None)
            if isinstance(own, dict):
                learnt = sum(1 for host in means if host not in own)
                own.update(means)
                self.policy.changes += learnt  # type: ignore[attr-defined]  # (adaptive's counter)
            self.policy.shape_totals = shapes
            self.policy.epoch(self.progress)  # the aspiration level, from every worker's hosts
            self._update_boost()

    # -- handing out --------------------------------------------------------------------------------

    def _record(self, host: str, raw: str | dict[str, Any] | None) -> HostRecord:
        record = HostRecord(host, budget=self.limits.per_host_budget)
        data = json.loads(raw) if isinstance(raw, str) else raw
        if isinstance(data, dict) and data:
            restore_host(record, data)
            # pages of it that workers fetched and have not recorded yet count as fetched (and, while it
            # is sampled, as samples handed out), as HostFrontier counts its own: no blind deepening
            unscored = int(data.get(UNSCORED, 0) or 0)
            record.fetched += unscored
            record.sample_handed += unscored
        apply_prior(
            record, None if self.priors is None else self.priors.lookup(host)
        )  # (no signal: a thread)
        return record

    def _rank(self, record: HostRecord) -> tuple[float | None, bool]:
        """The policy's priority as one number (Redis sorts by one score: primary + 1e-9 x secondary), and
        whether the policy has judged the host. A host it has not competes with the aspiration level; that
        part is left to Redis (CLAIM's boost), so raising the aspiration needs no re-ranking of every host.
        A dropped host's rank is its dormant rank (FILL_FLOOR up for a filler), None if it never returns."""
        self._sync_explored()
        if not record.queue:  # the queue is in Redis: rank it as a host with pages left
            record.queue.append(QueuedUrl(f"http://{record.host}/", 1, self.seq))
        if record.state is HostState.DROPPED:
            filler = self.policy.fill_priority(record)
            revive = filler or self.policy.revive_priority(record)
            if revive is None:
                return None, True
            return _flat(revive) + (FILL_FLOOR + 1.0 if filler else 0.0), True
        priority = self.policy.priority(record, self.progress) or self.policy.fill_priority(record)
        aspiration = getattr(self.policy, "aspiration", None)
        judged = True
        if aspiration is not None and priority is not None:
            self.policy.aspiration = 0.0  # type: ignore[attr-defined]
            own = self.policy.priority(record, self.progress)
            self.policy.aspiration = aspiration  # type: ignore[attr-defined]
            judged = own == priority
            priority = own or priority
        if priority is None:
            return UNRANKED, True
        return _flat(priority), judged

    def _update_boost(self) -> None:
        """The aspiration level, as what it adds to an unjudged host's own index (for CLAIM)."""
        aspiration = getattr(self.policy, "aspiration", None)
        estimate = getattr(self.policy, "estimate", None)
        if aspiration is None or estimate is None:
            return
        mean, sd = estimate(HostRecord("new.invalid"))
        boost = max(0.0, aspiration - (mean + self.policy.config.exploration_bonus * sd))
        if boost != self.boost:
            self.frontier_store.set_boost(boost)
            self.boost = boost

    def next_request(self) -> Request | None:
        while self.inbox:
            claimed = self.inbox.pop(0)
            lease_id = int(claimed.lease_id)
            if claimed.request is None:
                self._skip(claimed)
                continue
            request = claimed.request
            record = self._record(claimed.host, claimed.host_record)
            with self.policy_lock:
                phase = Phase.DISCOVER if request.discover else self.policy.phase_of(record, request.url)
            host, url, depth = claimed.host, request.url, request.depth
            lease = Lease(host, url, depth, lease_id, 0, phase, None, request.discover)
            self.leases[lease_id] = lease
            self.claimed_records[lease_id] = record
            self.fetching += 1
            meta: dict[str, Any] = dict(request.meta)
            meta.update({"depth": request.depth, LEASE_META: lease, POLICY_META: self.policy.name})
            self.stats.inc_value(f"frontier/handed_out/{phase.value}")
            if phase is not Phase.DEEPEN:  # the run's explore share is spent by every worker's fetches
                self.progress.explore_fetches += 1
                self.link.send("count", "explore_fetches", 1)
            return Request(
                request.url,
                callback=self.spider.parse,
                errback=getattr(self.spider, "failed", None),
                meta=meta,
                dont_filter=True,
            )
        return None

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

    def _pick(
        self, host: str, data: dict[str, Any], requests: list[QueuedRequest | None], urgent: bool
    ) -> int | None:
        """The policy's choice among a leased host's first queued URLs (from the link thread)."""
        if requests[0] is None:
            return 0  # taken out of the queue, counted and skipped
        record = self._record(host, data)
        valid = [(i, r) for i, r in enumerate(requests) if r is not None]
        for i, r in valid:
            record.queue.append(QueuedUrl(r.url, r.depth, i, discover=r.discover))
        with self.policy_lock:
            index, _ = next_in_host(record, self.policy)
        return None if index is None else valid[index][0]

    def enqueue_request(self, request: Request) -> bool:
        old: Lease | None = request.meta.get(LEASE_META)
        if old is not None:
            if not old.ended:  # a retry after a network error, or robots.txt said "not now"
                self._end(old, fetched=old.fetched)
            self._settle(old, None)  # a retry or redirect replaces it
        url = canonical(request.url)
        host = (urlsplit(url).hostname or "").lower()
        redirect = old is not None and url != canonical(old.url)
        force = request.dont_filter and not redirect
        reason = None if host else "no_host"
        if reason is None and not force:
            reason = self.guard.reason(url) and f"trap/{self.guard.reason(url)}"
        if reason is not None:
            self.stats.inc_value(f"frontier/dropped/{reason}")
            return False
        kept = {k: request.meta[k] for k in KEPT_META if k in request.meta}
        discover = bool(request.meta.get(DISCOVER_META))
        self.seq += 1
        record = HostRecord(host, budget=self.limits.per_host_budget)
        record.queue.append(QueuedUrl(url, int(request.meta.get("depth", 0)), self.seq))
        apply_prior(record, None if self.priors is None else self.priors.lookup(host))
        with self.policy_lock:
            rank, _ = self._rank(record)  # a host new to the run is unjudged (see _rank)
        rank = UNRANKED if rank is None else rank
        queued = QueuedRequest(url, int(request.meta.get("depth", 0)), kept, discover)
        self.link.send("enqueue", [NewUrl(host, queued, old is not None or discover, force, rank)])
        if redirect:
            self.stats.inc_value("redirect/followed")
        return True

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
            self.stats.inc_value("frontier/fetched")

    def _hold(self, lease: Lease) -> bool:
        """The policy would not fetch more of the host before this page's score is back (as HostFrontier
        keeps such a host out of its heap): it stays busy until the page is recorded."""
        record = self.claimed_records.pop(lease.row_id, None)
        if record is None:
            return False
        if record.state is HostState.DROPPED:
            return True  # a dormant host comes back one page at a time, each scored before the next
        record.fetched += 1
        with self.policy_lock:
            rank, _ = self._rank(record)
        return rank == UNRANKED

    def _settle(self, lease: Lease, checkpoint: dict[str, str] | None) -> None:
        if lease.settled:
            return
        lease.settled = True
        self.leases.pop(lease.row_id, None)
        self.claimed_records.pop(lease.row_id, None)
        self.link.send("done", str(lease.row_id), checkpoint)

    def left_downloader(self, request: Request) -> None:
        lease: Lease | None = request.meta.get(LEASE_META)
        if lease is not None and not lease.ended:
            lease.fetched = True  # reached the network: it costs budget, whatever happens next

    def response_received(self, response: Any, request: Request, spider: Any = None) -> None:
        lease: Lease | None = request.meta.get(LEASE_META)
        if lease is not None:
            self._end(lease, fetched=True)

    def fetched(self, lease: Lease, page: dict[str, Any], html: str) -> None:
        """A worker that dies before recording the page loses its lease, and another fetches it again."""

    def scored(self, lease: Lease, score: float | None, checkpoint: dict[str, str] | None = None) -> None:
        if lease.settled:
            return
        if not lease.ended:  # a network error, or dropped before the network (robots.txt, private address)
            self._end(lease, fetched=lease.fetched)
        if lease.fetched:
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
        """IP groups are per worker in this mode (see the note in README): only hosts are shared."""

    def politeness_changed(self, host: str, part: str, state: dict[str, Any]) -> None:
        self.link.send("save_politeness", host, part, json.dumps(state, separators=(",", ":")))


def _flat(priority: tuple[float, ...]) -> float:
    return float(priority[0]) + (1e-9 * float(priority[1]) if len(priority) > 1 else 0.0)


def _pid() -> int:
    import os

    return os.getpid()
