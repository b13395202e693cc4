"""The frontier of a run shared by many workers, in Redis: per-host queues, politeness clocks, leases.

What scrapy-redis does badly and this replaces: one global priority set per spider (here: one queue per
host and a cluster-wide ready-time set, so one request per host is in flight across all workers and
each host's delay holds between workers); a pop that deletes the request (here: a leased pop that a
live worker renews and that returns to its host's queue when it expires, counted); a dupefilter of
40-byte hex SHA1 strings in one hash-table set (here: 47-bit fingerprints in 65,536 intset buckets,
about 4-5 bytes per URL); pickled requests (here: JSON; a payload that does not decode is counted
and skipped, never executed). Connection settings stay scrapy-redis's (REDIS_URL, REDIS_PARAMS). Every call
here is a blocking round trip: the Scrapy side calls it from a thread (scheduler/redis_link.py)."""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

import redis

from scheduler import redis_groups, redis_host_scripts, redis_scripts
from scheduler.redis_connect import as_strings, run_pipeline, run_prefix
from scheduler.redis_requests import Claimed, NewUrl, Pick, QueuedRequest
from scheduler.urls import fingerprint

DEDUP_BUCKET_BITS = 16  # 65,536 intset keys; at 10M URLs about 150 members each
DEDUP_MEMBER_BITS = 31  # members below 2**31 keep an intset at 4 bytes per member
# 47 bits in all: a new URL is taken for a seen one with probability N / 2**47 (7e-8 at 10M URLs)
INTSET_ENTRIES = 4096  # asked of the server at seeding, so buckets stay intsets up to ~250M URLs
QUEUE_CAP = 50_000  # URLs queued per host
SHARDS_META = "shards"  # the run's meta field: how many shards it has (absent, in a run from before: 1)

UNSCORED = "unscored"  # key CLAIM adds to a host record: its fetched pages whose leases are not done
PARK_HORIZON_S = 600.0  # HOSTCRAWL_BACKOFF_MAX's default, as the SQLite frontier's park_horizon


SHARED_READ_PAGE = 5000  # changed hosts and shapes read per call by shared_policy_state
WINDOW = 64  # queued URLs a worker chooses from (the policies look at as many: SHAPE_WINDOW)
# A dormant host (dropped, kept to come back to) ranked at or above this fills idle capacity; below it, it
# waits until no other host is in its delay or in flight (see CLAIM). Revive ranks are in [-1, 0]: a
# filler's is raised by FILL_FLOOR + 1.
FILL_FLOOR = 10.0


def dedup_key(url: str) -> tuple[int, int]:
    unsigned = fingerprint(url) & 0xFFFF_FFFF_FFFF_FFFF
    return unsigned >> (64 - DEDUP_BUCKET_BITS), unsigned & ((1 << DEDUP_MEMBER_BITS) - 1)


SCRIPTS = {  # every change to the frontier, one atomic Lua script each
    name: getattr(module, name)
    for module, names in (
        (redis_scripts, "ENQUEUE CLAIM PICK FETCH_ENDED DONE RECLAIM RENEW"),
        (redis_host_scripts, "BLOCK DROP PRIORITISE COUNT_ONCE SHARE SHARED_SINCE"),
        (redis_groups, "JOIN"),
    )
    for name in names.split()
}


