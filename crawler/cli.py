"""The `hostcrawl` command: crawl the web politely, or try it all on the local test web first."""

from __future__ import annotations

import argparse
import os
import sys
from importlib import metadata
from pathlib import Path

from rich.console import Console

from crawler import __version__
from crawler.errors import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_STORAGE,
    EXIT_USAGE,
    missing_extra,
    print_error,
)
from crawler.monitor.status_options import add_status_options, check_status_port
from crawler.run.crawl_config import (
    DEFAULT_CONTACT_URL,
    POLICY_NAMES,
    ConfigError,
    CrawlConfig,
    default_run_dir,
    load_config,
    proxy_problem,
    table_problem,
    validate,
)
from crawler.run.run_counts import run_counts
from crawler.run.seed_urls import check_seed, load_seeds
from crawler.run.worker_options import continue_command
from scheduler.queue_window import MEMORY_URLS
from scheduler.sqlite_store import FrontierError

COMMAND_ENTRY_POINTS = "hostcrawl.commands"

EPILOG = """\
examples:
  hostcrawl demo                                   crawl the built-in test web (about 2 minutes)
  hostcrawl crawl --seeds seeds.txt --out runs/r1 --contact https://you.example/bot
  hostcrawl testweb serve --hosts 1000 --port 8080 serve the test web for your own experiments

Every crawl writes one run directory: config.toml, warc/, text/, pages.parquet, hosts.parquet,
stats.json and report.md. See README.md for the layout and for crawling the real web.
"""


