"""`hostcrawl study NAME ...` and `hostcrawl report DIR`: the host-level studies, one command each."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analytics.study_inputs import DEFAULT_SEED, DEFAULT_THRESHOLD, STUDY_ORDER, InputError, Inputs

if TYPE_CHECKING:
    import duckdb

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
STUDY_EPILOG = """\
examples:
  hostcrawl study synth --hosts 100000 --out data/synth      generated data in Common Crawl's schemas
  hostcrawl study all --data data/synth                      every study the data allows -> data/synth/studies
  hostcrawl study icc --pages runs/r1/pages.parquet --out st ICC1 of each score_* column
  hostcrawl study coverage --host-index cc/host-index/ --annotations cc/gneissweb/ --crawl CC-MAIN-2024-10
  hostcrawl report data/synth/studies                        assemble report.md with the plots

Inputs: --data DIR picks up DIR/pages.parquet, DIR/hosts.parquet, DIR/ranks.parquet, DIR/host_index/ and
DIR/annotations/ (the layout of `study synth` and of a crawl run); explicit flags override it.
"""
# Which inputs each study needs (all of them) to run under `study all`.
NEEDS = {
    "icc": ("pages",),
    "ksample": ("pages",),
    "yield": ("pages",),
    "depth": ("pages",),
    "coverage": ("host_index", "annotations"),
    "language": ("pages", "ranks"),
}


def _inputs_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, help="folder with the synth / crawl-run layout (see below)")
    p.add_argument("--pages", type=Path, help="pages table: url, host, score_* columns[, language]")
    p.add_argument("--hosts-table", type=Path, help="a crawl's hosts.parquet (its own host order)")
    p.add_argument(
        "--host-index", type=Path, help="Common Crawl host index (file or Hive-partitioned folder)"
    )
    p.add_argument("--annotations", type=Path, help="GneissWeb host annotations (file or folder)")
    p.add_argument("--ranks", type=Path, help="web-graph ranks parquet (host, hc_val, pr_val, ...)")
    p.add_argument("--out", type=Path, help="study folder (default DATA/studies, else ./studies)")
    p.add_argument("--scores", nargs="+", help="classifier columns (default: every score_* column)")
    p.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD, help="high quality above (0.5)")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of the sampling orders (0)")


def _budgets(text: str) -> tuple[float, ...]:
    values = tuple(float(v) for v in text.split(","))
    if not all(0 < v <= 1 for v in values):
        raise argparse.ArgumentTypeError("budgets are fractions in (0, 1], comma-separated")
    return values


def _study_parsers(sub: Any) -> None:
    help_text = {
        "icc": "ICC1 per classifier with the Spearman-Brown ceiling (RQ1)",
        "ksample": "Spearman of k-page sample density vs the rest of the host, k = 1..20 (RQ3)",
        "yield": "crawl-yield simulation: random, HC, PR, current, oracle host orders (RQ2)",
        "depth": "depth simulation: uniform, HC depth, sample-then-deepen, oracle (RQ3)",
        "coverage": "coverage vs quality density, hidden gems, uncrawled high-quality pages (RQ4)",
        "language": "centrality vs host median scores, pooled and by host language",
        "all": "every study whose inputs are present",
    }
    for name, text in help_text.items():
        p = sub.add_parser(
            name,
            help=text,
            description=text,
            epilog=STUDY_EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        _inputs_args(p)
        if name in ("icc", "all"):
            p.add_argument(
                "--min-pages", type=int, nargs="+", default=[3, 5, 10], help="ICC host thresholds (3 5 10)"
            )
        if name in ("ksample", "all"):
            p.add_argument("--max-k", type=int, default=20, help="largest sample size (20)")
            p.add_argument("--min-rest", type=int, default=1, help="pages a host needs beyond the sample (1)")
        if name in ("yield", "depth", "all"):
            p.add_argument("--budgets", type=_budgets, help="fractions of all pages, e.g. 0.01,0.1,1")
        if name in ("depth", "all"):
            p.add_argument("--sample-pages", type=int, default=3, help="probe size of sample-then-deepen (3)")
        if name in ("coverage", "all"):
            p.add_argument(
                "--quality",
                default="gneissweb_education",
                help="density column or SQL expression (%(default)s)",
            )
            p.add_argument("--crawl", help="crawl partition, e.g. CC-MAIN-2024-10 (needed if several)")
        if name in ("language", "all"):
            p.add_argument("--lang-min-pages", type=int, default=3, help="hosts need this many pages (3)")
        p.set_defaults(func=cmd_study, study=name)


def _synth_parser(sub: Any) -> None:
    from analytics.synth_config import SynthConfig

    d = SynthConfig()
    p = sub.add_parser(
        "synth",
        help="generate a host index, annotations, ranks and pages with a configurable truth",
        description="Write DIR/host_index/crawl=.../, DIR/annotations/crawl=.../, DIR/ranks.parquet, "
        "DIR/pages.parquet and DIR/truth.json, in the real schemas, so every study runs without downloads.",
    )
    p.add_argument("--out", type=Path, required=True, help="folder to write")
    p.add_argument("--hosts", type=int, default=d.hosts, help=f"crawled, annotated hosts ({d.hosts:,})")
    p.add_argument("--page-hosts", type=int, help="hosts in pages.parquet (default min(hosts, 20,000))")
    p.add_argument("--pages-per-host", type=float, default=d.pages_per_host, help="mean pages per host (5)")
    p.add_argument(
        "--icc", type=float, default=d.icc, help="ICC1 of the first classifier's page scores (0.5)"
    )
    p.add_argument("--quality-mean", type=float, default=d.quality_mean, help="mean page score (0.3)")
    p.add_argument(
        "--coverage-quality-rho",
        type=float,
        default=d.coverage_quality_rho,
        help="Spearman of nutch_fetched_pct with quality density (-0.08)",
    )
    p.add_argument(
        "--centrality-quality-rho",
        type=float,
        default=d.centrality_quality_rho,
        help="Spearman of HC with true quality density (0.1)",
    )
    p.add_argument(
        "--english-share", type=float, default=d.english_share, help="share of English hosts (0.55)"
    )
    p.add_argument(
        "--language-bias",
        type=float,
        default=d.language_bias,
        help="how much the second classifier favours non-English hosts (0.8)",
    )
    p.add_argument(
        "--link-only-ratio",
        type=float,
        default=d.link_only_ratio,
        help="host-index rows known only from links, per crawled host (1.0)",
    )
    p.add_argument("--crawl", default=d.crawl, help=f"crawl partition name ({d.crawl})")
    p.add_argument("--seed", type=int, default=d.seed, help="random seed (%(default)s)")
    p.set_defaults(func=cmd_synth)


def register_cli(subparsers: Any) -> None:
    """Add `study` (with its subcommands) and `report` to the hostcrawl command."""
    p = subparsers.add_parser(
        "study",
        help="host-level studies in DuckDB (ICC1, k-sample, yield, depth, ...)",
        description=__doc__,
        epilog=STUDY_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="study_command", metavar="NAME", required=True)
    _synth_parser(sub)
    _study_parsers(sub)
    r = subparsers.add_parser(
        "report",
        help="assemble study sections and plots into one markdown report",
        description="For a study folder: DIR/report.md. For a crawl run directory: runs the "
        "studies its tables allow into RUN/studies/ and writes RUN/study-report.md (the "
        "crawler's own report.md is left alone).",
    )
    r.add_argument("dir", type=Path, help="study folder or crawl run directory")
    r.add_argument("--rerun", action="store_true", help="re-run the studies of a crawl run first")
    r.set_defaults(func=cmd_report)


def _say(message: str) -> None:
    print(message, file=sys.stderr)


def cmd_synth(args: argparse.Namespace) -> int:
    from analytics.synth import generate
    from analytics.synth_config import SynthConfig

    cfg = SynthConfig(
        hosts=args.hosts,
        page_hosts=args.page_hosts,
        pages_per_host=args.pages_per_host,
        icc=args.icc,
        quality_mean=args.quality_mean,
        coverage_quality_rho=args.coverage_quality_rho,
        centrality_quality_rho=args.centrality_quality_rho,
        english_share=args.english_share,
        language_bias=args.language_bias,
        link_only_ratio=args.link_only_ratio,
        crawl=args.crawl,
        seed=args.seed,
    )
    try:
        result = generate(cfg, args.out, progress=_say)
    except ValueError as exc:
        _say(f"error: {exc}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        _say(f"interrupted: nothing was written to {args.out} (the partial data is removed); run it again")
        return EXIT_INTERRUPTED
    _say(
        f"done: {result.host_index_rows:,} host-index rows, {result.annotated_hosts:,} annotated hosts, "
        f"{result.pages:,} pages on {result.page_hosts:,} hosts -> {args.out} (truth in truth.json)"
    )
    return EXIT_OK


def resolve_inputs(args: argparse.Namespace) -> Inputs:
    inputs = Inputs.from_dir(args.data) if args.data else Inputs()
    if args.data and not args.data.is_dir():
        raise InputError(f"--data {args.data}: no such folder")
    for attr, flag in (
        ("pages", "pages"),
        ("hosts", "hosts_table"),
        ("host_index", "host_index"),
        ("annotations", "annotations"),
        ("ranks", "ranks"),
    ):
        value = getattr(args, flag)
        if value is not None:
            setattr(inputs, attr, value)
    return inputs


def check_not_empty(name: str, inputs: Inputs) -> None:
    """A study of no pages would print a report of nothing (or fail inside a plot): say so instead."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from analytics.schema import parquet_files

    if "pages" not in NEEDS[name] or inputs.pages is None:
        return
    rows = 0
    for path in parquet_files(inputs.pages):
        try:
            rows += pq.ParquetFile(path).metadata.num_rows
        except (OSError, pa.ArrowInvalid) as exc:  # not parquet at all: ArrowInvalid
            raise InputError(f"{path}: not a readable parquet file ({exc})") from None
    if rows == 0:
        raise InputError(f"{inputs.pages}: the pages table has no rows; there is nothing to study")


