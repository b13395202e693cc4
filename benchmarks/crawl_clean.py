"""Fetch rate of a test-web crawl with inline cleaning against the same crawl with cleaning switched off.

Usage: python -m benchmarks.crawl_clean [--hosts 500] [--pages 2500] [--cleaner blocks_v1] [--workers 0]

Two pairs of crawls of one local test web (issue 5's target): default politeness (the crawl's own 1 s
floor per host), where cleaning must keep at least 0.9x the fetch rate of `--cleaner none`; and no delay,
where the rates show the machine's ceiling and the printed shares say what limits it.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from cleaner.registry import NO_CLEANER
from crawler.bench.demo import demo_config
from crawler.run.crawl_config import CrawlConfig, PolitenessConfig
from crawler.run.crawl_run import run_crawl
from crawler.testweb import TestWebConfig, TestWebProcess

TARGET_RATIO = 0.9  # issue 5: inline cleaning keeps at least this share of the uncleaned fetch rate
# bfs ignores scores, so both crawls of a pair fetch in the same order whether or not pages are scored.
DEFAULT_POLICY = "bfs"
# A share above this marks the part that limits the crawl.
SATURATED = 0.5
BUSY = 0.8
CPU_FILE = "bench-cpu.json"


@dataclass(slots=True)
class Crawl:
    label: str
    cleaner: str
    wall: float
    stats: dict[str, Any]
    fetched: int
    rate: float  # responses per second from the first to the last response (no start-up, no shutdown)
    workers_cpu: float  # CPU seconds of the cleaning workers, model loading included
    machine_busy: float  # share of all cores busy during the crawl (every process on the machine)

    @property
    def crawl_cpu(self) -> float:
        return float(self.stats.get("clean/crawl_process_cpu_seconds", 0.0))

    def share(self, key: str) -> float:
        wall = float(self.stats.get("clean/crawl_process_wall_seconds", 0.0)) or self.wall
        return float(self.stats.get(key, 0.0)) / wall if wall else 0.0


def _cpu_jiffies() -> tuple[int, int] | None:
    """(busy, total) jiffies over all cores since boot; None off Linux."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


def _child(config: CrawlConfig, run_dir: Path) -> None:
    run_crawl(config, run_dir, progress=False)
    workers = resource.getrusage(resource.RUSAGE_CHILDREN)  # the pool's processes, reaped at close
    (run_dir / CPU_FILE).write_text(json.dumps({"workers": workers.ru_utime + workers.ru_stime}))


def fetch_rate(run_dir: Path) -> tuple[int, float]:
    """Responses and responses per second between the first and the last one."""
    pages = pl.read_parquet(run_dir / "pages.parquet").filter(pl.col("status").is_not_null())
    if pages.height < 2:
        return pages.height, 0.0
    times = pages["fetched_at"].dt.epoch("us")
    span = (int(times.max()) - int(times.min())) / 1e6  # type: ignore[arg-type]
    return pages.height, (pages.height - 1) / span if span else 0.0


def crawl(config: CrawlConfig, run_dir: Path, label: str) -> Crawl:
    """One crawl in a fresh process (Scrapy's reactor runs once per process); its stats and CPU."""
    before_jiffies = _cpu_jiffies()
    started = time.monotonic()
    process = multiprocessing.get_context("spawn").Process(target=_child, args=(config, run_dir))
    process.start()
    process.join()
    wall = time.monotonic() - started
    if process.exitcode != 0:
        log = run_dir / "crawl.log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise RuntimeError(f"{label} crawl exited with {process.exitcode}:\n{tail}")
    after_jiffies = _cpu_jiffies()
    busy = 0.0
    if before_jiffies and after_jiffies and after_jiffies[1] > before_jiffies[1]:
        busy = (after_jiffies[0] - before_jiffies[0]) / (after_jiffies[1] - before_jiffies[1])

    stats = json.loads((run_dir / "stats.json").read_text())
    workers = json.loads((run_dir / CPU_FILE).read_text())["workers"]
    fetched, rate = fetch_rate(run_dir)
    return Crawl(label, config.cleaning.cleaner, wall, stats, fetched, rate, workers, busy)


def bottleneck(c: Crawl, cores: int) -> str:
    """The part that limits the crawl's fetch rate, read from the crawl's own time shares."""
    pool = c.share("clean/pool_saturated_seconds")
    waited = c.share("clean/backpressure_seconds")
    reactor = c.share("clean/crawl_process_cpu_seconds")
    if c.cleaner != NO_CLEANER and (pool > SATURATED or waited > SATURATED):
        busy = float(c.stats.get("clean/worker_seconds", 0.0))
        on_cpu = c.workers_cpu / busy if busy else 1.0
        starved = f"; workers on a CPU only {on_cpu:.0%} of their busy time" if on_cpu < SATURATED else ""
        return (
            f"the cleaning pool: all workers busy {pool:.0%} of the crawl, fetching held back {waited:.0%}"
            f"{starved}"
        )
    if reactor > BUSY:
        return f"the crawling process (reactor, parsing, links, writing): {reactor:.0%} of one core"
    if c.machine_busy > BUSY:
        return f"the machine: {c.machine_busy:.0%} of {cores} cores busy (crawler, workers, test web server)"
    return (
        f"neither cleaning nor CPU (pool idle {c.share('clean/pool_idle_seconds'):.0%}, crawl process "
        f"{reactor:.0%} of a core): fetches wait on per-host delays, Crawl-delay and slow hosts"
    )


