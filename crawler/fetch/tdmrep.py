"""A host's /.well-known/tdmrep.json (W3C TDMRep), fetched at most once per host and cached, like
robots.txt: through the downloader, so the host's slot, delay and robots.txt apply to it as to any page.

A page the frontier hands out for a host whose tdmrep.json is not known yet fetches it first, once the
host is ready (HostReadyGate, just before, has seen to that), so it goes out at once. The page keeps its
lease meanwhile (its host and address have one request at a time), and is then handed back to the
frontier while its host rests from that fetch, as after robots.txt: no request slot waits out a delay.
(It used to be fetched after the host's first HTML page, which held its slot through the host's delay
and the fetch: half the slots of a wide crawl at 64 in flight, benchmarks/network_bound.py.) A request
the frontier did not hand out (Scrapy's own scheduler) still fetches it when its first HTML page has
arrived, and waits for it. Every later page of the host is matched against the cached rules. A missing,
unreadable or unreachable file reserves nothing (TDMRep: the origin then does not implement the
protocol); each outcome is counted under `tdmrep/`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Self

from scrapy import Request
from scrapy.exceptions import NotConfigured
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.defer import Deferred

from crawler.fetch.directives import TdmRule, parse_tdmrep, tdm_reserved
from crawler.fetch.failures import failure_reason
from crawler.fetch.politeness import HostReadyGate
from crawler.fetch.shutdown import StopCancelled
from scheduler.scrapy_scheduler import DISCOVER_META, LEASE_META, politeness_changed, politeness_restored

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

TDMREP_PATH = "/.well-known/tdmrep.json"
RESERVED_META = "hostcrawl_tdm_reserved"  # set on a page's request when its host's tdmrep.json reserves it
TDMREP_META = "hostcrawl_tdmrep"  # marks the tdmrep.json request itself
HTML_TYPES = (b"text/html", b"application/xhtml+xml")


def is_page(request: Request) -> bool:
    """Only pages can be reserved. A host's own policy files (robots.txt, tdmrep.json) and discovery
    fetches (sitemaps) never wait for tdmrep.json: a robots.txt served as text/html would otherwise wait
    for a tdmrep.json fetch that itself waits for that robots.txt, and the host's IP with it, for good."""
    meta = request.meta
    return not (meta.get(TDMREP_META) or meta.get("dont_obey_robotstxt") or meta.get(DISCOVER_META))


class TdmRepPolicy:
    """Downloader middleware: marks pages whose host reserves TDM rights for their path."""

    def __init__(self, crawler: Crawler) -> None:
        if not crawler.settings.getbool("HOSTCRAWL_TDMREP", True):
            raise NotConfigured
        self.crawler = crawler
        self.stats = crawler.stats
        self.rules: dict[str, list[TdmRule]] = {}
        self.waiting: dict[str, list[Deferred[list[TdmRule]]]] = {}
        self.ready_gate = HostReadyGate(crawler)  # the page goes back while its host rests from the fetch
        crawler.signals.connect(self.restore, signal=politeness_restored)

    def restore(self, rows: list[tuple[str, str, dict[str, Any]]]) -> None:
        """What a previous run (or another worker) learnt: no host's tdmrep.json is fetched twice."""
        for netloc, part, saved in rows:
            if part == "tdmrep" and netloc not in self.rules:
                body = saved.get("body")
                self.rules[netloc] = (parse_tdmrep(str(body).encode("utf-8")) or []) if body else []
                self.stats.inc_value("tdmrep/restored")

    def _save(self, netloc: str, body: bytes | None) -> None:
        """Stored with the host's politeness (robots.txt's too), in the frontier: SQLite or Redis."""
        state = {"body": None if body is None else body.decode("utf-8", "replace")}
        self.crawler.signals.send_catch_log(
            signal=politeness_changed, host=netloc, part="tdmrep", state=state
        )

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    async def process_request(self, request: Request, spider: Any = None) -> Request | None:
        if LEASE_META not in request.meta or not is_page(request):
            return None
        if urlparse_cached(request).netloc in self.rules:
            return None
        await self.host_rules(request)
        return self.ready_gate.process_request(request)

    async def process_response(self, request: Request, response: Response, spider: Any = None) -> Response:
        content_type = (response.headers.get(b"Content-Type") or b"").lower()
        if not is_page(request) or response.status != 200 or not content_type.startswith(HTML_TYPES):
            return response
        rules = await self.host_rules(request)
        if rules and tdm_reserved(rules, response.url):
            request.meta[RESERVED_META] = True
        return response

    async def host_rules(self, request: Request) -> list[TdmRule]:
        parts = urlparse_cached(request)
        netloc = parts.netloc
        if netloc in self.rules:
            return self.rules[netloc]
        if netloc in self.waiting:  # another page of the host is fetching it: wait for that
            waiter: Deferred[list[TdmRule]] = Deferred()
            self.waiting[netloc].append(waiter)
            return await maybe_deferred_to_future(waiter)
        self.waiting[netloc] = []
        try:
            rules = await self._fetch(f"{parts.scheme}://{netloc}{TDMREP_PATH}", netloc)
        except BaseException as exc:  # the crawl is stopping: its pages are not sent either
            for waiter in self.waiting.pop(netloc):
                waiter.errback(exc)
            raise
        self.rules[netloc] = rules
        for waiter in self.waiting.pop(netloc):
            waiter.callback(rules)
        return rules

    async def _fetch(self, url: str, netloc: str) -> list[TdmRule]:
        # not retried: a retry would wait out the host's backoff (an hour, for `429 Retry-After: 3600`) in
        # the downloader while the page holds its lease, and with it every host on its address; the page
        # goes back to the frontier instead, and an unavailable file reserves nothing
        request = Request(url, meta={TDMREP_META: True, "dont_retry": True}, callback=NO_CALLBACK)
        self.stats.inc_value("tdmrep/requested")
        try:
            assert self.crawler.engine is not None
            response = await self.crawler.engine.download_async(request)
        except StopCancelled:
            raise
        except Exception as exc:  # refused by robots.txt, unreachable, ...: nothing is reserved
            self.stats.inc_value(f"tdmrep/unavailable/{failure_reason(exc)}")
            return []
        if response.status != 200:
            self.stats.inc_value(f"tdmrep/absent/http_{response.status}")
            if response.status < 500 and response.status != 429:  # an answer, not "not now"
                self._save(netloc, None)
            return []
        rules = parse_tdmrep(response.body)
        self._save(netloc, None if rules is None else response.body)
        if rules is None:
            self.stats.inc_value("tdmrep/unparsable")
            return []
        self.stats.inc_value("tdmrep/found")
        logger.info("%s: tdmrep.json with %d rules", url, len(rules))
        return rules
