"""`hostcrawl testweb serve` and `python -m crawler.testweb serve`: run until stopped."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from crawler.testweb.config import TestWebConfig

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
    p.add_argument("--hostile-share", type=float, default=None, help="share of hostile hosts (default 0.05)")
    p.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="port to listen on (%(default)s; 0: any free)"
    )
    p.add_argument("--bind", default="127.0.0.1", help="address to listen on (%(default)s)")
    p.add_argument("--out", default=DEFAULT_OUT, help="folder for ground truth and request log (%(default)s)")
    p.add_argument("--config", default=None, help="a testweb-config.json to start from")
    p.add_argument("--ready-file", default=None, help="write {port, pid} here once listening")
    p.set_defaults(func=run_serve)
    return p


def register_cli(subparsers: Any) -> None:
    """Add `testweb serve` to the hostcrawl console script."""
    testweb = subparsers.add_parser("testweb", help="the local test web for demos and tests")
    inner = testweb.add_subparsers(dest="testweb_command", required=True)
    add_serve_parser(inner)


class ServeError(ValueError):
    """A flag or file `testweb serve` cannot use; the message names it."""


def config_from_args(args: argparse.Namespace) -> TestWebConfig:
    if args.hosts is not None and args.hosts < 1:
        raise ServeError(f"--hosts {args.hosts}: a test web needs at least 1 host")
    base: dict[str, Any] = {}
    if args.config:
        try:
            base = json.loads(Path(args.config).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ServeError(f"--config {args.config}: cannot read ({exc.strerror})") from None
        except json.JSONDecodeError as exc:
            raise ServeError(f"{args.config}:{exc.lineno}: invalid JSON ({exc.msg})") from None
        if not isinstance(base, dict):
            raise ServeError(f"{args.config}: expected a JSON object (a testweb-config.json)")
    for flag, name in (("hosts", "n_hosts"), ("seed", "seed"), ("hostile_share", "hostile_share")):
        if getattr(args, flag) is not None:
            base[name] = getattr(args, flag)
    try:
        return TestWebConfig.from_dict(base)
    except (TypeError, ValueError) as exc:
        raise ServeError(f"{args.config or 'options'}: {exc}") from None


def check_port(bind: str, port: int) -> None:
    """Fail before writing the ground truth when the port is taken."""
    if port == 0:
        return
    try:
        with socket.socket(socket.AF_INET6 if ":" in bind else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((bind, port))
    except OSError as exc:
        raise ServeError(f"--port {port}: cannot listen on {bind}:{port} ({exc.strerror})") from None


def make_out_dir(out: Path) -> bool:
    """Create --out; True when this call created it (so a failed start can take it away again)."""
    if out.exists() and not out.is_dir():
        raise ServeError(f"--out {out}: exists and is not a folder")
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ServeError(f"--out {out}: cannot create ({exc.strerror})") from None
    return created


async def serve(cfg: TestWebConfig, out: Path, bind: str, port: int, ready: Path | None) -> None:
    """Serve until SIGTERM or SIGINT, then flush the log and return."""
    from crawler.testweb.server import TestWeb

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
    out = Path(args.out)
    try:
        cfg = config_from_args(args)
        check_port(args.bind, args.port)
        created = make_out_dir(out)
    except ServeError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 2
    ready = Path(args.ready_file) if args.ready_file else None
    try:
        asyncio.run(serve(cfg, out, args.bind, args.port, ready))
    except OSError as exc:  # the port was taken between the check and the start
        if created:
            shutil.rmtree(out, ignore_errors=True)
        print(f"error: --port {args.port}: cannot listen on {args.bind} ({exc.strerror})", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m crawler.testweb")
    add_serve_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))
