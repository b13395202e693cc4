"""A local redis-server on a free loopback port (tests, benchmarks, demos): AOF on, stopped by its owner;
and a local Redis Cluster of several of them (`redis-cli --cluster create`)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis

from scheduler.redis_connect import connect

STARTUP_TIMEOUT_S = 20.0
CLUSTER_BUS_OFFSET = 10000
CLUSTER_NODE_TIMEOUT_MS = 2000  # a node silent this long is failed by the others (the default is 15 s)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000, Redis's rule) is a valid free port too."""
    while True:
        port = free_port()
        if port + CLUSTER_BUS_OFFSET > 65535:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port + CLUSTER_BUS_OFFSET))
            except OSError:
                continue
        return port


class RedisProcessError(RuntimeError):
    """redis-server is missing or did not start; the message says what to do."""


class RedisProcess:
    """redis-server bound to 127.0.0.1 only, its data (AOF, fsync always) in `directory`; restartable."""

    def __init__(
        self, directory: Path, port: int | None = None, persist: bool = True, cluster: bool = False
    ) -> None:
        self.directory = directory
        self.port = port or (free_cluster_port() if cluster else free_port())
        self.persist = persist  # False: no AOF (benchmarks measuring memory and speed, not durability)
        self.cluster = cluster  # a node of a Redis Cluster (RedisClusterProcess joins the nodes)
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
        if self.cluster:  # nodes.conf in its directory: a restarted node knows its cluster and its slots
            args += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
            args += ["--cluster-node-timeout", str(CLUSTER_NODE_TIMEOUT_MS)]
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


class RedisClusterProcess:
    """`nodes` redis-server processes in cluster mode on loopback ports, joined into one Redis Cluster
    (every node a master, no replicas: a test kills and restarts one to see the crawl survive it)."""

    def __init__(self, directory: Path, nodes: int = 3) -> None:
        self.directory = directory
        self.nodes = [RedisProcess(directory / f"node{i}", cluster=True) for i in range(nodes)]

    @property
    def url(self) -> str:
        """Any node's URL reaches the whole cluster (scheduler/redis_connect.py)."""
        return self.nodes[0].url

    def client(self) -> redis.Redis:
        return connect(self.url, cluster=True, decode_responses=True)

    def node_of(self, key: str) -> RedisProcess:
        """The node serving `key`'s slot."""
        first = self.nodes[0].client()
        slot = int(first.cluster("KEYSLOT", key))
        for start, end, master, *_ in first.execute_command("CLUSTER", "SLOTS"):
            if int(start) <= slot <= int(end):
                return next(node for node in self.nodes if node.port == int(master[1]))
        raise RedisProcessError(f"no node serves slot {slot}")

    def start(self) -> RedisClusterProcess:
        binary = shutil.which("redis-cli")
        if binary is None:
            raise RedisProcessError("redis-cli is not installed (apt-get install redis-server)")
        try:
            for node in self.nodes:
                node.start()
        except RedisProcessError:
            self.stop()
            raise
        addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
        args = [binary, "--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes"]
        made = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
        if made.returncode != 0:
            self.stop()
            raise RedisProcessError(f"redis-cli --cluster create failed: {made.stdout[-500:]}{made.stderr}")
        self.wait_ok()
        return self

    def wait_ok(self, timeout: float = 30.0) -> None:
        """Until every node says `cluster_state:ok` (slots assigned, and a restarted node back in)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if all(n.client().cluster("INFO").get("cluster_state") == "ok" for n in self.nodes):
                    return
            except redis.RedisError:
                pass
            time.sleep(0.1)
        raise RedisProcessError(f"the Redis Cluster in {self.directory} did not reach cluster_state:ok")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> RedisClusterProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
