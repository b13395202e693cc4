"""report.md of a crawl run, with plots, for people who would rather look than read stats.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import polars as pl

from crawler.run.run_counts import label, run_counts
from crawler.run.run_stats import ATTEMPTS
from crawler.run.worker_options import RUN_FILE, WORKERS_DIR, worker_command

TOP_HOSTS = 20


def _save(fig: Any, run_dir: Path, name: str) -> str:
    fig.tight_layout()
    fig.savefig(run_dir / name, dpi=110)
    plt.close(fig)
    return name


def plot_progress(pages: pl.DataFrame, run_dir: Path) -> str | None:
    times = pages.drop_nulls("fetched_at").sort("fetched_at")
    if not times.height:
        return None
    start = times["fetched_at"][0]
    seconds = [(t - start).total_seconds() for t in times["fetched_at"]]
    curated = times["curated"].fill_null(False).cast(pl.Int64).cum_sum().to_list()
    fig, ax = plt.subplots(figsize=(6.5, 3.5))
    ax.plot(seconds, range(1, len(seconds) + 1), label="pages fetched")
    ax.plot(seconds, curated, label="pages curated")
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("pages")
    ax.legend()
    ax.set_title("Crawl progress")
    return _save(fig, run_dir, "progress.png")


def plot_scores(pages: pl.DataFrame, score: str, threshold: float, run_dir: Path) -> str | None:
    values = pages[score].drop_nulls().to_list()
    if not values:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 3.5))
    ax.hist(values, bins=40, range=(0, 1), color="#4c72b0")
    ax.axvline(threshold, color="#c44e52", linestyle="--", label=f"threshold {threshold:g}")
    ax.set_xlabel(score.removeprefix("score_"))
    ax.set_ylabel("pages")
    ax.set_title("Quality score of cleaned pages")
    ax.legend()
    return _save(fig, run_dir, "scores.png")


def plot_hosts(hosts: pl.DataFrame, run_dir: Path) -> str | None:
    top = hosts.sort("fetched", descending=True).head(TOP_HOSTS)
    if not top.height:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 0.25 * top.height + 1.2))
    names = top["host"].to_list()[::-1]
    ax.barh(names, top["fetched"].to_list()[::-1], label="fetched", color="#bbbbbb")
    ax.barh(names, top["curated"].to_list()[::-1], label="curated", color="#55a868")
    ax.set_xlabel("pages")
    ax.set_title(f"Top {top.height} hosts by pages fetched")
    ax.legend(loc="lower right")
    return _save(fig, run_dir, "hosts.png")


def plot_yield_curves(hq_by_fetch: dict[str, list[int]], total_pages: int, path: Path) -> None:
    """High-quality pages collected against pages fetched, as shares of the whole test web."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for policy, hits in hq_by_fetch.items():
        xs = [100 * (i + 1) / total_pages for i in range(len(hits))]
        ax.plot(xs, hits, label=policy)
    ax.set_xlabel("budget: pages fetched, % of all pages")
    ax.set_ylabel("high-quality pages collected")
    ax.set_title("Crawl yield by policy (same test web)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_yield_against_budget(curve: dict[str, dict[str, float]], path: Path) -> None:
    """High-quality pages per fetch of each policy at budgets from 1% to 50% of the test web."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for policy, points in curve.items():
        ax.plot([100 * float(s) for s in points], list(points.values()), marker="o", label=policy)
    ax.set_xscale("log")
    ticks = sorted({100 * float(s) for points in curve.values() for s in points})
    ax.set_xticks(ticks, [f"{t:g}%" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("budget, share of all pages (log scale)")
    ax.set_ylabel("high-quality pages per fetch")
    ax.set_ylim(0, 1)
    ax.set_title("Yield against budget by policy (same test web)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _table(rows: list[tuple[str, Any]]) -> str:
    lines = ["| | |", "|---|---|"]
    for key, value in rows:
        shown = f"{value:.3f}" if isinstance(value, float) else str(value)
        lines.append(f"| {key} | {shown} |")
    return "\n".join(lines)


def _status_table(stats: dict[str, Any]) -> str:
    wanted: tuple[str, ...] = ("fetch/", "page/", "clean/", "politeness/", "robotstxt/")
    wanted += ("retry/reason_count/", "warc/", "dedup/")
    rows = sorted((k, v) for k, v in stats.items() if k.startswith(wanted))
    return _table(rows) if rows else "(none)"


def _continue_hint(run_dir: Path) -> str:
    """--resume for a one-process run; a worker's own report (RUN/workers/ID/) names its run's command."""
    marker = run_dir.parent.parent / RUN_FILE
    if run_dir.parent.name != WORKERS_DIR or not marker.is_file():
        return f"Continue it with `hostcrawl crawl --resume {run_dir}`."
    try:
        run = json.loads(marker.read_text(encoding="utf-8"))
        frontier, name = run["frontier"], run["run"]
    except (OSError, ValueError, KeyError, TypeError):
        frontier, name = "URL", "NAME"
    return (
        f"Continue the run with a worker: `{worker_command(frontier, name, run_dir.parent.parent)}` and this "
        "worker's other options, under a new --worker-id (or none)."
    )


def _run_status(run_dir: Path, stats: dict[str, Any]) -> list[str]:
    """Whether the run finished, and over how many processes (every figure below covers them all)."""
    lines = []
    if stats.get("finish_reason") == "shutdown":
        lines += [
            "**Interrupted** (SIGINT or SIGTERM): the crawl stopped before its budget was spent. "
            + _continue_hint(run_dir),
            "",
        ]
    attempts = int(stats.get(ATTEMPTS, 1) or 1)
    if attempts > 1:
        lines += [f"This run took {attempts} processes ({attempts - 1} resumes); figures cover all.", ""]
    return lines


def language_scores(pages: pl.DataFrame, score: str, threshold: float, top: int = 15) -> str:
    """Score distribution per page language (the most common `top`), as a markdown table."""
    scored = pages.filter(pl.col(score).is_not_null())
    if scored.is_empty() or "language" not in scored.columns:
        return "(no scored pages)"
    table = (
        scored.group_by(pl.col("language").fill_null("unknown"))
        .agg(
            pl.len().alias("pages"),
            pl.col(score).mean().alias("mean"),
            pl.col(score).quantile(0.1).alias("p10"),
            pl.col(score).median().alias("median"),
            pl.col(score).quantile(0.9).alias("p90"),
            (pl.col(score) > threshold).mean().alias(f"share > {threshold:g}"),
            pl.col("curated").fill_null(False).mean().alias("share curated"),
        )
        .sort(["pages", "language"], descending=[True, False])
        .head(top)
    )
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * table.width]
    for row in table.iter_rows():
        cells = [f"{v:.3f}" if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_report(
    run_dir: Path,
    pages: pl.DataFrame,
    hosts: pl.DataFrame,
    stats: dict[str, Any],
    score: str,
    threshold: float,
    extra_sections: list[str] | None = None,
) -> Path:
    html_pages = pages.filter(pl.col(score).is_not_null())
    counts = run_counts(stats)
    summary = [
        (f"{label('fetched')} (what the budget counts)", counts["fetched"] or pages.height),
        (f"{label('page_rows')} (pages.parquet: every URL's outcome)", pages.height),
        (f"{label('responses')} (robots.txt, redirects and retries too)", counts["responses"]),
        ("hosts (hosts.parquet)", hosts.height),
        ("HTML pages cleaned and scored", html_pages.height),
        ("pages curated (text/)", int(pages["curated"].fill_null(False).sum())),
        ("wall time (s)", stats.get("hostcrawl/wall_seconds", 0.0)),
        ("pages per second", stats.get("hostcrawl/pages_per_second", 0.0)),
        ("policy", stats.get("hostcrawl/policy", "")),
    ]
    parts = [f"# Crawl report: {run_dir.name}", "", *_run_status(run_dir, stats), _table(summary), ""]
    for title, image in (
        ("Progress", plot_progress(pages, run_dir)),
        ("Quality scores", plot_scores(pages, score, threshold, run_dir)),
        ("Hosts", plot_hosts(hosts, run_dir)),
    ):
        if image:
            parts += [f"## {title}", "", f"![{title}]({image})", ""]
    parts += [f"## Scores per language ({score})", "", language_scores(pages, score, threshold), ""]
    parts += ["## Decisions and failures (from stats.json)", "", _status_table(stats), ""]
    for section in extra_sections or []:
        parts += [section, ""]
    path = run_dir / "report.md"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
