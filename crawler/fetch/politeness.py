"""Per-host timing and health: delay, robots.txt Crawl-delay, 429/503 backoff, Retry-After, circuit breaker.

Retry-After beyond `backoff_max` parks the host for as long as it asks, up to `HOSTCRAWL_MAX_PARK`;
a host asking for more is blocked (`host/blocked/retry_after_too_long`), and so is one that answers
429/503 `HOSTCRAWL_BREAKER_FAILURES` times in a row (`host/blocked/rate_limited`). Timeouts and connection
failures back a host off exponentially; `HOSTCRAWL_BREAKER_FAILURES` of them in a row block it
(`host/blocked/network_errors`). The frontier hears both through signals and hands out nothing of a
parked host before its time, and nothing at all of a blocked one.
"""

from __future__ import annotations

import email.utils
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

from scrapy import Request, signals
from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.httpobj import urlparse_cached

from crawler.fetch.addresses import PrivateAddressGuard
from crawler.fetch.failures import failure_reason
from scheduler.scrapy_scheduler import (
    LEASE_META,
    host_blocked,
    host_ready_at,
    politeness_changed,
    politeness_restored,
)

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

BACKOFF_STATUSES = frozenset({429, 503})
# A handed-out request whose host may not be fetched for longer than this goes back to the frontier
# (HostReadyGate) rather than hold one of the crawl's request slots while it waits
HAND_BACK_S = 0.25
NETWORK_FAILURES = frozenset({"timeout", "connection_lost", "connection_refused"})


def slot_key(request: Request) -> str:
    """The downloader slot a request goes through, and the key of its host's politeness state."""
    return str(request.meta.get("download_slot") or urlparse_cached(request).hostname or "")


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
    network_failures: int = 0  # consecutive timeouts and connection failures
    last_end: float = 0.0  # monotonic time the last fetch ended
    ready_at: float = 0.0  # monotonic time before which the host must not be fetched
    crawl_delay: float | None = None  # robots.txt's, when it set one


