"""`hostcrawl frontier status|drain|merge`: look at, stop and finish a distributed run (frontier in Redis)."""

from __future__ import annotations

import argparse
import json
import threading
from pathlib import Path
from typing import Any

from rich.console import Console

from crawler.run.crawl_config import ConfigError

REFRESH_S = 1.0

EPILOG = """\
examples:
  hostcrawl frontier status --frontier redis://localhost:6379/0 --run r1
  hostcrawl frontier status --frontier redis://localhost:6379/0 --run r1 --serve 8080
  hostcrawl frontier drain --frontier redis://localhost:6379/0 --run r1
  hostcrawl frontier merge runs/r1
  hostcrawl frontier merge runs/r1 --from /mnt/box2/runs/r1   workers that wrote on another machine
"""


def add_frontier_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "frontier",
        help="status, drain or merge a distributed run (workers on one Redis)",
        description="A distributed run is `hostcrawl crawl --frontier redis://HOST:PORT/DB --run NAME "
        "--out RUN`, started on as many machines as you like. These commands look at it, stop it, and "
        "merge its workers' outputs into RUN.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="frontier_command", metavar="COMMAND", required=True)
    status = sub.add_parser(
        "status", help="hosts, queue sizes, leases, workers and rates of a run (--serve: a live page)"
    )
    _run_options(status)
    status.add_argument("--json", action="store_true", help="the whole snapshot as JSON (as /api/status)")
    status.add_argument(
        "--serve",
        type=int,
        metavar="PORT",
        help="serve the status page, /api/status and /metrics for the whole run on PORT until Ctrl-C",
    )
    status.add_argument(
        "--bind", default="127.0.0.1", metavar="ADDR", help="address --serve listens on (default %(default)s)"
    )
    status.set_defaults(func=cmd_status)
    drain = sub.add_parser("drain", help="stop a run cleanly: no new leases; workers finish what they hold")
    _run_options(drain)
    drain.set_defaults(func=cmd_drain)
    merge = sub.add_parser(
        "merge",
        help="merge RUN/workers/*/ into RUN (pages, hosts, stats, report); the last worker does it too",
    )
    merge.add_argument(
        "run_dir", type=Path, metavar="RUN", help="the run directory the workers wrote (--out)"
    )
    merge.add_argument("--frontier", metavar="URL", help="Redis URL (default: RUN/distributed.json's)")
    merge.add_argument("--run", dest="run_name", metavar="NAME", help="run name (default: RUN's)")
    merge.add_argument(
        "--from",
        dest="sources",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="another machine's --out of this run (a copy or a mount): its workers/*/ are merged too; "
        "repeat for each machine. The merge refuses while a worker of the run is found in none of them",
    )
    merge.set_defaults(func=cmd_merge)


def _run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--frontier",
        required=True,
        metavar="URL",
        help="redis://HOST:PORT/DB of the run (or any node of its Redis Cluster)",
    )
    p.add_argument("--run", dest="run_name", required=True, metavar="NAME", help="the run's name")


def _frontier(url: str, run: str) -> Any:
    import redis  # the `redis` extra (crawler/cli.py names it when it is missing)

    from scheduler.redis_connect import connect
    from scheduler.redis_shards import open_frontier

    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise ConfigError(f"--frontier {url}: not a Redis URL (redis://HOST:PORT/DB)")
    try:
        client = connect(url, decode_responses=True, socket_connect_timeout=5)
        client.ping()
    except (redis.RedisError, ValueError) as exc:
        raise ConfigError(f"--frontier {url}: cannot reach Redis ({exc})") from None
    frontier = open_frontier(client, run)
    if not client.exists(frontier.key("meta")):
        raise ConfigError(f"--run {run}: no such run in {url} (no worker has started it)")
    return frontier


def cmd_status(args: argparse.Namespace) -> int:
    from crawler.monitor.frontier_status import run_snapshot, status_text

    frontier = _frontier(args.frontier, args.run_name)
    if args.serve is not None:
        return serve(frontier, args.bind, args.serve)
    snap = run_snapshot(frontier)
    print(json.dumps(snap, indent=2) if args.json else status_text(snap))
    return 0


def cmd_drain(args: argparse.Namespace) -> int:
    frontier = _frontier(args.frontier, args.run_name)
    frontier.drain()
    leases = sum(frontier.client.zcard(part.key("leases")) for part in frontier.parts)
    print(
        f"run {args.run_name}: draining; workers finish their {leases} leases and stop (the last merges RUN)"
    )
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    import redis

    from crawler.run.worker_merge import (
        frontier_of,
        live_workers,
        merge_run,
        missing_message,
        missing_workers,
        worker_folders,
    )
    from crawler.run.worker_options import WORKERS_DIR

    for root in (args.run_dir, *args.sources):
        if not (root / WORKERS_DIR).is_dir():
            raise ConfigError(f"{root}: no {WORKERS_DIR}/ here; is it the --out of a distributed run?")
    try:
        frontier = frontier_of(args.run_dir, args.frontier, args.run_name)
        running = live_workers(frontier)
        missing = missing_workers(frontier, worker_folders(args.run_dir, tuple(args.sources)))
    except redis.RedisError as exc:
        raise ConfigError(f"{args.run_dir}: cannot reach its Redis ({exc})") from None
    if running:
        raise ConfigError(
            f"{args.run_dir}: workers {', '.join(running)} are still running (or writing their tables); "
            "drain the run first, or wait for them to end"
        )
    if missing:
        raise ConfigError(f"{args.run_dir}: not merged: {missing_message(args.run_dir, missing)}")
    stats = merge_run(args.run_dir, frontier, sources=tuple(args.sources))
    Console(stderr=True).print(
        f"merged {stats.get('frontier/workers')} workers: {stats.get('response_received_count', 0)} "
        f"responses -> {args.run_dir}/report.md",
        highlight=False,
    )
    return 0


class RunStatusPage:
    """What crawler/monitor/status_server.py's handler asks of its owner: the page, a snapshot, a registry."""

    def __init__(self, frontier: Any) -> None:
        from crawler.monitor.metrics import metrics_registry
        from crawler.monitor.status_server import page_html

        self.frontier = frontier
        self.page = page_html()
        self.curve: list[list[float]] = []
        self.latest: dict[str, Any] = {"state": "starting"}
        self.registry = metrics_registry(self.snapshot)
        self.stopping = threading.Event()

    def snapshot(self) -> dict[str, Any]:
        return self.latest

    def refresh(self) -> None:
        while not self.stopping.wait(REFRESH_S):
            self.refresh_once()

    def refresh_once(self) -> None:
        import redis

        from crawler.monitor.frontier_status import run_snapshot

        try:
            self.latest = run_snapshot(self.frontier, self.curve)
        except redis.RedisError as exc:  # Redis away: the page shows the last snapshot, marked so
            self.latest = {**self.latest, "frontier_error": str(exc)}


def serve(frontier: Any, bind: str, port: int) -> int:
    from crawler.monitor.status_server import check_listen, listen

    check_listen(bind, port)
    page = RunStatusPage(frontier)
    page.refresh_once()  # the first request gets the run, not {"state": "starting"}
    httpd = listen(bind, port)
    httpd.owner = page  # type: ignore[assignment]
    threading.Thread(target=page.refresh, name="hostcrawl-run-status", daemon=True).start()
    host, bound = str(httpd.server_address[0]), httpd.server_address[1]
    Console(stderr=True).print(f"status page of run {frontier.run}: http://{host}:{bound}/", highlight=False)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        page.stopping.set()
        httpd.server_close()
    return 0
