"""What `hostcrawl score` shows and writes around the page table: progress, summary, host table."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import polars as pl
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from cleaner.quality import HIGH_QUALITY_THRESHOLD, score_column, scorer_column
from cleaner.quality.ensemble import add_ensemble_to_parquet

SHOWN_BROKEN = 10  # broken records listed by offset; the rest are counted
ENSEMBLE_NAME = "ensemble"


@contextlib.contextmanager
def progress_bar(
    console: Console, total_bytes: int, enabled: bool = True
) -> Iterator[Callable[[int, int], None]]:
    """A bar over the input bytes with pages and pages/s; yields `advance(bytes_done, pages)`."""
    if not enabled:
        yield lambda done, pages: None
        return
    columns = (
        TextColumn("[bold]scoring"),
        BarColumn(),
        DownloadColumn(),
        TextColumn("{task.fields[pages]:,} pages, {task.fields[rate]:.1f} pages/s"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("score", total=total_bytes or 1, pages=0, rate=0.0)

        def advance(done: int, pages: int) -> None:
            elapsed = progress.tasks[0].elapsed or 0.0
            rate = pages / elapsed if elapsed > 0 else 0.0
            progress.update(task, completed=done, pages=pages, rate=rate)

        yield advance


def host_table(pages: Path, out: Path, score_columns: Sequence[str]) -> int:
    """Per host: pages, registered domain, primary language and its share, mean score and the
    share of pages above the high-quality bar (the host's quality density) per classifier."""
    frame = pl.scan_parquet(pages)
    language = (
        frame.filter(pl.col("language").is_not_null())
        .group_by("host", "language")
        .agg(pl.len().alias("n"))
        .sort(["host", "n", "language"], descending=[False, True, False])
        .group_by("host", maintain_order=True)
        .first()
    )
    aggregates = [
        pl.len().alias("pages"),
        pl.col("registered_domain").first(),
        (pl.col("text_length") > 0).sum().alias("pages_with_text"),
    ]
    for column in score_columns:
        name = column.removeprefix("score_")
        aggregates += [
            pl.col(column).mean().alias(f"mean_{name}"),
            (pl.col(column) > HIGH_QUALITY_THRESHOLD).mean().alias(f"density_{name}"),
        ]
    hosts = (
        frame.group_by("host")
        .agg(aggregates)
        .join(language, on="host", how="left")
        .with_columns(
            pl.col("language").alias("primary_language"),
            (pl.col("n").fill_null(0) / pl.col("pages")).alias("primary_language_share"),
        )
        .drop("language", "n")
        .sort("host")
        .collect()
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    hosts.write_parquet(out)
    return hosts.height


def finish_outputs(
    out: Path, scorers: Sequence[str], pages: int, ensemble: bool, hosts_out: Path | None
) -> dict[str, Any]:
    """Post-passes over the written table (ensemble column, host table); returns what they made."""
    extra: dict[str, Any] = {}
    columns = [score_column(spec) for spec in scorers]
    if ensemble:
        members = dict(zip(columns, scorers, strict=True))
        try:
            calibration = add_ensemble_to_parquet(out, members, name=ENSEMBLE_NAME)
        except ValueError as exc:  # too few pages with text to place 19 cut points
            extra["ensemble_error"] = str(exc)
        else:
            # the calibration file is itself a scorer spec: --classifier nemotron=FILE
            calibration.members = {scorer_column(s): s for s in scorers}
            calibration.thresholds = {scorer_column(s): calibration.thresholds[c] for c, s in members.items()}
            path = out.with_suffix(".ensemble.json")
            calibration.save(path)
            extra["ensemble_calibration"] = str(path)
            columns.append(f"score_{ENSEMBLE_NAME}")
    if hosts_out is not None and pages:
        extra["hosts"] = host_table(out, hosts_out, columns)
        extra["hosts_out"] = str(hosts_out)
    return extra


def print_summary(
    console: Console,
    out: Path,
    pages: int,
    seconds: float,
    counts: Counter[str],
    broken: Sequence[Any],
    extra: dict[str, Any],
) -> None:
    """Pages written, throughput, every skip reason with its count, and the broken records."""
    rate = pages / seconds if seconds > 0 else 0.0
    console.print(f"[bold]scored[/] {pages:,} pages in {seconds:.1f}s ({rate:.1f} pages/s) -> {out}")
    table = Table(title="records", show_header=True)
    table.add_column("reason")
    table.add_column("count", justify="right")
    for reason, count in sorted(counts.items()):
        table.add_row(reason, f"{count:,}")
    console.print(table)
    for record in broken[:SHOWN_BROKEN]:
        resumed = "end of file" if record.resumed_at is None else f"byte {record.resumed_at}"
        console.print(
            f"[yellow]broken record[/] {record.warc_file} at byte {record.offset}: {record.reason}; "
            f"skipped to {resumed}",
            highlight=False,
        )
    if len(broken) > SHOWN_BROKEN:
        console.print(f"[yellow]... and {len(broken) - SHOWN_BROKEN} more broken records[/]")
    if "ensemble_error" in extra:
        console.print(f"[yellow]no ensemble:[/] {extra['ensemble_error']}")
    if "ensemble_calibration" in extra:
        console.print(f"ensemble calibration -> {extra['ensemble_calibration']}")
    if "hosts_out" in extra:
        console.print(f"{extra['hosts']:,} hosts -> {extra['hosts_out']}")
