"""A disk that refuses a write stops the crawl cleanly, with the run as it was at its last commit.

Whatever fails to write (a WARC record, a curated document, a page row, the frontier's own commit) sends
`storage_failed`. From then on the frontier commits nothing (scheduler/scrapy_scheduler.py), so the run
directory is what a kill -9 at that moment would leave: every page committed is in the files, every
page beyond is still in the frontier, fetched or queued. This extension logs one line naming the file,
stops the crawl as SIGTERM would, and the command exits with EXIT_STORAGE instead of writing tables
and a report onto the disk that refused; `hostcrawl crawl --resume RUN` goes on once there is room.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Self

from scrapy import signals
from scrapy.utils.defer import deferred_from_coro

from scheduler.scrapy_scheduler import storage_failed

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

STORAGE_STAT = "hostcrawl/storage_error"  # "PATH: reason" of the first write the disk refused


class StorageStop:
    """Extension: the first `storage_failed` names the file in stats.json and the log, and stops."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.failed: str | None = None
        crawler.signals.connect(self.failed_write, signal=storage_failed)
        # after Scrapy's crawl() installs its root handler again, with the crawl's settings
        crawler.signals.connect(self.watch_log_files, signal=signals.engine_started)

    def watch_log_files(self) -> None:
        for handler in logging.getLogger().handlers:  # Scrapy's LOG_FILE handler: crawl.log
            if isinstance(handler, logging.FileHandler):
                self.watch_log_file(handler)

    def watch_log_file(self, handler: logging.FileHandler) -> None:
        """crawl.log is on the same disk: a refused log line stops the crawl like any refused write,
        instead of printing logging's own traceback for every line from then on."""
        # here, not at module level: importing it installs a reactor, and Scrapy installs its own first
        from twisted.internet import reactor

        report_error = handler.handleError

        def handle_error(record: logging.LogRecord) -> None:
            error = sys.exc_info()[1]
            if not isinstance(error, OSError):
                report_error(record)
                return
            # from any thread, inside the handler's lock: the stop itself runs in the reactor
            reason = error.strerror or str(error)
            send = self.crawler.signals.send_catch_log
            reactor.callFromThread(send, signal=storage_failed, where=handler.baseFilename, error=reason)

        handler.handleError = handle_error  # type: ignore[method-assign]

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def failed_write(self, where: str, error: str) -> None:
        self.crawler.stats.inc_value("storage/refused_writes")
        if self.failed is not None:
            return
        self.failed = f"{where}: {error}"
        self.crawler.stats.set_value(STORAGE_STAT, self.failed)
        logger.error("stopping: the disk refused a write (%s); nothing committed is lost", self.failed)
        # the graceful stop of SIGTERM: what is in flight ends, nothing new starts
        deferred_from_coro(self.crawler.stop_async())