class Politeness:
    """Each host's delay: the floor, raised by robots.txt Crawl-delay, stretched by backoff."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.min_delay = settings.getfloat("DOWNLOAD_DELAY")
        self.max_crawl_delay = settings.getfloat("HOSTCRAWL_MAX_CRAWL_DELAY")
        self.backoff_base = settings.getfloat("HOSTCRAWL_BACKOFF_BASE")
        self.backoff_max = settings.getfloat("HOSTCRAWL_BACKOFF_MAX")
        self.max_park = settings.getfloat("HOSTCRAWL_MAX_PARK", 6 * 3600.0)
        self.breaker = settings.getint("HOSTCRAWL_BREAKER_FAILURES", 6)
        self.concurrency = settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN")
        self.hosts: dict[str, HostPoliteness] = {}
        self.too_slow: set[str] = set()
        crawler.signals.connect(self.robots_parsed, signal=signals.robots_parsed)
        crawler.signals.connect(self.restore, signal=politeness_restored)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def host(self, name: str) -> HostPoliteness:
        state = self.hosts.get(name)
        if state is None:
            state = self.hosts[name] = HostPoliteness(delay=self.min_delay)
        return state

    def _slot(self, key: str) -> Any:
        # Scrapy 2.19: `Downloader.slots` and `per_slot_settings` are public attributes but not documented
        # API, and there is no other way to move a slot's next send (delay, lastseen) once it exists.
        downloader = self.crawler.engine.downloader if self.crawler.engine else None
        return None if downloader is None else downloader.slots.get(key)

    def send_wait(self, key: str) -> float:
        """Seconds before the downloader would send the host's next request (its slot's delay since the
        last send, moved by `fetch_ended`); 0 for a host it has no slot for yet."""
        slot = self._slot(key)
        return 0.0 if slot is None else slot.lastseen + slot.download_delay() - time.monotonic()

    def robots_parsed(self, robotparser: Any, request: Request) -> None:
        self.set_crawl_delay(urlparse_cached(request).hostname or "", robotparser.crawl_delay())

    def set_crawl_delay(self, host: str, crawl_delay: float | None) -> None:
        stats = self.crawler.stats
        state = self.host(host)
        downloader = self.crawler.engine.downloader if self.crawler.engine else None
        applied = host in self.too_slow or (downloader is not None and host in downloader.per_slot_settings)
        if crawl_delay is None or (crawl_delay == state.crawl_delay and applied):
            return  # nothing new: a distributed worker restores it with every claim
        state.crawl_delay = crawl_delay
        if crawl_delay > self.max_crawl_delay:
            self.too_slow.add(host)
            self._announce(host, state, state.ready_at)  # stored: a resumed run skips it too
            stats.inc_value("robotstxt/crawl_delay_too_long")
            logger.info("skipping %s: Crawl-delay %.1fs exceeds the maximum", host, crawl_delay)
            return
        stats.inc_value("robotstxt/crawl_delay")
        state.delay = max(self.min_delay, crawl_delay)
        self._announce(host, state, max(state.ready_at, state.last_end + state.delay))
        if downloader is None:
            return
        downloader.per_slot_settings[host] = {
            "delay": state.delay,
            "concurrency": self.concurrency,
            "jitter": 0.0,
        }
        slot = self._slot(host)
        if slot is not None:
            slot.delay = state.delay

    def fetch_ended(
        self, request: Request, response: Response | None, error: BaseException | None = None
    ) -> None:
        """Counts the host's delay from the end of a fetch, so a lagging reactor can't shorten it."""
        key = slot_key(request)
        state = self.host(key)
        wait = state.delay
        # robots.txt has its own attempt limit (robots_policy.py): it backs off, trips no breaker
        robots = bool(request.meta.get("dont_obey_robotstxt"))
        if response is not None and response.status in BACKOFF_STATUSES:
            wait = self._backoff(key, state, response, breaker=not robots)
        elif response is not None:
            state.failures = state.network_failures = 0
        elif error is not None and failure_reason(error) in NETWORK_FAILURES:
            wait = self._network_failure(key, state, failure_reason(error), count=not robots)
        state.last_end = time.monotonic()
        self._announce(key, state, state.last_end + wait)
        self._hold_slot(key, state.last_end + wait)

    def _backoff(self, host: str, state: HostPoliteness, response: Response, breaker: bool = True) -> float:
        stats = self.crawler.stats
        state.failures += 1
        retry_after = parse_retry_after(response.headers.get(b"Retry-After"))
        exponential = self.backoff_base * 2 ** (state.failures - 1)
        wait = min(self.backoff_max, max(exponential, state.delay))
        stats.inc_value(f"politeness/backoff/{response.status}")
        if breaker and state.failures >= self.breaker:  # it never stops saying "later": give up on it
            self._block(host, "rate_limited")
        if retry_after is not None:
            stats.inc_value("politeness/retry_after_honoured")
            if retry_after > self.max_park:
                self._block(host, "retry_after_too_long")
            elif retry_after > self.backoff_max:
                stats.inc_value("politeness/parked")
                logger.info("parking %s for %.0fs (Retry-After)", host, retry_after)
            wait = max(wait, min(retry_after, self.max_park))
        logger.info("backing off %s for %.1fs after HTTP %s", host, wait, response.status)
        return wait

    def _network_failure(self, host: str, state: HostPoliteness, reason: str, count: bool = True) -> float:
        """Exponential backoff after a timeout or reset; `breaker_failures` in a row block the host."""
        self.crawler.stats.inc_value(f"politeness/backoff/{reason}")
        if not count:
            return min(self.backoff_max, max(state.delay, self.backoff_base))
        state.network_failures += 1
        if state.network_failures == self.breaker:
            self._block(host, "network_errors")
        return min(self.backoff_max, max(state.delay, self.backoff_base * 2 ** (state.network_failures - 1)))

    def _block(self, host: str, reason: str) -> None:
        logger.info("blocking %s: %s", host, reason)
        self.crawler.signals.send_catch_log(signal=host_blocked, host=host, reason=reason)

    def _announce(self, host: str, state: HostPoliteness, ready_at: float) -> None:
        """Tell the frontier, so it hands out no request of this host before then, and store it."""
        state.ready_at = ready_at
        self.crawler.signals.send_catch_log(signal=host_ready_at, host=host, ready_at=ready_at)
        saved = {
            "ready_at": time.time() + (ready_at - time.monotonic()),  # wall clock survives a restart
            "delay": state.delay,
            "crawl_delay": state.crawl_delay,
            "failures": state.failures,
            "network_failures": state.network_failures,
        }
        self.crawler.signals.send_catch_log(signal=politeness_changed, host=host, part="timing", state=saved)

    def restore(self, rows: list[tuple[str, str, dict[str, Any]]], claimed: bool = False) -> None:
        """Each host's saved Crawl-delay, backoff and next allowed fetch; robots.txt is restored by
        robots_policy.py. A resumed run waits at least a full delay from now (the last fetch before the stop
        may not have been stored). A claim (`claimed`: a distributed worker took hosts from the shared
        frontier, which hands out only hosts whose time has come) takes the saved time as it is, or this
        worker's own if that is later."""
        offset = time.monotonic() - time.time()
        for host, part, saved in rows:
            if part != "timing":
                continue
            state = self.host(host)
            state.failures = int(saved.get("failures", 0))
            state.network_failures = int(saved.get("network_failures", 0))
            self.set_crawl_delay(host, saved.get("crawl_delay"))
            saved_ready = float(saved.get("ready_at", 0.0)) + offset
            if claimed:
                if saved_ready > state.ready_at:  # another worker fetched or backed it off since
                    self._announce(host, state, saved_ready)
                    self._hold_slot(host, saved_ready)
                continue
            state.last_end = time.monotonic()
            self._announce(host, state, max(saved_ready, state.last_end + state.delay))

    def _hold_slot(self, key: str, ready_at: float) -> None:
        """The downloader sends the host's next request no earlier than `ready_at` (monotonic)."""
        slot = self._slot(key)
        if slot is not None:  # the slot sends its next request at lastseen + delay
            slot.lastseen = max(slot.lastseen, ready_at - slot.delay)

    def is_too_slow(self, host: str) -> bool:
        return host in self.too_slow


