"""Cut over-long bodies instead of dropping them, so the WARC keeps a record marked truncated."""

from __future__ import annotations

from typing import TYPE_CHECKING, Self
from weakref import WeakKeyDictionary

from scrapy import signals
from scrapy.exceptions import StopDownload

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler


class ResponseSizeCap:
    """Stops a download after HOSTCRAWL_MAX_PAGE_BYTES and keeps the partial response."""

    def __init__(self, crawler: Crawler) -> None:
        self.max_bytes = crawler.settings.getint("HOSTCRAWL_MAX_PAGE_BYTES")
        self.stats = crawler.stats
        self.received: WeakKeyDictionary[Request, int] = WeakKeyDictionary()
        crawler.signals.connect(self.bytes_received, signal=signals.bytes_received)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def bytes_received(self, data: bytes, request: Request) -> None:
        if "hostcrawl_truncated" in request.meta:
            return
        total = self.received.get(request, 0) + len(data)
        self.received[request] = total
        if total >= self.max_bytes:
            self.stats.inc_value("fetch/truncated/length")
            request.meta["hostcrawl_truncated"] = "length"
            raise StopDownload(fail=False)
