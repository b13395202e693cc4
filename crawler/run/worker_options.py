"""The distributed mode's flags on `hostcrawl crawl`, apart from the worker (Scrapy, redis): the command
line builds them without loading either."""

from __future__ import annotations

import argparse
from pathlib import Path

WORKERS_DIR = "workers"  # RUN/workers/ID/: each worker's own outputs, merged into RUN at the end
RUN_FILE = "distributed.json"  # RUN/distributed.json: the run's Redis URL, name and lease
DEFAULT_LEASE_S = 60.0  # a dead worker's leases return to the queue this long after its last renewal


def add_worker_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "distributed mode",
        "many workers, on one machine or many, crawl one run whose frontier is in Redis; each writes "
        "RUN/workers/ID/ and the last to finish merges them into RUN (or: hostcrawl frontier merge RUN)",
    )
    g.add_argument(
        "--frontier",
        metavar="URL",
        help="redis://HOST:PORT/DB (one Redis, or any node of a Redis Cluster): be a worker of a shared run",
    )
    g.add_argument("--run", dest="run_name", metavar="NAME", help="the run's name in that Redis (required)")
    g.add_argument("--worker-id", metavar="ID", help="this worker's name (default HOSTNAME-PID-RANDOM)")
    g.add_argument(
        "--lease-seconds",
        type=float,
        default=DEFAULT_LEASE_S,
        help=f"a dead worker's requests go to the others this long after it stopped ({DEFAULT_LEASE_S:.0f})",
    )
    g.add_argument(
        "--shards",
        type=int,
        default=1,
        metavar="N",
        help="split a new run's frontier over N hash slots, so a Redis Cluster spreads it over its nodes "
        "(1: the run on one node; a run keeps the number its first worker gave)",
    )


def continue_command(args: argparse.Namespace, run_dir: Path) -> str:
    """The command that goes on: --resume for one process; for a worker, a new worker of the same run
    (--resume refuses a worker's run directory, which has no frontier.sqlite3, and a stopped worker's name
    is taken: its RUN/workers/ID/ is kept for the merge)."""
    if not args.frontier:
        return f"hostcrawl crawl --resume {run_dir}"
    named = " (a new --worker-id, or none)" if args.worker_id else ""
    command = worker_command(args.frontier, args.run_name, run_dir)
    return f"{command}{named} and the options this worker was started with"


def worker_command(frontier: str, run: str, out: Path) -> str:
    """A new worker of a distributed run (its --out is the run's directory, not a worker's)."""
    return f"hostcrawl crawl --frontier {frontier} --run {run} --out {out}"
