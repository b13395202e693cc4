"""`hostcrawl bench yield`: every policy crawls the same test web; high-quality pages per fetch, compared."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crawler.bench.family import FAMILIES, FAMILY_POLICIES, cmd_bench_family
from scheduler.policies import TRUTH_POLICIES

if TYPE_CHECKING:
    import polars as pl

    from crawler.testweb import TestWebConfig, TestWebProcess


POLICIES = ("bfs", "uniform", "hc_depth", "sample_deepen", "adaptive", "sampled_oracle", "oracle")
RATE_BASELINE = "scrapy"  # Scrapy's own scheduler: the fetch-rate reference for sample_deepen
# The curve replays the frontier offline (bench/replay.py): one live crawl per budget would take hours.
CURVE_SHARES = (0.01, 0.02, 0.05, 0.1, 0.2, 0.35, 0.5)
CURVE_HOSTS = 500
LIVE_HOSTS = 2000


def _whole(value: str, of: str = "") -> int:
    """`value` as a whole number (argparse turns the error into exit code 2 and one line)."""
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number{of}") from None


def _pages(value: str) -> int:
    """A count of pages, 0 or more."""
    pages = _whole(value, " of pages")
    if pages < 0:
        raise argparse.ArgumentTypeError(f"{value} pages: a lag is 0 or more pages")
    return pages


def _positive(value: str) -> int:
    """A whole number of 1 or more."""
    number = _whole(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value}: must be 1 or more")
    return number


def _number(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value}: not a number") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"{value}: not a finite number")
    return number


def _seconds(value: str) -> float:
    """A duration in seconds, 0 or more."""
    seconds = _number(value)
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"{value}: seconds are 0 or more")
    return seconds


def _share(value: str) -> float:
    """A share within [0, 1]."""
    share = _number(value)
    if not 0.0 <= share <= 1.0:
        raise argparse.ArgumentTypeError(f"{value}: a share lies within [0, 1]")
    return share


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
    p.add_argument(
        "--hosts",
        type=int,
        default=None,
        help="virtual hosts (2000, about 100k pages; with --webs 200 per web)",
    )
    p.add_argument("--seed", type=int, default=0, help="test web seed (%(default)s)")
    p.add_argument(
        "--seeds",
        type=_positive,
        default=1,
        metavar="N",
        help="with --webs: replay seeds SEED to SEED+N-1 and print each web's mean over them, with how "
        "many seeds each policy fell below sample_deepen on (one seed moves a web's ratios by tens of "
        "percent; default %(default)s)",
    )
    p.add_argument(
        "--jobs",
        type=_positive,
        default=None,
        metavar="J",
        help="with --webs: replays run at once, one (seed, web, policy) each in its own process (default: "
        "one per core)",
    )
    p.add_argument(
        "--budget-share", type=float, default=0.10, help="budget as share of all pages (%(default)s)"
    )
    p.add_argument(
        "--policies",
        default=None,
        help=f"comma-separated policies (all: {','.join(POLICIES)}; with --webs {','.join(FAMILY_POLICIES)})",
    )
    p.add_argument(
        "--webs",
        choices=sorted(FAMILIES),
        help="replay every policy on a family of graded webs (ICC, base rate, host-size tail, scorer noise) "
        "and print one table of hq/fetch and ratios to bfs, sample_deepen, sampled_oracle and oracle, "
        "then one of the simulated clock: the ceiling, hq/hour until the last fetch is handed out, idle "
        "slots, the last 20%% pace and the drain (the wait for the last fetches and scores)",
    )
    p.add_argument(
        "--graded",
        action="store_true",
        help="crawl the graded test web (graded_config) and replay it too: live and replay side by side",
    )
    p.add_argument(
        "--truth-scores",
        action="store_true",
        help="with --webs: the replay scores pages by their truth, not as the cleaner and scorer do",
    )
    p.add_argument(
        "--score-lag",
        type=_pages,
        default=None,
        help="with --webs: pages fetched before a page's score arrives (default: the replay's 40, as "
        "measured on a quiet machine; 160 is a CPU-starved cleaning pool)",
    )
    p.add_argument(
        "--min-delay",
        type=_seconds,
        default=0.0,
        help="with --webs: the simulated crawl's floor between two requests to one host (crawl --min-delay; "
        "default 0 as the live loopback crawls, 1 is a crawl of the Internet)",
    )
    p.add_argument(
        "--latency",
        type=_seconds,
        default=None,
        help="with --webs: a page's mean answer time on the simulated clock (default 0.32 s: 32 requests "
        "in flight fetch 100 pages/s)",
    )
    p.add_argument(
        "--keep-busy",
        type=_share,
        default=None,
        help="with --webs: the replayed crawls' --keep-busy (see crawl --help; default 0.5)",
    )
    p.add_argument("--no-rate-baseline", action="store_true", help="skip the Scrapy scheduler run")
    p.add_argument(
        "--starve-cleaning",
        action="store_true",
        help="run the live crawls beside one CPU-bound process per core, as on a machine busy with other "
        "work: the cleaning pool (at a lower priority) falls behind and scores arrive late",
    )
    p.add_argument(
        "--max-unscored", type=int, default=None, help="each live crawl's --max-unscored (see crawl --help)"
    )
    p.add_argument(
        "--concurrency", type=int, default=32, help="requests in flight per crawl and per curve replay (32)"
    )
    p.add_argument(
        "--out", type=Path, default=Path("runs/bench-yield"), help="working directory (%(default)s)"
    )
    p.add_argument("--json", type=Path, help="write {policy: {hq, fetched, hq_per_fetch}} here")
    p.add_argument(
        "--curve-shares",
        default=",".join(str(s) for s in CURVE_SHARES),
        help="budgets (shares of all pages) for the yield-against-budget curve; empty: no curve "
        "(default %(default)s)",
    )
    p.add_argument(
        "--curve-hosts",
        type=int,
        default=CURVE_HOSTS,
        help=f"hosts of the web the curve is replayed on ({CURVE_HOSTS}; ~2 min per policy)",
    )
    p.set_defaults(func=cmd_bench_yield)


@contextlib.contextmanager
def cpu_burners(count: int) -> Iterator[None]:
    """`count` processes spinning at normal priority for the duration (none for 0)."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