def run_study(name: str, inputs: Inputs, out_root: Path, args: argparse.Namespace) -> None:
    from analytics import db

    check_not_empty(name, inputs)
    with db.spill_folder(out_root / ".duckdb-tmp") as spill:
        _run_in(db.connect(spill), name, inputs, out_root, args)


def _run_in(
    con: duckdb.DuckDBPyConnection, name: str, inputs: Inputs, out_root: Path, args: argparse.Namespace
) -> None:
    """One study on `con` (closed afterwards): its folder is complete, or it is what it was before."""
    from analytics.studies import coverage, depth, icc, ksample, language, yieldsim
    from analytics.study import Output

    out = Output(out_root, name)
    common: dict[str, Any] = {"scores": args.scores}
    budgets = {"budgets": args.budgets} if getattr(args, "budgets", None) else {}
    runners: dict[str, Callable[[], object]] = {
        "icc": lambda: icc.run(con, inputs, out, min_pages=tuple(args.min_pages), **common),
        "ksample": lambda: ksample.run(
            con,
            inputs,
            out,
            threshold=args.threshold,
            max_k=args.max_k,
            min_rest=args.min_rest,
            seed=args.seed,
            **common,
        ),
        "yield": lambda: yieldsim.run(
            con, inputs, out, threshold=args.threshold, seed=args.seed, **budgets, **common
        ),
        "depth": lambda: depth.run(
            con,
            inputs,
            out,
            threshold=args.threshold,
            sample_pages=args.sample_pages,
            seed=args.seed,
            **budgets,
            **common,
        ),
        "coverage": lambda: coverage.run(con, inputs, out, quality=args.quality, crawl=args.crawl),
        "language": lambda: language.run(con, inputs, out, min_pages=args.lang_min_pages, **common),
    }
    try:
        runners[name]()
    except BaseException:  # Ctrl-C too: the study's previous complete folder stays as it was
        out.discard()
        raise
    finally:
        con.close()


