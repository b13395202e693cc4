"""A distributed worker's policy: host records and ranks live in Redis, decisions are made here.

The reactor (handing out, queueing) and the link thread (scores, claims, the run's shared state) both ask
the policy, so every call goes through one lock. A host's record comes from Redis (its JSON, plus how many of
its pages other workers fetched and have not recorded yet); its rank goes back to Redis as one number.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from scheduler.frontier_limits import FrontierLimits
from scheduler.host_priors import PriorLookup, apply_prior
from scheduler.host_scores import ScoreOutcome, next_in_host, record_score
from scheduler.hosts import HostRecord, HostState, Phase, host_state, restore_host
from scheduler.policy_base import CrawlProgress, Policy, Priority
from scheduler.queue_window import QueuedUrl
from scheduler.redis_frontier import FILL_FLOOR, UNSCORED, RedisFrontier
from scheduler.redis_link import SharedUpdate
from scheduler.redis_requests import QueuedRequest
from scheduler.urls import url_shape

UNRANKED = -1.0  # a host the policy says "not now" for: still fetched, after every ranked one


class SharedPolicy:
    def __init__(
        self,
        policy: Policy,
        limits: FrontierLimits,
        priors: PriorLookup | None,
        frontier: RedisFrontier,
        run_explored: Callable[[], int],
    ) -> None:
        self.policy = policy
        self.limits = limits
        self.priors = priors
        self.frontier = frontier
        self.run_explored = run_explored  # the run's explore fetches, as the link last read them
        self.progress = CrawlProgress(budget=limits.budget)
        self.lock = threading.Lock()
        self.seq = 0
        self.boost = 0.0

    def record(self, host: str, raw: str | dict[str, Any] | None) -> HostRecord:
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

    # -- the reactor's questions --------------------------------------------------------------------

    def rank(self, record: HostRecord) -> tuple[float | None, bool]:
        with self.lock:
            return self._rank(record)

    def phase(self, record: HostRecord, url: str, discover: bool) -> Phase:
        with self.lock:
            return Phase.DISCOVER if discover else self.policy.phase_of(record, url)

    def explored(self) -> None:
        """A discover or sample fetch was handed out (the worker also counts it in Redis)."""
        self.progress.explore_fetches += 1

    def hold(self, record: HostRecord) -> bool:
        """The policy would not fetch more of the host before this page's score is back (as HostFrontier
        keeps such a host out of its heap): it stays busy in Redis until the page is recorded."""
        if record.state is HostState.DROPPED:
            return True  # a dormant host comes back one page at a time, each scored before the next
        record.fetched += 1
        return self.rank(record)[0] == UNRANKED

    # -- the link thread's questions ----------------------------------------------------------------

    def observe(
        self, raw: str | None, host: str, phase: str, url: str, value: float, sitemap: bool
    ) -> tuple[str, tuple[float | None, bool], ScoreOutcome, SharedUpdate]:
        """The shared record with this page's score: (record JSON, rank, outcome, run-wide policy state)."""
        record = self.record(host, raw)
        record.fetched += 1
        record.settled += 1
        with self.lock:
            outcome = record_score(
                record, self.policy, Phase(phase), url, value, self.limits.threshold, sitemap
            )
            if outcome.drop_reason and record.state not in (HostState.DROPPED, HostState.BLOCKED):
                record.state = HostState.DROPPED
                record.drop_reason = outcome.drop_reason
            rank = self._rank(record)
            mean = getattr(self.policy, "means", {}).get(host)
        shared = SharedUpdate(url_shape(url), value > self.limits.threshold, mean)
        return json.dumps(host_state(record), separators=(",", ":")), rank, outcome, shared

    def shared(self, means: dict[str, float], shapes: dict[str, list[int]]) -> None:
        """What changed in the whole run's host means (the aspiration level's input) and URL-shape counts
        since the last read replaces this worker's, which saw only its own pages (every SHARED_EVERY_S)."""
        with self.lock:
            own = getattr(self.policy, "means", None)
            if isinstance(own, dict):
                learnt = sum(1 for host in means if host not in own)
                own.update(means)
                self.policy.changes += learnt  # type: ignore[attr-defined]  # (adaptive's counter)
            self.policy.shape_totals.update(shapes)  # a shape's run-wide count includes this worker's
            self.policy.epoch(self.progress)  # the aspiration level, from every worker's hosts
            self._update_boost()

    def claim_limits(self) -> tuple[int, bool, int]:
        """Hosts busy in the run below which fillers are claimed, whether the run still explores (the
        policy's explore share, counted over every worker's fetches), and the run's pages leased and
        unscored at which nothing more is claimed (0: no bound; run_max_unscored)."""
        exploring = getattr(self.policy, "exploring", None)
        unscored = self.limits.run_max_unscored if self.policy.learns_from_scores else 0
        with self.lock:
            self._sync_explored()
            explores = True if exploring is None else bool(exploring(self.progress))
            return self.limits.fill_hosts, explores, unscored

    def pick(
        self, host: str, data: dict[str, Any], requests: list[QueuedRequest | None], urgent: bool
    ) -> int | None:
        """The policy's choice among a leased host's first queued URLs."""
        if requests[0] is None:
            return 0  # taken out of the queue, counted and skipped
        record = self.record(host, data)
        valid = [(i, r) for i, r in enumerate(requests) if r is not None]
        for i, r in valid:
            record.queue.append(QueuedUrl(r.url, r.depth, i, discover=r.discover))
        with self.lock:
            index, _ = next_in_host(record, self.policy)
        return None if index is None else valid[index][0]

    # -- under the lock -----------------------------------------------------------------------------

    def _sync_explored(self) -> None:
        self.progress.explore_fetches = max(self.progress.explore_fetches, self.run_explored())

    def _rank(self, record: HostRecord) -> tuple[float | None, bool]:
        """The policy's priority as one number (Redis sorts by one score: primary + 1e-9 x secondary), and
        whether the policy has judged the host. A host it has not competes with the aspiration level; that
        part is left to Redis (CLAIM's boost), so raising the aspiration needs no re-ranking of every host.
        A dropped host's rank is its dormant rank (FILL_FLOOR up for a filler), None if it never returns."""
        self._sync_explored()
        policy = self.policy
        if not record.queue:  # the queue is in Redis: rank it as a host with pages left
            record.queue.append(QueuedUrl(f"http://{record.host}/", 1, self.seq))
        if record.state is HostState.DROPPED:
            filler = policy.fill_priority(record)
            revive = filler or policy.revive_priority(record)
            if revive is None:
                return None, True
            return _flat(revive) + (FILL_FLOOR + 1.0 if filler else 0.0), True
        priority = policy.priority(record, self.progress) or policy.fill_priority(record)
        aspiration = getattr(policy, "aspiration", None)
        judged = True
        if aspiration is not None and priority is not None:
            policy.aspiration = 0.0  # type: ignore[attr-defined]
            own = policy.priority(record, self.progress)
            policy.aspiration = aspiration  # type: ignore[attr-defined]
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
            self.frontier.set_boost(boost)
            self.boost = boost


def _flat(priority: Priority) -> float:
    return float(priority[0]) + (1e-9 * float(priority[1]) if len(priority) > 1 else 0.0)