def add_crawl_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "crawl",
        help="crawl from seed URLs into a run directory",
        description="Crawl politely (robots.txt, Crawl-delay, one request per host at a time, "
        "backoff on 429/503) from seed URLs; write WARC, curated text and tables.",
    )
    p.add_argument("urls", nargs="*", help="seed URLs (in addition to --seeds)")
    p.add_argument("--seeds", type=Path, help="file with one seed URL per line ('#' comments)")
    p.add_argument("--config", type=Path, help="TOML config (see README); flags override it")
    p.add_argument("--out", type=Path, help="run directory to create (default runs/crawl-TIME)")
    p.add_argument("--max-pages", type=int, help="global page budget (default 1000)")
    p.add_argument("--max-depth", type=int, help="link depth limit, 0 = none (default 0)")
    p.add_argument("--min-delay", type=float, help="seconds between requests to one host (1.0)")
    p.add_argument("--concurrency", type=int, help="requests in flight over all hosts (32)")
    p.add_argument(
        "--frontier-memory-urls",
        type=int,
        help=f"queued URLs held in memory beyond each host's first few; the rest wait on disk "
        f"({MEMORY_URLS:,}; 0 = all in memory)",
    )
    p.add_argument("--max-unscored", type=int, help="pages fetched ahead of their scores, at most (0: auto)")
    p.add_argument("--timeout", type=float, help="download timeout in seconds (30)")
    p.add_argument("--user-agent", help="product token, e.g. mybot/1.0 (default hostcrawl/VER)")
    p.add_argument(
        "--contact", help=f"URL or mailto: where site owners can reach you (default {DEFAULT_CONTACT_URL})"
    )
    p.add_argument("--proxy", help="send every request through this HTTP proxy (default: none)")
    p.add_argument(
        "--allow-private",
        action="store_true",
        help="allow loopback/private/link-local targets (refused by default)",
    )
    p.add_argument("--same-host", action="store_true", help="do not follow links to other hosts")
    p.add_argument(
        "--allow",
        action="append",
        metavar="REGEX",
        help="follow only links whose URL matches one of these regexes (repeatable; seeds always)",
    )
    p.add_argument(
        "--deny", action="append", metavar="REGEX", help="never follow links matching this regex (repeatable)"
    )
    p.add_argument(
        "-s",
        "--set",
        action="append",
        dest="scrapy_settings",
        metavar="NAME=VALUE",
        help="set a Scrapy setting, as `scrapy crawl -s` does (repeatable; politeness settings are "
        "hostcrawl's own options)",
    )
    p.add_argument(
        "--policy",
        choices=POLICY_NAMES,
        help="crawl order: adaptive (default; best), sample_deepen, bfs, uniform, hc_depth, "
        "oracle and sampled_oracle (benchmarks: need --truth), scrapy (Scrapy's own scheduler, a baseline)",
    )
    p.add_argument("--sample-pages", type=int, help="pages sampled per host before ranking it (3)")
    p.add_argument(
        "--explore-share",
        type=float,
        help="sample_deepen, adaptive: budget share for looking at new hosts (0.2)",
    )
    p.add_argument(
        "--keep-busy",
        type=float,
        help="share of --concurrency kept busy with hosts the policy ranks 'not now' when its best hosts "
        "rest between fetches: 0 spends every fetch on the best hosts (best pages per fetch), 1 keeps "
        "every request slot busy (best pages per hour); see the README's clock table (0.5)",
    )
    p.add_argument("--per-host-budget", type=int, help="pages per host, 0 = no cap (0)")
    p.add_argument("--priors", help="ranks parquet from `hostcrawl graph ingest` (HC/PR tie-breaks)")
    p.add_argument("--truth", help="test web hosts.parquet with true densities (oracle policies only)")
    p.add_argument(
        "--plan",
        type=Path,
        help="recrawl plan from `hostcrawl recrawl plan`: seeds its hosts with their budgets and priors; "
        "--max-pages defaults to the plan's total; links to other hosts are not followed",
    )
    p.add_argument(
        "--previous",
        type=Path,
        metavar="RUN",
        help="a previous run: pages it fetched are revisited with conditional GETs (WARC revisit records)",
    )
    p.add_argument(
        "--resume",
        type=Path,
        metavar="RUN",
        help="continue a stopped or crashed run in RUN with its saved config.toml",
    )
    p.add_argument(
        "--classifier",
        action="append",
        metavar="NAME=PATH[:LABEL]",
        help="add a quality scorer (fastText model file; repeatable); the first scorer decides curation",
    )
    p.add_argument(
        "--cleaner",
        help="main-content extractor: blocks_v1 (default), trafilatura_v1, resiliparse_v1, encoder_v2, "
        "decoder_v2, rescraper_v1 (extract and refine in one model), or none (fetch and archive only)",
    )
    p.add_argument("--threshold", type=float, help="quality score a page needs to be kept (0.5)")
    p.add_argument("--workers", type=int, help="cleaning processes (default: one per core)")
    p.add_argument("--no-progress", action="store_true", help="no live progress display")
    add_status_options(p, default_port=None)
    from crawler.run.worker_options import add_worker_options  # (redis and Scrapy load only for the crawl)

    add_worker_options(p)
    p.add_argument(
        "--status-linger",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="keep the status page up this long after the crawl ends (a last look, a last scrape; default 0)",
    )
    p.set_defaults(func=cmd_crawl)