def crawl(
    policy: str,
    web: TestWebProcess,
    seeds: Path,
    out: Path,
    budget: int,
    concurrency: int,
    extra: tuple[str, ...] = (),
) -> float:
    """One policy's crawl in its own process (Scrapy's reactor runs once per process); wall seconds."""
    truth = str(web.out_dir / "hosts.parquet")
    command = [
        sys.executable, "-m", "crawler.cli", "crawl", "--seeds", str(seeds), "--out", str(out),
        "--proxy", web.proxy_url, "--allow-private", "--min-delay", "0", "--max-pages", str(budget),
        "--policy", policy, "--priors", truth, "--no-progress", "--timeout", "10",
        "--concurrency", str(concurrency), *extra,
    ]  # fmt: skip
    if policy in TRUTH_POLICIES:
        command += ["--truth", truth]
    started = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{policy} crawl failed:\n{result.stderr[-2000:]}")
    return time.monotonic() - started


def grade(run: Path, truth_pages: pl.DataFrame, budget: int) -> dict[str, Any]:
    import polars as pl

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
        "score_lag": (
            stats.get("scheduler/score_lag_pages_mean", 0.0),
            stats.get("scheduler/score_lag_pages_max", 0),
        ),
        "policy": stats.get("hostcrawl/policy"),
        "hq_by_fetch": hits,
        "budget": budget,
    }


