"""Clean and score pages in batches in worker processes, then write text, WARC metadata and page rows."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from concurrent.futures import Executor
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from scrapy import signals
from scrapy.exceptions import DontCloseSpider

from cleaner.pipeline import PageResult, process_pages, warm_up
from cleaner.quality import score_column, scorer_column
from cleaner.quality.language_profiles import LanguageThresholds
from cleaner.registry import NO_CLEANER
from crawler import __version__
from crawler.archive.warc_capture import WarcCaptureMiddleware
from crawler.fetch.directives import kept_out
from crawler.pages.batch_cleaner import (
    CLEAN_BATCH_MS,
    WORKER_CRASH,
    WORKER_NICENESS,
    BatchCleaner,
    pool_shape,
)
from crawler.pages.sinks import CHECKPOINT_META, PAGES_SPOOL, PageSpool, SinkCheckpoint, TextSink
from crawler.pages.staged_pool import cleaning_pool
from crawler.run.run_stats import ATTEMPTS, STATS_META, dumps_stats
from scheduler.lease import Lease
from scheduler.scrapy_scheduler import page_fetched, page_recovered, page_scored, storage_failed

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

DOC_SOURCE = "hostcrawl"  # dolma's `source` field of every curated document


def doc_id(url: str) -> str:
    return hashlib.sha1(url.encode("utf-8")).hexdigest()[:20]


def crawl_value(
    thresholds: LanguageThresholds, score: float | None, language: str | None, withheld: str | None
) -> float | None:
    """What a scored page tells the scheduler about its host: the score on the default threshold's
    scale, or 0.0 for a page kept out of the curated text (noindex, opted out of AI training): a page
    we may not use is worth nothing to the crawl, however good."""
    if score is None:
        return None
    return 0.0 if withheld else thresholds.on_default_scale(score, language)


def _pool_failure(error: str | None) -> bool:
    """The cleaning pool failed the page (not the page itself): worth another try."""
    return error is not None and error.startswith(("cleaner/exception/", WORKER_CRASH))


class CleanScoreStorePipeline:
    """The reactor only batches pages and awaits them; cleaners and scorers run in a process pool."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.stats = crawler.stats
        self.run_dir = Path(settings["HOSTCRAWL_RUN_DIR"])
        self.cleaner = settings["HOSTCRAWL_CLEANER"]
        self.scorers = tuple(settings.getlist("HOSTCRAWL_SCORERS"))
        self.threshold = settings.getfloat("HOSTCRAWL_THRESHOLD")
        self.curate_optout = settings.getbool("HOSTCRAWL_CURATE_OPTOUT")
        self.allow_rewrite = settings.getbool("HOSTCRAWL_ALLOW_REWRITE", True)
        by_language = settings.getdict("HOSTCRAWL_LANGUAGE_THRESHOLDS")
        self.thresholds = LanguageThresholds(self.threshold, by_language)
        self.workers, self.batch_pages = pool_shape(
            self.cleaner, settings.getint("HOSTCRAWL_CLEAN_WORKERS"), settings.getint("HOSTCRAWL_CLEAN_BATCH")
        )
        self.batch_ms = settings.getfloat("HOSTCRAWL_CLEAN_BATCH_MS", CLEAN_BATCH_MS)
        self.max_in_flight = settings.getint("HOSTCRAWL_CLEAN_IN_FLIGHT", 0)
        self.niceness = settings.getint("HOSTCRAWL_CLEAN_NICENESS", WORKER_NICENESS)
        self.docs_per_file = settings.getint("HOSTCRAWL_TEXT_DOCS_PER_FILE")
        self.batcher: BatchCleaner | None = None
        self.text: TextSink | None = None
        self.pages: PageSpool | None = None
        self.warc: WarcCaptureMiddleware | None = None
        self.started = (0.0, 0.0)  # wall and CPU seconds of this process when the spider opened
        self.recovered: list[dict[str, Any]] = []  # pages an earlier run fetched and never scored
        self.recovering: set[asyncio.Task[dict[str, Any]]] = set()
        self.storage_failed = False  # a write was refused (crawler/run/storage_stop.py): commit nothing more
        crawler.signals.connect(self._recovered, signal=page_recovered)
        crawler.signals.connect(self._storage_failed, signal=storage_failed)
        crawler.signals.connect(self._idle, signal=signals.spider_idle)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def _make_pool(self) -> Executor:
        return cleaning_pool(self.cleaner, self.workers, self.niceness)

    async def open_spider(self, spider: Any = None) -> None:
        self.text = TextSink(self.run_dir / "text", self.docs_per_file)
        self.pages = PageSpool(self.run_dir / PAGES_SPOOL)
        self.warc = self.crawler.get_downloader_middleware(WarcCaptureMiddleware)
        if self.cleaner != NO_CLEANER:
            self.batcher = BatchCleaner(
                self._make_pool,
                process_pages,
                (self.cleaner, self.scorers),
                name=self.cleaner,
                workers=self.workers,
                batch_pages=self.batch_pages,
                batch_seconds=self.batch_ms / 1000,
                max_in_flight=self.max_in_flight,
            )
            await self.batcher.warm_up(warm_up)
        self.started = (time.monotonic(), time.process_time())
        self.stats.set_value(ATTEMPTS, 1)  # this process; a resumed run's stats sum them
        self._clean_recovered()

    def _recovered(self, lease: Lease, page: dict[str, Any], html: str) -> None:
        self.recovered.append(dict(page, html=html, _lease=lease, _recovered=True))

    def _clean_recovered(self) -> None:
        """Pages fetched before a crash but not scored: cleaned from their stored HTML, not refetched."""
        for item in self.recovered:
            self.stats.inc_value("page/cleaned_again_after_resume")
            task = asyncio.ensure_future(self.process_item(item))
            self.recovering.add(task)
            task.add_done_callback(self.recovering.discard)
        self.recovered = []

    def _storage_failed(self, where: str, error: str) -> None:
        self.storage_failed = True

    def _idle(self) -> None:
        """Recovered pages are not in Scrapy's scraper slot: keep the crawl open until they are scored."""
        if self.recovering:
            raise DontCloseSpider

    def close_spider(self, spider: Any = None) -> None:
        if self.batcher is not None:
            self.batcher.close()
            for key, value in self.batcher.report().items():
                self.stats.set_value(key, value)
        wall, cpu = time.monotonic() - self.started[0], time.process_time() - self.started[1]
        # the crawling process alone (reactor, parsing, writing; not the workers): CPU near wall = the limit
        self.stats.set_value("clean/crawl_process_cpu_seconds", round(cpu, 3))
        self.stats.set_value("clean/crawl_process_wall_seconds", round(wall, 3))
        for sink in (self.text, self.pages):
            try:
                if sink is not None:
                    sink.close()
            except OSError:
                if not self.storage_failed:
                    raise  # after a refused write the resume cuts both back to the last commit

    async def process_item(self, item: dict[str, Any], spider: Any = None) -> dict[str, Any]:
        assert self.text is not None and self.pages is not None
        html = item.pop("html", None)
        lease = item.pop("_lease", None)
        recovered = item.pop("_recovered", False)
        if lease is not None and html is not None and self.batcher is not None and not recovered:
            # committed with its links before cleaning: a crash from here on cleans it again, never
            # fetches it again (the ordering that makes this safe is explained in crawler/pages/sinks.py)
            self.crawler.signals.send_catch_log(signal=page_fetched, lease=lease, page=item, html=html)
        row = dict(item, cleaner=None, operation=None, n_words=0, curated=False, title=None, language=None)
        for name in self.scorers:
            row[score_column(name)] = None
        result: PageResult | None = None
        if html is not None and self.batcher is None:
            row["cleaner"] = NO_CLEANER  # cleaning switched off: the page is stored, never scored
            self.stats.inc_value("page/not_cleaned")
        elif html is not None and self.batcher is not None:
            result = await self.batcher.clean(html, item["url"])
            if self._stopping() and lease is not None and _pool_failure(result.error):
                # a failure the interruption may have caused: no row; the page stays fetched in the
                # frontier and the resumed run cleans it again
                self.stats.inc_value("page/left_for_resume")
                return row
        if self.storage_failed:  # the disk refused a write: nothing more is committed
            self.stats.inc_value("page/left_for_resume")
            return row
        try:
            if result is not None:
                self._record(item, row, result)
            elif html is not None:
                self._write_metadata(item, row, None)
            self.pages.write(row)
        except OSError as exc:
            return self._refused(exc, row)
        self.stats.inc_value("page/recorded")
        if lease is not None:
            score = crawl_value(
                self.thresholds,
                row[score_column(self.scorers[0])],
                row["language"],
                kept_out(item, self.curate_optout),
            )
            self.crawler.signals.send_catch_log(
                signal=page_scored, lease=lease, score=score, checkpoint=self._checkpoint()
            )
        return row

    def _refused(self, exc: OSError, row: dict[str, Any]) -> dict[str, Any]:
        """The disk refused the page's text, row or metadata: nothing of it is committed, and the crawl
        stops (crawler/run/storage_stop.py); the resumed run cuts the sinks back and cleans it again."""
        where = str(exc.filename) if exc.filename else str(self.run_dir)
        self.crawler.signals.send_catch_log(
            signal=storage_failed, where=where, error=exc.strerror or str(exc)
        )
        self.stats.inc_value("page/left_for_resume")
        return row

    def _stopping(self) -> bool:
        engine = self.crawler.engine
        return engine is not None and not engine.running

    def _checkpoint(self) -> dict[str, str]:
        """Committed by the frontier with the page: where the sinks end now, and this process's counters."""
        assert self.text is not None and self.pages is not None
        shard, text_bytes = self.text.position()
        sinks = SinkCheckpoint(self.pages.position(), shard, text_bytes)
        # a killed process never reaches finish_run: its wall time so far goes with its counters
        wall = round(time.monotonic() - self.started[0], 3)
        stats = dict(self.stats.get_stats(), **{"hostcrawl/wall_seconds": wall})
        return {CHECKPOINT_META: sinks.to_json(), STATS_META: dumps_stats(stats)}

    def _record(self, item: dict[str, Any], row: dict[str, Any], result: PageResult) -> None:
        """Fill the row from the page's result; curated text to the text sink, metadata to the WARC."""
        assert self.text is not None
        row.update(
            cleaner=result.cleaner, operation=result.operation, n_words=result.n_words, title=result.title,
            language=result.language,
        )  # fmt: skip
        if result.operation:  # rescraper_v1: how many pages were kept, edited, rewritten
            self.stats.inc_value(f"clean/operation/{result.operation}")
        for spec, value in result.scores.items():
            row[score_column(spec)] = value
        if result.truncated:
            self.stats.inc_value("clean/truncated")
        if result.fallback:  # e.g. clean/fallback/decoder_v2/overflow: the fallback's text, under its name
            self.stats.inc_value(f"clean/fallback/{result.fallback}")
        if result.error:
            row["error"] = result.error
            self.stats.inc_value(f"page/{result.error}")
        else:
            primary = result.scores.get(self.scorers[0], 0.0)
            withheld = kept_out(item, self.curate_optout) or (
                "generated" if result.generated and not self.allow_rewrite else None
            )
            threshold = self.thresholds.of(result.language)
            row["curated"] = primary > threshold and withheld is None
            if withheld and primary > threshold:
                self.stats.inc_value(f"page/kept_out/{withheld}")  # noindex or opted out of AI training
            else:
                self.stats.inc_value("page/curated" if row["curated"] else "page/below_threshold")
        revisit = bool(item.get("revisit"))  # unchanged since the previous run: its text is curated there
        if row["curated"] and not revisit:
            self.text.write(self._doc(item, result))
        self._write_metadata(item, row, None if revisit else result.text)

    def _doc(self, item: dict[str, Any], result: PageResult) -> dict[str, Any]:
        """A curated page as datatrove and dolma read it: id, text, dolma's source/added/created, and
        everything else under metadata."""
        return {
            "id": doc_id(item["url"]),
            "text": result.markdown or result.text,
            "source": DOC_SOURCE,
            "added": datetime.now(UTC).isoformat(timespec="seconds"),
            "created": item["fetched_at"],
            "metadata": {
                "url": item["url"],
                "host": item["host"],
                "title": result.title,
                "language": result.language,
                "scores": result.scores,
                "cleaner": result.cleaner,
                "operation": result.operation,
                "generated": result.generated,  # written by a model (a rewrite), not copied from the page
                "classifiers": list(self.scorers),
                "policy": item["policy"],
                "fetched_at": item["fetched_at"],
                "warc_record_id": item["warc_record_id"],
                "warc_filename": item.get("warc_filename"),
                "warc_offset": item.get("warc_offset"),
                "warc_length": item.get("warc_length"),
                "hostcrawl": __version__,
            },
        }

    def _write_metadata(self, item: dict[str, Any], row: dict[str, Any], text: str | None) -> None:
        warc = self.warc
        if warc is None or not item.get("warc_record_id"):
            return
        data = {
            "hostcrawl": __version__,
            "policy": row["policy"],
            "phase": row["phase"],
            "cleaner": row["cleaner"],
            "operation": row["operation"],
            "n_words": row["n_words"],
            "scores": {scorer_column(n): row[score_column(n)] for n in self.scorers},
            "threshold": self.thresholds.of(row["language"]),
            "curated": row["curated"],
            "error": row["error"],
        }
        warc.write_metadata(item["url"], item["warc_record_id"], data, text)
