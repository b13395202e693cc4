"""One run directory from many workers: RUN/workers/*/ merged into RUN's pages, hosts, stats and report.

A worker that died (kill -9) never wrote its tables: its folder is first made whole as of the last page
it committed to Redis (the same cut a one-process --resume makes; what lies beyond was requeued when its
leases expired and fetched by another worker). WARC files and text shards are hard-linked into RUN/warc
and RUN/text (their names carry the worker id), so RUN reads like a one-process run directory.

Workers need no shared file system: each records in Redis the machine and --out it writes to. The merge
takes RUN/workers/* and the workers/ of every other run directory it is given (`frontier merge RUN --from
DIR`, a copy or a mount of another machine's --out), and refuses while a worker the run knows is missing
from all of them: a merge without it would lose its pages.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import time
from pathlib import Path
from typing import Any

import polars as pl
import redis

from crawler.archive.warc_files import recover_open_files
from crawler.pages.sinks import CHECKPOINT_META, PAGES_SPOOL, SinkCheckpoint, cut_to_checkpoint
from crawler.pages.tables import join_scheduler_states
from crawler.run.crawl_config import ConfigError, CrawlConfig, load_config
from crawler.run.crawl_run import finish_run, render_report
from crawler.run.run_stats import STATS_META, loads_stats, merge_stats
from crawler.run.worker_options import RUN_FILE, WORKERS_DIR
from scheduler.export import host_state_frame
from scheduler.hosts import PARKED
from scheduler.redis_connect import connect
from scheduler.redis_frontier import RedisFrontier
from scheduler.redis_shards import open_frontier

logger = logging.getLogger(__name__)

ALIVE_S = 15.0  # a worker that has not sent its heartbeat (every second) for this long is not running
MERGE_LOCK_S = 600
MACHINE_META, OUT_META = "machine", "out"  # wmeta:WORKER fields: where the worker writes


SILENT_S = 3.0  # a worker whose heartbeat is this late may have died: the last one waits to see
# A worker's crawl is over (`finished`) before its tables are written: until they are, it says `writing`,
# and no other worker merges under it (one did, and read its hosts.parquet half-written). One still writing
# this long after its crawl ended died doing so: `frontier merge` then cuts it back like any dead worker.
WRITING, WRITING_S = "writing", 600.0


def live_workers(frontier: RedisFrontier, but: str = "") -> dict[str, float]:
    """Workers that may still write into the run: name -> seconds since their last heartbeat, for those
    crawling (not finished, a heartbeat within ALIVE_S), and 0 for those writing their tables (WRITING)."""
    now = time.time()
    live = {}
    for worker, info in frontier.workers().items():
        age = now - float(info.get("seen", 0))
        if worker == but:
            continue
        if info.get(WRITING) and age < WRITING_S:
            live[worker] = 0.0  # at work, not silent: it merges the run itself when it is done
        elif not info.get("finished") and age < ALIVE_S:
            live[worker] = age
    return live


def outputs_written(frontier: RedisFrontier, worker: str) -> None:
    """The worker's tables are written (or never will be): the run may be merged without waiting for it."""
    info = frontier.workers().get(worker)
    if info is not None and info.pop(WRITING, None):
        frontier.heartbeat(worker, info)


class WorkersElsewhere(Exception):
    """The run's last worker cannot merge it: some workers wrote on another machine."""


def record_place(frontier: RedisFrontier, worker: str, run_dir: Path) -> None:
    """Say in Redis where this worker writes (the merge asks for what it cannot find)."""
    place = {MACHINE_META: socket.gethostname(), OUT_META: str(run_dir.resolve())}
    frontier.client.hset(frontier.key(f"wmeta:{worker}"), mapping=place)  # type: ignore[arg-type]


def missing_workers(frontier: RedisFrontier, found: list[Path]) -> dict[str, str]:
    """Workers of the run (those that ever sent a heartbeat) with no folder in `found`: name -> where it
    wrote ("MACHINE:OUT/workers/NAME")."""
    have = {folder.name for folder in found}
    missing = {}
    for worker in sorted(set(frontier.workers()) - have):
        meta = frontier.worker_meta(worker)
        where = f"{meta.get(MACHINE_META, '?')}:{meta.get(OUT_META, '?')}/{WORKERS_DIR}/{worker}"
        missing[worker] = where
    return missing


def missing_message(run_dir: Path, missing: dict[str, str]) -> str:
    places = "; ".join(f"{worker} at {where}" for worker, where in missing.items())
    return (
        f"{len(missing)} worker(s) of this run wrote outside {run_dir}: {places}. Copy each folder into "
        f"{run_dir / WORKERS_DIR}/ (rsync -a MACHINE:OUT/{WORKERS_DIR}/NAME {run_dir / WORKERS_DIR}/), or "
        f"name the other run directories, then: hostcrawl frontier merge {run_dir} --from OTHER_OUT"
    )


def worker_folders(run_dir: Path, sources: tuple[Path, ...] = ()) -> list[Path]:
    """RUN/workers/* and each source's workers/*, one folder per worker name (RUN's own first)."""
    folders: dict[str, Path] = {}
    for root in (run_dir, *sources):
        parent = root / WORKERS_DIR
        for folder in sorted(parent.iterdir()) if parent.is_dir() else []:
            if folder.is_dir():
                folders.setdefault(folder.name, folder)
    return sorted(folders.values(), key=lambda folder: folder.name)