class RedisFrontier:
    """One run's shared frontier. `run` names it; many runs can share one Redis database."""

    def __init__(
        self,
        client: redis.Redis,
        run: str,
        lease_seconds: float = 60.0,
        group_limit: int = 1,
        park_horizon: float = PARK_HORIZON_S,
    ) -> None:
        self.client = client
        self.run = run
        self.prefix = run_prefix(run)
        self.lease_ms = int(lease_seconds * 1000)
        self.group_limit = group_limit  # requests in flight per politeness group in the run (0: no limit)
        self.park_horizon_ms = int(park_horizon * 1000)  # a host waiting longer keeps no worker running
        self.scripts = {name: client.register_script(lua) for name, lua in SCRIPTS.items()}
        self.parts: list[RedisFrontier] = [self]  # the run's shards (scheduler/redis_shards.py)

    def key(self, name: str) -> str:
        return self.prefix + name

    def shard_index(self, host: str) -> int:
        """The number of the shard holding the host's queue, record and clock."""
        return 0

    def part_of_host(self, host: str) -> RedisFrontier:
        return self.parts[self.shard_index(host)]

    def split_by_shard(self, urls: list[NewUrl]) -> dict[int, list[int]]:
        """The URLs' positions, by the shard of their host."""
        by_shard: dict[int, list[int]] = {}
        for i, url in enumerate(urls):
            by_shard.setdefault(self.shard_index(url.host), []).append(i)
        return by_shard

    def part_of_lease(self, lease_id: str) -> tuple[RedisFrontier, int, str]:
        """The lease's shard, its number and the lease id there."""
        return self, 0, lease_id

    def after_sent(self, ended: list[tuple[str, int]], joined: list[tuple[str, str]]) -> None:
        """What a sharded run does run-wide after FETCH_ENDED or DONE ((lease, FETCH_ENDED's answer, 1 for
        DONE)) and JOIN ((host, group)): nothing here."""

    def numbered(self, checkpoint: dict[str, str] | None) -> dict[str, str]:
        """A checkpoint as DONE commits it (a sharded run numbers it)."""
        return checkpoint or {}

    def pipeline(self, transaction: bool = False) -> Any:
        """A pipeline on the node holding this run's keys (scripts may run in it, on a cluster too)."""
        return run_pipeline(self.client, self.prefix, transaction)

    def _call(self, script: str, *args: Any) -> Any:
        return self.scripts[script](keys=[self.prefix], args=list(args))

    # -- a run's life -------------------------------------------------------------------------------

    def start(self, worker: str, budget: int, config: dict[str, Any]) -> bool:
        """True for the worker that seeds the run; the others join it (and its budget). The run's shard
        count is set first (scheduler/redis_shards.py): whoever sets it first decides it."""
        self.client.hsetnx(self.key("meta"), SHARDS_META, "1")
        first = bool(self.client.hsetnx(self.key("meta"), "seeded_by", worker))
        if first:
            started, settings = str(time.time()), json.dumps(config)
            meta = {"budget": str(budget), "state": "running", "started": started, "config": settings}
            self.client.hset(self.key("meta"), mapping=meta)  # type: ignore[arg-type]  # (invariant Mapping)
            with contextlib.suppress(redis.ResponseError):  # a managed Redis may refuse CONFIG
                self.client.config_set("set-max-intset-entries", INTSET_ENTRIES)  # compact dedup buckets
        return first

    def meta(self) -> dict[str, str]:
        return as_strings(self.client.hgetall(self.key("meta")))

    def budget(self) -> int:
        return int(self.client.hget(self.key("meta"), "budget") or 0)

    def drain(self) -> None:
        """No more leases are handed out; the workers finish what they hold and stop."""
        self.client.hset(self.key("meta"), "state", "draining")

    def draining(self) -> bool:
        return self.client.hget(self.key("meta"), "state") == "draining"

    # -- the queue ----------------------------------------------------------------------------------

    def enqueue(self, urls: list[NewUrl], cap: int = QUEUE_CAP, worker: str = "") -> list[str | None]:
        """Queues URLs (one round trip); per URL None or why it was not queued (a stats reason)."""
        if not urls:
            return []
        return [reason or None for reason in self._call("ENQUEUE", *self.enqueue_args(urls, cap, worker))]

    @staticmethod
    def enqueue_args(urls: list[NewUrl], cap: int = QUEUE_CAP, worker: str = "") -> list[Any]:
        """`worker` numbers its forced URLs (NewUrl.op): ENQUEUE keeps the highest it queued."""
        args: list[Any] = [cap, worker]
        for item in urls:
            bucket, member = dedup_key(item.request.url)
            flags = (1 if item.front else 0) | (2 if item.force else 0) | (4 if item.urgent else 0)
            payload, priority = item.request.encode(item.host), repr(float(item.priority))
            args += [item.host, bucket, member, payload, flags, priority, item.op]
        return args

    def claim(
        self,
        n: int,
        worker: str,
        budget: int,
        pick: Pick = lambda host, record, requests, urgent: 0,
        fill_hosts: int = 0,
        exploring: bool = True,
        max_unscored: int = 0,
        shard_args: tuple[str, ...] = (),
    ) -> list[Claimed]:
        """Leases up to n hosts, ready and best ranked first, and one URL of each (two round trips). Past
        the explore share (`exploring` False), new hosts and dormant ones are fillers: taken while fewer
        than `fill_hosts` hosts are busy in the run, or when nothing else is queued (see CLAIM). None
        while the run holds `max_unscored` leases (claimed and not recorded, by any worker; 0: no
        bound), but a dead worker's URLs. `shard_args`: a shard's claim in a sharded run (see CLAIM)."""
        exploring_arg = "1" if exploring else "0"
        limits = (fill_hosts, repr(FILL_FLOOR), exploring_arg, self.group_limit, max_unscored)
        leased = self._call("CLAIM", n, self.lease_ms, worker, budget, WINDOW, *limits, *shard_args)
        out, picks = [], []
        for lease_id, host, raw_record, urgent, window, unscored in leased:
            try:
                record = json.loads(raw_record) if raw_record else {}
            except ValueError:
                record = {}
            record = record if isinstance(record, dict) else {}
            record[UNSCORED] = int(unscored)  # its pages other workers fetched, not recorded yet
            requests = [QueuedRequest.decode(payload, host) for payload in window]
            claimed = Claimed(str(lease_id), host, None, record, urgent=urgent == "1")
            index = 0 if claimed.urgent else pick(host, record, requests, False)
            if index is None:
                claimed.skipped = "only_bad_urls_left"
            else:
                picks.append((claimed, window[index], requests[index]))
            out.append(claimed)
        pipe = self.pipeline()
        for claimed, payload, _ in picks:
            self.scripts["PICK"](keys=[self.prefix], args=[claimed.lease_id, payload], client=pipe)
        for (claimed, _, request), taken in zip(picks, pipe.execute() if picks else [], strict=True):
            if not taken:
                claimed.skipped = "gone"
            elif request is None:
                claimed.skipped = "invalid_payload"
            else:
                claimed.request = request
        return out

    def fetch_ended(self, lease_id: str, delay_seconds: float, fetched: bool, hold: bool = False) -> int:
        """FETCH_ENDED's answer: 0 the lease was gone, 2 its budget was given back, else 1."""
        ms = max(0, int(delay_seconds * 1000))
        return int(self._call("FETCH_ENDED", lease_id, ms, "1" if fetched else "0", "1" if hold else "0"))

    def done(self, lease_id: str, worker: str, checkpoint: dict[str, str] | None = None) -> bool:
        """False if the lease had expired (its URL went back to the queue and may be fetched again)."""
        pairs = [x for item in (checkpoint or {}).items() for x in item]
        return bool(self._call("DONE", lease_id, worker, *pairs))

    def renew(self, lease_ids: list[str]) -> int:
        return int(self._call("RENEW", self.lease_ms, *lease_ids)) if lease_ids else 0

    def reclaim(self) -> int:
        return int(self._call("RECLAIM")[0])

    def block(self, host: str, reason: str) -> int:
        return int(self._call("BLOCK", host, reason))

    def join(self, host: str, group: str) -> bool:
        """`host` is in politeness group `group` (`ip:ADDRESS`, `domain:NAME`); True if that is news."""
        return bool(self._call("JOIN", host, group))

    def drop(self, host: str, reason: str, rank: float | None = None) -> int:
        """The policy gave up on `host`: with a rank it is dormant (kept, fetched when better hosts are
        lacking), without one its queue is dropped. Returns how many queued URLs were dropped."""
        return int(self._call("DROP", host, reason, "" if rank is None else repr(float(rank))))

    def prioritise(self, host: str, priority: float, judged: bool = True, rejudged: bool = False) -> None:
        """A host's new rank; `rejudged`: it was dormant, and its new page lifted it over the drop level."""
        self._call(
            "PRIORITISE", host, repr(float(priority)), "1" if judged else "0", "1" if rejudged else "0"
        )

    def set_boost(self, boost: float) -> None:
        """How much better than their own score hosts the policy has not judged yet count (aspiration)."""
        self.client.hset(self.key("meta"), "boost", repr(float(boost)))

    # -- shared state -------------------------------------------------------------------------------

    def host_record(self, host: str) -> dict[str, Any]:
        raw = self.client.get(self.key(f"host:{host}"))
        data = json.loads(raw) if raw else {}
        return data if isinstance(data, dict) else {}

    def _park_horizon(self) -> int:
        """Now plus the park horizon, on the scripts' clock (ready times are Redis TIME, in ms)."""
        seconds, micros = self.client.time()
        return int(seconds) * 1000 + int(micros) // 1000 + self.park_horizon_ms

    def parked_hosts(self) -> list[str]:
        """Hosts with URLs queued that wait beyond the park horizon (what `pending` does not count)."""
        horizon = self._park_horizon()
        names: list[str] = []
        for name in ("waiting", "dormant_waiting"):
            names += [str(h) for h in self.client.zrangebyscore(self.key(name), f"({horizon}", "+inf")]
        return sorted(names)

    def host_records(self) -> dict[str, dict[str, Any]]:
        """Every host's shared record (a SCAN: for reports and status, not the crawl's hot path)."""
        keys = list(self.client.scan_iter(match=self.key("host:*"), count=1000))
        out = {}
        for key, raw in zip(keys, self.client.mget(keys) if keys else [], strict=True):
            try:
                data = json.loads(raw) if raw else None
            except ValueError:
                continue
            if isinstance(data, dict):
                out[str(key)[len(self.key("host:")) :]] = data
        return out

    def add_shared_policy_state(self, pipe: Any, host: str, update: Any) -> None:
        """One scored page's share of the run-wide policy state (on the caller's pipeline)."""
        mean = "" if update.mean is None else repr(update.mean)
        args = [host, update.shape, "1" if update.high else "0", mean]
        self.scripts["SHARE"](keys=[self.prefix], args=args, client=pipe)

    def shared_policy_state(self, since: int = 0) -> tuple[dict[str, float], dict[str, list[int]], int]:
        """What changed in the run-wide policy state after change `since` (0: all of it): host means,
        [high, low] pages per URL shape (whole counts), and the last change read (the next `since`)."""
        means: dict[str, float] = {}
        shapes: dict[str, list[int]] = {}
        while True:
            last, *entries = self._call("SHARED_SINCE", since, SHARED_READ_PAGE)
            since = int(float(last))
            for kind, name, *values in ([str(x) for x in e] for e in entries):
                if kind == "m" and values[0]:
                    means[name] = float(values[0])
                elif kind == "s":
                    shapes[name] = [int(values[0]), int(values[1])]
            if len(entries) < SHARED_READ_PAGE:
                return means, shapes, since

    def count(self, key: str, n: int = 1) -> None:
        self.client.hincrby(self.key("counters"), key, n)

    def counters(self) -> dict[str, int]:
        return {k: int(v) for k, v in as_strings(self.client.hgetall(self.key("counters"))).items()}

    def explore_fetches(self) -> int:
        """The run's fetches so far that looked at hosts (discover and sample phases), every worker's."""
        return int(self.client.hget(self.key("counters"), "explore_fetches") or 0)

    def pending(self) -> bool:
        """Work anywhere in the run: queued hosts (ready, or waiting within the park horizon) or leases
        some worker holds."""
        if self.draining():
            return bool(self.client.zcard(self.key("leases")))
        budget = self.budget()
        spent = int(self.client.hget(self.key("counters"), "spent") or 0)
        if budget and spent >= budget:  # only what dead workers held is still to be fetched
            return bool(self.client.zcard(self.key("leases")) or self.client.hlen(self.key("urgent")))
        horizon = self._park_horizon()
        pipe = self.pipeline()
        for name in ("eligible", "eligible_new", "dormant", "leases"):
            pipe.zcard(self.key(name))
        for name in ("waiting", "dormant_waiting"):  # parked beyond the horizon: not worth staying for
            pipe.zcount(self.key(name), "-inf", horizon)
        pipe.hlen(self.key("busy"))
        pipe.scard(self.key("gwaiting"))  # hosts waiting for a group (a claim lets them in once it is free)
        return any(pipe.execute())

    # -- workers ------------------------------------------------------------------------------------

    def heartbeat(self, worker: str, info: dict[str, Any]) -> None:
        info = {**info, "seen": time.time()}
        self.client.hset(self.key("workers"), worker, json.dumps(info, separators=(",", ":")))

    def workers(self) -> dict[str, dict[str, Any]]:
        out = {}
        for worker, raw in as_strings(self.client.hgetall(self.key("workers"))).items():
            with contextlib.suppress(ValueError):
                out[worker] = json.loads(raw)
        return out

    def worker_meta(self, worker: str) -> dict[str, str]:
        return as_strings(self.client.hgetall(self.key(f"wmeta:{worker}")))

    def queued(self) -> int:
        """URLs queued over all hosts (a SCAN: for status, not for the crawl's hot path)."""
        pipe = self.pipeline()
        keys = list(self.client.scan_iter(match=self.key("q:*"), count=1000))
        for key in keys:
            pipe.llen(key)
        return sum(int(n) for n in (pipe.execute() if keys else []))
