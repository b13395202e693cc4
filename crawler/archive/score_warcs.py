"""`hostcrawl score`: clean and score the HTML responses in WARC files, one parquet row per page.

The paper's "classified-sample regime": Common Crawl's (or our own) WARC records -> main text ->
classifier scores and language, with host and registered domain for per-host aggregation. Records
stream through a bounded process pool, so memory stays flat whatever the input size; a broken or
truncated record is reported with its byte offset and the reader resumes at the next intact record.
"""

from __future__ import annotations

import argparse
import gc
import glob
import json
import logging
import multiprocessing
import os
import time
from collections import Counter, deque
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from rich.console import Console

from cleaner import decode_html
from cleaner.pipeline import process_pages
from cleaner.quality import DEFAULT_LANGID, DEFAULT_SCORER, get_scorer, score_column, scorer_column
from cleaner.quality.langid import describe_identifier, get_language_identifier
from cleaner.registry import cleaner_names
from crawler import __version__
from crawler.archive.score_warcs_reader import HtmlPage, ScoreStats, WarcReader, is_wet
from crawler.archive.score_warcs_report import finish_outputs, print_summary, progress_bar
from crawler.archive.warc_files import not_a_warc
from crawler.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, print_error
from crawler.pages.batch_cleaner import exit_with_parent
from crawler.pages.tables import WARC_LOCATION, PageTableWriter

PAGES_PER_TASK = 16  # pages a worker cleans per task: amortises pickling without long stalls
TASKS_IN_FLIGHT_PER_WORKER = 3  # bounds memory: at most workers x 3 x 16 pages are held at once
ROW_GROUP_ROWS = 10_000


def _quiet_worker() -> None:
    """Workers have no log setup; without this every page trafilatura discards prints a warning."""
    for name in ("trafilatura", "htmldate", "courlan"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def _init_pool_worker(parent: int = 0) -> None:
    """A pool worker is quiet too, and ends by itself when its `score` (pid `parent`) was killed outright."""
    exit_with_parent(parent)
    _quiet_worker()


def score_pages(
    pages: list[HtmlPage], cleaner: str, scorers: tuple[str, ...], langid: str | None
) -> tuple[list[dict[str, Any]], Counter[str]]:
    """Worker task: decode, clean, identify and score a handful of pages (one cleaner call for them all,
    so a model cleaner labels them in one batch)."""
    rows, counts = [], Counter[str]()
    htmls = [(decode_html(page.body, page.charset), page.url) for page in pages]
    for page, result in zip(pages, process_pages(htmls, cleaner, scorers, langid), strict=True):
        if result.error:
            counts[f"page/{result.error}"] += 1
        if result.fallback:  # a model cleaner could not label the page: its fallback's text is scored
            counts[f"clean/fallback/{result.fallback}"] += 1
        row: dict[str, Any] = {
            "url": page.url,
            "host": page.host,
            "registered_domain": page.registered_domain,
            "language": result.language,
            "language_score": result.language_score if result.language else None,
            "text_length": len(result.text),
        }
        for spec in scorers:
            row[score_column(spec)] = result.scores.get(spec, 0.0)
        row.update(warc_filename=page.warc_file, warc_offset=page.offset, warc_length=page.length)
        rows.append(row)
    return rows, counts


def page_schema(columns: list[str], metadata: dict[str, Any]) -> pa.Schema:
    fields = [
        pa.field("url", pa.string()),
        pa.field("host", pa.string()),
        pa.field("registered_domain", pa.string()),
        pa.field("language", pa.string()),
        pa.field("language_score", pa.float32()),
        pa.field("text_length", pa.int64()),
        *(pa.field(column, pa.float64()) for column in columns),
        *WARC_LOCATION,
    ]
    return pa.schema(fields, metadata={"hostcrawl": json.dumps(metadata)})


@dataclass(slots=True)
class ScoreJob:
    """Everything `hostcrawl score` was asked to do, resolved and validated."""

    warcs: list[Path]
    out: Path
    scorers: tuple[str, ...]
    cleaner: str = "blocks_v1"
    langid: str | None = DEFAULT_LANGID
    workers: int = 1
    limit: int | None = None
    ensemble: bool = False
    hosts_out: Path | None = None
    progress: bool = True
    force: bool = False


def provenance(job: ScoreJob) -> dict[str, Any]:
    """Build each scorer once here, so a bad model path fails before any WARC is read."""
    described = [get_scorer(spec).describe() for spec in job.scorers]
    language = describe_identifier(get_language_identifier(job.langid)) if job.langid else None
    gc.collect()  # drop the models again: the workers load their own
    return {
        "hostcrawl": __version__,
        "cleaner": job.cleaner,
        "scorers": described,
        "langid": language,
        "warcs": [str(p) for p in job.warcs],
    }


def run_score(job: ScoreJob, console: Console) -> ScoreStats:
    """Stream every WARC through the pool into the parquet file; returns the counters."""
    stats, started = ScoreStats(), time.monotonic()
    columns = [score_column(spec) for spec in job.scorers]
    schema = page_schema(columns, provenance(job))
    buffer: list[dict[str, Any]] = []
    job.out.parent.mkdir(parents=True, exist_ok=True)
    writer = PageTableWriter(job.out, schema, overwrite=job.force)
    pool = None
    if job.workers > 1:
        context = multiprocessing.get_context("spawn")
        pool = ProcessPoolExecutor(
            job.workers, mp_context=context, initializer=_init_pool_worker, initargs=(os.getpid(),)
        )
    else:
        _quiet_worker()
    pending: deque[Future[Any] | tuple[list[dict[str, Any]], Counter[str]]] = deque()
    total_bytes = sum(p.stat().st_size for p in job.warcs)

    def drain(keep: int) -> None:
        while len(pending) > keep:
            item = pending.popleft()
            rows, counts = item.result() if isinstance(item, Future) else item
            stats.counts.update(counts)
            stats.pages += len(rows)
            buffer.extend(rows)
            if len(buffer) >= ROW_GROUP_ROWS:
                writer.write_rows(buffer)
                buffer.clear()

    def submit(batch: list[HtmlPage]) -> None:
        args = (batch, job.cleaner, job.scorers, job.langid)
        pending.append(pool.submit(score_pages, *args) if pool else score_pages(*args))
        drain(job.workers * TASKS_IN_FLIGHT_PER_WORKER)

    try:
        with progress_bar(console, total_bytes, enabled=job.progress) as advance:
            done_bytes, queued = 0, 0
            for path in job.warcs:
                reader, batch = WarcReader(path, stats), []
                for page in reader:
                    batch.append(page)
                    queued += 1
                    if len(batch) >= PAGES_PER_TASK:
                        submit(batch)
                        batch = []
                    advance(done_bytes + reader.position, stats.pages)
                    if job.limit is not None and queued >= job.limit:
                        break
                if batch:
                    submit(batch)
                done_bytes += path.stat().st_size
                advance(done_bytes, stats.pages)
                if job.limit is not None and queued >= job.limit:
                    stats.counts["run/stopped_at_limit"] += 1
                    break
            drain(0)
            advance(done_bytes, stats.pages)
        if buffer:
            writer.write_rows(buffer)
    except BaseException:
        writer.abort()
        raise
    else:
        writer.close()
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    stats.seconds = time.monotonic() - started
    return stats


def expand_warcs(patterns: list[str]) -> list[Path]:
    """Files and globs -> sorted, de-duplicated paths; a pattern matching nothing is an error."""
    found: list[Path] = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern, recursive=True)) or ([pattern] if Path(pattern).is_file() else [])
        files = [Path(m) for m in matches if Path(m).is_file()]
        if not files:
            raise ValueError(f"--warc {pattern!r} matches no file")
        found += [f for f in files if f not in found]
    return found