def merge_if_last(
    run_dir: Path, frontier: RedisFrontier, worker: str, config: CrawlConfig
) -> dict[str, Any] | None:
    """The last worker to finish merges (once: a lock in Redis); the others leave it to that one. Call it
    after `outputs_written`: a worker whose crawl has ended but whose tables are not written yet is not
    finished here (it merges when it is).

    A worker killed moments ago still looks alive for ALIVE_S: while every other unfinished worker is
    silent, this one waits for them to be declared gone rather than leave the run unmerged. Workers that
    wrote on another machine leave the merge to `frontier merge --from` (WorkersElsewhere says so).
    """
    try:
        deadline = time.monotonic() + ALIVE_S
        while live := live_workers(frontier, but=worker):
            if min(live.values()) < SILENT_S or time.monotonic() > deadline:
                return None  # a worker still running: it merges when it ends
            time.sleep(0.5)
        if frontier.pending():
            return None
        if missing := missing_workers(frontier, worker_folders(run_dir)):
            raise WorkersElsewhere(f"the run is not merged: {missing_message(run_dir, missing)}")
        if not frontier.client.set(frontier.key("merge_lock"), worker, nx=True, ex=MERGE_LOCK_S):
            return None
        return merge_run(run_dir, frontier, config)
    except redis.RedisError as exc:
        logger.warning("merge skipped (%s): run `hostcrawl frontier merge %s`", exc, run_dir)
        return None


def frontier_of(run_dir: Path, url: str | None = None, run: str | None = None) -> RedisFrontier:
    """The frontier a distributed run directory names in RUN/distributed.json (flags override it)."""
    marker = run_dir / RUN_FILE
    if not marker.is_file() and (url is None or run is None):
        raise ConfigError(f"{marker}: not found; is {run_dir} the --out of a distributed run?")
    saved = json.loads(marker.read_text(encoding="utf-8")) if marker.is_file() else {}
    client = connect(url or saved["frontier"], decode_responses=True)
    return open_frontier(client, run or saved["run"], float(saved.get("lease_seconds", 60.0)))


def merge_run(
    run_dir: Path, frontier: RedisFrontier, config: CrawlConfig | None = None, sources: tuple[Path, ...] = ()
) -> dict[str, Any]:
    """RUN's pages, hosts, stats and report from every worker's folder (RUN/workers/* and the sources')."""
    config = config or load_config(run_dir / "config.toml")
    workers = worker_folders(run_dir, sources)
    stats: dict[str, Any] = {}
    delays: dict[str, float] = {}
    for folder in (run_dir / "warc", run_dir / "text"):
        folder.mkdir(exist_ok=True)
    with (run_dir / PAGES_SPOOL).open("wb") as spool:
        for worker_dir in workers:
            stats = merge_stats(stats, _finish_worker(worker_dir, frontier))
            spool.write(_complete_rows(worker_dir / PAGES_SPOOL))
            _link_outputs(worker_dir, run_dir)
            hosts_file = worker_dir / "hosts.parquet"
            if hosts_file.exists():
                for host, delay in pl.read_parquet(hosts_file, columns=["host", "crawl_delay"]).iter_rows():
                    if delay is not None:
                        delays[host] = max(delay, delays.get(host, 0.0))
    for key, value in frontier.counters().items():
        stats[f"frontier/run/{key}"] = value
    # the run's fetches against its budget (each worker's own figure is a gauge: merge_stats keeps one)
    stats["frontier/fetched"] = stats.get("frontier/run/fetched", stats.get("frontier/fetched", 0))
    stats["frontier/workers"] = len(workers)
    parked = frontier.parked_hosts()  # their URLs stay queued in Redis for a later worker
    if parked:
        stats["frontier/parked_at_end"] = len(parked)
    started = float(frontier.meta().get("started", time.time()))
    merged = finish_run(run_dir, config, stats, delays, time.time() - started)
    hosts = pl.read_parquet(run_dir / "hosts.parquet")
    states = host_state_frame(frontier.host_records().items(), {})
    states = states.with_columns(
        pl.when(pl.col("host").is_in(parked) & pl.col("drop_reason").is_null())
        .then(pl.lit(PARKED))
        .otherwise(pl.col("drop_reason"))
        .alias("drop_reason")
    )
    hosts = join_scheduler_states(hosts, states)
    hosts.write_parquet(run_dir / "hosts.parquet")
    render_report(run_dir, config, merged)
    return merged


def _finish_worker(worker_dir: Path, frontier: RedisFrontier) -> dict[str, Any]:
    """The worker's counters; a worker that died is first cut back to its last committed page."""
    stats_file = worker_dir / "stats.json"
    if stats_file.exists():
        return loads_stats(stats_file.read_text(encoding="utf-8"))
    saved = frontier.worker_meta(worker_dir.name)
    if (worker_dir / "warc").exists():
        recover_open_files(worker_dir / "warc")
    cut, _ = cut_to_checkpoint(worker_dir, SinkCheckpoint.from_json(saved.get(CHECKPOINT_META)))
    logger.info("worker %s died: cut %d rows, %d documents", worker_dir.name, cut["rows"], cut["docs"])
    stats = loads_stats(saved.get(STATS_META))
    stats["frontier/worker_died"] = 1
    return stats


def _complete_rows(spool: Path) -> bytes:
    if not spool.exists():
        return b""
    data = spool.read_bytes()
    return data[: data.rfind(b"\n") + 1]


def _link_outputs(worker_dir: Path, run_dir: Path) -> None:
    for path in sorted((worker_dir / "warc").glob("*")):
        if path.name.endswith((".warc.gz", ".cdxj")):
            _link(path, run_dir / "warc" / path.name)
    for path in sorted((worker_dir / "text").glob("part-*.jsonl.zst")):
        _link(path, run_dir / "text" / f"part-{worker_dir.name}-{path.name.removeprefix('part-')}")


def _link(source: Path, target: Path) -> None:
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:  # another file system: a copy
        shutil.copy2(source, target)
