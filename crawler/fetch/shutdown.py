"""A graceful stop that ends: SIGINT/SIGTERM lets transfers in progress finish (each bounded by the
download timeout) and cancels everything that is only waiting to be sent.

Scrapy's engine closes once no request is in progress, and a request waiting in a downloader slot for
its host's delay counts as in progress: after a `429 Retry-After: 3600` the host's next request (its
robots.txt, its tdmrep.json) could hold a stopping crawl open for an hour and then be sent. Once the
engine stops running, such requests are cancelled with `StopCancelled`; the spider records nothing for
them, so their leases stay open in the frontier and `--resume` fetches them (`shutdown/cancelled_waits`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Self

from scrapy import signals
from scrapy.exceptions import IgnoreRequest
from twisted.internet import task

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

POLL_S = 0.5


class StopCancelled(IgnoreRequest):
    """Never sent: the crawl was stopping. Not a failure of the page; a resume fetches it."""


class StopDeadline:
    """Extension: watches the engine; once it stops running, no request waits to be sent."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.loop = task.LoopingCall(self._check)
        self.stopping = False
        crawler.signals.connect(self.opened, signal=signals.spider_opened)
        crawler.signals.connect(self.closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def opened(self) -> None:
        self.loop.start(POLL_S, now=False)

    def closed(self) -> None:
        if self.loop.running:
            self.loop.stop()

    def _check(self) -> None:
        engine = self.crawler.engine
        if engine is None or engine.running:
            return
        if not self.stopping:
            self.stopping = True
            logger.info("stopping: requests waiting to be sent are cancelled and stay queued")
        self.cancel_waiting()

    def cancel_waiting(self) -> int:
        """Fail every request a downloader slot holds back for its delay (Scrapy 2.19 has no public way:
        `Downloader.slots[key].queue` holds (request, deferred) pairs that `_process_queue` sends)."""
        engine = self.crawler.engine
        if engine is None:
            return 0
        cancelled = 0
        for slot in list(engine.downloader.slots.values()):
            while slot.queue:
                request, waiting = slot.queue.popleft()
                waiting.errback(StopCancelled(f"not sent: the crawl is stopping ({request.url})"))
                cancelled += 1
        if cancelled:
            self.crawler.stats.inc_value("shutdown/cancelled_waits", cancelled)
        return cancelled