def resolve_crawl_config(args: argparse.Namespace) -> CrawlConfig:
    """Config file, then seeds, then flags; raises ConfigError before anything is written."""
    if args.resume and args.config:
        raise ConfigError("--resume uses the run's own config.toml; drop --config")
    if args.resume and args.out and args.out.resolve() != args.resume.resolve():
        raise ConfigError(f"--resume continues in {args.resume}; drop --out {args.out}")
    if args.resume:
        config = load_config(args.resume / "config.toml")
    else:
        config = load_config(args.config) if args.config else CrawlConfig()
    if args.seeds:
        config.seeds = config.seeds + load_seeds(args.seeds)
    config.seeds += [check_seed(url, f"argument {i + 1}") for i, url in enumerate(args.urls)]
    planned = None
    if getattr(args, "plan", None):
        from crawler.run.plan_seeds import apply_plan

        planned = apply_plan(config, args.plan, args.max_pages)
    previous = getattr(args, "previous", None) or (planned.source_run if planned else None)
    if previous:
        from crawler.archive.revisit import check_previous, previous_urls

        previous = check_previous(previous)
        config.fetch.previous = str(previous)
        known = set(config.seeds)
        urls = [url for url in previous_urls(previous) if url not in known]
        if planned is not None:  # a recrawl plan's hosts only: the others have no budget in it
            urls = [url for url in urls if planned.keeps(url)]
        config.seeds += urls
    p, f, c, pol = config.politeness, config.fetch, config.cleaning, config.policy
    overrides = [
        (args.policy, pol, "name"),
        (args.sample_pages, pol, "sample_pages"),
        (args.explore_share, pol, "explore_share"),
        (args.keep_busy, pol, "keep_busy"),
        (args.per_host_budget, pol, "per_host_budget"),
        (args.priors, pol, "priors"),
        (args.truth, pol, "truth"),
        (args.max_pages, f, "max_pages"),
        (args.max_depth, f, "max_depth"),
        (args.min_delay, p, "min_delay"),
        (args.concurrency, f, "concurrency"),
        (args.frontier_memory_urls, f, "frontier_memory_urls"),
        (args.max_unscored, f, "max_unscored"),
        (args.timeout, f, "timeout"),
        (args.user_agent, p, "user_agent"),
        (args.contact, p, "contact_url"),
        (args.proxy, f, "proxy"),
        (args.threshold, c, "threshold"),
        (args.workers, c, "workers"),
    ]
    for value, section, name in overrides:
        if value is not None:
            setattr(section, name, value)
    if args.classifier:
        c.scorers = [*args.classifier, *c.scorers]
    if args.cleaner:
        c.cleaner = args.cleaner
    if args.allow_private:
        p.allow_private = True
    if args.same_host:
        f.follow_cross_host = False
    f.allow += args.allow or []
    f.deny += args.deny or []
    for i, setting in enumerate(args.scrapy_settings or []):
        name, sep, value = setting.partition("=")
        if not sep:
            raise ConfigError(f"-s argument {i + 1}: {setting!r} is not NAME=VALUE")
        config.scrapy[name.strip()] = value
    validate(config, "command line")
    for flag, key in (("--priors", "priors"), ("--truth", "truth")):
        value = getattr(args, key)
        if value is not None and (problem := table_problem(Path(value), key)):
            raise ConfigError(f"{flag} {value}: {problem}")
    if not config.seeds and not getattr(args, "frontier", None):  # a worker may join a seeded run
        raise ConfigError("no seed URLs: pass URLs, --seeds FILE, or seeds = [...] in --config")
    return config


def check_crawl_inputs(config: CrawlConfig, args: argparse.Namespace) -> None:
    """What validation alone cannot see: Scrapy settings hostcrawl owns, a proxy that is not there."""
    from crawler.run.settings import check_scrapy_settings

    config_file = args.resume / "config.toml" if args.resume else args.config
    check_scrapy_settings(config, "-s" if args.scrapy_settings else str(config_file))
    proxy = config.fetch.proxy
    if proxy and (problem := proxy_problem(proxy)):
        raise ConfigError(f"{'--proxy' if args.proxy else config_file}: proxy {proxy} {problem}")


def create_run_dir(run_dir: Path) -> None:
    """Create --out now, after every check, so a bad flag leaves nothing behind."""
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"--out {run_dir}: exists and is not a directory")
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        probe = run_dir / f".hostcrawl-write-test-{os.getpid()}"  # workers of one run start together
        probe.touch()
        probe.unlink(missing_ok=True)
    except OSError as exc:
        raise ConfigError(f"--out {run_dir}: cannot create the run directory ({exc.strerror})") from None


