"""Clean and score pages in worker processes, then write text, WARC metadata and page rows."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from cleaner.pipeline import process_page
from cleaner.quality import score_column, scorer_column
from crawler import __version__
from crawler.sinks import PAGES_SPOOL, PageSpool, TextSink
from crawler.warc_capture import WarcCaptureMiddleware
from scheduler.scrapy_scheduler import page_scored

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


def quiet_worker_logging() -> None:
    """Workers have no log setup; without this every page trafilatura discards prints a warning."""
    logging.getLogger("trafilatura").setLevel(logging.CRITICAL)
    logging.getLogger("htmldate").setLevel(logging.CRITICAL)


def doc_id(url: str) -> str:
    return hashlib.sha1(url.encode("utf-8")).hexdigest()[:20]


class CleanScoreStorePipeline:
    """The reactor only awaits futures; trafilatura and the scorers run in a process pool."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.stats = crawler.stats
        self.run_dir = Path(settings["HOSTCRAWL_RUN_DIR"])
        self.cleaner = settings["HOSTCRAWL_CLEANER"]
        self.scorers = tuple(settings.getlist("HOSTCRAWL_SCORERS"))
        self.threshold = settings.getfloat("HOSTCRAWL_THRESHOLD")
        self.workers = settings.getint("HOSTCRAWL_CLEAN_WORKERS") or os.cpu_count() or 1
        self.docs_per_file = settings.getint("HOSTCRAWL_TEXT_DOCS_PER_FILE")
        self.pool: ProcessPoolExecutor | None = None
        self.text: TextSink | None = None
        self.pages: PageSpool | None = None
        self.warc: WarcCaptureMiddleware | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def open_spider(self, spider: Any = None) -> None:
        # spawn, not fork: the parent runs a reactor and threads that must not be copied
        context = multiprocessing.get_context("spawn")
        self.pool = ProcessPoolExecutor(
            max_workers=self.workers, mp_context=context, initializer=quiet_worker_logging
        )
        self.text = TextSink(self.run_dir / "text", self.docs_per_file)
        self.pages = PageSpool(self.run_dir / PAGES_SPOOL)
        self.warc = self.crawler.get_downloader_middleware(WarcCaptureMiddleware)

    def close_spider(self, spider: Any = None) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
        if self.text is not None:
            self.text.close()
        if self.pages is not None:
            self.pages.close()

    async def process_item(self, item: dict[str, Any], spider: Any = None) -> dict[str, Any]:
        assert self.pool is not None and self.text is not None and self.pages is not None
        html = item.pop("html", None)
        lease = item.pop("_lease", None)
        row = dict(item, cleaner=None, n_words=0, curated=False, title=None, language=None)
        for name in self.scorers:
            row[score_column(name)] = None
        if html is not None:
            future = self.pool.submit(process_page, html, item["url"], self.cleaner, self.scorers)
            result = await asyncio.wrap_future(future)
            row.update(
                cleaner=result.cleaner, n_words=result.n_words, title=result.title, language=result.language
            )
            for spec, value in result.scores.items():
                row[score_column(spec)] = value
            if result.error:
                row["error"] = result.error
                self.stats.inc_value(f"page/{result.error}")
            else:
                primary = result.scores.get(self.scorers[0], 0.0)
                row["curated"] = primary > self.threshold
                self.stats.inc_value("page/curated" if row["curated"] else "page/below_threshold")
            if row["curated"]:
                self.text.write(self._doc(item, result))
            self._write_metadata(item, row, result.text)
        self.pages.write(row)
        self.stats.inc_value("page/recorded")
        if lease is not None:
            score = row[score_column(self.scorers[0])]
            self.crawler.signals.send_catch_log(signal=page_scored, lease=lease, score=score)
        return row

    def _doc(self, item: dict[str, Any], result: Any) -> dict[str, Any]:
        return {
            "id": doc_id(item["url"]),
            "url": item["url"],
            "host": item["host"],
            "title": result.title,
            "language": result.language,
            "text": result.markdown or result.text,
            "scores": result.scores,
            "cleaner": result.cleaner,
            "classifiers": list(self.scorers),
            "policy": item["policy"],
            "fetched_at": item["fetched_at"],
            "warc_record_id": item["warc_record_id"],
            "hostcrawl": __version__,
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
            "n_words": row["n_words"],
            "scores": {scorer_column(n): row[score_column(n)] for n in self.scorers},
            "threshold": self.threshold,
            "curated": row["curated"],
            "error": row["error"],
        }
        warc.write_metadata(item["url"], item["warc_record_id"], data, text)