def run_all(inputs: Inputs, out_root: Path, args: argparse.Namespace) -> list[str]:
    """Every study whose inputs are present; says which were skipped and why."""
    done = []
    for name in STUDY_ORDER:
        missing = [need for need in NEEDS[name] if getattr(inputs, need) is None]
        if name == "language" and inputs.pages is not None and not missing:
            from analytics.schema import has_column

            if not has_column(inputs.pages, "language"):
                missing = ["a language column in the pages table"]
        if missing:
            _say(f"skip {name}: needs {', '.join(missing)}")
            continue
        _say(f"study {name} ...")
        run_study(name, inputs, out_root, args)
        done.append(name)
    return done


def _out_root(args: argparse.Namespace) -> Path:
    if args.out:
        return Path(args.out)
    return Path(args.data) / "studies" if args.data else Path("studies")


def cmd_study(args: argparse.Namespace) -> int:
    import duckdb

    from analytics import db
    from analytics.schema import SchemaError

    out_root = _out_root(args)
    try:
        inputs = resolve_inputs(args)
        if args.study == "all":
            done = run_all(inputs, out_root, args)
            if not done:
                _say("error: no study had its inputs; see `hostcrawl study all --help`")
                return EXIT_USAGE
        else:
            run_study(args.study, inputs, out_root, args)
    except (SchemaError, InputError) as exc:
        _say(f"error: {exc}")
        return EXIT_USAGE
    except duckdb.OutOfMemoryException:
        _say(db.out_of_memory())
        return EXIT_USAGE
    except (KeyboardInterrupt, duckdb.InterruptException, RuntimeError) as exc:  # Ctrl-C inside a query too
        if not db.interrupted(exc):
            raise
        _say(f"interrupted: finished studies are in {out_root}; the running one left nothing; run it again")
        return EXIT_INTERRUPTED
    _say(f"done -> {out_root} (assemble with `hostcrawl report {out_root}`)")
    return EXIT_OK


def _defaults_for_all() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    _study_parsers(sub)
    return parser.parse_args(["all"])


def cmd_report(args: argparse.Namespace) -> int:
    from analytics.report import ReportError, report
    from analytics.schema import SchemaError

    def run_studies(data: Path, out: Path) -> list[str]:
        defaults = _defaults_for_all()
        return run_all(resolve_inputs(argparse.Namespace(**{**vars(defaults), "data": data})), out, defaults)

    try:
        path = report(args.dir, run_studies, rerun=args.rerun)
    except (ReportError, SchemaError, InputError) as exc:
        _say(f"error: {exc}")
        return EXIT_USAGE
    _say(f"report -> {path}")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (`python -m analytics.cli`) until the hostcrawl entry point is registered."""
    parser = argparse.ArgumentParser(prog="hostcrawl")
    register_cli(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
