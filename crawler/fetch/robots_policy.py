"""robots.txt per RFC 9309: fetched once per host, obeyed, refetched after a day, retried when unavailable.

Answers (RFC 9309 §2.3.1): 2xx, its rules apply (crawler/fetch/robots_rules.py); 4xx other than 429, no
rules; 429, 5xx and network errors, "disallow for now": the host is parked until the retry time
(exponential backoff, at least Retry-After) and its requests go back to the frontier; after
`HOSTCRAWL_ROBOTS_ATTEMPTS` unavailable answers in a row the host is parked beyond backoff_max (tried
again later in a long crawl, named `parked` when a crawl ends without it). A robots.txt that
disallows everything blocks its host: the frontier then drops its queue at once.
"""

from __future__ import annotations

import itertools
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urlsplit

from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.defer import Deferred

from crawler.fetch.failures import failure_reason
from crawler.fetch.politeness import Politeness, parse_retry_after
from crawler.fetch.robots_rules import DISALLOW_ALL, RobotsRules
from crawler.fetch.shutdown import StopCancelled
from scheduler.scrapy_scheduler import (
    DISCOVER_META,
    LATER_META,
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

ROBOTS_TTL_S = 24 * 3600.0  # §2.4: a cached robots.txt is not used for more than 24 hours
MAX_SITEMAPS_PER_HOST = 3


@dataclass(slots=True)
class RobotsEntry:
    rules: RobotsRules | None  # None: no rules (4xx), everything allowed
    expires_at: float  # monotonic; then it is fetched again
    unavailable: bool = False  # 429, 5xx or unreachable: disallow everything until expires_at
    failures: int = 0  # unavailable answers in a row


class RobotsPolicy:
    """Downloader middleware: every request waits for its host's robots.txt and obeys it."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        if not settings.getbool("ROBOTSTXT_OBEY"):
            raise NotConfigured
        self.crawler = crawler
        self.stats = crawler.stats
        agent = settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT")
        self.user_agent = str(agent)
        self.ttl = settings.getfloat("HOSTCRAWL_ROBOTS_TTL", ROBOTS_TTL_S)
        self.attempts = settings.getint("HOSTCRAWL_ROBOTS_ATTEMPTS", 4)
        self.backoff_base = settings.getfloat("HOSTCRAWL_BACKOFF_BASE")
        self.backoff_max = settings.getfloat("HOSTCRAWL_BACKOFF_MAX")
        self.max_park = settings.getfloat("HOSTCRAWL_MAX_PARK", 6 * 3600.0)
        self.entries: dict[str, RobotsEntry] = {}
        self.readable: dict[str, set[str]] = {}  # host -> its origins (netlocs) whose robots.txt was read
        self.waiting: dict[str, list[Deferred[RobotsEntry]]] = {}  # requests waiting for a fetch
        crawler.signals.connect(self.restore, signal=politeness_restored)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    async def process_request(self, request: Request, spider: Any = None) -> Request | None:
        if request.meta.get("dont_obey_robotstxt") or not request.url.startswith("http"):
            return None
        entry = await self.entry(request)
        url = urlparse_cached(request)
        host = url.hostname or ""
        if entry.unavailable and self._other_origin_readable(url.netloc, host):
            # one origin of a host that answers elsewhere (a link to a closed port): only its own URLs go
            self.stats.inc_value("robotstxt/origin_unavailable")
            raise IgnoreRequest(f"robots.txt unavailable for {url.netloc}: Forbidden by robots.txt for now")
        if entry.unavailable:
            return self._later(request, host, entry)
        if entry.rules is not None and not entry.rules.allowed(request.url):
            self.stats.inc_value("robotstxt/forbidden")
            raise IgnoreRequest("Forbidden by robots.txt")
        return None

    def _other_origin_readable(self, netloc: str, host: str) -> bool:
        """Another origin (scheme, port) of this host whose robots.txt could be read."""
        return bool(self.readable.get(host, set()) - {netloc})

    def _remember(self, netloc: str, entry: RobotsEntry) -> None:
        self.entries[netloc] = entry
        host = urlsplit(f"//{netloc}").hostname or ""
        origins = self.readable.setdefault(host, set())
        if entry.unavailable:
            origins.discard(netloc)
        else:
            origins.add(netloc)

    def _later(self, request: Request, host: str, entry: RobotsEntry) -> Request:
        """robots.txt said "not now": the request goes back to the frontier, the host waits."""
        if LEASE_META not in request.meta:  # not our frontier (Scrapy's scheduler cannot park a host)
            raise IgnoreRequest("robots.txt unavailable: Forbidden by robots.txt for now")
        self.stats.inc_value("robotstxt/deferred_requests")
        self.crawler.signals.send_catch_log(signal=host_ready_at, host=host, ready_at=entry.expires_at)
        return request.replace(dont_filter=True, meta={**request.meta, LATER_META: True})

    async def entry(self, request: Request) -> RobotsEntry:
        """The host's robots.txt: cached, or fetched now (requests of the host wait for it)."""
        url = urlparse_cached(request)
        netloc = url.netloc
        if netloc in self.waiting:
            waiter: Deferred[RobotsEntry] = Deferred()
            self.waiting[netloc].append(waiter)
            return await maybe_deferred_to_future(waiter)
        current = self.entries.get(netloc)
        if current is not None and current.expires_at > time.monotonic():
            return current
        self.waiting[netloc] = []
        try:
            entry = await self._fetch(f"{url.scheme}://{netloc}", url.hostname or "", current)
        except BaseException:
            entry = RobotsEntry(RobotsRules(DISALLOW_ALL, self.user_agent), time.monotonic(), True)
            raise
        finally:
            self._remember(netloc, entry)
            self._save(netloc, entry)
            for waiter in self.waiting.pop(netloc):
                waiter.callback(entry)
        return entry

    def _save(self, netloc: str, entry: RobotsEntry) -> None:
        """The body as served and when it expires (wall clock), so a resumed run does not refetch it."""
        state = {
            "body": None if entry.rules is None else entry.rules.text,
            "expires_at": time.time() + (entry.expires_at - time.monotonic()),
            "unavailable": entry.unavailable,
            "failures": entry.failures,
        }
        self.crawler.signals.send_catch_log(
            signal=politeness_changed, host=netloc, part="robots", state=state
        )

    def restore(self, rows: list[tuple[str, str, dict[str, Any]]]) -> None:
        offset = time.monotonic() - time.time()
        for netloc, part, saved in rows:
            if part != "robots":
                continue
            body = saved.get("body")
            rules = None if body is None else RobotsRules(str(body).encode("utf-8"), self.user_agent)
            expires_at = float(saved.get("expires_at", 0.0)) + offset
            entry = RobotsEntry(
                rules, expires_at, bool(saved.get("unavailable")), int(saved.get("failures", 0))
            )
            self._remember(netloc, entry)
        self.stats.set_value("robotstxt/restored", sum(part == "robots" for _, part, _ in rows))

    async def _fetch(self, origin: str, host: str, previous: RobotsEntry | None) -> RobotsEntry:
        assert self.crawler.engine is not None
        request = Request(
            origin + "/robots.txt",
            priority=1000,
            meta={"dont_obey_robotstxt": True, "dont_retry": True},
            callback=NO_CALLBACK,
        )
        self.stats.inc_value("robotstxt/request_count")
        if previous is not None and not previous.unavailable:
            self.stats.inc_value("robotstxt/refetched")
        try:
            response = await self.crawler.engine.download_async(request)
        except StopCancelled:  # not sent: the crawl is stopping; asked again on resume
            raise
        except IgnoreRequest as exc:  # refused by us (private address), not by the host
            self.stats.inc_value("robotstxt/refused")
            logger.info("robots.txt of %s not fetched: %s", host, exc)
            return RobotsEntry(RobotsRules(DISALLOW_ALL, self.user_agent), time.monotonic() + self.ttl)
        except Exception as exc:
            return self._unavailable(host, failure_reason(exc), previous, None, urlsplit(origin).netloc)
        return await self._read(response, origin, host, previous)

    async def _read(
        self, response: Response, origin: str, host: str, previous: RobotsEntry | None
    ) -> RobotsEntry:
        status = response.status
        self.stats.inc_value("robotstxt/response_count")
        self.stats.inc_value(f"robotstxt/response_status_count/{status}")
        if status == 429 or status >= 500:
            retry_after = parse_retry_after(response.headers.get(b"Retry-After"))
            return self._unavailable(host, f"http_{status}", previous, retry_after, urlsplit(origin).netloc)
        expires = time.monotonic() + self.ttl
        if status >= 400:  # §2.3.1.3: unavailable, so no rules
            return RobotsEntry(None, expires)
        rules = RobotsRules(response.body, self.user_agent)
        await self.crawler.signals.send_catch_log_async(
            signal=signals.robots_parsed, robotparser=rules, request=response.request
        )
        if rules.disallows_everything(origin):
            self._block(host, "robots_disallow_all")
        elif status == 200 and self.crawler.engine is not None:
            self._request_sitemaps(rules, urlsplit(origin).netloc)
        return RobotsEntry(rules, expires)

    def _unavailable(
        self,
        host: str,
        reason: str,
        previous: RobotsEntry | None,
        retry_after: float | None,
        origin_netloc: str,
    ) -> RobotsEntry:
        failures = previous.failures + 1 if previous is not None and previous.unavailable else 1
        self.stats.inc_value(f"robotstxt/unavailable/{reason}")
        wait = min(self.backoff_max, self.backoff_base * 2 ** (failures - 1))
        if failures >= self.attempts and not self._other_origin_readable(origin_netloc, host):
            # Given up for now, not for good: parked beyond backoff_max (a finished crawl does not wait
            # for it, and names it `parked`), tried again after twice as long each time while the crawl
            # goes on, up to max_park. An outage of a minute no longer costs the host the whole run.
            wait = min(self.max_park, self.backoff_max * 2 ** (failures - self.attempts + 1))
            self.stats.inc_value("robotstxt/parked")
        wait = max(wait, retry_after or 0.0)
        politeness = self.crawler.get_extension(Politeness)
        ready_at = max(time.monotonic() + wait, politeness.host(host).ready_at if politeness else 0.0)
        logger.info("robots.txt of %s unavailable (%s, try %d): retry in %.1fs", host, reason, failures, wait)
        return RobotsEntry(RobotsRules(DISALLOW_ALL, self.user_agent), ready_at, True, failures)

    def _block(self, host: str, reason: str) -> None:
        logger.info("blocking %s: %s", host, reason)
        self.crawler.signals.send_catch_log(signal=host_blocked, host=host, reason=reason)

    def _request_sitemaps(self, rules: RobotsRules, netloc: str) -> None:
        """A host's sitemaps go to the front of its queue: its size and content pages, before sampling."""
        assert self.crawler.engine is not None
        for url in itertools.islice(rules.sitemaps(), MAX_SITEMAPS_PER_HOST):
            if urlsplit(url).netloc != netloc:
                continue
            self.stats.inc_value("robotstxt/sitemaps")
            self.crawler.engine.crawl(Request(url, meta={DISCOVER_META: True}))
