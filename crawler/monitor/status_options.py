"""The status page's command-line options, shared by `crawl` and `demo` (light: no Scrapy here)."""

from __future__ import annotations

import argparse

from crawler.run.crawl_config import ConfigError


def add_status_options(p: argparse.ArgumentParser, default_port: int | None) -> None:
    shown = "off" if default_port is None else "a free port"
    p.add_argument(
        "--status-port",
        type=int,
        default=default_port,
        metavar="PORT",
        help=f"serve a live status page, /api/status and /metrics on PORT (0: a free port; default {shown})",
    )
    p.add_argument(
        "--status-bind",
        default="127.0.0.1",
        metavar="ADDR",
        help="address the status page listens on (default 127.0.0.1: this machine only)",
    )


def check_status_port(args: argparse.Namespace) -> None:
    from crawler.monitor.status_server import check_listen

    if args.status_port is not None and not 0 <= args.status_port <= 65535:
        raise ConfigError(f"--status-port {args.status_port}: a port is 0-65535 (0: a free port)")
    if not getattr(args, "no_status", False):
        check_listen(args.status_bind, args.status_port)
