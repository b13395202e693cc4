"""What a worker's Redis link sends: its outbox entries, batched (runs of enqueues as one script call) and
routed to the shard each belongs to (scheduler/redis_shards.py; a plain run has one)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scheduler.redis_frontier import RedisFrontier
from scheduler.redis_requests import NewUrl

ENQUEUE_BATCH = 500  # discovered URLs sent in one ENQUEUE script call


@dataclass(slots=True)
class Op:
    """One outbox entry: a RedisFrontier method name and its arguments."""

    method: str
    args: tuple[Any, ...]
    host: str = ""  # for "politeness": rows of this host are wanted with the claim


def by_shard(frontier: RedisFrontier, op: Op) -> list[Op]:
    """An enqueue of URLs of several shards' hosts as one per shard (other operations go whole)."""
    if op.method != "enqueue" or len(frontier.parts) == 1:
        return [op]
    urls: list[NewUrl] = op.args[0]
    return [
        Op("enqueue", ([urls[i] for i in positions], *op.args[1:]))
        for positions in frontier.split_by_shard(urls).values()
    ]


def coalesce(ops: list[Op]) -> list[Op]:
    """Runs of enqueue operations (pages' links, redirects, retries) as one ENQUEUE call of up to
    ENQUEUE_BATCH URLs, in order: one script run per batch instead of one per operation."""
    out: list[Op] = []
    for op in ops:
        last = out[-1] if out else None
        if last is not None and last.method == op.method == "enqueue":
            urls = [*last.args[0], *op.args[0]]
            if len(urls) <= ENQUEUE_BATCH:
                out[-1] = Op("enqueue", (urls,))
                continue
        out.append(op)
    return out


def shard_of_op(f: RedisFrontier, op: Op) -> tuple[RedisFrontier, int]:
    """The shard an operation goes to: its lease's, its host's, or the home (politeness, counts)."""
    if op.method in ("fetch_ended", "done"):
        part, k, _ = f.part_of_lease(op.args[0])
        return part, k
    if op.method in ("block", "drop", "join"):
        k = f.shard_index(op.args[0])
    elif op.method == "enqueue":
        k = f.shard_index(op.args[0][0].host)
    else:
        k = 0  # the home: politeness, counts
    return f.parts[k], k
