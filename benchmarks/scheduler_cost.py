"""The frontier's own cost at scale: enqueue and next_request per second, peak RSS.

    python -m benchmarks.scheduler_cost [--hosts 100000] [--urls 1000000] [--leases 200000]

Prints rates for the host-aware frontier (SQLite write-through, dedup, trap guards, policy heap) and,
as the baseline measured in the same run, for a bare dict-of-deques with a seen-set doing the same
enqueue and dequeue. Target (issue 3): RSS < 1 GB with 100,000 hosts and 1,000,000 queued URLs.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from collections import deque
from pathlib import Path

from scheduler.core import FrontierLimits, HostFrontier
from scheduler.frontier import SQLiteFrontier
from scheduler.policies import PolicyConfig, make_policy


def urls(hosts: int, total: int) -> list[tuple[str, str]]:
    per_host = max(1, total // hosts)
    return [
        (f"h{h}.example", f"http://h{h}.example/s{i % 7}/p{i}.html")
        for h in range(hosts)
        for i in range(per_host)
    ]


def baseline(pairs: list[tuple[str, str]], leases: int) -> tuple[float, float]:
    queues: dict[str, deque[str]] = {}
    seen: set[int] = set()
    start = time.perf_counter()
    for host, url in pairs:
        key = hash(url)
        if key in seen:
            continue
        seen.add(key)
        queues.setdefault(host, deque()).append(url)
    enqueue = len(pairs) / (time.perf_counter() - start)
    order = deque(queues)
    start = time.perf_counter()
    for _ in range(leases):
        host = order.popleft()
        queues[host].popleft()
        order.append(host)
    return enqueue, leases / (time.perf_counter() - start)


def frontier_rates(pairs: list[tuple[str, str]], leases: int, policy: str, db: Path) -> tuple[float, float]:
    clock = [0.0]
    frontier = HostFrontier(
        SQLiteFrontier(db),
        make_policy(policy, PolicyConfig()),
        FrontierLimits(budget=10**9),
        lambda: clock[0],
    )
    start = time.perf_counter()
    for n, (_, url) in enumerate(pairs, start=1):
        frontier.add(url, 1)
        if n % 100 == 0:
            frontier.commit()  # the crawl commits once per page, with that page's ~100 links
    frontier.commit()
    enqueue = len(pairs) / (time.perf_counter() - start)
    start = time.perf_counter()
    for _ in range(leases):
        lease = frontier.next()
        if lease is None:
            clock[0] += 1.0
            continue
        frontier.fetch_ended(lease, True, clock[0] + 1.0)
        frontier.observe(lease, 0.7)
    return enqueue, leases / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hosts", type=int, default=100_000)
    parser.add_argument("--urls", type=int, default=1_000_000)
    parser.add_argument("--leases", type=int, default=200_000)
    parser.add_argument("--policy", default="adaptive")
    args = parser.parse_args()
    pairs = urls(args.hosts, args.urls)
    base_enqueue, base_next = baseline(pairs, args.leases)
    with tempfile.TemporaryDirectory() as tmp:
        enqueue, next_rate = frontier_rates(pairs, args.leases, args.policy, Path(tmp) / "f.sqlite3")
        db_mb = (Path(tmp) / "f.sqlite3").stat().st_size / 2**20
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{args.hosts} hosts, {len(pairs)} URLs, {args.leases} leases, policy {args.policy}")
    print(
        f"enqueue: {enqueue:10.0f}/s   baseline {base_enqueue:10.0f}/s   ratio {enqueue / base_enqueue:.3f}"
    )
    print(
        f"next+end+observe: {next_rate:8.0f}/s   baseline {base_next:10.0f}/s   "
        f"ratio {next_rate / base_next:.4f}"
    )
    print(f"peak RSS {rss_mb:.0f} MB (target < 1024 MB, URL list included); frontier file {db_mb:.0f} MB")


if __name__ == "__main__":
    main()
