"""One run's frontier over several hash slots, so a Redis Cluster spreads it over its nodes (`--shards N`).

One Redis holds about 100 GB: a billion queued URLs. A run of N shards keeps N sub-frontiers, each a whole
RedisFrontier under its own hash tag (`{RUN}` for shard 0, `{RUN~K}` for shard K), and a host lives in
shard hash(host) mod N with its queue, dedup buckets, record and politeness clock. Every script of the
frontier then runs unchanged in one shard's slot. What spans shards:

- **the budget**: reserved run-wide in the home slot (scheduler/redis_run_scripts.py) before a shard's
  claim, which may pay for no more than it was given; what it did not use goes back;
- **politeness groups**: a shard's claim keeps its own hosts' groups to one request at a time, and a lease
  is then taken in its groups run-wide (GROUP_TAKE); one whose group is busy in another shard is handed
  back untouched and its host waits `GROUP_RETRY_MS`;
- **which host next**: each claim starts at the next shard in turn and takes what that shard ranks best,
  then the next shard's, until it has its n;
- **the policy's shared state**: host means and URL-shape counts are kept per shard, read from each and
  summed; counters likewise; the run's meta (state, boost) is written to every shard;
- **a worker's checkpoint**: DONE commits it in the lease's shard, numbered; the highest number is the
  worker's latest.

Worker heartbeats, the politeness hash (robots.txt, timing), merge lock and places stay in the home slot.
"""

from __future__ import annotations

import hashlib
import math
import time
from typing import Any

import redis

from scheduler import redis_run_scripts
from scheduler.redis_frontier import PARK_HORIZON_S, QUEUE_CAP, SHARDS_META, RedisFrontier
from scheduler.redis_requests import Claimed, NewUrl, Pick

CHECKPOINT_SEQ = "checkpoint_seq"  # a worker's checkpoint's number, committed with it in its lease's shard
MAX_SHARDS = 1024  # shards of one run (a cluster has 16,384 slots); a lease id is ID * MAX_SHARDS + SHARD
GROUP_RETRY_MS = 1000  # a host whose group is busy in another shard waits this long before a new claim
LIVE_EVERY_S = 0.5  # how stale a claim's view of the other shards' hosts in flight may be


def shard_run(run: str, shard: int) -> str:
    """Shard 0 is the run itself (a one-shard run is the plain layout); `~` never appears in a run name."""
    return run if shard == 0 else f"{run}~{shard}"


