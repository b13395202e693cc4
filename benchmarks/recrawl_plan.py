"""Does a recrawl plan pay? High-quality pages per fetch of a plan-guided recrawl against the same page budget
spread over randomly chosen hosts and over HC-ordered hosts of the same host index (issue 14).

    python -m benchmarks.recrawl_plan [--hosts 300] [--budget 600] [--seed 14] [--out /tmp/hostcrawl-recrawl]

The host index is the test web's own (crawler/testweb/hostindex.py: one seed for both), so every planned
host can be crawled for real. Three plans of the same total budget are crawled with `hostcrawl crawl --plan`
over sockets (adaptive policy, the plan's priors): `recrawl plan`'s, the same number of hosts drawn at random
from the index's captured hosts, and the most central hosts (hcrank); budgets are split evenly in the two
baselines. Every fetched page is graded with the test web's truth.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

from analytics.plan_config import PlanConfig
from analytics.recrawl_plan import PLAN_COLUMNS, build_plan
from analytics.study_inputs import Inputs
from crawler.testweb import SiteModel, TestWebConfig, TestWebProcess
from crawler.testweb.hostindex import write_host_index


def _baseline(index_dir: Path, crawl: str, hosts: int, budget: int, order: str, seed: int) -> pl.DataFrame:
    """`hosts` captured hosts of the index (random or by hcrank), the budget split evenly."""
    index = pl.read_parquet(index_dir / "host_index" / f"crawl={crawl}" / "*.parquet")
    notes = pl.read_parquet(index_dir / "annotations" / f"crawl={crawl}" / "*.parquet")
    rows = index.filter(pl.col("nutch_fetched") > 0).join(notes, on="surt_host_name")
    if order == "random":
        rows = rows.sample(n=min(hosts, rows.height), seed=seed, shuffle=True)
    else:
        rows = rows.sort("hcrank", descending=True).head(hosts)
    share = np.full(rows.height, budget // rows.height)
    share[: budget - int(share.sum())] += 1
    host = pl.col("url_host_registered_domain")
    frame = rows.select(
        host=host,
        seed_url=pl.lit("http://") + host + pl.lit("/"),
        reason=pl.lit(order),
        missing_hq=(pl.col("nutch_unfetched") * pl.col("gneissweb_education")).cast(pl.Float64),
        budget=pl.Series(share, dtype=pl.Int64),
        density=pl.col("gneissweb_education"),
        hc_percentile=pl.col("hcrank").rank() / pl.len(),
        pr_percentile=pl.col("prank").rank() / pl.len(),
        tld=pl.col("url_host_tld"),
        language=pl.when(pl.col("fetch_200_lote_pct") >= 50).then(pl.lit("non-en")).otherwise(pl.lit("en")),
    ).with_columns(expected_hq=pl.col("budget") * pl.col("density"))
    return frame.select([c.name for c in PLAN_COLUMNS])


def _crawl(plan_path: Path, web_cfg: TestWebConfig, out: Path) -> tuple[int, int, float]:
    import subprocess

    run = out / f"run-{plan_path.stem}"
    shutil.rmtree(run, ignore_errors=True)
    with TestWebProcess(web_cfg, out / f"web-{plan_path.stem}") as web:
        started = time.perf_counter()
        process = subprocess.run(
            [sys.executable, "-m", "crawler.cli", "crawl", "--plan", str(plan_path), "--out", str(run),
             "--proxy", web.proxy_url, "--allow-private", "--min-delay", "0.05", "--timeout", "5",
             "--no-progress", "--truth", str(web.out_dir / "hosts.parquet")],
            capture_output=True, text=True,
        )  # fmt: skip
    if process.returncode != 0:
        raise SystemExit(f"crawl of {plan_path} failed: {process.stderr[-2000:]}")
    table = pl.read_parquet(run / "plan_hosts.parquet")
    return int(table["fetched"].sum()), int(table["true_hq_got"].sum()), time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hosts", type=int, default=300, help="test web hosts (300)")
    parser.add_argument("--budget", type=int, default=600, help="pages in all, per plan (600)")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--out", type=Path, default=Path("/tmp/hostcrawl-recrawl"))
    args = parser.parse_args(argv)
    web_cfg = TestWebConfig(n_hosts=args.hosts, seed=args.seed, hostile_share=0)
    args.out.mkdir(parents=True, exist_ok=True)
    files = write_host_index(SiteModel(web_cfg), args.out / "cc")
    plan = build_plan(
        Inputs(host_index=files.host_index, annotations=files.annotations),
        PlanConfig(budget=args.budget, max_tld_share=1.0, crawl=files.crawl, scheme="http"),
    ).frame
    budget = int(plan["budget"].sum())  # what the plan could give (caps); the baselines get the same
    plans = {
        "plan": plan.select([c.name for c in PLAN_COLUMNS]),
        "random": _baseline(args.out / "cc", files.crawl, plan.height, budget, "random", args.seed),
        "hc": _baseline(args.out / "cc", files.crawl, plan.height, budget, "hc", args.seed),
    }
    print(
        f"test web {args.hosts} hosts (seed {args.seed}); {plan.height} hosts per plan, {budget} pages each"
    )
    results: dict[str, float] = {}
    for name, frame in plans.items():
        path = args.out / f"{name}.parquet"
        frame.write_parquet(path)
        fetched, hq, seconds = _crawl(path, web_cfg, args.out)
        results[name] = hq / max(fetched, 1)
        print(
            f"{name:>7}: {hq:5d} high-quality of {fetched:5d} fetches = {results[name]:.3f} per fetch "
            f"({seconds:.0f} s)"
        )
    for base in ("random", "hc"):
        ratio = results["plan"] / results[base] if results[base] else float("inf")
        print(f"plan / {base}: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
