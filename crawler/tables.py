"""pages.parquet and hosts.parquet of a run, built from the page spool at the end (or after a crash)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from cleaner.quality import score_column
from crawler.sinks import PAGES_SPOOL
from scheduler.export import host_states
from scheduler.scrapy_scheduler import FRONTIER_FILE

PAGE_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "url": pl.String,
    "host": pl.String,
    "status": pl.Int32,
    "content_type": pl.String,
    "bytes": pl.Int64,
    "depth": pl.Int32,
    "fetched_at": pl.String,
    "warc_record_id": pl.String,
    "truncated": pl.Boolean,
    "policy": pl.String,
    "phase": pl.String,
    "error": pl.String,
    "noindex": pl.Boolean,
    "nofollow": pl.Boolean,
    "optout": pl.String,
    "cleaner": pl.String,
    "n_words": pl.Int64,
    "curated": pl.Boolean,
    "title": pl.String,
    "language": pl.String,
}


def read_spool(run_dir: Path, scorers: list[str]) -> pl.DataFrame:
    """The spool as a typed frame; a half-written last line from a crash is skipped."""
    schema = dict(PAGE_SCHEMA)
    for name in scorers:
        schema[score_column(name)] = pl.Float64
    path = run_dir / PAGES_SPOOL
    if not path.exists() or path.stat().st_size == 0:
        return pl.DataFrame(schema=schema)
    lines = path.read_bytes().splitlines()
    if lines and not lines[-1].rstrip().endswith(b"}"):
        lines = lines[:-1]
    frame = pl.read_ndjson(b"\n".join(lines), schema=schema, ignore_errors=True)
    return frame.with_columns(pl.col("fetched_at").str.to_datetime(time_zone="UTC", strict=False))


def host_table(pages: pl.DataFrame, scorers: list[str], crawl_delays: dict[str, float]) -> pl.DataFrame:
    """Per host: what was fetched, what it was worth, and how politely."""
    primary = score_column(scorers[0])
    hosts = (
        pages.group_by("host")
        .agg(
            fetched=pl.col("status").is_not_null().sum(),
            not_fetched=pl.col("status").is_null().sum(),  # robots.txt, private address, network error
            ok=(pl.col("status") == 200).sum(),
            errors=(pl.col("status") >= 400).sum(),
            html_pages=pl.col(primary).is_not_null().sum(),
            curated=pl.col("curated").sum(),
            mean_score=pl.col(primary).mean(),
            bytes=pl.col("bytes").sum(),
            language=pl.col("language").drop_nulls().mode().first(),
            first_fetch=pl.col("fetched_at").min(),
            last_fetch=pl.col("fetched_at").max(),
        )
        .with_columns(
            density_estimate=pl.when(pl.col("html_pages") > 0)
            .then(pl.col("curated") / pl.col("html_pages"))
            .otherwise(None),
            state=pl.when(pl.col("html_pages") == 0).then(pl.lit("blocked")).otherwise(pl.lit("exhausted")),
        )
        .sort("host")
    )
    delays = pl.DataFrame(
        {"host": list(crawl_delays), "crawl_delay": list(crawl_delays.values())},
        schema={"host": pl.String, "crawl_delay": pl.Float64},
    )
    return hosts.join(delays, on="host", how="left")


def with_scheduler_states(hosts: pl.DataFrame, run_dir: Path) -> pl.DataFrame:
    """Adds what the frontier believes about each host (state, density estimate, drop reason)."""
    states = host_states(run_dir / FRONTIER_FILE)
    if not states.height:
        return hosts
    return (
        hosts.drop("state")
        .join(states, on="host", how="left")
        .with_columns(pl.col("state").fill_null("unknown"))
    )


def write_tables(run_dir: Path, scorers: list[str], crawl_delays: dict[str, float]) -> pl.DataFrame:
    pages = read_spool(run_dir, scorers)
    pages.write_parquet(run_dir / "pages.parquet")
    hosts = with_scheduler_states(host_table(pages, scorers, crawl_delays), run_dir)
    hosts.write_parquet(run_dir / "hosts.parquet")
    return pages
