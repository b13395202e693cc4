"""A worker of a distributed run: `hostcrawl crawl --frontier redis://HOST:PORT/DB --run NAME --out RUN`.

Every worker crawls in its own folder, RUN/workers/ID/, laid out like a one-process run and just as crash
safe (its sinks' checkpoint is committed to Redis with every page it records); the frontier is the run's,
in Redis. The first worker seeds the run (later ones queue the same seeds, refused as duplicates, and
join). The last worker to finish merges every worker's output into RUN itself (crawler/run/worker_merge.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import socket
import uuid
from pathlib import Path
from typing import Any

from crawler.errors import EXIT_FAILED
from crawler.run.crawl_config import SCRAPY_SCHEDULER, ConfigError, CrawlConfig, validate
from crawler.run.crawl_run import RunResult, crawl_and_finish
from crawler.run.settings import build_settings
from crawler.run.worker_options import DEFAULT_LEASE_S, RUN_FILE, WORKERS_DIR, worker_command
from scheduler.sqlite_store import FrontierError

logger = logging.getLogger(__name__)

RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
CONNECT_TIMEOUT_S = 5.0


def check_worker_args(args: argparse.Namespace, config: CrawlConfig) -> None:
    """Every flag problem before anything is written or any worker joins."""
    url = args.frontier
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise ConfigError(f"--frontier {url}: not a Redis URL (redis://HOST:PORT/DB)")
    if not args.run_name or not RUN_NAME.match(args.run_name):
        raise ConfigError("--frontier needs --run NAME (letters, digits, '.', '_', '-'; at most 64)")
    if args.resume:
        raise ConfigError("--resume is for one-process runs; a worker that stopped is simply started again")
    if not args.out:
        raise ConfigError("--frontier needs --out RUN: the run directory every worker writes into")
    if args.worker_id is not None and not RUN_NAME.match(args.worker_id):
        raise ConfigError(f"--worker-id {args.worker_id!r}: letters, digits, '.', '_', '-' only")
    from scheduler.redis_shards import MAX_SHARDS

    if not 1 <= args.shards <= MAX_SHARDS:
        raise ConfigError(f"--shards {args.shards}: from 1 to {MAX_SHARDS}")
    if args.lease_seconds < 2:
        raise ConfigError(f"--lease-seconds {args.lease_seconds}: at least 2 seconds")
    if config.policy.name == SCRAPY_SCHEDULER:
        raise ConfigError(
            "--policy scrapy is Scrapy's own one-process scheduler; pick another with --frontier"
        )
    import redis  # the `redis` extra: only a distributed run needs it

    try:
        redis.Redis.from_url(url, socket_connect_timeout=CONNECT_TIMEOUT_S).ping()
    except (redis.RedisError, ValueError) as exc:
        raise ConfigError(f"--frontier {url}: cannot reach Redis ({exc})") from None


class RedisRefused(FrontierError):
    """Redis kept refusing the frontier's operations (out of memory, read-only, a denied command)."""

    exit_code = EXIT_FAILED


def default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def worker_settings(
    config: CrawlConfig, worker_dir: Path, frontier_url: str, run_name: str, worker_id: str, lease_s: float
) -> dict[str, Any]:
    return {
        "SCHEDULER": "scheduler.redis_scheduler.RedisHostScheduler",
        "REDIS_URL": frontier_url,  # scrapy-redis's connection settings (REDIS_PARAMS too, via -s)
        "REDIS_PARAMS": {"decode_responses": True, "socket_timeout": 30, "socket_connect_timeout": 10},
        "HOSTCRAWL_REDIS_RUN": run_name,
        "HOSTCRAWL_WORKER_ID": worker_id,
        "HOSTCRAWL_LEASE_SECONDS": lease_s,
        "HOSTCRAWL_WARC_PREFIX": f"hostcrawl-{worker_id}",
    }


def run_worker(
    config: CrawlConfig,
    run_dir: Path,
    frontier_url: str,
    run_name: str,
    *,
    worker_id: str | None = None,
    lease_seconds: float = DEFAULT_LEASE_S,
    shards: int = 1,
    progress: bool = True,
    status_port: int | None = None,
    status_bind: str = "127.0.0.1",
) -> RunResult:
    """Crawl as one worker of run `run_name` until the run has no work left (or is drained)."""
    validate(config)
    worker_id = worker_id or default_worker_id()
    worker_dir = run_dir / WORKERS_DIR / worker_id
    if worker_dir.exists():
        raise ConfigError(f"{worker_dir}: a worker of this name already wrote here; pick another --worker-id")
    worker_dir.mkdir(parents=True)
    import redis

    from scheduler.redis_connect import CLUSTER_CLASS, connect
    from scheduler.redis_scheduler import FAILED_STAT
    from scheduler.redis_shards import open_frontier

    client = connect(  # bounded: a Redis gone silent must not hang the worker's end
        frontier_url, decode_responses=True, socket_connect_timeout=CONNECT_TIMEOUT_S, socket_timeout=30
    )
    frontier = open_frontier(client, run_name, lease_seconds, shards=shards)
    first = frontier.start(worker_id, config.fetch.max_pages, {"out": str(run_dir)})
    frontier = open_frontier(client, run_name, lease_seconds)  # as many shards as the run has
    # every machine's RUN names its run and config (the first worker's, where RUN is shared), so the
    # merge can run on any of them
    if first or not (run_dir / RUN_FILE).is_file():
        (run_dir / "config.toml").write_text(config.to_toml(), encoding="utf-8")
        marker = {"frontier": frontier_url, "run": run_name, "lease_seconds": lease_seconds}
        (run_dir / RUN_FILE).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
    from crawler.run.worker_merge import WorkersElsewhere, merge_if_last, outputs_written, record_place

    record_place(frontier, worker_id, run_dir)
    (worker_dir / "config.toml").write_text(config.to_toml(), encoding="utf-8")
    settings = build_settings(
        config, worker_dir, progress=progress, status_port=status_port, status_bind=status_bind
    )
    settings.update(worker_settings(config, worker_dir, frontier_url, run_name, worker_id, lease_seconds))
    if not isinstance(client, redis.Redis):  # a Redis Cluster: the scheduler's own client is a cluster one
        settings["REDIS_PARAMS"] = {**settings["REDIS_PARAMS"], "redis_cls": CLUSTER_CLASS}
    try:
        result = crawl_and_finish(settings, config, worker_dir)
    finally:
        with contextlib.suppress(redis.RedisError):
            outputs_written(frontier, worker_id)
    stats, delays = result.stats, result.crawl_delays
    if failure := stats.get(FAILED_STAT):
        raise RedisRefused(
            f"{failure}. Nothing committed is lost; fix Redis (out of memory: raise maxmemory or free "
            f"memory) and start a worker again: {worker_command(frontier_url, run_name, run_dir)}"
        )
    with contextlib.suppress(redis.RedisError):  # a worker that fetched nothing while the others did
        stats["frontier/run/fetched"] = frontier.counters().get("fetched", 0)  # has not failed
    if not result.interrupted and result.storage_error is None:
        try:
            merged = merge_if_last(run_dir, frontier, worker_id, config)
        except WorkersElsewhere as exc:
            logger.warning("%s", exc)
            return RunResult(result.run_dir, stats, delays, note=str(exc))
        if merged is not None:
            return RunResult(run_dir, merged, delays)
    return result
