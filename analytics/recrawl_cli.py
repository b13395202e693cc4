"""`hostcrawl recrawl plan`: a recrawl plan of under-covered good hosts (see analytics/recrawl_plan.py)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from analytics.study_inputs import InputError, Inputs

EXIT_OK, EXIT_USAGE = 0, 2
EPILOG = """\
examples:
  hostcrawl recrawl plan --host-index cc/host-index/ --annotations cc/gneissweb/ --crawl CC-MAIN-2024-10 \\
      --budget 100000 --out plan.parquet
  hostcrawl recrawl plan --data data/synth --budget 5000 --ranks data/synth/ranks.parquet --out plan.parquet
  hostcrawl recrawl plan --previous runs/r1 --budget 5000 --out plan.parquet
  hostcrawl crawl --plan plan.parquet --out runs/recrawl --contact https://you.example/bot
"""


def register_cli(subparsers: Any) -> None:
    from analytics.plan_config import PlanConfig

    d = PlanConfig()
    p = subparsers.add_parser(
        "recrawl",
        help="plan a recrawl of under-covered good hosts (then `crawl --plan`)",
        description=__doc__,
    )
    sub = p.add_subparsers(dest="recrawl_command", metavar="NAME", required=True)
    plan = sub.add_parser(
        "plan",
        help="choose hosts and page budgets from a host index or a previous run",
        description="One row per chosen host: why (gem, under-covered, under-crawled last run), the "
        "estimated missing high-quality pages (the coverage study's estimate), its page budget, priors, "
        "TLD and language. Budget proportional to the missing pages, capped per host, with at most a "
        "given share per TLD and per language.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    plan.add_argument("--data", type=Path, help="folder with host_index/, annotations/ [and ranks.parquet]")
    plan.add_argument("--host-index", type=Path, help="Common Crawl host index (file or Hive folder)")
    plan.add_argument("--annotations", type=Path, help="GneissWeb host annotations (file or folder)")
    plan.add_argument("--ranks", type=Path, help="web-graph ranks parquet for HC/PR percentiles")
    plan.add_argument("--previous", type=Path, metavar="RUN", help="plan from a previous run's hosts.parquet")
    plan.add_argument("--quality", default=d.quality, help=f"density column or SQL expression ({d.quality})")
    plan.add_argument("--crawl", help="crawl partition, e.g. CC-MAIN-2024-10 (needed if several)")
    plan.add_argument("--budget", type=int, default=d.budget, help=f"pages in all ({d.budget:,})")
    plan.add_argument("--per-host-cap", type=int, default=d.per_host_cap, help=f"({d.per_host_cap:,})")
    plan.add_argument("--max-tld-share", type=float, default=d.max_tld_share, help=f"({d.max_tld_share})")
    plan.add_argument(
        "--max-language-share", type=float, default=d.max_language_share, help=f"({d.max_language_share})"
    )
    plan.add_argument(
        "--scheme",
        choices=("http", "https"),
        help="seed URL scheme (default: with --previous, each host's as that run fetched it; else https)",
    )
    plan.add_argument("--out", type=Path, required=True, help="plan.parquet to write (and plan.json)")
    plan.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    plan.set_defaults(func=cmd_plan)


def _say(message: str) -> None:
    print(message, file=sys.stderr)


def cmd_plan(args: argparse.Namespace) -> int:
    import duckdb

    from analytics.db import out_of_memory, spill_folder
    from analytics.plan_config import PlanConfig
    from analytics.recrawl_plan import build_plan, write_plan
    from analytics.schema import SchemaError

    started = time.perf_counter()
    cfg = PlanConfig(
        budget=args.budget,
        per_host_cap=args.per_host_cap,
        max_tld_share=args.max_tld_share,
        max_language_share=args.max_language_share,
        quality=args.quality,
        crawl=args.crawl,
        scheme=args.scheme,
    )
    try:
        if args.out.exists() and not args.force:
            raise InputError(f"--out {args.out}: exists; pass --force to overwrite it")
        inputs = Inputs.from_dir(args.data) if args.data else Inputs()
        if args.data and not args.data.is_dir():
            raise InputError(f"--data {args.data}: no such folder")
        for attr in ("host_index", "annotations", "ranks"):
            if getattr(args, attr) is not None:
                setattr(inputs, attr, getattr(args, attr))
        previous = None
        if args.previous is not None:
            previous = args.previous / "hosts.parquet" if args.previous.is_dir() else args.previous
        # DuckDB spills beside --out: a disk the user chose
        with spill_folder(args.out.parent / f".{args.out.name}.duckdb-tmp") as spill:
            plan = build_plan(inputs, cfg, previous, spill)
            write_plan(plan, args.out)
    except (SchemaError, InputError) as exc:
        _say(f"error: {exc}")
        return EXIT_USAGE
    except duckdb.OutOfMemoryException:
        _say(out_of_memory())
        return EXIT_USAGE
    s = plan.summary
    _say(
        f"plan: {s['hosts']:,} hosts of {s['candidates']:,} candidates, {s['budget_given']:,} of "
        f"{cfg.budget:,} pages given, {s['expected_hq']:,.0f} high-quality pages expected "
        f"({s['missing_hq']:,.0f} estimated missing); reasons {s['reasons']}"
    )
    for column, groups in s["capped_by_guard"].items():
        _say(
            f"  diversity guard: {column} {', '.join(groups)} held to "
            f"{getattr(cfg, f'max_{column}_share'):.0%} of the budget"
        )
    _say(f"done in {time.perf_counter() - started:.1f}s -> {args.out}")
    return EXIT_OK
