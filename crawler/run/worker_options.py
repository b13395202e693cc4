"""The distributed mode's flags on `hostcrawl crawl`, apart from the worker (Scrapy, redis): the command
line builds them without loading either."""

from __future__ import annotations

import argparse

DEFAULT_LEASE_S = 60.0  # a dead worker's leases return to the queue this long after its last renewal


def add_worker_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "distributed mode",
        "many workers, on one machine or many, crawl one run whose frontier is in Redis; each writes "
        "RUN/workers/ID/ and the last to finish merges them into RUN (or: hostcrawl frontier merge RUN)",
    )
    g.add_argument("--frontier", metavar="URL", help="redis://HOST:PORT/DB: be a worker of a shared run")
    g.add_argument("--run", dest="run_name", metavar="NAME", help="the run's name in that Redis (required)")
    g.add_argument("--worker-id", metavar="ID", help="this worker's name (default HOSTNAME-PID-RANDOM)")
    g.add_argument(
        "--lease-seconds",
        type=float,
        default=DEFAULT_LEASE_S,
        help=f"a dead worker's requests go to the others this long after it stopped ({DEFAULT_LEASE_S:.0f})",
    )
