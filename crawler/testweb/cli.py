"""`hostcrawl testweb serve` and `python -m crawler.testweb serve`: run until stopped."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from crawler.testweb.config import TestWebConfig
from crawler.testweb.server import TestWeb

DEFAULT_OUT = "runs/testweb"
DEFAULT_PORT = 8899


def add_serve_parser(subparsers: Any, name: str = "serve") -> argparse.ArgumentParser:
    """The `serve` subcommand, shared by the hostcrawl CLI and `python -m crawler.testweb`."""
    p = subparsers.add_parser(
        name,
        help="serve the local test web (many virtual hosts behind one HTTP proxy port)",
        description="Serve a generated web of virtual hosts on one port. Point a crawler at it "
        "as an HTTP proxy. Ground truth (hosts.parquet, pages.parquet) and requests.jsonl "
        "go to --out.",
    )
    p.add_argument("--hosts", type=int, default=None, help="number of virtual hosts (default 500)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default 0)")
    p.add_argument("--hostile-share", type=float, default=None, help="share of hostile hosts")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="port to listen on (0: any free)")
    p.add_argument("--bind", default="127.0.0.1", help="address to listen on")
    p.add_argument("--out", default=DEFAULT_OUT, help="folder for ground truth and request log")
    p.add_argument("--config", default=None, help="a testweb-config.json to start from")
    p.add_argument("--ready-file", default=None, help="write {port, pid} here once listening")
    p.set_defaults(func=run_serve)
    return p


def register_cli(subparsers: Any) -> None:
    """Add `testweb serve` to the hostcrawl console script."""
    testweb = subparsers.add_parser("testweb", help="the local test web for demos and tests")
    inner = testweb.add_subparsers(dest="testweb_command", required=True)
    add_serve_parser(inner)


def config_from_args(args: argparse.Namespace) -> TestWebConfig:
    base: dict[str, Any] = {}
    if args.config:
        base = json.loads(Path(args.config).read_text(encoding="utf-8"))
    for flag, name in (("hosts", "n_hosts"), ("seed", "seed"), ("hostile_share", "hostile_share")):
        if getattr(args, flag) is not None:
            base[name] = getattr(args, flag)
    return TestWebConfig.from_dict(base)


async def serve(cfg: TestWebConfig, out: Path, bind: str, port: int, ready: Path | None) -> None:
    """Serve until SIGTERM or SIGINT, then flush the log and return."""
    web = TestWeb(cfg, out)
    bound = await web.start(bind, port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if ready is not None:
        tmp = ready.with_suffix(".tmp")
        tmp.write_text(json.dumps({"port": bound, "pid": os.getpid(), "bind": bind}))
        tmp.replace(ready)
    print(
        f"testweb: {cfg.n_hosts} hosts via proxy http://{bind}:{bound}; ground truth in {out}",
        file=sys.stderr,
        flush=True,
    )
    try:
        await stop.wait()
    finally:
        await web.stop()


def run_serve(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    ready = Path(args.ready_file) if args.ready_file else None
    asyncio.run(serve(cfg, Path(args.out), args.bind, args.port, ready))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m crawler.testweb")
    add_serve_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))
