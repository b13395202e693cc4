"""The frontier's own cost at scale: enqueue and next_request rates and peak RSS, bounded vs all-in-memory.

    python -m benchmarks.scheduler_cost [--hosts 100000] [--urls 1000000,10000000] [--leases 200000]

For each number of URLs, two fresh processes queue the same URLs (100 links per batch and commit, as a
crawl queues and commits once per page) and then hand out, fetch and score `--leases` pages with the
adaptive policy: the default frontier (each host's queue head and a window of FrontierLimits.memory_urls
URLs in memory, the rest in SQLite) and, as the baseline measured in the same run, the same frontier
with memory_urls=0 (every queued URL and dedup fingerprint in memory: hostcrawl before issue 13). URLs
are generated as they are queued, so peak RSS is the frontier's own. Target (issue 13): 10M URLs on 100k
hosts under 1 GB, rates within 2x.
The baseline is skipped where it would not fit in the memory available (about 800 bytes per URL).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from scheduler.core import HostFrontier
from scheduler.frontier_limits import FrontierLimits
from scheduler.policies import PolicyConfig, make_policy
from scheduler.sqlite_store import SQLiteFrontier

ALL_IN_MEMORY_BYTES_PER_URL = 800  # measured: 1M URLs took ~700 MB before issue 13; with headroom


def page_url(host: int, page: int) -> str:
    """The benchmark's URL of page `page` of host `host` (seven sections, one URL shape)."""
    return f"http://h{host}.example/s{page % 7}/p{page}.html"


def urls(hosts: int, total: int) -> Iterator[str]:
    per_host = max(1, total // hosts)
    for h in range(hosts):
        for i in range(per_host):
            yield page_url(h, i)


def link_pages(links: Iterable[str], size: int = 100) -> Iterator[list[str]]:
    """`links` in pages of `size`, as a crawl queues a page's ~100 links at once (the last may be shorter)."""
    page: list[str] = []
    for url in links:
        page.append(url)
        if len(page) == size:
            yield page
            page = []
    if page:
        yield page


def measure(hosts: int, total: int, leases: int, memory_urls: int, db: Path) -> dict[str, float]:
    """One frontier's enqueue and lease rates, in this process (its peak RSS is this process's)."""
    clock = [0.0]
    frontier = HostFrontier(
        SQLiteFrontier(db),
        make_policy("adaptive", PolicyConfig()),
        FrontierLimits(budget=10**9, memory_urls=memory_urls),
        lambda: clock[0],
    )
    start = time.perf_counter()
    queued = 0
    for page in link_pages(urls(hosts, total)):  # and commits once per page
        queued += len(page)
        frontier.add_links(page, 1)
        frontier.commit()
    enqueue = queued / (time.perf_counter() - start)
    next_rate = hand_out(frontier, leases, clock)
    frontier.store.close()
    return {
        "urls": queued,
        "enqueue": enqueue,
        "next": next_rate,
        "rss_mb": peak_rss_mb(),
        "in_memory": frontier.windows.in_memory,
        "paged_in": frontier.windows.paged_in,
        "db_mb": db.stat().st_size / 2**20,
    }


def hand_out(frontier: HostFrontier, leases: int, clock: list[float]) -> float:
    """Leases per second over `leases` rounds of next, fetch_ended and observe (a host rests 1 s on the
    frontier's clock after each fetch; the clock moves on when no host is ready)."""
    start = time.perf_counter()
    for _ in range(leases):
        lease = frontier.next()
        if lease is None:
            clock[0] += 1.0
            continue
        frontier.fetch_ended(lease, True, clock[0] + 1.0)
        frontier.observe(lease, 0.7)
    return leases / (time.perf_counter() - start)


def peak_rss_mb() -> float:
    """Peak resident set of this process in MiB: VmHWM, which starts again at exec. (ru_maxrss does not:
    a measuring child reported its parent's peak, the 100M prefill's 2 GB page cache, as the frontier's.)"""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def available_mb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return float("inf")


def run_one(hosts: int, total: int, leases: int, memory_urls: int) -> dict[str, float]:
    """`measure` in a fresh process, so that its peak RSS is its own."""
    command = [sys.executable, "-m", "benchmarks.scheduler_cost", "--measure", str(memory_urls)]
    command += ["--hosts", str(hosts), "--urls", str(total), "--leases", str(leases)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hosts", type=int, default=100_000)
    parser.add_argument("--urls", default="1000000", help="comma-separated sizes, e.g. 1000000,10000000")
    parser.add_argument("--leases", type=int, default=200_000)
    parser.add_argument("--memory-urls", type=int, default=FrontierLimits().memory_urls)
    parser.add_argument(
        "--no-baseline", action="store_true", help="the default frontier only (1M hosts take long)"
    )
    parser.add_argument("--measure", type=int, help=argparse.SUPPRESS)  # internal: one run, memory_urls
    args = parser.parse_args()
    if args.measure is not None:
        with tempfile.TemporaryDirectory() as tmp:
            result = measure(args.hosts, int(args.urls), args.leases, args.measure, Path(tmp) / "f.sqlite3")
        print(json.dumps(result))
        return
    print(f"{args.hosts} hosts, {args.leases} leases, policy adaptive; old = all in memory (memory_urls=0)")
    for total in (int(size) for size in args.urls.split(",")):
        new = run_one(args.hosts, total, args.leases, args.memory_urls)
        print(
            f"{new['urls']:>10,} URLs  new: enqueue {new['enqueue']:7.0f}/s  next+end+observe "
            f"{new['next']:6.0f}/s  peak RSS {new['rss_mb']:5.0f} MB  in memory {new['in_memory']:,} URLs  "
            f"paged in {new['paged_in']:,}  frontier file {new['db_mb']:.0f} MB"
        )
        need = total * ALL_IN_MEMORY_BYTES_PER_URL / 2**20 + 1024
        if args.no_baseline:
            continue
        if need > available_mb():
            print(f"{'':>16}old: skipped, needs ~{need:.0f} MB and {available_mb():.0f} MB are available")
            continue
        old = run_one(args.hosts, total, args.leases, 0)
        print(
            f"{'':>16}old: enqueue {old['enqueue']:7.0f}/s  next+end+observe {old['next']:6.0f}/s  "
            f"peak RSS {old['rss_mb']:5.0f} MB"
        )
        print(
            f"{'':>16}new/old: enqueue {new['enqueue'] / old['enqueue']:.2f}  "
            f"next {new['next'] / old['next']:.2f}  peak RSS {new['rss_mb'] / old['rss_mb']:.2f}"
        )


if __name__ == "__main__":
    main()
