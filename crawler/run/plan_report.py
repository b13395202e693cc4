"""A plan-guided crawl's report: per planned host and in total, the high-quality pages the plan expected
against what the crawl got (curated pages), and on the test web against the truth (its page labels)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from crawler.run.crawl_config import CrawlConfig

PLAN_HOSTS_FILE = "plan_hosts.parquet"
SHOWN_HOSTS = 15


def plan_table(run_dir: Path, config: CrawlConfig) -> pl.DataFrame | None:
    """RUN/plan_hosts.parquet: one row per planned host; None for a crawl without a plan."""
    if not config.policy.plan or not Path(config.policy.plan).is_file():
        return None
    plan = pl.read_parquet(config.policy.plan, columns=["host", "reason", "budget", "expected_hq", "density"])
    plan = plan.with_columns(pl.col("host").str.to_lowercase())
    pages = pl.read_parquet(run_dir / "pages.parquet", columns=["url", "host", "status", "curated"])
    got = pages.group_by("host").agg(
        fetched=pl.col("status").is_not_null().sum(), got_hq=pl.col("curated").fill_null(False).sum()
    )
    table = plan.join(got, on="host", how="left").with_columns(
        pl.col("fetched").fill_null(0), pl.col("got_hq").fill_null(0)
    )
    truth = _truth(config)
    if truth is not None:
        hosts, labels = truth
        fetched_true = (
            pages.filter(pl.col("status") == 200)
            .join(labels, on="url")
            .group_by("host")
            .agg(true_hq_got=pl.col("high_quality").sum())
        )
        table = (
            table.join(hosts, on="host", how="left")
            .join(fetched_true, on="host", how="left")
            .with_columns(pl.col("true_hq_got").fill_null(0))
        )
    table.write_parquet(run_dir / PLAN_HOSTS_FILE)
    return table


def _truth(config: CrawlConfig) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """The test web's hosts.parquet (n_high per host) and the pages.parquet beside it, when given."""
    if not config.policy.truth:
        return None
    hosts_path = Path(config.policy.truth)
    pages_path = hosts_path.parent / "pages.parquet"
    if not hosts_path.is_file() or not pages_path.is_file():
        return None
    hosts = pl.read_parquet(hosts_path, columns=["host", "n_high"]).rename({"n_high": "true_hq_on_host"})
    labels = pl.read_parquet(pages_path, columns=["url", "high_quality"])
    return hosts, labels


def plan_section(run_dir: Path, config: CrawlConfig) -> list[str]:
    """The report.md section comparing the plan with the crawl ([] without a plan)."""
    table = plan_table(run_dir, config)
    if table is None:
        return []
    expected, got, fetched = (
        table["expected_hq"].sum(),
        int(table["got_hq"].sum()),
        int(table["fetched"].sum()),
    )
    budget = int(table["budget"].sum())
    truth = "true_hq_got" in table.columns
    lines = [
        "## Recrawl plan: expected vs got",
        "",
        f"Plan `{config.policy.plan}`: {table.height} hosts, {budget:,} pages budgeted. The crawl fetched "
        f"{fetched:,} pages from them and curated {got:,} high-quality pages; the plan expected "
        f"{expected:,.0f} ({got / expected if expected else 0:.2f}x).",
    ]
    unreached = table.filter(pl.col("fetched") == 0)["host"].to_list()
    if unreached:  # no page answered: a name that does not resolve, a host that is down or refuses us
        names = ", ".join(unreached[:5]) + (f" and {len(unreached) - 5} more" if len(unreached) > 5 else "")
        lines.append(
            f"{len(unreached)} planned hosts answered no page ({names}); their budget went to the next ones."
        )
    if truth:
        true_got = int(table["true_hq_got"].sum())
        lines.append(
            f"By the test web's truth, {true_got:,} of the fetched pages are high quality "
            f"({true_got / max(fetched, 1):.3f} per fetch; the plan expected "
            f"{expected / max(budget, 1):.3f})."
        )
    by_reason = (
        table.group_by("reason")
        .agg(
            pl.len().alias("hosts"),
            *(pl.col(c).sum() for c in ("budget", "fetched", "expected_hq", "got_hq")),
            *([pl.col("true_hq_got").sum()] if truth else []),
        )
        .sort("reason")
    )
    shown = table.sort("expected_hq", descending=True).head(SHOWN_HOSTS)
    columns = ["host", "reason", "budget", "fetched", "expected_hq", "got_hq"]
    columns += ["true_hq_got", "true_hq_on_host"] if truth else []
    lines += ["", _md(by_reason), "", f"Top {len(shown)} hosts by expected pages (all in {PLAN_HOSTS_FILE}):"]
    lines += ["", _md(shown.select(columns))]
    return ["\n".join(lines)]


def _md(frame: pl.DataFrame) -> str:
    rows = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    for row in frame.iter_rows():
        cells = [f"{v:.1f}" if isinstance(v, float) else ("" if v is None else str(v)) for v in row]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)
