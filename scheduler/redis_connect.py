"""One way to open the frontier's Redis, whether one server or a Redis Cluster, and which errors mean
"Redis is away for now" (the worker pauses) rather than "Redis refuses" (the worker fails after a few).

A frontier URL names any one node (`redis://HOST:PORT/0`); the node says whether it is part of a cluster
(`INFO cluster`), and then redis-py's cluster client is used, which finds the others itself. Every key of a
run carries the run's hash tag (scheduler/redis_frontier.py), so each of the frontier's Lua scripts touches
one slot, on one node."""

from __future__ import annotations

from typing import Any

import redis
from redis.cluster import RedisCluster
from redis.exceptions import AskError, ClusterDownError, MovedError, SlotNotCoveredError, TryAgainError

KEY_PREFIX = "hostcrawl:"
CLUSTER_CLASS = "redis.cluster.RedisCluster"  # scrapy-redis's REDIS_PARAMS["redis_cls"] for a cluster

# The node or the cluster cannot answer now (down, failing over, a slot without a master): wait and retry.
# Not RedisClusterException as a whole: redis-py raises it for misuse too, which must fail, not pause.
OUTAGE_ERRORS: tuple[type[Exception], ...] = (
    redis.ConnectionError,
    redis.TimeoutError,
    ClusterDownError,
    TryAgainError,
    SlotNotCoveredError,
    MovedError,  # the run's slot moved to another node (failover, resharding): asked again next turn
    AskError,
)


def run_prefix(run: str) -> str:
    """Every key of run `run` starts with this: `hostcrawl:{RUN}:`. The braces are a Redis Cluster hash
    tag: all of a run's keys hash to one slot, so each of the frontier's Lua scripts touches one node."""
    return f"{KEY_PREFIX}{{{run}}}:"


def as_strings(data: Any) -> dict[str, str]:
    """A hash as the client returns it (decode_responses=True): str -> str."""
    return {str(k): str(v) for k, v in data.items()}


def run_pipeline(client: Any, prefix: str, transaction: bool = False) -> Any:
    """A pipeline for keys under `prefix`. On a cluster, the pipeline of the node serving the prefix's slot:
    redis-py's cluster pipeline refuses scripts (EVALSHA) and WATCH, and one node holds all of a run's
    keys. A slot that moved meanwhile answers MOVED, an outage the caller retries."""
    if isinstance(client, RedisCluster):
        node = client.get_node_from_key(prefix)
        client = client.get_redis_connection(node)
    return client.pipeline(transaction=transaction)


def is_cluster(url: str, connect_timeout: float = 5.0) -> bool:
    """Whether the node at `url` runs in cluster mode (raises redis.RedisError when it cannot be asked)."""
    client = redis.Redis.from_url(url, socket_connect_timeout=connect_timeout, socket_timeout=connect_timeout)
    try:
        return bool(client.info("cluster").get("cluster_enabled"))
    finally:
        client.close()


def connect(url: str, cluster: bool | None = None, **options: Any) -> redis.Redis:
    """A client of the frontier at `url`: redis-py's cluster client when the node is part of a cluster
    (`cluster` None: ask it). `options` are redis-py's connection options (decode_responses, timeouts)."""
    if cluster is None:
        cluster = is_cluster(url, float(options.get("socket_connect_timeout") or 5.0))
    if cluster:
        client: Any = RedisCluster.from_url(url, **options)
        return client  # (RedisCluster answers the commands the frontier uses; it is not a subclass)
    return redis.Redis.from_url(url, **options)