def check_output(path: Path | None, flag: str, force: bool) -> None:
    """Refuse before reading anything: an output that is a folder, or exists without --force."""
    if path is None:
        return
    if path.is_dir():
        raise ValueError(f"{flag} {path}: is a directory; give a parquet file name")
    if path.exists() and not force:
        raise ValueError(f"{flag} {path}: exists; pass --force to overwrite it")
    parent = next((p for p in path.parents if p.exists()), Path("."))
    if not parent.is_dir():
        raise ValueError(f"{flag} {path}: {parent} is a file, not a folder")


def check_warcs(warcs: list[Path]) -> None:
    """Every input is a WARC file with HTML in it, or nothing is scored (and nothing written)."""
    for path in warcs:
        if is_wet(path):
            raise ValueError(
                f"{path}: a WET file (extracted text, no HTML); score cleans HTML itself, so give it "
                "the WARC file (Common Crawl's *.warc.gz, not *.warc.wet.gz)"
            )
        if (problem := not_a_warc(path)) is not None:
            raise ValueError(f"{path}: not a WARC file ({problem})")


def cmd_score(args: argparse.Namespace) -> int:
    console = Console(stderr=True)
    scorers = ([] if args.no_heuristic else [DEFAULT_SCORER]) + list(args.classifier)
    try:
        if not scorers:
            raise ValueError("no classifier: drop --no-heuristic or add --classifier")
        if len({scorer_column(s) for s in scorers}) < len(scorers):
            raise ValueError(f"two classifiers share a name: {scorers}")
        if args.cleaner not in cleaner_names():
            raise ValueError(f"unknown cleaner {args.cleaner!r}; known: {', '.join(cleaner_names())}")
        if args.limit is not None and args.limit < 1:
            raise ValueError(f"--limit {args.limit}: must be at least 1")
        if args.workers < 1:
            raise ValueError(f"--workers {args.workers}: must be at least 1 (one process per core)")
        check_output(args.out, "--out", args.force)
        check_output(args.hosts_out, "--hosts-out", args.force)
        warcs = expand_warcs(args.warc)
        check_warcs(warcs)
        job = ScoreJob(
            warcs=warcs,
            out=args.out,
            scorers=tuple(scorers),
            cleaner=args.cleaner,
            langid=args.lid or DEFAULT_LANGID,
            workers=args.workers,
            limit=args.limit,
            ensemble=args.ensemble,
            hosts_out=args.hosts_out,
            progress=not args.no_progress,
            force=args.force,
        )
        stats = run_score(job, console)
    except (ValueError, ImportError) as exc:
        print_error(exc)
        return EXIT_USAGE
    except OSError as exc:  # an output that cannot be written, an input that cannot be read
        print_error(f"{exc.filename or args.out}: {exc.strerror or exc}")
        return EXIT_USAGE
    extra = finish_outputs(job.out, job.scorers, stats.pages, ensemble=job.ensemble, hosts_out=job.hosts_out)
    summary = {**asdict(stats), "counts": dict(stats.counts), **extra}
    job.out.with_suffix(".stats.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    print_summary(console, job.out, stats.pages, stats.seconds, stats.counts, stats.broken, extra)
    return EXIT_OK if stats.pages else EXIT_FAILED