def print_runs(title: str, runs: list[Crawl], cleaner: str, target: float | None, cores: int) -> None:
    """Every crawl's row, the ratio of the median fetch rates, the cleaning stats and the bottleneck."""
    print(f"\n{title}")
    print(f"{'cleaner':<12}{'fetched':>8}{'wall s':>8}{'pages/s':>9}{'crawl CPU':>11}", end="")
    print(f"{'workers CPU':>13}{'cores busy':>12}")
    for c in runs:
        wall = float(c.stats.get("clean/crawl_process_wall_seconds", 0.0)) or c.wall
        print(
            f"{c.cleaner:<12}{c.fetched:>8}{wall:>8.1f}{c.rate:>9.1f}{c.crawl_cpu / wall:>10.0%} "
            f"{c.workers_cpu / wall:>11.0%}  {c.machine_busy:>10.0%}"
        )
    base = statistics.median(c.rate for c in runs if c.cleaner == NO_CLEANER)
    cleaned = [c for c in runs if c.cleaner == cleaner]
    rate = statistics.median(c.rate for c in cleaned)
    ratio = rate / base if base else 0.0
    verdict = (
        "" if target is None else f"  (target >= {target:.2f}: {'met' if ratio >= target else 'NOT met'})"
    )
    print(f"median pages/s: {base:.1f} without cleaning, {rate:.1f} with {cleaner}: {ratio:.2f}x{verdict}")
    for c in cleaned:
        clean_stats = {k: v for k, v in sorted(c.stats.items()) if k.startswith("clean/")}
        print(
            "clean/* stats: " + ", ".join(f"{k.removeprefix('clean/')}={v}" for k, v in clean_stats.items())
        )
    for c in runs:
        print(f"bottleneck, {c.cleaner}: {bottleneck(c, cores)}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hosts", type=int, default=500, help="test web hosts (500)")
    parser.add_argument("--pages", type=int, default=2500, help="page budget of each crawl (2500)")
    parser.add_argument("--cleaner", default="blocks_v1", help="the inline cleaner measured (blocks_v1)")
    parser.add_argument("--workers", type=int, default=0, help="cleaning processes, 0 = one per core")
    parser.add_argument(
        "--policy", default=DEFAULT_POLICY, help=f"crawl policy of every run ({DEFAULT_POLICY})"
    )
    parser.add_argument("--repeat", type=int, default=1, help="crawl pairs per setting, interleaved (1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-polite", action="store_true", help="only the no-delay crawls")
    parser.add_argument("--out", type=Path, help="working directory (default: a temporary one, removed)")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="hostcrawl-crawl-clean-"))
    out.mkdir(parents=True, exist_ok=True)
    cores = os.cpu_count() or 1
    modes = [
        ("default politeness", PolitenessConfig().min_delay, TARGET_RATIO),
        ("no politeness delay", 0.0, None),
    ]
    try:
        with TestWebProcess(TestWebConfig(n_hosts=args.hosts, seed=args.seed), out / "testweb") as web:
            truth = out / "testweb" / "hosts.parquet"
            print(
                f"test web: {args.hosts} hosts; {args.pages} pages per crawl; policy {args.policy}; "
                f"{args.workers or cores} cleaning workers on {cores} cores; load average "
                + " ".join(f"{v:.2f}" for v in os.getloadavg())
            )
            for title, delay, target in modes[1:] if args.skip_polite else modes:
                runs = []
                for i in range(args.repeat):
                    for cleaner in (NO_CLEANER, args.cleaner):
                        seeds = list(web.seed_urls)
                        config = demo_config(seeds, web.proxy_url, args.pages, delay, args.policy, truth)
                        config.cleaning.cleaner = cleaner
                        config.cleaning.workers = args.workers
                        label = f"{cleaner}-delay{delay:g}-{i}"
                        runs.append(crawl(config, out / f"run-{label}", label))
                print_runs(f"{title} (min delay {delay:g} s per host)", runs, args.cleaner, target, cores)
    finally:
        if args.out is None:
            shutil.rmtree(out, ignore_errors=True)
    print("\nload average after: " + " ".join(f"{v:.2f}" for v in os.getloadavg()))


if __name__ == "__main__":
    main()
