"""`hostcrawl demo`: start the local test web, crawl it politely, and grade the crawl against its truth."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
from rich.console import Console

from cleaner.quality import score_column
from crawler.bench.audit import (
    DirectivesAudit,
    PolitenessAudit,
    audit_directives_of_run,
    audit_test_web,
    yield_against_truth,
)
from crawler.bench.replay import tail_pace
from crawler.errors import EXIT_FAILED, EXIT_OK
from crawler.monitor.status_options import check_status_port
from crawler.run.crawl_config import CrawlConfig, default_run_dir
from crawler.run.crawl_run import RunResult, prepare_run_dir, render_report, run_crawl
from crawler.run.run_counts import run_counts
from crawler.testweb import SiteModel, TestWebConfig, TestWebProcess
from scheduler.policies import TRUTH_POLICIES

DEMO_MIN_DELAY = 0.25  # loopback only; live crawls default to 1 s
WEB_SUBDIR = "testweb"  # the test web's ground truth and request log, inside the run directory


@dataclass(slots=True)
class DemoResult:
    run: RunResult
    audit: PolitenessAudit
    quality: dict[str, Any]


def demo_config(
    seeds: list[str], proxy: str, max_pages: int, min_delay: float, policy: str, truth: Path
) -> CrawlConfig:
    config = CrawlConfig(seeds=seeds)
    config.policy.name = policy
    config.policy.priors = str(truth)  # in-link percentiles stand in for web-graph centrality
    config.policy.truth = str(truth) if policy in TRUTH_POLICIES else None
    config.politeness.allow_private = True  # the test web listens on loopback, on purpose
    config.politeness.min_delay = min_delay
    config.fetch.proxy = proxy
    config.fetch.max_pages = max_pages
    config.fetch.timeout = 10.0
    return config


def grade(
    run_dir: Path, web_dir: Path, web_config: TestWebConfig, config: CrawlConfig
) -> tuple[PolitenessAudit, dict[str, Any]]:
    """Politeness from the server's request log; yield from the pages' true labels."""
    model = SiteModel(web_config)
    truth_hosts = pl.read_parquet(web_dir / "hosts.parquet")
    truth_pages = pl.read_parquet(web_dir / "pages.parquet")
    politeness = config.politeness
    token = politeness.user_agent.split("/")[0]
    _, audit = audit_test_web(web_dir, model, politeness.min_delay, politeness.user_agent, token)
    pages = pl.read_parquet(run_dir / "pages.parquet")
    quality = yield_against_truth(pages, truth_pages, score_column(config.cleaning.scorers[0]))
    hosts = pl.read_parquet(run_dir / "hosts.parquet").join(
        truth_hosts.select("host", pl.col("q").alias("true_density")), on="host", how="left"
    )
    ranked = hosts.filter(pl.col("scored_pages") >= 3) if "scored_pages" in hosts.columns else hosts
    if "density_mean" in ranked.columns and ranked.height >= 3:
        quality["host_rank_spearman"] = ranked.select(
            pl.corr("density_mean", "true_density", method="spearman")
        ).item()
        quality["hosts_ranked"] = ranked.height
    return audit, quality


def ranking_section(run_dir: Path, web_dir: Path) -> str:
    """The scheduler's host ranking beside each host's true quality density."""
    hosts = pl.read_parquet(run_dir / "hosts.parquet")
    if "density_mean" not in hosts.columns:
        return ""
    truth = pl.read_parquet(web_dir / "hosts.parquet").select("host", pl.col("q").alias("true q"))
    top = (
        hosts.join(truth, on="host", how="left")
        .sort("density_mean", descending=True)
        .select("host", "state", "fetched", "curated", "sample_density", "density_mean", "true q")
        .head(15)
    )
    lines = ["## Host ranking (top 15 by the scheduler's density estimate)", ""]
    lines.append("| " + " | ".join(top.columns) + " |")
    lines.append("|" + "---|" * len(top.columns))
    for row in top.iter_rows():
        lines.append("| " + " | ".join(f"{v:.2f}" if isinstance(v, float) else str(v) for v in row) + " |")
    return "\n".join(lines)


def truth_section(a: PolitenessAudit, q: dict[str, Any]) -> str:
    lines = [
        "## Against the test web's ground truth",
        "",
        "Politeness, from the server's own request log:",
        "",
        f"- requests received: {a.requests} over {a.hosts} hosts",
        f"- two requests in flight to one host: {a.overlapping}",
        f"- sooner than the host's delay or Crawl-delay: {a.too_fast}"
        + (f" (smallest gap / delay: {a.min_gap_ratio:.2f})" if a.min_gap_ratio else ""),
        f"- paths disallowed by robots.txt fetched: {a.disallowed}",
        f"- returned sooner than Retry-After: {a.backoff_ignored}",
        "",
        "Quality, from every page's true label:",
        "",
    ]
    for key, value in q.items():
        shown = f"{value:.3f}" if isinstance(value, float) else value
        lines.append(f"- {key.replace('_', ' ')}: {shown}")
    return "\n".join(lines)


def links_section(a: DirectivesAudit, stats: dict[str, Any]) -> str:
    """Links and page directives: what the crawl declined to follow or to curate, and the server's view."""

    def total(prefix: str) -> int:
        return sum(int(v) for k, v in stats.items() if k.startswith(prefix) and isinstance(v, int | float))

    return "\n".join(
        [
            "## Links and page directives",
            "",
            f"- redirects followed: {total('redirect/followed')}, dropped: {total('redirect/dropped/')}"
            f" (to already-seen URLs: {total('redirect/dropped/duplicate')}, to traps: "
            f"{total('redirect/dropped/trap/')})",
            f"- nofollow links not followed: {total('links/skipped/nofollow_rel')} rel=nofollow, "
            f"{total('links/skipped/nofollow_page')} on nofollow pages",
            f"- pages opted out of AI training: {total('page/optout/')}; noindex pages: "
            f"{total('page/robots/noindex')}; kept out of the curated text although above the threshold: "
            f"{total('page/kept_out/')}",
            f"- gzipped sitemaps read: {total('sitemap/gzipped')}; "
            f"tdmrep.json files found: {total('tdmrep/found')}",
            f"- server side: nofollow-only pages requested {a.nofollow_only_requested}, "
            f"trap targets requested {a.trap_targets_requested}, tdmrep.json refetched {a.tdmrep_refetched}; "
            f"curated noindex pages "
            f"{a.curated_noindex}, curated opted-out pages {a.curated_optout}",
        ]
    )