class PoliteDownloadHandler(HTTP11DownloadHandler):
    """Scrapy's HTTP/1.1 handler that reports every finished fetch, failed or not, to Politeness."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        # Twisted silently resends a GET whose pooled connection died; that skips the host's delay.
        # Scrapy 2.19's HTTP11DownloadHandler has no option for it: its connection pool is `_pool`.
        self._pool.retryAutomatically = False
        self.crawler = crawler
        self.politeness = crawler.get_extension(Politeness)

    async def download_request(self, request: Request) -> Response:
        response: Response | None = None
        error: BaseException | None = None
        try:
            response = await super().download_request(request)
            guard = self.crawler.get_downloader_middleware(PrivateAddressGuard)
            if guard is not None:  # before any middleware (the WARC capture) sees the response
                guard.check_connected(request, response)
            return response
        except BaseException as exc:
            error = exc
            raise
        finally:
            if self.politeness is not None:
                self.politeness.fetch_ended(request, response, error)


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


class HostReadyGate:
    """Sends a handed-out request back to the front of its host's queue when its host must still wait.

    That happens to a host's first request: it waited for the host's robots.txt, and the host's delay
    runs from that fetch. Held in the downloader, it would keep one of the crawl's `concurrency` request
    slots idle for the delay (a second at the default floor, far more under a Crawl-delay); handed back,
    the slot fetches another host and the frontier hands this one out again when the host is ready."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.politeness = crawler.get_extension(Politeness)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def process_request(self, request: Request, spider: Any = None) -> Request | None:
        if self.politeness is None or LEASE_META not in request.meta:  # not the frontier's own request
            return None
        # the downloader's own clock for the host (its slot's last send and delay, which fetch_ended and a
        # claim's restore move): what decides when this request would really be sent
        key = slot_key(request)
        if self.politeness.send_wait(key) <= HAND_BACK_S:
            return None
        self.crawler.stats.inc_value("politeness/handed_back")
        return request.replace(dont_filter=True)