def cmd_crawl(args: argparse.Namespace) -> int:
    from crawler.monitor.status_server import linger
    from crawler.run.crawl_run import run_crawl
    from crawler.run.worker import check_worker_args, run_worker

    config = resolve_crawl_config(args)
    check_status_port(args)
    check_crawl_inputs(config, args)
    if args.frontier:
        check_worker_args(args, config)
    run_dir = args.resume or args.out or default_run_dir("crawl")
    if not args.resume:
        create_run_dir(run_dir)
    status = {"progress": not args.no_progress, "status_port": args.status_port}
    status["status_bind"] = args.status_bind
    if args.frontier:
        result = run_worker(
            config,
            run_dir,
            args.frontier,
            args.run_name,
            worker_id=args.worker_id,
            lease_seconds=args.lease_seconds,
            shards=args.shards,
            **status,
        )
    else:
        result = run_crawl(config, run_dir, resume=bool(args.resume), **status)
    counts = run_counts(result.stats)
    # pages answered (robots.txt alone is not a crawl), or the run's: a worker left no lease has not failed
    pages = sum(int(v) for k, v in result.stats.items() if k.startswith("page/status/"))
    pages = pages or int(result.stats.get("frontier/run/fetched", 0) or 0)
    console = Console(stderr=True)
    if result.storage_error:  # stopped at the frontier's last commit: nothing committed is lost
        print(
            f"hostcrawl crawl: the disk refused a write ({result.storage_error}); free space or make it "
            f"writable, then continue with: {continue_command(args, run_dir)}",
            file=sys.stderr,
        )
        return EXIT_STORAGE
    if result.interrupted:  # SIGINT/SIGTERM: Scrapy stopped scheduling and let what was in flight finish
        console.print(
            f"[yellow]interrupted[/]: {counts['fetched']} pages fetched so far, "
            f"{counts['curated']} pages curated; continue with: {continue_command(args, run_dir)}"
        )
        return EXIT_INTERRUPTED
    console.print(
        f"[bold]done[/]: {counts['fetched']} pages fetched ({counts['responses']} responses with robots.txt, "
        f"redirects and retries), {counts['curated']} pages curated, "
        f"{result.stat('hostcrawl/pages_per_second')} pages/s -> {result.run_dir}/report.md",
        highlight=False,
    )
    if result.note:
        console.print(result.note, style="yellow", markup=False, highlight=False)
    if not pages:
        from crawler.fetch.failures import why_nothing

        print(f"no page was fetched: {why_nothing(result.stats)}", file=sys.stderr)
    linger(args.status_linger)
    return EXIT_OK if pages else EXIT_FAILED


def add_plugin_commands(subparsers: argparse._SubParsersAction) -> None:
    """Commands of the other packages (graph, study, ...), found through their entry points.

    The crawler does not import analytics by name; each package registers its own subcommands.
    """
    for entry in sorted(metadata.entry_points(group=COMMAND_ENTRY_POINTS), key=lambda e: e.name):
        entry.load()(subparsers)


def build_parser() -> argparse.ArgumentParser:
    from crawler.archive.warc_files import add_index_parser
    from crawler.bench.cli import add_demo_parser
    from crawler.bench.yield_bench import add_bench_parser
    from crawler.run.frontier_cli import add_frontier_parser
    from crawler.testweb.cli import register_cli

    parser = argparse.ArgumentParser(
        prog="hostcrawl",
        description="A polite, host-aware web crawler for LLM pretraining data.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"hostcrawl {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_demo_parser(subparsers)
    add_crawl_parser(subparsers)
    add_bench_parser(subparsers)
    add_frontier_parser(subparsers)
    add_index_parser(subparsers)
    register_cli(subparsers)
    add_plugin_commands(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except (ConfigError, FrontierError) as exc:
        print_error(exc)
        return int(getattr(exc, "exit_code", EXIT_USAGE))  # a Redis that refuses a worker: 1
    except ModuleNotFoundError as exc:  # an optional extra's module; any other one is raised again
        print_error(f"{args.command} needs {missing_extra(exc)}")
        return EXIT_USAGE
    except (KeyboardInterrupt, RuntimeError) as exc:  # RuntimeError: DuckDB 2.0's Ctrl-C inside a query
        if isinstance(exc, RuntimeError):
            from analytics.db import interrupted  # (duckdb is loaded already when it raised this)

            if not interrupted(exc):
                raise
        console.print("[yellow]interrupted[/]")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