def cmd_bench_yield(args: argparse.Namespace) -> int:
    if args.webs:
        return cmd_bench_family(args)
    import polars as pl

    from crawler.run.run_report import plot_yield_against_budget, plot_yield_curves
    from crawler.testweb import TestWebConfig, TestWebProcess
    from crawler.testweb.config import graded_config

    args.out.mkdir(parents=True, exist_ok=True)
    web_dir = args.out / "testweb"
    web_dir.mkdir(exist_ok=True)
    policies = [p for p in (args.policies or ",".join(POLICIES)).split(",") if p]
    args.hosts = args.hosts or LIVE_HOSTS
    results: dict[str, dict[str, Any]] = {}
    web_config = (graded_config if args.graded else TestWebConfig)(n_hosts=args.hosts, seed=args.seed)
    with TestWebProcess(web_config, web_dir) as web:
        seeds = args.out / "seeds.txt"
        seeds.write_text("\n".join(web.seed_urls) + "\n")
        truth_pages = pl.read_parquet(web_dir / "pages.parquet")
        total = int(pl.read_parquet(web_dir / "hosts.parquet")["n_pages"].sum())
        budget = max(1, int(total * args.budget_share))
        print(f"test web: {args.hosts} hosts, {total} pages; budget {budget} fetches", flush=True)
        runs = [*policies] + ([] if args.no_rate_baseline else [RATE_BASELINE])
        extra = () if args.max_unscored is None else ("--max-unscored", str(args.max_unscored))
        for policy in runs:
            run = args.out / f"run-{policy}-{int(time.time())}"
            with cpu_burners((os.cpu_count() or 1) if args.starve_cleaning else 0):
                wall = crawl(policy, web, seeds, run, budget, args.concurrency, extra)
            results[policy] = grade(run, truth_pages, budget)
            r = results[policy]
            lag_mean, lag_max = r["score_lag"]
            print(
                f"{policy:>14}: {r['hq']:6d} hq / {r['fetched']:6d} fetched = {r['hq_per_fetch']:.3f}"
                f"  ({r['pages_per_second']:.1f} pages/s, {wall:.0f}s; scores {lag_mean:.0f} pages late,"
                f" at most {lag_max})",
                flush=True,
            )
    print(format_table(results))
    if args.graded:
        print(live_against_replay(web_config, results, args.budget_share, args.concurrency))
    plot_yield_curves({p: r["hq_by_fetch"] for p, r in results.items()}, total, args.out / "yield.png")
    print(f"plot: {args.out / 'yield.png'}")
    shares = [float(s) for s in args.curve_shares.split(",") if s]
    if shares:
        curve = yield_curve(policies, shares, args.curve_hosts, args.seed, args.concurrency)
        (args.out / "yield_curve.json").write_text(json.dumps(curve, indent=2) + "\n")
        plot_yield_against_budget(curve, args.out / "yield_curve.png")
        print(f"curve: {args.out / 'yield_curve.png'} ({args.out / 'yield_curve.json'})")
    if args.json:
        summary = {p: {k: r[k] for k in ("hq", "fetched", "hq_per_fetch")} for p, r in results.items()}
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


def live_against_replay(
    cfg: TestWebConfig, live: dict[str, dict[str, Any]], budget_share: float, concurrency: int
) -> str:
    """Each policy's live hq/fetch beside its replay on the same web with pages scored as the crawl does."""
    from crawler.bench.replay import replay
    from crawler.bench.replay_scores import ScoreSampler
    from crawler.testweb.model import SiteModel

    model = SiteModel(cfg)
    sampler = ScoreSampler.measure(model)
    lines = [
        "",
        "live crawl vs replay (scored pages) on the same graded web: hq/fetch",
        "policy            live  replay",
    ]
    for policy, r in live.items():
        if policy == RATE_BASELINE:
            continue
        sim = replay(model, policy, budget_share, concurrency, scores=sampler)
        note = "  (replay's bound: scored densities; live: true)" if policy == "sampled_oracle" else ""
        lines.append(
            f"{policy:<14} {r['hq_per_fetch']:7.3f} {sum(sim.hits) / max(1, len(sim.hits)):7.3f}{note}"
        )
    return "\n".join(lines)


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


def yield_curve(
    policies: list[str], shares: list[float], hosts: int, seed: int, concurrency: int = 32
) -> dict[str, dict[str, float]]:
    """{policy: {budget share: high-quality pages per fetch}} from offline replays of one test web."""
    from rich.progress import track

    from crawler.bench.replay import replay
    from crawler.testweb import TestWebConfig
    from crawler.testweb.model import SiteModel

    model = SiteModel(TestWebConfig(n_hosts=hosts, seed=seed))
    curve: dict[str, dict[str, float]] = {policy: {} for policy in policies}
    runs = [(policy, share) for policy in policies for share in shares]
    for policy, share in track(runs, description="yield curve (offline replay)"):
        sim = replay(model, policy, share, concurrency)
        curve[policy][str(share)] = sum(sim.hits) / max(1, len(sim.hits))
    lines = ["", f"yield against budget ({hosts} hosts, offline replay): hq/fetch"]
    lines.append("policy         " + "".join(f"{float(s):>7.0%}" for s in shares))
    for policy, points in curve.items():
        lines.append(f"{policy:<14} " + "".join(f"{v:7.3f}" for v in points.values()))
    print("\n".join(lines), flush=True)
    return curve
