"""The worker's one thread that talks to Redis, so no round trip ever blocks Scrapy's reactor.

The reactor puts operations in an outbox and takes claimed leases from an inbox; this thread sends the
outbox in one pipeline per turn, tops the inbox up, renews the worker's leases, returns dead workers'
expired leases to their queues and refreshes whether the run still has work. A lost connection pauses
it: nothing in the outbox is dropped, it retries with backoff (0.5 s doubling to 8 s) and goes on where it
stopped. Every operation it resends is idempotent (a lease's end and commit are keyed by lease id; a URL
queued twice is refused as a duplicate), and a claim whose answer was lost expires and is requeued.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import redis

from scheduler.redis_connect import OUTAGE_ERRORS
from scheduler.redis_frontier import RedisFrontier
from scheduler.redis_outbox import Op, by_shard, coalesce, shard_of_op
from scheduler.redis_politeness import PolitenessReader, politeness_fields
from scheduler.redis_requests import Claimed, NewUrl, Pick

logger = logging.getLogger(__name__)

BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 8.0
TURN_S = 0.05  # the longest an outbox operation waits before it is sent
CLAIM_IDLE_S = 0.25  # after a claim that found nothing ready, the next one waits this long
STATUS_EVERY_S = 1.0  # reclaim expired leases, heartbeat, refresh `pending`
# Every worker's policy takes the whole run's host means (the aspiration level's input) and URL-shape
# counts from Redis this often; between merges it adds what it learns itself.
SHARED_EVERY_S = 10.0
PAUSED_FLUSH_S = 2.0  # at close with Redis unreachable, how long the outbox waits for it to come back
# Redis answering with an error (out of memory, read-only, a denied command) or a bug here: retried with
# the same backoff this many times in a row (about 15 s), then the worker fails with the error instead of
# retrying for ever (an unreachable Redis is different: the worker pauses until it is back).
FAIL_AFTER_ERRORS = 5


@dataclass(slots=True, frozen=True)
class SharedUpdate:
    """What one scored page adds to the run-wide policy state."""

    shape: str
    high: bool
    mean: float | None  # the host's posterior mean, once the policy counts it for the aspiration


@dataclass
class LinkState:
    """What the reactor reads without a round trip (written by the thread; plain values, GIL-atomic)."""

    paused: bool = False
    failure: str | None = None  # Redis kept refusing (or this thread kept failing): the worker stops
    pending: bool = True  # the run has work somewhere (queued, waiting or leased)
    draining: bool = False
    reconnects: int = 0
    explore_fetches: int = 0  # the run's, as of the last status turn
    counts: Counter[str] = field(default_factory=Counter)


def tell(line: str) -> None:
    """The worker's terminal, not only crawl.log: its progress line alone showed 0.0/s and no reason."""
    print(line, file=sys.stderr, flush=True)


