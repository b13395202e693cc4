"""A claim brings the claimed hosts' robots.txt only when this worker does not have it yet (or it changed):
bodies of up to 500 KiB were read back from Redis on every claim of their host. Real redis-server and a real
three-node Redis Cluster."""

from __future__ import annotations

import itertools
import json

import pytest
from redis_server import (
    RedisServer,
    redis_cluster_fixture,  # noqa: F401  (registers the fixture)
    redis_server_fixture,  # noqa: F401  (registers the fixture)
)

from scheduler.redis_frontier import RedisFrontier
from scheduler.redis_politeness import PolitenessReader, politeness_fields

RUNS = itertools.count()
BIG = "User-agent: *\n" + "Disallow: /private/path/number/\n" * 12_000  # about 390 KB


@pytest.fixture(params=["one_redis", "redis_cluster"])
def server(request: pytest.FixtureRequest) -> RedisServer:
    return request.getfixturevalue("redis_server" if request.param == "one_redis" else "redis_cluster")


def save(frontier: RedisFrontier, host: str, part: str, state: dict[str, object]) -> None:
    fields = politeness_fields(host, part, json.dumps(state))
    frontier.client.hset(frontier.key("politeness"), mapping=fields)  # type: ignore[arg-type]


def test_a_robots_txt_is_read_once_per_worker_until_it_changes(server: RedisServer) -> None:
    frontier = RedisFrontier(server.client(), f"polite{next(RUNS)}", lease_seconds=30.0)
    save(frontier, "a.example", "robots", {"body": BIG, "expires_at": 1.0})
    save(frontier, "a.example", "timing", {"ready_at": 5.0, "crawl_delay": 2.0})
    save(frontier, "b.example", "timing", {"ready_at": 7.0})
    worker, other = (PolitenessReader(frontier.client, frontier.key("politeness")) for _ in range(2))

    first = worker.rows(["a.example", "b.example"])
    assert ("a.example", "robots", {"body": BIG, "expires_at": 1.0}) in first
    assert worker.bodies_read == 1 and worker.bytes_read > len(BIG)
    again = worker.rows(["a.example", "b.example"])  # the next claim of the same hosts
    assert sorted(part for _, part, _ in again) == ["timing", "timing"]  # the timing, always fresh
    assert worker.bodies_read == 1
    save(frontier, "a.example", "timing", {"ready_at": 9.0})  # another worker backed the host off
    assert ("a.example", "timing", {"ready_at": 9.0}) in worker.rows(["a.example"])

    save(frontier, "a.example", "robots", {"body": "User-agent: *\nDisallow: /\n", "expires_at": 2.0})
    changed = worker.rows(["a.example"])
    assert ("a.example", "robots", {"body": "User-agent: *\nDisallow: /\n", "expires_at": 2.0}) in changed
    assert worker.bodies_read == 2
    assert other.rows(["a.example"])[0][1] == "robots"  # each worker reads it once itself


def test_a_robots_txt_saved_without_a_digest_is_still_read(server: RedisServer) -> None:
    """A run whose robots.txt rows an older version wrote (no digest beside them) still shares them."""
    frontier = RedisFrontier(server.client(), f"polite{next(RUNS)}", lease_seconds=30.0)
    frontier.client.hset(frontier.key("politeness"), "a.example|robots", json.dumps({"body": "x"}))
    reader = PolitenessReader(frontier.client, frontier.key("politeness"))
    assert reader.rows(["a.example"]) == [("a.example", "robots", {"body": "x"})]
    assert reader.rows(["a.example"]) == [("a.example", "robots", {"body": "x"})]
