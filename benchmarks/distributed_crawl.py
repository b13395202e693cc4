"""Workers on one Redis against one worker, same test web and budget, measured in the same run.

    python -m benchmarks.distributed_crawl rate  [--workers 2] [--hosts 300] [--budget 3000]       # ~3 min
    python -m benchmarks.distributed_crawl yield [--workers 3] [--hosts 200] [--budget-share 0.1]  # ~8 min
    python -m benchmarks.distributed_crawl yield --seeds 3-7 --no-one-process  # ~6 min a seed, their mean
    python -m benchmarks.distributed_crawl yield --workers 2 --shards 3 --no-one-process  # + a sharded run

`rate`: pages fetched per second of wall time (first worker started to last worker done, merge included),
with `--cleaner none` and bfs, so the frontier and the fetching are what is measured. `yield`: adaptive, every
fetched page graded by the test web's ground truth (as `hostcrawl bench yield` does): high-quality pages per
fetch of N workers sharing host estimates through Redis against one worker (target >= 0.95x). Redis runs
without AOF here (a deployment's `appendfsync everysec` costs about as little); no delay floor on loopback,
robots.txt Crawl-delay still applies. Every worker is a real `hostcrawl crawl --frontier ...` process.
`--shards K` adds the N workers on a three-node Redis Cluster with the run split into K shards
(scheduler/redis_shards.py), against the N workers on one Redis (issue 27's target: within 5%).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

from crawler.bench.yield_bench import grade
from crawler.testweb import TestWebConfig, TestWebProcess
from scheduler.redis_process import RedisClusterProcess, RedisProcess


def run_workers(
    n: int,
    web: TestWebProcess,
    server: RedisProcess | RedisClusterProcess | None,
    out: Path,
    budget: int,
    extra: list[str],
) -> float:
    """n worker processes of one run (no server: one plain one-process crawl); wall seconds until the
    last one is done (the last worker merges the run)."""
    seeds = out.parent / "seeds.txt"
    seeds.write_text("\n".join(web.seed_urls) + "\n")
    command = [
        sys.executable, "-m", "crawler.cli", "crawl", "--seeds", str(seeds), "--out", str(out),
        "--proxy", web.proxy_url, "--allow-private",
        "--min-delay", "0", "--max-pages", str(budget), "--timeout", "10", "--no-progress", *extra,
    ]  # fmt: skip
    workers: list[list[str]] = [[]]  # the one-process crawl
    if server is not None:
        workers = [["--frontier", server.url, "--run", out.name, "--worker-id", f"w{i}"] for i in range(n)]
    started = time.monotonic()
    procs = [
        subprocess.Popen([*command, *worker], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for worker in workers
    ]
    for proc in procs:
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"a worker failed:\n{err.decode(errors='replace')[-2000:]}")
    return time.monotonic() - started


def fetched(run: Path) -> int:
    return pl.read_parquet(run / "pages.parquet").filter(pl.col("status").is_not_null()).height


def seed_list(text: str) -> list[int]:
    """ "3-7" or "3,5,9" -> the seeds."""
    out: list[int] = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        out += range(int(first), int(last or first) + 1)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("kind", choices=("rate", "yield"))
    parser.add_argument("--workers", type=int, help="workers to compare with one (rate 2, yield 3)")
    parser.add_argument("--hosts", type=int, help="test web hosts (rate 300, yield 200)")
    parser.add_argument("--budget", type=int, default=3000, help="rate: pages (3000)")
    parser.add_argument("--budget-share", type=float, default=0.1, help="yield: share of all pages (0.1)")
    parser.add_argument("--seeds", type=seed_list, default=[0], help='test webs, e.g. "3-7" or "3,5" (0)')
    parser.add_argument("--concurrency", type=int, default=32, help="each worker's --concurrency (32)")
    parser.add_argument(
        "--no-one-process", action="store_true", help="skip the one-process crawl (SQLite frontier)"
    )
    parser.add_argument(
        "--wide-process",
        action="store_true",
        help="yield: also one process at N x --concurrency (as many pages in flight as the N workers), "
        "to tell what the workers' sharing costs from what their extra pages in flight cost",
    )
    parser.add_argument(
        "--shards", type=int, default=0, help="also the N workers on a 3-node Redis Cluster, run in K shards"
    )
    args = parser.parse_args(argv)
    workers = args.workers or (2 if args.kind == "rate" else 3)
    ratios = [one_seed(args, seed, workers) for seed in args.seeds]
    if len(ratios) > 1:
        what = "pages/s" if args.kind == "rate" else "high-quality pages per fetch"
        shown = ", ".join(f"{seed}: {r:.3f}x" for seed, r in zip(args.seeds, ratios, strict=True))
        print(f"mean ratio {workers} workers / 1 over {len(ratios)} seeds: {sum(ratios) / len(ratios):.3f}x "
              f"{what} ({shown})")  # fmt: skip


def one_seed(args: argparse.Namespace, seed: int, workers: int) -> float:
    """The comparison on one test web; returns the N workers' ratio to one worker."""
    hosts = args.hosts or (300 if args.kind == "rate" else 200)
    extra = ["--cleaner", "none", "--policy", "bfs"] if args.kind == "rate" else ["--policy", "adaptive"]
    extra += ["--concurrency", str(args.concurrency)]
    with tempfile.TemporaryDirectory() as tmp, RedisProcess(Path(tmp) / "redis", persist=False) as server:
        base = Path(tmp)
        with TestWebProcess(TestWebConfig(n_hosts=hosts, seed=seed), base / "web") as web:
            truth = pl.read_parquet(base / "web" / "pages.parquet")
            total = int(pl.read_parquet(base / "web" / "hosts.parquet")["n_pages"].sum())
            budget = args.budget if args.kind == "rate" else max(1, int(total * args.budget_share))
            print(
                f"seed {seed}: {hosts} hosts, {total} pages; budget {budget}; {os.cpu_count()} cores",
                flush=True,
            )
            results = {}
            if not args.no_one_process:
                # the one-process crawl (SQLite frontier): what being a worker costs, in speed and in yield
                run = base / f"{args.kind}-one-process"
                wall = run_workers(1, web, None, run, budget, extra)
                hq = grade(run, truth, budget)["hq_per_fetch"]
                rate = fetched(run) / wall
                print(
                    f"  one process: {wall:6.1f} s, {rate:6.1f} pages/s, {hq:.3f} hq/fetch (SQLite frontier)"
                )
                if args.wide_process and args.kind == "yield":
                    run = base / "yield-one-process-wide"
                    wide = [*extra[:-1], str(args.concurrency * workers)]
                    wall = run_workers(1, web, None, run, budget, wide)
                    hq_wide = grade(run, truth, budget)["hq_per_fetch"]
                    print(f"  one process at concurrency {args.concurrency * workers}: {wall:6.1f} s, "
                          f"{fetched(run) / wall:6.1f} pages/s, {hq_wide:.3f} hq/fetch "
                          f"({hq_wide / hq:.3f}x the one process)", flush=True)  # fmt: skip
            for n in (1, workers):
                run = base / f"{args.kind}-{n}"
                wall = run_workers(n, web, server, run, budget, extra)
                graded = grade(run, truth, budget)
                results[n] = (fetched(run) / wall, graded["hq_per_fetch"], wall)
                rate, hq, _ = results[n]
                print(f"  {n} worker(s): {wall:6.1f} s, {rate:6.1f} pages/s, {hq:.3f} hq/fetch", flush=True)
            if args.shards:
                with RedisClusterProcess(base / "cluster") as cluster:
                    run = base / f"{args.kind}-{workers}-sharded"
                    sharded = [*extra, "--shards", str(args.shards)]
                    wall = run_workers(workers, web, cluster, run, budget, sharded)
                    graded = grade(run, truth, budget)
                rate, hq = fetched(run) / wall, graded["hq_per_fetch"]
                plain_rate, plain_hq = results[workers][0], results[workers][1]
                print(f"  {workers} worker(s), {args.shards} shards on a 3-node cluster: {wall:6.1f} s, "
                      f"{rate:6.1f} pages/s ({rate / plain_rate:.2f}x one Redis), {hq:.3f} hq/fetch "
                      f"({hq / plain_hq:.3f}x one Redis; target >= 0.95)", flush=True)  # fmt: skip
    one, many = results[1], results[workers]
    if args.kind == "rate":
        ratio = many[0] / one[0]
        print(f"ratio {workers} workers / 1: {ratio:.2f}x pages/s", flush=True)
    else:
        ratio = many[1] / one[1]
        print(
            f"ratio {workers} workers / 1: {ratio:.3f}x high-quality pages per fetch (target >= 0.95)",
            flush=True,
        )
    return ratio


if __name__ == "__main__":
    main()
