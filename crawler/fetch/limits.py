"""Cut over-long bodies instead of dropping them, so the WARC keeps a record marked truncated."""

from __future__ import annotations

from typing import TYPE_CHECKING, Self
from weakref import WeakKeyDictionary

from scrapy import signals
from scrapy.exceptions import StopDownload

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler


# the request's own DOWNLOAD_MAXSIZE, set aside while its declared length is read (see headers_received)
DECODED_CAP_META = "hostcrawl_decoded_cap"


class ResponseSizeCap:
    """Stops a download after HOSTCRAWL_MAX_PAGE_BYTES and keeps the partial response, whether the body
    is chunked or declares its length."""

    def __init__(self, crawler: Crawler) -> None:
        self.max_bytes = crawler.settings.getint("HOSTCRAWL_MAX_PAGE_BYTES")
        self.max_decoded = crawler.settings.getint("DOWNLOAD_MAXSIZE")
        self.stats = crawler.stats
        self.received: WeakKeyDictionary[Request, int] = WeakKeyDictionary()
        crawler.signals.connect(self.headers_received, signal=signals.headers_received)
        crawler.signals.connect(self.bytes_received, signal=signals.bytes_received)

    def headers_received(
        self, headers: object, body_length: int, request: Request, spider: object = None
    ) -> None:
        """A Content-Length beyond DOWNLOAD_MAXSIZE makes Scrapy drop the response unread, with no
        WARC record, while a chunked body of the same size is kept cut at HOSTCRAWL_MAX_PAGE_BYTES.
        Read its head the same way: Scrapy's HTTP/1.1 handler (2.19) reads `download_maxsize`
        from the meta right after this signal, so it is raised to the declared length for the
        handler and put back at the first bytes, before the decompression middleware reads it as
        the decoded-size cap (gzip bombs still stop there)."""
        cap = request.meta.get("download_maxsize", self.max_decoded)
        # a chunked body's length is Twisted's UNKNOWN_LENGTH, a string: only a declared one counts
        if cap and isinstance(body_length, int) and body_length > cap:
            request.meta[DECODED_CAP_META] = cap
            request.meta["download_maxsize"] = body_length

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def bytes_received(self, data: bytes, request: Request) -> None:
        if DECODED_CAP_META in request.meta:
            request.meta["download_maxsize"] = request.meta.pop(DECODED_CAP_META)
        if "hostcrawl_truncated" in request.meta:
            return
        total = self.received.get(request, 0) + len(data)
        self.received[request] = total
        if total >= self.max_bytes:
            self.stats.inc_value("fetch/truncated/length")
            request.meta["hostcrawl_truncated"] = "length"
            raise StopDownload(fail=False)
