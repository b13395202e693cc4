"""What watching a crawl costs: pages/s with the status page polled every second against no status page.

Usage: python -m benchmarks.status_overhead [--hosts 300] [--pages 1000] [--repeat 2] [--min-delay 0]

Crawls of one local test web, run as `hostcrawl crawl` in their own processes and interleaved: without
`--status-port` (and without the progress line, so nothing gathers a snapshot at all), and with
`--status-port 0` while a client does what an open page and an eager Prometheus do: /api/status and /metrics
every second. The fetch rate is read from pages.parquet (first to last response). No politeness delay by
default: the crawl then runs at the machine's ceiling, where any cost of serving shows. It also times one
scan of a synthetic host table of 2,000 and 100,000 hosts (what the snapshot costs the reactor).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import IO, Any

from benchmarks.crawl_clean import fetch_rate
from crawler.monitor.status import scan_hosts
from crawler.testweb import TestWebConfig, TestWebProcess
from scheduler.hosts import HostRecord, HostState
from scheduler.queue_window import QueuedUrl

POLL_EVERY_S = 1.0


def poll(url: str, stop: threading.Event, counts: dict[str, int]) -> None:
    """The page once, then its API and the metrics every second, as long as the crawl runs."""
    urllib.request.urlopen(url, timeout=10).read()
    while not stop.wait(POLL_EVERY_S):
        for path in ("api/status", "metrics"):
            try:
                urllib.request.urlopen(url + path, timeout=10).read()
                counts[path] = counts.get(path, 0) + 1
            except OSError as exc:  # a timeout on a busy machine
                failed = f"failed/{type(exc).__name__}"
                counts[failed] = counts.get(failed, 0) + 1


def crawl(args: argparse.Namespace, seeds: Path, proxy: str, run_dir: Path, watched: bool) -> dict[str, Any]:
    command = [
        sys.executable, "-m", "crawler.cli", "crawl", "--seeds", str(seeds), "--out", str(run_dir),
        "--proxy", proxy, "--allow-private", "--min-delay", str(args.min_delay), "--max-pages",
        str(args.pages), "--policy", args.policy, "--timeout", "10", "--no-progress",
    ]  # fmt: skip
    if watched:
        command += ["--status-port", "0"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stop = threading.Event()
    counts: dict[str, int] = {}
    poller = None
    assert process.stderr is not None
    stream: IO[str] = process.stderr
    if watched:
        for line in stream:
            if "status page: " in line:
                url = line.split("status page: ", 1)[1].split()[0]
                poller = threading.Thread(target=poll, args=(url, stop, counts), daemon=True)
                poller.start()
                break
    rest = []
    for line in stream:
        rest.append(line)
        if line.startswith("done:"):
            stop.set()  # the crawl is over; its process exits next
    stop.set()
    if process.wait() != 0:
        raise RuntimeError(f"crawl exited with {process.returncode}: {''.join(rest)[-2000:]}")
    if poller is not None:
        poller.join()
    fetched, rate = fetch_rate(run_dir)
    return {"watched": watched, "fetched": fetched, "pages_per_second": round(rate, 2), "polls": counts}


def host_scan_ms(hosts: int, repeat: int = 5) -> float:
    """CPU milliseconds of one scan of a host table of this size (states, waiting hosts, top hosts), the
    median of `repeat` scans of one table (CPU time: on a busy machine wall time mostly measures waiting)."""
    states = list(HostState)
    table = {}
    for i in range(hosts):
        record = HostRecord(f"host-{i}.example", state=states[i % len(states)], fetched=i % 50)
        record.high, record.low = i % 7, i % 5
        record.sample_scores = [0.2, 0.9, 0.6][: i % 4]
        record.ready_at = float(i % 3)
        record.queue.append(QueuedUrl(f"http://host-{i}.example/", 0, i))
        table[record.host] = record
    frontier: Any = SimpleNamespace(hosts=table)
    gc.collect()
    times = []
    for _ in range(repeat):
        started = time.process_time()
        scan_hosts(frontier, 1.0)
        times.append((time.process_time() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hosts", type=int, default=300, help="test web hosts (300)")
    parser.add_argument("--pages", type=int, default=1000, help="page budget of each crawl (1000)")
    parser.add_argument("--repeat", type=int, default=2, help="pairs of crawls, interleaved (2)")
    parser.add_argument("--min-delay", type=float, default=0.0, help="politeness floor per host (0)")
    parser.add_argument("--policy", default="bfs", help="crawl order; bfs fetches the same pages each run")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    scans = {n: round(host_scan_ms(n), 2) for n in (2_000, 100_000)}
    print("one host-table scan: " + ", ".join(f"{n:,} hosts {ms:.1f} CPU ms" for n, ms in scans.items()))
    runs = []
    with tempfile.TemporaryDirectory(prefix="hostcrawl-status-") as tmp:
        base = Path(tmp)
        with TestWebProcess(TestWebConfig(n_hosts=args.hosts), base / "web") as web:
            seeds = base / "seeds.txt"
            seeds.write_text("\n".join(web.seed_urls) + "\n")
            print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
            for i in range(args.repeat):
                for watched in (False, True):
                    run = crawl(args, seeds, web.proxy_url, base / f"run-{i}-{int(watched)}", watched)
                    runs.append(run)
                    label = "polled every second" if watched else "no status page"
                    rate = run["pages_per_second"]
                    print(f"{label:<20} {run['fetched']:>6} pages {rate:>8.1f} pages/s  {run['polls'] or ''}")
            print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    without = statistics.median(r["pages_per_second"] for r in runs if not r["watched"])
    with_page = statistics.median(r["pages_per_second"] for r in runs if r["watched"])
    ratio = with_page / without if without else 0.0
    print(f"median pages/s: {without:.1f} without, {with_page:.1f} polled every second: {ratio:.3f}x")
    if args.json:
        figures = {"runs": runs, "ratio": ratio, "host_scan_ms": scans, "args": vars(args) | {"json": None}}
        args.json.write_text(json.dumps(figures, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
