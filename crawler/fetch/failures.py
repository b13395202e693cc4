"""Why a fetch failed, in a few stable words, counted per attempt and per final outcome."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

from scrapy.exceptions import IgnoreRequest

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler


def failure_reason(exc: BaseException) -> str:
    """A short, stable reason for stats and pages.parquet (e.g. `timeout`, `redirect_loop`)."""
    message = str(exc)
    if isinstance(exc, IgnoreRequest):
        if "robots.txt unavailable" in message:  # not fetched (DNS, timeout, 5xx): not a refusal by the host
            return "robots_unavailable"
        if "robots.txt" in message:
            return "robots_forbidden"
        if "redirections" in message:
            return "redirect_loop"
        if "DOWNLOAD_MAXSIZE" in message:
            return "too_large_decoded"
        if "Crawl-delay" in message:
            return "crawl_delay_too_long"
        if "refusing" in message:
            return "private_address"
        return "ignored"
    name = type(exc).__name__
    known = {
        "TimeoutError": "timeout",
        "DownloadTimeoutError": "timeout",
        "TCPTimedOutError": "timeout",
        "ResponseNeverReceived": "connection_lost",
        "ResponseFailed": "connection_lost",
        "DownloadFailedError": "connection_lost",
        "ConnectionLost": "connection_lost",
        "ConnectionRefusedError": "connection_refused",
        "DownloadConnectionRefusedError": "connection_refused",
        "DNSLookupError": "dns",
        "CannotResolveHostError": "dns",
        "DownloadCancelledError": "too_large",
    }
    return known.get(name, f"exception/{name}")


class FailureCounter:
    """Counts `fetch/error/<reason>` for every failed attempt, including the ones retried later."""

    def __init__(self, crawler: Crawler) -> None:
        self.stats = crawler.stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def process_exception(self, request: Request, exception: Exception, spider: Any = None) -> None:
        self.stats.inc_value(f"fetch/error/{failure_reason(exception)}")


UNRESOLVABLE = "fetch/refused/unresolvable"


def why_nothing(stats: dict[str, object]) -> str:
    """The reasons a crawl fetched nothing, from its counters (`fetch/refused/loopback: 1`)."""
    reasons = {
        key: value
        for key, value in stats.items()
        if key.startswith(("fetch/refused/", "fetch/failed/", "robotstxt/unavailable/"))
    }
    text = ", ".join(f"{key} {value}" for key, value in sorted(reasons.items()))
    if any(key.startswith("fetch/refused/") and key != UNRESOLVABLE for key in reasons):
        text += "; loopback/private addresses are refused unless you pass --allow-private"
    if UNRESOLVABLE in reasons:
        text += "; a name that does not resolve is refused (check the seed's spelling, or pass --proxy)"
    return text or "see crawl.log"
