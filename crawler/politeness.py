"""Politeness beyond Scrapy's defaults: robots.txt Crawl-delay, backoff on 429/503, no private targets."""

from __future__ import annotations

import email.utils
import ipaddress
import itertools
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urlsplit

from scrapy import Request, signals
from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.misc import build_from_crawler
from twisted.internet.defer import Deferred

from crawler.failures import failure_reason
from scheduler.scrapy_scheduler import DISCOVER_META, host_ready_at

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

BACKOFF_STATUSES = frozenset({429, 503})
DISALLOW_ALL = b"User-agent: *\nDisallow: /\n"
MAX_SITEMAPS_PER_HOST = 3
PRIVATE_HOST_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def parse_retry_after(value: bytes | str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP-date); None if absent/bad."""
    if value is None:
        return None
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    text = text.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass(slots=True)
class HostPoliteness:
    delay: float  # base delay between two requests to this host
    failures: int = 0  # consecutive 429/503 responses
    last_end: float = 0.0  # monotonic time the last fetch ended
    ready_at: float = 0.0  # monotonic time before which the host must not be fetched


class Politeness:
    """Each host's delay: the floor, raised by robots.txt Crawl-delay, stretched by 429/503 backoff."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.min_delay = settings.getfloat("DOWNLOAD_DELAY")
        self.max_crawl_delay = settings.getfloat("HOSTCRAWL_MAX_CRAWL_DELAY")
        self.backoff_base = settings.getfloat("HOSTCRAWL_BACKOFF_BASE")
        self.backoff_max = settings.getfloat("HOSTCRAWL_BACKOFF_MAX")
        self.concurrency = settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN")
        self.user_agent = settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT")
        self.hosts: dict[str, HostPoliteness] = {}
        self.too_slow: set[str] = set()
        crawler.signals.connect(self.robots_parsed, signal=signals.robots_parsed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def host(self, name: str) -> HostPoliteness:
        state = self.hosts.get(name)
        if state is None:
            state = self.hosts[name] = HostPoliteness(delay=self.min_delay)
        return state

    def _slot(self, key: str) -> Any:
        downloader = self.crawler.engine.downloader if self.crawler.engine else None
        return None if downloader is None else downloader.slots.get(key)

    def robots_parsed(self, robotparser: Any, request: Request) -> None:
        host = urlparse_cached(request).hostname or ""
        crawl_delay = robotparser.crawl_delay(self.user_agent)
        stats = self.crawler.stats
        if crawl_delay is None:
            return
        if crawl_delay > self.max_crawl_delay:
            self.too_slow.add(host)
            stats.inc_value("robotstxt/crawl_delay_too_long")
            logger.info("skipping %s: Crawl-delay %.1fs exceeds the maximum", host, crawl_delay)
            return
        stats.inc_value("robotstxt/crawl_delay")
        state = self.host(host)
        state.delay = max(self.min_delay, crawl_delay)
        self._announce(host, state, max(state.ready_at, state.last_end + state.delay))
        downloader = self.crawler.engine.downloader
        downloader.per_slot_settings[host] = {
            "delay": state.delay,
            "concurrency": self.concurrency,
            "jitter": 0.0,
        }
        slot = self._slot(host)
        if slot is not None:
            slot.delay = state.delay

    def fetch_ended(self, request: Request, response: Response | None) -> None:
        """Counts the host's delay from the end of a fetch, so a lagging reactor can't shorten it."""
        key = request.meta.get("download_slot") or urlparse_cached(request).hostname or ""
        state = self.host(key)
        wait = state.delay
        if response is not None and response.status in BACKOFF_STATUSES:
            state.failures += 1
            retry_after = parse_retry_after(response.headers.get(b"Retry-After"))
            exponential = self.backoff_base * 2 ** (state.failures - 1)
            wait = min(self.backoff_max, max(retry_after or 0.0, exponential, state.delay))
            self.crawler.stats.inc_value(f"politeness/backoff/{response.status}")
            if retry_after is not None:
                self.crawler.stats.inc_value("politeness/retry_after_honoured")
            logger.info("backing off %s for %.1fs after HTTP %s", key, wait, response.status)
        elif response is not None:
            state.failures = 0
        state.last_end = time.monotonic()
        self._announce(key, state, state.last_end + wait)
        slot = self._slot(key)
        if slot is not None:
            # the slot sends its next request at lastseen + delay; make that now + wait
            slot.lastseen = max(slot.lastseen, time.monotonic() + wait - slot.delay)

    def _announce(self, host: str, state: HostPoliteness, ready_at: float) -> None:
        """Tell the frontier, so it hands out no request of this host before then."""
        state.ready_at = ready_at
        self.crawler.signals.send_catch_log(signal=host_ready_at, host=host, ready_at=ready_at)

    def is_too_slow(self, host: str) -> bool:
        return host in self.too_slow


class PoliteDownloadHandler(HTTP11DownloadHandler):
    """Scrapy's HTTP/1.1 handler that reports every finished fetch, failed or not, to Politeness."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        # Twisted silently resends a GET whose pooled connection died; that skips the host's delay
        self._pool.retryAutomatically = False
        self.politeness = crawler.get_extension(Politeness)

    async def download_request(self, request: Request) -> Response:
        response: Response | None = None
        try:
            response = await super().download_request(request)
            return response
        finally:
            if self.politeness is not None:
                self.politeness.fetch_ended(request, response)


class RobotsPolicy(RobotsTxtMiddleware):
    """Scrapy's robots.txt handling, plus RFC 9309 §2.3.1.4: an unreachable robots.txt disallows all."""

    def _disallow_all(self, netloc: str, reason: str) -> None:
        self._stats.inc_value(f"robotstxt/unreachable/{reason}")
        logger.info("robots.txt of %s unreachable (%s): not crawling the host", netloc, reason)
        parser = build_from_crawler(self._parserimpl, self.crawler, DISALLOW_ALL)
        pending = self._parsers[netloc]
        self._parsers[netloc] = parser
        if isinstance(pending, Deferred):
            pending.callback(parser)

    async def _parse_robots(self, response: Response, netloc: str, request: Request) -> None:
        if response.status >= 500:
            self._stats.inc_value("robotstxt/response_count")
            self._disallow_all(netloc, f"http_{response.status}")
            return
        await super()._parse_robots(response, netloc, request)
        parser = self._parsers.get(netloc)
        if response.status == 200 and parser is not None and self.crawler.engine is not None:
            self._request_sitemaps(parser, netloc)

    def _request_sitemaps(self, parser: Any, netloc: str) -> None:
        """A host's sitemaps go to the front of its queue: its size and content pages, before sampling."""
        sitemaps = getattr(getattr(parser, "rp", None), "sitemaps", ())
        for url in itertools.islice(sitemaps, MAX_SITEMAPS_PER_HOST):
            if urlsplit(url).netloc != netloc:
                continue
            self._stats.inc_value("robotstxt/sitemaps")
            self.crawler.engine.crawl(Request(url, meta={DISCOVER_META: True}))

    def _robots_error(self, exc: Exception, netloc: str) -> None:
        if isinstance(exc, IgnoreRequest):  # refused by us (private address), not by the host
            super()._robots_error(exc, netloc)
            return
        self._disallow_all(netloc, failure_reason(exc))


class CrawlDelayGate:
    """Drops requests to hosts whose robots.txt asks for a Crawl-delay above the maximum."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.politeness = crawler.get_extension(Politeness)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def process_request(self, request: Request, spider: Any = None) -> None:
        host = urlparse_cached(request).hostname or ""
        if self.politeness is not None and self.politeness.is_too_slow(host):
            self.crawler.stats.inc_value("fetch/skipped/crawl_delay_too_long")
            raise IgnoreRequest(f"{host} asks for a Crawl-delay above the configured maximum")


class PrivateAddressGuard:
    """Refuses loopback, private and link-local targets unless the crawl explicitly allows them."""

    def __init__(self, crawler: Crawler) -> None:
        if crawler.settings.getbool("HOSTCRAWL_ALLOW_PRIVATE"):
            raise NotConfigured
        self.crawler = crawler
        self.verdicts: dict[str, str | None] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    async def process_request(self, request: Request, spider: Any = None) -> None:
        host = urlparse_cached(request).hostname or ""
        if host not in self.verdicts:
            self.verdicts[host] = await self._classify(host)
        reason = self.verdicts[host]
        if reason is not None:
            self.crawler.stats.inc_value(f"fetch/refused/{reason}")
            raise IgnoreRequest(
                f"refusing {reason} target {host}; pass --allow-private to crawl it on purpose"
            )

    async def _classify(self, host: str) -> str | None:
        if host.lower() in PRIVATE_HOST_NAMES:
            return "loopback"
        try:
            address = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            from twisted.internet import reactor

            try:
                resolved = await maybe_deferred_to_future(reactor.resolve(host))  # type: ignore[arg-type]
            except Exception:
                return None  # the download itself will fail and be counted as a DNS error
            address = ipaddress.ip_address(resolved)
        return address_class(address)


def address_class(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link_local"
    if address.is_private or address.is_reserved or address.is_unspecified:
        return "private"
    return None
