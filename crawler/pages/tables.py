"""pages.parquet and hosts.parquet of a run, built from the page spool at the end (or after a crash).

One writer for every page table (a crawl's pages.parquet, `hostcrawl score`'s): rows stream into
`NAME.partial` and the table appears under its name only when complete; both carry the same
WARC location columns, so any row leads back to its archived response with one seek.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Self

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from cleaner.quality import score_column
from crawler.pages.outcomes import REFUSED_BY_US
from crawler.pages.sinks import PAGES_SPOOL
from scheduler.export import host_states
from scheduler.scrapy_scheduler import FRONTIER_FILE

# Where a row's response record lies (None when nothing was archived: robots.txt refusal, network error).
WARC_LOCATION = pa.schema(
    [("warc_filename", pa.string()), ("warc_offset", pa.int64()), ("warc_length", pa.int64())]
)
# Responses that are not HTML pages to clean: a page kind, not an error (html for the rest).
PAGE_KINDS = ("sitemap", "not_html", "binary_as_html")

PAGE_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "url": pl.String,
    "host": pl.String,
    "outcome": pl.String,
    "kind": pl.String,
    "status": pl.Int32,
    "content_type": pl.String,
    "bytes": pl.Int64,
    "depth": pl.Int32,
    "fetched_at": pl.String,
    "warc_record_id": pl.String,
    **pl.from_arrow(WARC_LOCATION.empty_table()).schema,  # type: ignore[union-attr]
    "truncated": pl.Boolean,
    "policy": pl.String,
    "phase": pl.String,
    "error": pl.String,
    "noindex": pl.Boolean,
    "nofollow": pl.Boolean,
    "optout": pl.String,
    "cleaner": pl.String,
    "operation": pl.String,  # rescraper_v1: keep, edit, rewrite or extract_only (null for other cleaners)
    "n_words": pl.Int64,
    "curated": pl.Boolean,
    "title": pl.String,
    "language": pl.String,
    "revisit": pl.String,  # --previous: the WARC revisit profile of an unchanged page
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
    return with_outcome(frame).with_columns(
        pl.col("fetched_at").str.to_datetime(time_zone="UTC", strict=False)
    )


def with_outcome(frame: pl.DataFrame) -> pl.DataFrame:
    """`outcome` and `kind` from status and error; a page kind leaves the error column."""
    error, status = pl.col("error"), pl.col("status")
    # a response archived as received, then refused when decoded (a bomb): its row has the record's
    # status and location, and it failed
    refused_decoded = error == "too_large_decoded"
    outcome = (
        pl.when(status >= 400)
        .then(pl.lit("http_error"))
        .when(refused_decoded)
        .then(pl.lit("failed"))
        .when(status.is_not_null())
        .then(pl.lit("fetched"))
        .when(error == "robots_forbidden")
        .then(pl.lit("robots_refused"))
        .when(error.is_in(REFUSED_BY_US))
        .then(pl.lit("refused"))
        .otherwise(pl.lit("failed"))
    )
    kind = (
        pl.when(status.is_null() | refused_decoded)
        .then(None)
        .when(error.is_in(PAGE_KINDS))
        .then(error)
        .otherwise(pl.lit("html"))
    )
    return frame.with_columns(
        outcome=outcome,
        kind=kind,
        error=pl.when(error.is_in(PAGE_KINDS)).then(None).otherwise(error),
    )


class PageTableWriter:
    """Streams row batches into `path` under one schema; the file appears only once it is complete."""

    def __init__(self, path: Path, schema: pa.Schema, *, overwrite: bool = True) -> None:
        if path.is_dir():
            raise IsADirectoryError(f"{path}: is a directory, not a parquet file")
        if path.exists() and not overwrite:
            raise FileExistsError(f"{path}: exists; pass --force to overwrite it")
        self.path = path
        self.partial = path.with_name(path.name + ".partial")
        self.schema = schema
        self._writer = pq.ParquetWriter(self.partial, schema)

    def write_rows(self, rows: list[dict[str, Any]]) -> None:
        self._writer.write_table(pa.Table.from_pylist(rows, self.schema))

    def write_table(self, table: pa.Table) -> None:
        self._writer.write_table(table.select(self.schema.names).cast(self.schema))

    def close(self) -> None:
        self._writer.close()
        os.replace(self.partial, self.path)

    def abort(self) -> None:
        self._writer.close()
        self.partial.unlink(missing_ok=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


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
    return join_scheduler_states(hosts, host_states(run_dir / FRONTIER_FILE))


def join_scheduler_states(hosts: pl.DataFrame, states: pl.DataFrame) -> pl.DataFrame:
    if not states.height:
        return hosts
    joined = (
        hosts.drop("state")
        .join(states, on="host", how="left")
        .with_columns(pl.col("state").fill_null("unknown"))
    )
    # a host given up on (or parked) before any of its pages got a row still says why
    unfetched = states.filter(pl.col("drop_reason").is_not_null() & ~pl.col("host").is_in(hosts["host"]))
    if not unfetched.height:
        return joined
    counts = ["fetched", "not_fetched", "ok", "errors", "html_pages", "curated", "bytes"]
    return (
        pl.concat([joined, unfetched], how="diagonal_relaxed")
        .with_columns(pl.col(counts).fill_null(0))
        .sort("host")
    )


def write_tables(run_dir: Path, scorers: list[str], crawl_delays: dict[str, float]) -> pl.DataFrame:
    pages = read_spool(run_dir, scorers)
    table = pages.to_arrow()
    with PageTableWriter(run_dir / "pages.parquet", table.schema) as writer:
        writer.write_table(table)
    hosts = with_scheduler_states(host_table(pages, scorers, crawl_delays), run_dir)
    hosts.write_parquet(run_dir / "hosts.parquet")
    return pages