def last_fifth_pace(pages: Path) -> float | None:
    """The crawl's pages/s over the last 20% of its pages over its mean pages/s, from the pages' fetch times
    (issue 25's target: at least 0.7); None without pages."""
    if not pages.is_file():
        return None
    times = pl.read_parquet(pages, columns=["fetched_at"])["fetched_at"]  # UTC datetimes
    seconds = times.drop_nulls().sort().dt.epoch("ms") / 1000
    if seconds.len() < 5:
        return None
    done = seconds.to_list()
    return tail_pace(done, done[0], done[-1])


def run_demo(
    run_dir: Path,
    *,
    hosts: int,
    max_pages: int,
    seed: int = 0,
    min_delay: float = DEMO_MIN_DELAY,
    policy: str = "adaptive",
    progress: bool = True,
    status_port: int | None = None,
    status_bind: str = "127.0.0.1",
) -> DemoResult:
    """`status_port` 0 serves the status page on a free port (`hostcrawl demo` does; its URL is printed)."""
    web_config = TestWebConfig(n_hosts=hosts, seed=seed)
    prepare_run_dir(run_dir)
    web_dir = run_dir / WEB_SUBDIR
    web_dir.mkdir()
    with TestWebProcess(web_config, web_dir) as web:
        truth = web_dir / "hosts.parquet"
        config = demo_config(list(web.seed_urls), web.proxy_url, max_pages, min_delay, policy, truth)
        run = run_crawl(
            config,
            run_dir,
            progress=progress,
            ignore={WEB_SUBDIR},
            status_port=status_port,
            status_bind=status_bind,
        )
    audit, quality = grade(run_dir, web_dir, web_config, config)
    quality["last_fifth_pace"] = last_fifth_pace(run_dir / "pages.parquet")
    token = config.politeness.user_agent.split("/")[0]
    links = audit_directives_of_run(web_dir, run_dir, token, config.cleaning.curate_optout)
    (run_dir / "audit.json").write_text(
        json.dumps({"politeness": audit.as_dict(), "quality": quality, "links": links.as_dict()}, indent=2)
        + "\n"
    )
    sections = [
        truth_section(audit, quality),
        links_section(links, run.stats),
        ranking_section(run_dir, web_dir),
    ]
    render_report(run_dir, config, run.stats, sections)
    return DemoResult(run, audit, quality)


def cmd_demo(args: argparse.Namespace) -> int:
    check_status_port(args)
    run_dir = args.out or default_run_dir("demo")
    result = run_demo(
        run_dir,
        hosts=args.hosts,
        max_pages=args.max_pages,
        seed=args.seed,
        policy=args.policy,
        progress=not args.no_progress,
        status_port=None if args.no_status else args.status_port,
        status_bind=args.status_bind,
    )
    run, audit, quality = result.run, result.audit, result.quality
    verdict = "[green]clean[/]" if audit.clean else "[red]VIOLATIONS[/]"
    counts = run_counts(run.stats)  # the names and numbers of crawl's end line and report.md
    Console(stderr=True).print(
        f"[bold]demo done[/] ({run.stat('hostcrawl/policy', args.policy)}) in "
        f"{run.stat('hostcrawl/wall_seconds'):.0f}s: "
        f"{counts['fetched']} pages fetched from {audit.hosts} hosts ({counts['responses']} responses with "
        f"robots.txt, redirects and retries), {run.stat('hostcrawl/pages_per_second'):.1f} pages/s\n"
        f"  politeness audit (server side): {verdict} "
        f"(overlaps {audit.overlapping}, too fast {audit.too_fast}, "
        f"disallowed {audit.disallowed}, Retry-After ignored {audit.backoff_ignored})\n"
        f"  curated {quality.get('curated', 0)} pages, precision "
        f"{_fmt(quality.get('curated_precision'))}, score AUC {_fmt(quality.get('score_auc'))}\n"
        f"  last 20% of the pages at {_fmt(quality.get('last_fifth_pace'))}x the crawl's mean pages/s\n"
        f"  report: {run_dir}/report.md"
    )
    return EXIT_OK if audit.clean else EXIT_FAILED


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