def shard_of(host: str, shards: int) -> int:
    digest = hashlib.blake2b(host.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % shards


def run_shards(client: redis.Redis, run: str) -> int:
    """How many shards run `run` has (1 for a run that does not exist yet or was never sharded)."""
    raw = client.hget(RedisFrontier(client, run).key("meta"), SHARDS_META)
    return max(1, int(raw)) if raw else 1


def open_frontier(
    client: redis.Redis,
    run: str,
    lease_seconds: float = 60.0,
    group_limit: int = 1,
    park_horizon: float = PARK_HORIZON_S,
    shards: int | None = None,
) -> RedisFrontier:
    """The frontier of run `run`: as many shards as the run has, or (a new run) as `shards` asks."""
    existing = client.exists(RedisFrontier(client, run).key("meta"))
    n = run_shards(client, run) if existing or not shards else shards
    if n <= 1:
        return RedisFrontier(client, run, lease_seconds, group_limit, park_horizon)
    return ShardedFrontier(client, run, n, lease_seconds, group_limit, park_horizon)


class ShardedFrontier(RedisFrontier):
    """A RedisFrontier (the home shard: meta, heartbeats, politeness hash) that routes each host's
    operations to its shard. A lease id names its shard too: ID * MAX_SHARDS + K (a number, as the
    scheduler keys leases)."""

    def __init__(
        self,
        client: redis.Redis,
        run: str,
        shards: int,
        lease_seconds: float = 60.0,
        group_limit: int = 1,
        park_horizon: float = PARK_HORIZON_S,
    ) -> None:
        super().__init__(client, run, lease_seconds, group_limit, park_horizon)
        self.parts = [self] + [
            RedisFrontier(client, shard_run(run, k), lease_seconds, group_limit, park_horizon)
            for k in range(1, shards)
        ]
        self.run_scripts = {
            name: client.register_script(getattr(redis_run_scripts, name))
            for name in (
                "SET_SHARDS",
                "RESERVE",
                "UNRESERVE",
                "RUN_JOIN",
                "GROUP_TAKE",
                "GROUP_GIVE",
                "GROUP_RENEW",
            )
        }
        self._turn = 0  # the shard the next claim starts at
        self._budget: int | None = None  # the run's (read once)
        self._live: list[bool] = []
        self._live_until = 0.0
        self._checkpoints = 0  # the last checkpoint number this process gave
        self._shapes: list[dict[str, list[int]]] = [{} for _ in range(shards)]  # per shard, as last read

    # -- routing ------------------------------------------------------------------------------------

    def shard_index(self, host: str) -> int:
        return shard_of(host, len(self.parts))

    def part_of_lease(self, lease_id: str) -> tuple[RedisFrontier, int, str]:
        shard, raw = int(lease_id) % MAX_SHARDS, int(lease_id) // MAX_SHARDS
        return self.parts[shard], shard, str(raw)

    def _home(self, script: str, *args: Any) -> Any:
        return self.run_scripts[script](keys=[self.prefix], args=list(args))

    def _each(self, method: str, *args: Any) -> list[Any]:
        return [getattr(RedisFrontier, method)(part, *args) for part in self.parts]

    # -- a run's life -------------------------------------------------------------------------------

    def start(self, worker: str, budget: int, config: dict[str, Any]) -> bool:
        """The shard count is set before the run is seeded, by the first worker to start (a plain one sets
        1), so workers started at once with different --shards agree; each opens the run again after."""
        self._home("SET_SHARDS", SHARDS_META, len(self.parts))
        first = super().start(worker, budget, config)
        if first:
            for part in self.parts[1:]:
                self.client.hset(part.key("meta"), mapping={"state": "running", "of": self.run})
        return first

    def drain(self) -> None:
        self._each("drain")

    def set_boost(self, boost: float) -> None:
        self._each("set_boost", boost)

    # -- the queue ----------------------------------------------------------------------------------

    def enqueue(self, urls: list[NewUrl], cap: int = QUEUE_CAP, worker: str = "") -> list[str | None]:
        out: list[str | None] = [None] * len(urls)
        for k, indexes in self.split_by_shard(urls).items():
            reasons = RedisFrontier.enqueue(self.parts[k], [urls[i] for i in indexes], cap, worker)
            for i, reason in zip(indexes, reasons, strict=True):
                out[i] = reason
        return out

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
        """As RedisFrontier.claim, over the shards in turn, paying with budget reserved run-wide."""
        shards = len(self.parts)
        paid = int(self._home("RESERVE", budget, n)) if budget else n
        live = self._live_by_part()
        out: list[Claimed] = []
        start, self._turn = self._turn, (self._turn + 1) % shards
        spent = 0
        limits = (  # each shard's even part of the run's
            math.ceil(fill_hosts / shards),
            exploring,
            math.ceil(max_unscored / shards) if max_unscored else 0,
        )
        for step in range(shards):
            if len(out) >= n:
                break
            k = (start + step) % shards
            part = self.parts[k]
            elsewhere = any(live[j] for j in range(shards) if j != k)
            taken = _claim_in(part, n - len(out), worker, pick, limits, paid - spent, elsewhere)
            for claimed in taken:
                claimed.lease_id = str(int(claimed.lease_id) * MAX_SHARDS + k)
            kept = self._take_groups(taken)
            spent += sum(0 if claimed.urgent else 1 for claimed in kept)
            out += kept
        if budget and paid > spent:
            self._home("UNRESERVE", paid - spent)
        return out

    def _live_by_part(self) -> list[bool]:
        """Per shard: are any of its hosts in their delay or in flight (CLAIM's `others`)? Read every
        LIVE_EVERY_S, not on every claim: a claim then costs one round trip per shard it asks."""
        now = time.monotonic()
        if now < self._live_until:
            return self._live
        answers = []
        for part in self.parts:
            pipe = part.pipeline()
            pipe.get(part.key("live"))
            pipe.zcard(part.key("waiting"))
            live, waiting = pipe.execute()
            answers.append(bool(int(live or 0) or waiting))
        self._live, self._live_until = answers, now + LIVE_EVERY_S
        return answers

    def _take_groups(self, taken: list[Claimed]) -> list[Claimed]:
        """Each claimed lease with a URL counts in its host's politeness groups run-wide (one round trip);
        one whose group is at its limit in another shard goes back to its shard, its URL at the front of
        its host's queue."""
        asking = [c for c in taken if c.request is not None]
        if not asking:
            return taken
        pipe = self.pipeline()
        for claimed in asking:
            args: list[str | int] = [claimed.lease_id, claimed.host, self.group_limit, self.lease_ms]
            self.run_scripts["GROUP_TAKE"](keys=[self.prefix], args=args, client=pipe)
        refused = {c.lease_id for c, ok in zip(asking, pipe.execute(), strict=True) if not int(ok)}
        for claimed in (c for c in asking if c.lease_id in refused):
            part, _, raw = self.part_of_lease(claimed.lease_id)
            assert claimed.request is not None
            back = NewUrl(claimed.host, claimed.request, front=True, force=True, urgent=claimed.urgent)
            RedisFrontier.enqueue(part, [back])
            RedisFrontier.fetch_ended(part, raw, GROUP_RETRY_MS / 1000, fetched=False)
            RedisFrontier.done(part, raw, "")
            self.count("politeness/group_busy_in_another_shard")
        return [c for c in taken if c.lease_id not in refused]

    def fetch_ended(self, lease_id: str, delay_seconds: float, fetched: bool, hold: bool = False) -> int:
        part, _, raw = self.part_of_lease(lease_id)
        answer = RedisFrontier.fetch_ended(part, raw, delay_seconds, fetched, hold)
        self.after_sent([(lease_id, answer)], [])
        return answer

    def after_sent(self, ended: list[tuple[str, int]], joined: list[tuple[str, str]]) -> None:
        """In one round trip: ended leases out of their groups, the budget of those that never reached the
        network back to the run, and hosts' groups known run-wide."""
        if not ended and not joined:
            return
        pipe = self.pipeline()
        calls: list[tuple[str, list[Any]]] = []
        if ended:
            calls.append(("GROUP_GIVE", [lease for lease, _ in ended]))
        unused = sum(1 for _, answer in ended if answer == 2)
        if unused and self._run_budget():
            calls.append(("UNRESERVE", [unused]))
        calls += [("RUN_JOIN", [host, group]) for host, group in joined]
        for script, args in calls:
            self.run_scripts[script](keys=[self.prefix], args=args, client=pipe)
        pipe.execute()

    def numbered(self, checkpoint: dict[str, str] | None) -> dict[str, str]:
        """Numbered from the clock (a worker id used again later numbers on) and never backwards."""
        if not checkpoint:
            return {}
        self._checkpoints = max(self._checkpoints + 1, time.time_ns())
        return {**checkpoint, CHECKPOINT_SEQ: str(self._checkpoints)}

    def done(self, lease_id: str, worker: str, checkpoint: dict[str, str] | None = None) -> bool:
        part, _, raw = self.part_of_lease(lease_id)
        finished = RedisFrontier.done(part, raw, worker, self.numbered(checkpoint))
        self.after_sent([(lease_id, 1)], [])
        return finished

    def renew(self, lease_ids: list[str]) -> int:
        held = 0
        by_part: dict[int, list[str]] = {}
        for lease_id in lease_ids:
            _, k, raw = self.part_of_lease(lease_id)
            by_part.setdefault(k, []).append(raw)
        for k, raws in by_part.items():
            held += RedisFrontier.renew(self.parts[k], raws)
        if lease_ids:
            self._home("GROUP_RENEW", self.lease_ms, *lease_ids)
        return held

    def reclaim(self) -> int:
        expired = 0
        for part in self.parts:
            count, refunded = part.scripts["RECLAIM"](keys=[part.prefix], args=[])
            expired += int(count)
            if int(refunded) and self._run_budget():
                self._home("UNRESERVE", int(refunded))
        return expired

    # -- per host -----------------------------------------------------------------------------------

    def block(self, host: str, reason: str) -> int:
        return RedisFrontier.block(self.part_of_host(host), host, reason)

    def join(self, host: str, group: str) -> bool:
        self.after_sent([], [(host, group)])
        return RedisFrontier.join(self.part_of_host(host), host, group)

    def drop(self, host: str, reason: str, rank: float | None = None) -> int:
        return RedisFrontier.drop(self.part_of_host(host), host, reason, rank)

    def prioritise(self, host: str, priority: float, judged: bool = True, rejudged: bool = False) -> None:
        RedisFrontier.prioritise(self.part_of_host(host), host, priority, judged, rejudged)

    def host_record(self, host: str) -> dict[str, Any]:
        return RedisFrontier.host_record(self.part_of_host(host), host)

    # -- over every shard ---------------------------------------------------------------------------

    def parked_hosts(self) -> list[str]:
        return sorted(h for hosts in self._each("parked_hosts") for h in hosts)

    def host_records(self) -> dict[str, dict[str, Any]]:
        return {h: r for records in self._each("host_records") for h, r in records.items()}

    def shared_policy_state(self, since: Any = 0) -> tuple[dict[str, float], dict[str, list[int]], Any]:
        """As RedisFrontier's, with `since` a list of each shard's last change read; shape counts summed."""
        marks = list(since) if isinstance(since, list) else [0] * len(self.parts)
        means: dict[str, float] = {}
        changed: set[str] = set()
        for k, part in enumerate(self.parts):
            part_means, part_shapes, marks[k] = RedisFrontier.shared_policy_state(part, marks[k])
            means.update(part_means)
            self._shapes[k].update(part_shapes)
            changed.update(part_shapes)
        shapes = {s: [sum(p.get(s, [0, 0])[i] for p in self._shapes) for i in (0, 1)] for s in changed}
        return means, shapes, marks

    def counters(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for counters in self._each("counters"):
            for key, value in counters.items():
                total[key] = total.get(key, 0) + value
        return total

    def explore_fetches(self) -> int:
        return sum(self._each("explore_fetches"))

    def _run_budget(self) -> int:
        if self._budget is None:
            self._budget = self.budget()
        return self._budget

    def pending(self) -> bool:
        if self._run_budget() and self.spent() >= self._run_budget():
            # only what dead workers held is still to be fetched
            return any(
                self.client.zcard(p.key("leases")) or self.client.hlen(p.key("urgent")) for p in self.parts
            )
        return any(RedisFrontier.pending(part) for part in self.parts)

    def spent(self) -> int:
        return int(self.client.get(self.key("reserved")) or 0)

    def worker_meta(self, worker: str) -> dict[str, str]:
        """The home's fields of the worker, with the latest checkpoint any shard committed for it."""
        metas = self._each("worker_meta", worker)
        latest = max(metas, key=lambda m: int(m.get(CHECKPOINT_SEQ, 0)))
        return {**metas[0], **latest}

    def queued(self) -> int:
        return sum(self._each("queued"))

    def leases_held(self) -> int:
        return sum(int(self.client.zcard(p.key("leases"))) for p in self.parts)


def _claim_in(
    part: RedisFrontier,
    n: int,
    worker: str,
    pick: Pick,
    limits: tuple[int, bool, int],
    may_pay: int,
    elsewhere: bool,
) -> list[Claimed]:
    """One shard's claim of up to n hosts, paying for at most `may_pay` new leases."""
    fill_hosts, exploring, max_unscored = limits
    extra = (str(max(0, may_pay)), "1" if elsewhere else "0")
    return RedisFrontier.claim(part, n, worker, 0, pick, fill_hosts, exploring, max_unscored, extra)
