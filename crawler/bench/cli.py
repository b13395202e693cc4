"""The harness's commands as `hostcrawl` lists them: parsers only, so `--help` stays quick; each command
loads its implementation when it runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from crawler.monitor.status_options import add_status_options
from crawler.run.crawl_config import POLICY_NAMES

DEMO_MAX_PAGES = 4000  # enough for breadth-first to get past home and section pages
DEMO_HOSTS = 300


def add_demo_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "demo",
        help="start the local test web, crawl it, grade the crawl against the ground truth",
        description="A real crawl over real sockets of the built-in test web (hundreds of "
        "virtual hosts with known quality, hostile hosts included). Nothing to start by hand.",
    )
    p.add_argument("--out", type=Path, help="run directory (default runs/demo-TIME)")
    p.add_argument("--hosts", type=int, default=DEMO_HOSTS, help=f"virtual hosts ({DEMO_HOSTS})")
    p.add_argument("--max-pages", type=int, default=DEMO_MAX_PAGES, help=f"page budget ({DEMO_MAX_PAGES})")
    p.add_argument("--seed", type=int, default=0, help="test web seed (0)")
    p.add_argument(
        "--policy", choices=POLICY_NAMES, default="adaptive", help="crawl order to demonstrate (adaptive)"
    )
    p.add_argument("--no-progress", action="store_true", help="no live progress display")
    add_status_options(p, default_port=0)
    p.add_argument("--no-status", action="store_true", help="no status page")
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from crawler.bench.demo import cmd_demo as run

    return run(args)
