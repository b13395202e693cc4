"""The Redis tests' server: one real redis-server per session on a free loopback port, stopped at the end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scheduler.redis_process import RedisProcess, RedisProcessError, free_port

RedisServer = RedisProcess
__all__ = ["RedisServer", "free_port", "redis_server_fixture"]


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
