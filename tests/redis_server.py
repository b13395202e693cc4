"""The Redis tests' servers: one real redis-server per session on a free loopback port, and one real
three-node Redis Cluster, each started when a test first asks for it and stopped at the end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scheduler.redis_process import RedisClusterProcess, RedisProcess, RedisProcessError, free_port

RedisServer = RedisProcess | RedisClusterProcess  # what the tests use of either: .url and .client()
__all__ = ["RedisServer", "free_port", "redis_cluster_fixture", "redis_server_fixture"]


@pytest.fixture(scope="session", name="redis_server")
def redis_server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    """One server for every Redis test of the session; each test uses its own run name (key prefix)."""
    try:
        server = RedisProcess(tmp_path_factory.mktemp("redis")).start()
    except RedisProcessError as exc:
        pytest.fail(f"{exc} (.ci/run installs it)")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session", name="redis_cluster")
def redis_cluster_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterProcess]:
    """Three redis-server processes in cluster mode joined by `redis-cli --cluster create`."""
    try:
        cluster = RedisClusterProcess(tmp_path_factory.mktemp("redis-cluster")).start()
    except RedisProcessError as exc:
        pytest.fail(f"{exc} (.ci/run installs it)")
    try:
        yield cluster
    finally:
        cluster.stop()