class RedisLink:
    def __init__(
        self,
        frontier: RedisFrontier,
        worker: str,
        budget: int,
        want: Callable[[], int],
        on_claimed: Callable[[list[Claimed], list[tuple[str, str, dict[str, Any]]]], None],
        info: Callable[[], dict[str, Any]],
        observe: Callable[..., tuple[str, tuple[float | None, bool], Any, SharedUpdate]],
        on_shared: Callable[[dict[str, float], dict[str, list[int]]], None],
        pick: Pick,
        limits: Callable[[], tuple[int, bool, int]] = lambda: (0, True, 0),
    ) -> None:
        self.frontier = frontier
        self.worker = worker
        self.budget = budget
        self.want = want  # how many more leases the reactor can use now
        self.on_claimed = on_claimed  # called from this thread; the callee hands over to the reactor
        self.info = info  # the worker's heartbeat fields
        # (record JSON or None, host, phase, url, score, sitemap) -> (new record JSON, (rank or None for a
        # dropped host never to come back, judged), ScoreOutcome, SharedUpdate)
        self.observe = observe
        self.limits = limits  # (fill hosts, exploring, max unscored): see RedisFrontier.claim
        self.on_shared = on_shared  # the run's host means and shape counts, handed to the policy
        self.pick = pick  # which of a leased host's queued URLs to fetch (the policy's choice)
        self.observations: deque[tuple[Any, ...]] = deque()
        self.state = LinkState()
        self.politeness = PolitenessReader(frontier.client, frontier.key("politeness"))
        self.outbox: deque[Op] = deque()
        self.held: set[str] = set()  # lease ids this worker holds (renewed until done)
        # claimed, not yet handed to the reactor: Redis went between the claim and reading their hosts'
        # politeness rows. Renewed as held, so they must reach the reactor, or they would never end
        self.undelivered: list[Claimed] = []
        self.wake = threading.Event()
        self.stopping = False
        self.thread = threading.Thread(target=self._run, name="hostcrawl-redis", daemon=True)
        self._next_claim = 0.0
        self._next_status = 0.0
        self._next_shared = time.monotonic() + SHARED_EVERY_S
        self._shared_since = 0  # the last change to the run-wide policy state read (only news after it)
        self._next_renew = 0.0
        self._no_reclaim_until = 0.0
        self._errors = 0  # unexpected errors in a row (FAIL_AFTER_ERRORS)
        # count, observe and forced enqueue operations numbered from the clock (so a worker id used again
        # later counts again); Redis keeps the highest applied per worker and kind and skips one resent
        self._op_seq = time.time_ns() // 1000

    def start(self) -> None:
        self.thread.start()

    def send(self, method: str, *args: Any) -> None:
        if method == "observe":
            self.observations.append((self._next_op(), *args))
        elif method == "enqueue":  # forced URLs (retries) skip dedup: numbered, so a resend queues them once
            urls = [replace(u, op=self._next_op()) if u.force else u for u in args[0]]
            self.outbox.append(Op(method, (urls, *args[1:])))
        elif method == "count":
            self.outbox.append(Op(method, (*args, self._next_op())))
        else:
            self.outbox.append(Op(method, args))
        if method in ("fetch_ended", "enqueue", "done"):
            self._next_claim = 0.0  # a host may have become free
        self.wake.set()

    def _next_op(self) -> int:
        self._op_seq += 1
        return self._op_seq

    def stop(self, timeout: float) -> bool:
        """Sends what is left in the outbox (while Redis answers, up to `timeout`); True if all went.

        While Redis is unreachable it waits `PAUSED_FLUSH_S` only: Ctrl-C took 32 s with Redis gone. What
        stays unsent loses nothing: the leases it would have ended expire and other workers fetch again."""
        start = time.monotonic()
        deadline = start + timeout
        while self.unsent() and time.monotonic() < deadline and self.thread.is_alive():
            if self.state.paused and time.monotonic() - start >= PAUSED_FLUSH_S:
                break
            self.wake.set()
            time.sleep(0.02)
        self.stopping = True
        self.wake.set()
        self.thread.join(max(0.1, deadline - time.monotonic()))
        return not self.unsent()

    def unsent(self) -> int:
        return len(self.outbox) + len(self.observations)

    # -- the thread ---------------------------------------------------------------------------------

    def _run(self) -> None:
        backoff = BACKOFF_FIRST_S
        while not self.stopping:
            try:
                self._turn()
                if self.state.paused:
                    logger.warning("redis: connection back; worker %s resumes", self.worker)
                    tell(f"hostcrawl worker {self.worker}: Redis is back; the crawl goes on")
                    self.state.paused = False
                    # every worker was cut off: give the others time to renew before expiring anyone's
                    self._no_reclaim_until = time.monotonic() + self.frontier.lease_ms / 1000
                backoff = BACKOFF_FIRST_S
            except OUTAGE_ERRORS as exc:  # away for now (a cluster node down or failing over too)
                if not self.state.paused:
                    logger.warning("redis: connection lost (%s); worker %s pauses", exc, self.worker)
                    tell(
                        f"hostcrawl worker {self.worker}: Redis unreachable ({exc}); paused, nothing is "
                        "lost, and it goes on by itself once Redis answers again (Ctrl-C stops it)"
                    )
                self.state.paused = True
                self.state.reconnects += 1
                self._no_reclaim_until = float("inf")
                backoff = self._back_off(backoff)
                continue
            except Exception as exc:  # Redis refusing (OOM, READONLY, NOPERM) or a bug: retried, then fatal
                errors = self._errors = self._errors + 1
                logger.warning("redis link: %r (%d in a row)", exc, errors, exc_info=errors == 1)
                if errors >= FAIL_AFTER_ERRORS:
                    said = str(exc).split("caused error: ", 1)[-1]  # not the pipeline's command echo
                    self.state.failure = (
                        f"Redis refused the frontier's operations {errors} times in a row: {said}"
                    )
                    tell(f"hostcrawl worker {self.worker}: {self.state.failure}; stopping")
                    return
                backoff = self._back_off(backoff)
                continue
            self._errors = 0
            self.wake.wait(TURN_S)
            self.wake.clear()

    def _back_off(self, backoff: float) -> float:
        """Waits `backoff` (or until woken, say to stop) and returns the next, doubled up to the maximum."""
        self.wake.wait(backoff)
        self.wake.clear()
        return min(BACKOFF_MAX_S, backoff * 2)

    def _turn(self) -> None:
        self._flush()
        now = time.monotonic()
        if now >= self._next_renew and self.held:
            self.frontier.renew(sorted(self.held))
            self._next_renew = now + self.frontier.lease_ms / 4000
        if now >= self._next_status:
            self._status()
            self._next_status = now + STATUS_EVERY_S
        if now >= self._next_shared:
            means, shapes, self._shared_since = self.frontier.shared_policy_state(self._shared_since)
            self.on_shared(means, shapes)
            self._next_shared = now + SHARED_EVERY_S
        if self.undelivered:  # before any new claim: _want does not count them
            self._deliver()
        want = self.want()
        if want > 0 and now >= self._next_claim and not self.state.draining:
            self._claim(want)

    def _flush(self) -> None:
        """The outbox in one pipeline, kept whole until it went through; then the scored pages."""
        self._send_ops()
        while self.observations:
            self._observe(*self.observations[0])
            self.observations.popleft()

    def _observe(self, seq: int, host: str, *page: Any) -> None:
        """A scored page updates the host's shared record (optimistic: retried if another worker
        wrote it meanwhile) and its rank; a host the policy gives up on is dropped for every worker.

        Applied once: `seq` numbers this worker's observations, and the highest applied is written in the
        same transaction (`observed:WORKER`), so one resent after a lost EXEC reply is skipped."""
        f = self.frontier.part_of_host(host)
        key, applied = f.key(f"host:{host}"), f.key(f"observed:{self.worker}")
        with f.pipeline(transaction=True) as pipe:
            while True:
                try:
                    pipe.watch(key, applied)
                    if int(pipe.get(applied) or 0) >= seq:
                        pipe.unwatch()
                        self.state.counts["frontier/observation_resent"] += 1
                        return
                    record, rank, outcome, shared = self.observe(pipe.get(key), host, *page)
                    pipe.multi()
                    pipe.set(key, record)
                    pipe.set(applied, seq)
                    f.add_shared_policy_state(pipe, host, shared)
                    score, judged = rank
                    if outcome.drop_reason:  # dormant with a rank, else its queue is dropped
                        args = [host, outcome.drop_reason, "" if score is None else repr(score)]
                        f.scripts["DROP"](keys=[f.prefix], args=args, client=pipe)
                    elif score is not None:
                        args = [host, repr(score), "1" if judged else "0", "1" if outcome.rejudged else "0"]
                        f.scripts["PRIORITISE"](keys=[f.prefix], args=args, client=pipe)
                    if outcome.sampled:
                        pipe.hincrby(f.key("counters"), "host/sampled", 1)
                    pipe.execute()
                    return
                except redis.WatchError:
                    self.state.counts["frontier/host_record_retries"] += 1

    def _send_ops(self) -> None:
        """One pipeline per shard of the run (one in all for a plain run), in the outbox's order in each;
        then what a sharded run does run-wide with the answers (its groups and budget)."""
        ops = list(self.outbox)
        if not ops:
            return
        f = self.frontier
        calls = [part for call in coalesce(ops) for part in by_shard(f, call)]
        pipes: dict[int, Any] = {}
        order = []
        for call in calls:
            part, k = shard_of_op(f, call)
            if k not in pipes:
                pipes[k] = part.pipeline()
            self._queue(pipes[k], part, call)
            order.append(k)
        answers = {k: iter(pipe.execute()) for k, pipe in pipes.items()}
        results = [next(answers[k]) for k in order]
        ended = [
            (op.args[0], int(r) if op.method == "fetch_ended" else 1)
            for op, r in zip(calls, results, strict=True)
            if op.method in ("fetch_ended", "done")
        ]
        f.after_sent(ended, [op.args for op in calls if op.method == "join"])
        # what we sent changed the run (our URLs may all be duplicates of other workers' work): until
        # `pending` is read again, in this same turn, the reactor must not take a stale False and close
        self.state.pending = True
        self._next_status = 0.0
        for _ in ops:
            self.outbox.popleft()
        for op, result in zip(calls, results, strict=True):
            if op.method == "enqueue":
                self.state.counts.update(f"frontier/dropped/{r}" for r in result if r)
                self.state.counts["frontier/enqueued"] += sum(1 for r in result if not r)
            elif op.method == "done":
                self.held.discard(op.args[0])
                if not result:
                    self.state.counts["frontier/lease_lost_before_commit"] += 1

    def _queue(self, pipe: Any, f: RedisFrontier, op: Op) -> None:
        """Adds one operation to the pipeline of its shard `f` (scripts run on the pipeline's connection)."""
        scripts = f.scripts
        if op.method == "enqueue":
            urls: list[NewUrl] = op.args[0]
            args = f.enqueue_args(urls, worker=self.worker)
            scripts["ENQUEUE"](keys=[f.prefix], args=args, client=pipe)
        elif op.method == "fetch_ended":
            lease_id, delay, fetched, hold = op.args
            lease_id = self.frontier.part_of_lease(lease_id)[2]
            args = [lease_id, max(0, int(delay * 1000)), "1" if fetched else "0", "1" if hold else "0"]
            scripts["FETCH_ENDED"](keys=[f.prefix], args=args, client=pipe)
        elif op.method == "done":
            lease_id, checkpoint = op.args
            lease_id = self.frontier.part_of_lease(lease_id)[2]
            pairs = [x for item in self.frontier.numbered(checkpoint).items() for x in item]
            scripts["DONE"](keys=[f.prefix], args=[lease_id, self.worker, *pairs], client=pipe)
        elif op.method in ("block", "drop", "join"):
            scripts[op.method.upper()](keys=[f.prefix], args=list(op.args), client=pipe)
        elif op.method == "save_politeness":
            host, what, state = op.args
            pipe.hset(f.key("politeness"), mapping=politeness_fields(host, what, state))
        elif op.method == "count":  # numbered in send(): resent, it is not counted twice
            key, n, seq = op.args
            scripts["COUNT_ONCE"](keys=[f.prefix], args=[key, n, self.worker, seq], client=pipe)
        else:
            raise ValueError(f"unknown redis op {op.method}")

    def _claim(self, want: int) -> None:
        fill_hosts, exploring, max_unscored = self.limits()
        claimed = self.frontier.claim(
            want, self.worker, self.budget, self.pick, fill_hosts, exploring, max_unscored
        )
        if not claimed:
            self._next_claim = time.monotonic() + CLAIM_IDLE_S
            return
        self.held.update(c.lease_id for c in claimed)
        self.undelivered = claimed
        self._deliver()

    def _deliver(self) -> None:
        """The claimed leases to the reactor, with the latest any worker learnt of their hosts (robots.txt
        may have been read since we last had one). If Redis goes before the rows are read, the leases stay
        in `undelivered` and the next turn after the outage delivers them: dropped here, they were renewed
        for ever and fetched never, and with the budget spent every worker of the run waited on them."""
        rows = self.politeness.rows(sorted({c.host for c in self.undelivered}))
        claimed, self.undelivered = self.undelivered, []
        self.on_claimed(claimed, rows)

    def _status(self) -> None:
        if time.monotonic() >= self._no_reclaim_until:
            self.frontier.reclaim()
        self.state.draining = self.frontier.draining()
        self.state.pending = self.frontier.pending()
        self.state.explore_fetches = self.frontier.explore_fetches()
        self.frontier.heartbeat(self.worker, {**self.info(), "leases": len(self.held)})
