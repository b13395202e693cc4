"""The host-aware frontier without Scrapy: per-host queues, dedup, traps, politeness gates, policy order."""

from __future__ import annotations

import heapq
import itertools
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from scheduler.frontier_limits import FrontierLimits, ScorePipe
from scheduler.groups import PolitenessGroups
from scheduler.host_scores import next_in_host, record_score
from scheduler.hosts import PARKED, HostRecord, HostState, Phase, host_state
from scheduler.lease import Lease, ScoreLag
from scheduler.policy_base import CrawlProgress, Policy
from scheduler.queue_window import QueuedUrl, QueueWindows
from scheduler.seen_urls import SeenUrls
from scheduler.sqlite_store import FetchedPage, SQLiteFrontier
from scheduler.urls import Candidate, PathPatterns, TrapGuard, screen

ENDED = (HostState.DROPPED, HostState.BLOCKED)  # no policy decision changes these


class HostFrontier:
    """The scheduler's brain. Every change is written through to SQLite; memory holds the host table and
    the heads of the hosts' queues (FrontierLimits.memory_urls)."""

    def __init__(
        self,
        store: SQLiteFrontier,
        policy: Policy,
        limits: FrontierLimits,
        clock: Callable[[], float],
        count: Callable[[str], None] = lambda key: None,
        guard: TrapGuard | None = None,
        on_new_host: Callable[[HostRecord], None] = lambda record: None,
    ) -> None:
        self.store = store
        self.policy = policy
        self.limits = limits
        self.clock = clock
        self.count = count
        self.guard = guard or TrapGuard()
        self.on_new_host = on_new_host  # sets a new host's priors (centrality), whether queued or resumed
        self.hosts: dict[str, HostRecord] = {}
        self.windows = QueueWindows(store, limits.memory_head, limits.memory_urls)
        self.seen = SeenUrls(store, in_memory=limits.memory_urls <= 0)
        self.patterns = PathPatterns()
        self.progress = CrawlProgress(budget=limits.budget)
        self.in_flight = 0
        self.unobserved = 0  # pages fetched whose score has not arrived yet
        bound = limits.max_unscored if policy.learns_from_scores else 0
        self.pipe = ScorePipe(bound, clock(), count)  # pages leased and unscored: in_flight + unobserved
        self.score_lag = ScoreLag()
        self.seq = itertools.count()
        self.heap: list[tuple[tuple[float, ...], int, str, int]] = []
        self.waiting: list[tuple[float, str]] = []
        # hosts the policy would rather not fetch now, used only to keep `fill_hosts` hosts busy
        self.fill_heap: list[tuple[tuple[float, ...], int, str, int]] = []
        self.dirty: set[str] = set()
        self.urgent: dict[str, int] = {}  # host -> URLs in flight when the last run died, first in line
        # pages the last run fetched but had no score for: cleaned again from the store, not refetched
        self.recovered: list[tuple[Lease, FetchedPage]] = []
        self.epoch = policy.epoch(self.progress)
        self.groups = PolitenessGroups(limits.concurrency_per_group)

    # -- enqueue ----------------------------------------------------------------------------------

    def host(self, name: str) -> HostRecord:
        record = self.hosts.get(name)
        if record is None:
            queue = self.windows.queue(name)
            record = self.hosts[name] = HostRecord(name, queue=queue, budget=self.limits.per_host_budget)
            record.tld = sys.intern(name.rsplit(".", 1)[-1])  # one string per TLD, not one per host
            self.groups.add_host(name)
            self.on_new_host(record)
            self.count("host/discovered")
        return record

    def add(self, url: str, depth: int, **kind: Any) -> str | None:
        return self.add_links([url], depth, **kind)[0]  # why it was not queued (a stats reason) or None

    def add_links(
        self,
        urls: Iterable[str],
        depth: int,
        *,
        extra: bytes | None = None,
        force: bool = False,
        after: Lease | None = None,
        discover: bool = False,
        behind: bool = False,
    ) -> list[str | None]:
        """Queue URLs of one depth (a page's links, a sitemap's entries): one dedup lookup and one insert
        per table, each host ranked once they are in; returns, per URL, why not (a stats reason) or None.

        `force` skips dedup and trap checks (retries); `after` is the lease a retry or redirect
        continues: the URL goes to the front of its host's queue and keeps the lease's place in line,
        or to its back with `behind` (robots.txt said "not now" for this URL's origin).
        """
        checked = [screen(url, self.guard, force) for url in urls]
        seen = set() if force else self.seen.among([c.fp for c in checked if isinstance(c, Candidate)])
        after = None if behind else after  # `behind`: queued again as if new, the youngest of its host
        # its place in the host's queue: retries and sitemaps before everything queued so far
        front = after is not None or (discover and not behind)
        reasons: list[str | None] = []
        marked: list[int] = []  # fingerprints now seen
        rows: list[tuple[HostRecord, QueuedUrl]] = []
        batch: Counter[str] = Counter()  # URLs of this batch per host
        touched: dict[str, HostRecord] = {}
        for c in checked:
            if isinstance(c, str) or c.fp in seen:
                reasons.append(c if isinstance(c, str) else "duplicate")
                continue
            record = self.host(c.host)
            queued = len(record.queue) + batch[c.host]
            # a blocked host's URL is discovered, and deliberately not queued (nor on a resume)
            reason = "host_blocked" if record.state is HostState.BLOCKED else None
            if not reason and queued >= self.limits.per_host_queue:
                reason = "host_queue_full"
            elif not reason and self.patterns.over_cap(c.host, c.path) and not force:
                reason = "trap/pattern_explosion"
            if not force and reason in (None, "host_blocked"):
                seen.add(c.fp)
                marked.append(c.fp)
            reasons.append(reason)
            if reason:
                continue
            # re-ranked when it may now lead: the first URL, one in front, or one shallower than the head (a
            # seed Scrapy handed over after the host's first links: breadth-first fetches it first)
            if not batch[c.host] and (not queued or front or depth < record.queue[0].depth):
                touched[c.host] = record
            batch[c.host] += 1
            seq = after.seq if after is not None else next(self.seq)
            position = -next(self.seq) if after is not None else -seq if front else seq
            row = QueuedUrl(c.url, depth, seq, self.store.new_row_id(), extra, discover, position)
            rows.append((record, row))
        self.seen.add(marked)
        self.store.push_many(
            (i.row_id, r.host, i.url, depth, i.seq, extra, int(discover), i.position, i.shape)
            for r, i in rows
        )
        # into the queues once the store holds them (a queue may page in); in front: finish what was started
        for record, item in rows:  # before starting anything new
            (record.queue.appendleft if front else record.queue.append)(item)
        for record in touched.values():
            self.touch(record)
        return reasons

    # -- handing out ----------------------------------------------------------------------------

    def budget_left(self) -> int:
        return self.limits.budget - self.progress.fetched - self.in_flight

    def touch(self, record: HostRecord) -> None:
        """Its priority may have changed: re-queue it in the heap or the politeness wait list."""
        record.version += 1
        full = record.in_flight >= self.limits.concurrency_per_host or not self.groups.free(record.host)
        if full or not record.can_fetch_more():
            return  # touched again when the host or its politeness group has room
        if record.ready_at > self.clock():
            heapq.heappush(self.waiting, (record.ready_at, record.host))
            return
        priority = self.policy.priority(record, self.progress)
        filler = self.policy.fill_priority(record) if priority is None else None
        self.windows.trim()  # the policy may have paged in part of the host's queue
        if priority is not None:
            key = tuple(-p for p in priority)
            heapq.heappush(self.heap, (key, next(self.seq), record.host, record.version))
        elif filler is not None:
            key = tuple(-p for p in filler)
            heapq.heappush(self.fill_heap, (key, next(self.seq), record.host, record.version))

    def _refresh(self) -> None:
        now = self.clock()
        while self.waiting and self.waiting[0][0] <= now:
            _, name = heapq.heappop(self.waiting)
            self.touch(self.hosts[name])
        epoch = self.policy.epoch(self.progress)
        if epoch != self.epoch:
            self.epoch = epoch
            self.heap.clear()
            self.fill_heap.clear()
            self.waiting.clear()  # every host is touched again: it goes back where it belongs, once
            for record in self.hosts.values():
                self.touch(record)

    def _stuck(self) -> bool:
        """Nothing eligible now and nothing on its way: let the policy widen its rules once more."""
        busy = self.heap or self._waiting_soon() or self.urgent or self.in_flight or self.unobserved
        if busy or not self.policy.widen():
            return False
        self.count("frontier/policy_widened")
        self.fill_heap.clear()
        for record in self.hosts.values():
            self.touch(record)
        return bool(self.heap or self._waiting_soon())  # (a host it brings back may be in its Crawl-delay)

    def _waiting_soon(self) -> bool:
        """A host in its delay that is worth staying open for (not parked beyond the horizon)."""
        return bool(self.waiting) and self.waiting[0][0] <= self.clock() + self.limits.park_horizon

    def mark_parked(self) -> int:
        """Names `parked` the hosts with URLs left that wait beyond the park horizon; returns how many."""
        horizon = self.clock() + self.limits.park_horizon
        hosts = self.hosts.values()
        parked = [r for r in hosts if r.ready_at > horizon and r.can_fetch_more() and r.state not in ENDED]
        for record in parked:
            record.drop_reason = PARKED
            self.dirty.add(record.host)
        return len(parked)

    def next(self) -> Lease | None:
        if self.budget_left() <= 0:  # what was in flight at a crash may already be in a WARC: fetch it
            return self._pop_urgent()  # again, whatever the budget, so it gets its row and its text
        if not self.pipe.room(self.in_flight + self.unobserved, self.clock()):
            return None  # scores first
        self._refresh()
        lease = self._pop_urgent() or self._pop(self.heap)
        if lease is None and self.in_flight < self.limits.fill_hosts:
            lease = self._pop(self.fill_heap)
            if lease is not None:
                self.count("frontier/filled_idle_capacity")
        if lease is None and self._stuck():
            lease = self._pop(self.heap)
        self.windows.trim()
        return lease

    def _pop(self, heap: list[tuple[tuple[float, ...], int, str, int]]) -> Lease | None:
        while heap:
            _, _, name, version = heapq.heappop(heap)
            record = self.hosts[name]
            if version != record.version or record.in_flight >= self.limits.concurrency_per_host:
                continue
            if not record.can_fetch_more() or record.ready_at > self.clock() or not self.groups.free(name):
                continue
            lease = self._lease(record)
            if lease is not None:
                return lease
        return None

    def _pop_urgent(self) -> Lease | None:
        """Refetch what was in flight at the crash before anything else, so its links are found again."""
        if not self.urgent:
            return None
        now = self.clock()
        for name in list(self.urgent):
            record = self.hosts[name]
            if not record.queue:
                del self.urgent[name]
                continue
            free = self.groups.free(name) and record.in_flight < self.limits.concurrency_per_host
            if free and record.ready_at <= now:
                self.urgent[name] -= 1
                if self.urgent[name] <= 0:
                    del self.urgent[name]
                return self._lease(record, index=0)
        return None

    def _lease(self, record: HostRecord, index: int | None = None) -> Lease | None:
        index, discover = next_in_host(record, self.policy, index)
        if index is None:  # only URLs of shapes that have been bad on this host are left
            self._drop(record, "only_bad_urls_left")
            return None
        item = record.queue.take(index)
        phase = Phase.DISCOVER if discover else self.policy.phase_of(record, item.url)
        record.in_flight += 1
        self.in_flight += 1
        if phase is Phase.SAMPLE:
            record.sample_handed += 1
            if record.state is not HostState.DROPPED:  # a dropped host's filler: dropped until re-judged
                record.state = HostState.SAMPLING
        elif phase is Phase.DEEPEN and record.state in (HostState.SCORED, HostState.NEW):
            if record.state is HostState.SCORED:
                self.count("host/deepened")
            record.state = HostState.DEEPENING
        if phase is not Phase.DEEPEN:
            self.progress.explore_fetches += 1
        self.store.lease(item.row_id)
        self.dirty.add(record.host)
        record.version += 1
        lease = Lease(
            record.host, item.url, item.depth, item.row_id, item.seq, phase, item.extra, item.discover
        )
        self.groups.take(lease)
        return lease

    def next_ready_at(self) -> float | None:
        return self.waiting[0][0] if self.waiting else None

    # -- results ----------------------------------------------------------------------------------

    def fetch_ended(self, lease: Lease, fetched: bool, ready_at: float) -> None:
        """The downloader is done with it (or a middleware dropped it before the network)."""
        if lease.ended:
            return
        lease.ended = True
        lease.fetched = fetched
        record = self.hosts[lease.host]
        record.in_flight -= 1
        self.in_flight -= 1
        record.ready_at = max(record.ready_at, ready_at)
        if fetched:
            record.fetched += 1
            self.progress.fetched += 1
            self.unobserved += 1
            lease.fetch_number = self.progress.fetched
        elif lease.phase is Phase.SAMPLE:
            record.sample_handed -= 1  # never reached the host: draw another sample
        self.dirty.add(record.host)
        self.touch(record)
        for name in self.groups.release(lease):
            self.touch(self.hosts[name])

    def retire(self, lease: Lease) -> None:
        """A retry or redirect replaces this lease: its row is done, the new request has its own."""
        if lease.settled:
            return
        lease.settled = True
        if lease.fetched:
            self.unobserved = max(0, self.unobserved - 1)
            self._settled_one(self.hosts[lease.host])
        self.store.done(lease.row_id)

    def observe(self, lease: Lease, score: float | None) -> None:
        """A page's score (None: not HTML or failed) reaches the policy; then commit."""
        if lease.settled:
            return
        lease.settled = True
        record = self.hosts[lease.host]
        if lease.fetched:
            self.unobserved = max(0, self.unobserved - 1)
            self._settled_one(record)
            self.score_lag.add(self.progress.fetched - lease.fetch_number)
            value = 0.0 if score is None else score
            sitemap = lease.sitemap and score is None
            outcome = record_score(
                record, self.policy, lease.phase, lease.url, value, self.limits.threshold, sitemap
            )
            if outcome.sampled:
                self.count("host/sampled")
            reason = outcome.drop_reason
            if reason:
                self._drop(record, reason)
            elif outcome.rejudged:
                self.count("host/rejudged")
        self.store.done(lease.row_id)
        self._settle(record)
        self.commit()

    def _settled_one(self, record: HostRecord) -> None:
        """One of the host's fetched pages has its outcome (its score, or a retry replaced it)."""
        self.pipe.outcome(self.clock())
        record.settled += 1

    def _drop(self, record: HostRecord, reason: str) -> None:
        if record.state not in ENDED:
            record.state = HostState.DROPPED
            record.drop_reason = reason
            self.count(f"host/dropped/{reason}")
            self.dirty.add(record.host)

    def _settle(self, record: HostRecord) -> None:
        if not record.queue and not record.in_flight and record.state not in ENDED:
            if record.state is not HostState.EXHAUSTED:
                self.count("host/exhausted")
            record.state = HostState.EXHAUSTED
        self.dirty.add(record.host)
        self.touch(record)

    def block(self, host: str, reason: str) -> None:
        """No more requests to this host: its queued URLs are dropped (counted), none is handed out."""
        record = self.host(host)
        if record.state is not HostState.BLOCKED:
            record.state = HostState.BLOCKED
            record.drop_reason = reason
            self.count(f"host/blocked/{reason}")
        for _ in range(record.queue.clear()):  # its rows too
            self.count("frontier/dropped/host_blocked")
        self.urgent.pop(host, None)
        record.version += 1  # stale heap entries of the host are skipped
        self.dirty.add(host)

    def commit(self) -> None:
        self.store.save_hosts((h, host_state(self.hosts[h])) for h in self.dirty)
        self.dirty.clear()
        self.store.set_meta("explore_fetches", str(self.progress.explore_fetches))
        self.store.commit()

    def has_pending(self) -> bool:
        """Work left that the crawl should stay open for (including hosts waiting for their delay).

        O(1): the heap may hold stale entries, which the next `next()` call discards.
        """
        if self.budget_left() <= 0:
            return bool(self.urgent)  # a host with a long Crawl-delay may hold one back: wait for it
        pending = self.heap or self._waiting_soon() or self.urgent or self.in_flight or self.unobserved
        return bool(pending) or self._stuck()
