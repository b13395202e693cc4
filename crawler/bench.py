"""`hostcrawl bench yield`: every policy crawls the same test web; high-quality pages per fetch, compared."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import polars as pl

from crawler.report import plot_yield_curves
from crawler.testweb import TestWebConfig, TestWebProcess

POLICIES = ("bfs", "uniform", "hc_depth", "sample_deepen", "adaptive", "oracle")
RATE_BASELINE = "scrapy"  # Scrapy's own scheduler: the fetch-rate reference for sample_deepen


def add_bench_parser(subparsers: argparse._SubParsersAction) -> None:
    bench = subparsers.add_parser("bench", help="benchmarks on the local test web")
    kinds = bench.add_subparsers(dest="bench", metavar="BENCH", required=True)
    p = kinds.add_parser(
        "yield",
        help="every policy on one test web: high-quality pages per fetch",
        description="Runs each policy as a real crawl of the same test web (no delay floor on "
        "loopback; robots.txt Crawl-delay still applies) with a budget of a share of all pages, and "
        "grades every fetched page with the test web's ground truth.",
    )
    p.add_argument("--hosts", type=int, default=2000, help="virtual hosts (2000, about 100k pages)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget-share", type=float, default=0.10, help="budget as share of all pages")
    p.add_argument("--policies", default=",".join(POLICIES), help="comma-separated policies")
    p.add_argument("--no-rate-baseline", action="store_true", help="skip the Scrapy scheduler run")
    p.add_argument("--out", type=Path, default=Path("runs/bench-yield"), help="working directory")
    p.add_argument("--json", type=Path, help="write {policy: {hq, fetched, hq_per_fetch}} here")
    p.set_defaults(func=cmd_bench_yield)


def crawl(policy: str, web: TestWebProcess, seeds: Path, out: Path, budget: int) -> float:
    """One policy's crawl in its own process (Scrapy's reactor runs once per process); wall seconds."""
    truth = str(web.out_dir / "hosts.parquet")
    command = [
        sys.executable, "-m", "crawler.cli", "crawl", "--seeds", str(seeds), "--out", str(out),
        "--proxy", web.proxy_url, "--allow-private", "--min-delay", "0", "--max-pages", str(budget),
        "--policy", policy, "--priors", truth, "--no-progress", "--timeout", "10",
    ]  # fmt: skip
    if policy == "oracle":
        command += ["--truth", truth]
    started = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{policy} crawl failed:\n{result.stderr[-2000:]}")
    return time.monotonic() - started


def grade(run: Path, truth_pages: pl.DataFrame, budget: int) -> dict[str, Any]:
    pages = pl.read_parquet(run / "pages.parquet").filter(pl.col("status").is_not_null())
    labelled = pages.sort("fetched_at").join(truth_pages.select("url", "high_quality"), on="url", how="left")
    hits = labelled["high_quality"].fill_null(False).cast(pl.Int64).cum_sum().to_list()
    fetched = labelled.height
    stats = json.loads((run / "stats.json").read_text())
    return {
        "hq": hits[-1] if hits else 0,
        "fetched": fetched,
        "hq_per_fetch": (hits[-1] / fetched) if fetched else 0.0,
        "pages_per_second": stats.get("hostcrawl/pages_per_second", 0.0),
        "policy": stats.get("hostcrawl/policy"),
        "hq_by_fetch": hits,
        "budget": budget,
    }


def cmd_bench_yield(args: argparse.Namespace) -> int:
    args.out.mkdir(parents=True, exist_ok=True)
    web_dir = args.out / "testweb"
    web_dir.mkdir(exist_ok=True)
    policies = [p for p in args.policies.split(",") if p]
    results: dict[str, dict[str, Any]] = {}
    with TestWebProcess(TestWebConfig(n_hosts=args.hosts, seed=args.seed), web_dir) as web:
        seeds = args.out / "seeds.txt"
        seeds.write_text("\n".join(web.seed_urls) + "\n")
        truth_pages = pl.read_parquet(web_dir / "pages.parquet")
        total = int(pl.read_parquet(web_dir / "hosts.parquet")["n_pages"].sum())
        budget = max(1, int(total * args.budget_share))
        print(f"test web: {args.hosts} hosts, {total} pages; budget {budget} fetches", flush=True)
        runs = [*policies] + ([] if args.no_rate_baseline else [RATE_BASELINE])
        for policy in runs:
            run = args.out / f"run-{policy}-{int(time.time())}"
            wall = crawl(policy, web, seeds, run, budget)
            results[policy] = grade(run, truth_pages, budget)
            r = results[policy]
            print(
                f"{policy:>14}: {r['hq']:6d} hq / {r['fetched']:6d} fetched = {r['hq_per_fetch']:.3f}"
                f"  ({r['pages_per_second']:.1f} pages/s, {wall:.0f}s)",
                flush=True,
            )
    print(format_table(results))
    plot_yield_curves({p: r["hq_by_fetch"] for p, r in results.items()}, total, args.out / "yield.png")
    print(f"plot: {args.out / 'yield.png'}")
    if args.json:
        summary = {p: {k: r[k] for k in ("hq", "fetched", "hq_per_fetch")} for p, r in results.items()}
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


def format_table(results: dict[str, dict[str, Any]]) -> str:
    def ratio(policy: str, base: str) -> str:
        if base not in results or not results[base]["hq_per_fetch"]:
            return "   -  "
        return f"{results[policy]['hq_per_fetch'] / results[base]['hq_per_fetch']:6.2f}"

    lines = ["", "policy          hq/fetch   x bfs  x uniform  x oracle  pages/s"]
    for policy, r in results.items():
        lines.append(
            f"{policy:<14} {r['hq_per_fetch']:8.3f}  {ratio(policy, 'bfs')}  {ratio(policy, 'uniform')}"
            f"     {ratio(policy, 'oracle')}  {r['pages_per_second']:7.1f}"
        )
    if "sample_deepen" in results and RATE_BASELINE in results:
        rate = results["sample_deepen"]["pages_per_second"] / max(
            1e-9, results[RATE_BASELINE]["pages_per_second"]
        )
        lines.append(f"fetch rate of sample_deepen vs Scrapy's scheduler: {rate:.2f}x")
    return "\n".join(lines)
