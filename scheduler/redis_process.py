"""A local redis-server on a free loopback port (tests, benchmarks, demos): AOF on, stopped by its owner."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis

STARTUP_TIMEOUT_S = 20.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisProcessError(RuntimeError):
    """redis-server is missing or did not start; the message says what to do."""


class RedisProcess:
    """redis-server bound to 127.0.0.1 only, its data (AOF, fsync always) in `directory`; restartable."""

    def __init__(self, directory: Path, port: int | None = None, persist: bool = True) -> None:
        self.directory = directory
        self.port = port or free_port()
        self.persist = persist  # False: no AOF (benchmarks measuring memory and speed, not durability)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, decode_responses=True)

    def start(self) -> RedisProcess:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RedisProcessError("redis-server is not installed (apt-get install redis-server)")
        self.directory.mkdir(parents=True, exist_ok=True)
        args = [binary, "--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(self.directory)]
        args += ["--appendonly", "yes" if self.persist else "no", "--appendfsync", "always"]
        args += ["--save", "", "--protected-mode", "yes"]
        with (self.directory / "redis.log").open("ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                if self.client().ping():
                    return self
            except redis.ConnectionError:
                time.sleep(0.05)
        self.stop()
        raise RedisProcessError(
            f"redis-server did not start on port {self.port}; see {self.directory}/redis.log"
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def __enter__(self) -> RedisProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
