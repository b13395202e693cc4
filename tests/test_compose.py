"""docker-compose.yml: Docker Compose accepts it, and its services' hostcrawl commands work when run directly
(scaled down: fewer hosts, a smaller budget, loopback addresses), so the file cannot drift from the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml
from hostcrawl_cli import HOSTCRAWL
from redis_server import (
    RedisServer,
    free_port,
    redis_server_fixture,  # noqa: F401  (registers the fixture)
)

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
BUDGET, HOSTS, TIMEOUT_S = 120, 20, 300


def compose_config() -> dict[str, Any]:
    """The file as Docker Compose reads it (profiles included), or a skip/fail when it is not installed."""
    binary = shutil.which("docker-compose")
    if binary is None:
        message = "docker-compose is not installed (apt-get install docker-compose; .ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    done = subprocess.run(
        [binary, "-f", str(COMPOSE), "--profile", "gpu", "--profile", "cluster", "config"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    config: dict[str, Any] = yaml.safe_load(done.stdout)
    return config


def test_compose_file_is_valid_and_describes_the_distributed_run() -> None:
    services = compose_config()["services"]
    cluster = {"redis-node-1", "redis-node-2", "redis-node-3", "redis-cluster-init", "cluster-worker"}
    assert set(services) == {"redis", "testweb", "worker", "status", "gpu-worker"} | cluster
    redis_command = services["redis"]["command"]
    assert redis_command[redis_command.index("--appendonly") + 1] == "yes"  # a restart keeps the frontier
    worker = services["worker"]
    assert "container_name" not in worker and "ports" not in worker  # `--scale worker=N` needs both absent
    assert worker["depends_on"]["redis"]["condition"] == "service_healthy"
    targets = [v["target"] if isinstance(v, dict) else v.split(":")[1] for v in worker["volumes"]]
    assert "/runs" in targets  # one volume shared by every worker: the last one merges the run there
    gpu = services["gpu-worker"]
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["capabilities"] == ["gpu"] and gpu["build"]["args"]["EXTRAS"] == "redis,gpu"
    assert "--cleaner" in gpu["command"]
    for n in (1, 2, 3):  # cluster mode, and a restarted node keeps its slots (nodes.conf) and its data (AOF)
        command = services[f"redis-node-{n}"]["command"]
        assert command[command.index("--cluster-enabled") + 1] == "yes" and "--appendonly" in command
    init = " ".join(services["redis-cluster-init"]["command"])
    assert "--cluster create" in init and "--cluster-yes" in init
    on_cluster = services["cluster-worker"]
    assert on_cluster["command"][on_cluster["command"].index("--frontier") + 1].startswith(
        "redis://redis-node-"
    )
    assert on_cluster["depends_on"]["redis-cluster-init"]["condition"] == "service_completed_successfully"
    assert on_cluster["command"][on_cluster["command"].index("--shards") + 1] == "3"  # spread over the nodes


def scaled(command: list[str], tmp: Path, redis_url: str, web_port: int) -> list[str]:
    """A service's command as this machine runs it: its paths under tmp, loopback addresses, a small web."""
    swap = {
        "redis://redis:6379/0": redis_url,
        "http://testweb:8899": f"http://127.0.0.1:{web_port}",
        "0.0.0.0": "127.0.0.1",
    }
    out = [swap.get(arg, str(tmp) + arg[5:] if arg.startswith("/runs") else arg) for arg in command]
    for flag, value in (("--hosts", str(HOSTS)), ("--max-pages", str(BUDGET)), ("--port", str(web_port))):
        if flag in out:
            out[out.index(flag) + 1] = value
    return out


@pytest.mark.slow
def test_compose_services_commands_crawl_together(tmp_path: Path, redis_server: RedisServer) -> None:
    services = compose_config()["services"]
    web_port, status_port = free_port(), free_port()
    web_cmd = scaled(services["testweb"]["command"], tmp_path, redis_server.url, web_port)
    worker_cmd = scaled(services["worker"]["command"], tmp_path, redis_server.url, web_port)
    status_cmd = scaled(services["status"]["command"], tmp_path, redis_server.url, web_port)
    status_cmd[status_cmd.index("--serve") + 1] = str(status_port)
    ready = Path(web_cmd[web_cmd.index("--ready-file") + 1])
    web = subprocess.Popen([*HOSTCRAWL, *web_cmd], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs: list[subprocess.Popen[str]] = []
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():  # the compose healthcheck waits for the same file
            assert web.poll() is None and time.monotonic() < deadline, "the test web did not start"
            time.sleep(0.2)
        logs = [tmp_path / f"worker{i}.log" for i in range(2)]
        for log in logs:  # `docker-compose up --scale worker=2`
            with log.open("w") as fh:
                procs.append(subprocess.Popen([*HOSTCRAWL, *worker_cmd], stdout=fh, stderr=fh, text=True))
            time.sleep(1.0)
        codes = [proc.wait(timeout=TIMEOUT_S) for proc in procs]
        assert codes == [0, 0], "\n".join(log.read_text()[-2000:] for log in logs)
        status = subprocess.Popen(
            [*HOSTCRAWL, *status_cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        procs.append(status)  # type: ignore[arg-type]
        snapshot = _poll_json(f"http://127.0.0.1:{status_port}/api/status", status)
    finally:
        for proc in [*procs, web]:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)
    run_dir = Path(worker_cmd[worker_cmd.index("--out") + 1])
    pages = pl.read_parquet(run_dir / "pages.parquet")  # the last worker merged the run
    fetched = pages.filter(pl.col("status").is_not_null())
    assert 0 < fetched.height <= BUDGET + 2 * 8  # the budget, plus at most what was in flight per worker
    assert fetched["url"].n_unique() == fetched.height  # no page fetched twice across the two workers
    assert snapshot["pages"]["budget"] == BUDGET and len(snapshot["workers"]) == 2
    assert snapshot["pages"]["fetched"] >= fetched.height


def _poll_json(url: str, proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                data: dict[str, Any] = json.loads(resp.read())
                return data
        except OSError:
            assert proc.poll() is None, (proc.stderr.read() if proc.stderr else b"").decode()[-2000:]
            assert time.monotonic() < deadline, f"{url} never answered"
            time.sleep(0.3)
