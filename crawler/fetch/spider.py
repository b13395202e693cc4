"""The crawl spider: turns every fetch, failed or not, into one page record and follows HTML links."""

from __future__ import annotations

import itertools
import zlib
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from functools import cached_property
from typing import Any
from urllib.parse import urlsplit

import scrapy
from scrapy.http import Response, TextResponse
from scrapy.linkextractors import IGNORED_EXTENSIONS, LinkExtractor
from scrapy.utils.gz import gunzip, gzip_magic_number
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.sitemap import Sitemap
from twisted.python.failure import Failure

from crawler.archive.revisit import REVISIT_META
from crawler.archive.warc_capture import FETCHED_AT_META, WARC_ID_META, WARC_LOCATION_META, WARC_STATUS_META
from crawler.fetch.directives import TDM_HEADER, PageDirectives, page_directives, product_token
from crawler.fetch.failures import failure_reason
from crawler.fetch.link_gate import LinkGate
from crawler.fetch.shutdown import StopCancelled
from crawler.fetch.tdmrep import RESERVED_META
from scheduler.scrapy_scheduler import DISCOVER_META, LEASE_META, POLICY_META
from scheduler.urls import MAX_LINKS_PER_PAGE

HTML_TYPES = ("text/html", "application/xhtml+xml")
SITEMAP_TYPES = ("application/xml", "text/xml", "application/x-xml")
MAX_SITEMAP_URLS = 50_000  # the sitemaps.org limit per file
# Links to files that are not pages (Scrapy's list: images, archives, office files, ...), checked in one
# str.endswith per link: the link extractor's own check loops over the 91 of them for every link, 3% of the
# crawling process's CPU at 512 requests in flight (benchmarks/network_bound.py --profile)
NOT_PAGES = tuple(f".{extension}" for extension in IGNORED_EXTENSIONS)


def is_sitemap(response: Response, content_type: str) -> bool:
    return content_type in SITEMAP_TYPES or urlsplit(response.url).path.endswith((".xml", ".xml.gz"))


BINARY_SNIFF_BYTES = 4096
BINARY_CONTROL_SHARE = 0.10  # real HTML has almost no control bytes; images and archives do


def looks_binary(body: bytes) -> bool:
    head = body[:BINARY_SNIFF_BYTES]
    if not head:
        return False
    controls = sum(1 for b in head if b < 9 or 13 < b < 32)
    return b"\x00" in head or controls / len(head) > BINARY_CONTROL_SHARE


def page_record(url: str, meta: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """One row of pages.parquet; `html` and `_lease` travel to the pipeline and are dropped there."""
    lease = meta.get(LEASE_META)
    record = {
        "url": url,
        "host": urlsplit(url).hostname or "",
        "status": None,
        "content_type": None,
        "bytes": 0,
        "depth": int(meta.get("depth", 0)),
        "fetched_at": (meta.get(FETCHED_AT_META) or datetime.now(UTC)).isoformat(),
        "warc_record_id": None,
        "truncated": False,
        "policy": meta.get(POLICY_META),
        "phase": lease.phase.value if lease is not None else None,
        "error": None,
        "noindex": False,  # the page asks not to be indexed: archived, never curated
        "nofollow": False,  # the page asks that its links not be followed
        "optout": None,  # why the page opts out of AI training (crawler/fetch/directives.py), or None
        "revisit": meta.get(REVISIT_META),  # a revisit's profile (--previous): its text is already curated
        "html": None,
        "_lease": lease,
    }
    record.update(fields)
    return record


class HostSpider(scrapy.Spider):
    name = "hostcrawl"

    def __init__(self, seeds: list[str], follow_cross_host: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seeds = seeds
        self.follow_cross_host = follow_cross_host
        self.links = LinkExtractor(tags=("a", "area"), attrs=("href",), unique=True, deny_extensions=())

    @cached_property
    def link_gate(self) -> LinkGate:
        return LinkGate(self.crawler)

    async def start(self) -> AsyncIterator[scrapy.Request]:
        for url in self.seeds:
            yield scrapy.Request(url, callback=self.parse, errback=self.failed)

    def _record(self, response: Response) -> dict[str, Any]:
        meta = response.request.meta if response.request is not None else {}
        content_type = (response.headers.get(b"Content-Type") or b"").decode("latin-1")
        return page_record(
            response.url,
            meta,
            status=response.status,
            content_type=content_type.split(";")[0].strip().lower(),
            bytes=len(response.body),
            warc_record_id=meta.get(WARC_ID_META),
            **meta.get(WARC_LOCATION_META, {}),
            truncated="download_stopped" in response.flags or "dataloss" in response.flags,
        )

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        stats = self.crawler.stats
        record = self._record(response)
        stats.inc_value(f"page/status/{response.status // 100}xx")
        if response.status == 200 and is_sitemap(response, record["content_type"]):
            yield from self.follow_sitemap(response)
            record["error"] = "sitemap"
            yield record
            return
        if not isinstance(response, TextResponse) or not record["content_type"].startswith(HTML_TYPES):
            record["error"] = "not_html"
        elif looks_binary(response.body):
            record["error"] = "binary_as_html"
        elif response.status >= 400:
            record["error"] = f"http_{response.status}"
        if record["error"]:
            stats.inc_value(f"page/skipped/{record['error']}")
            yield record
            return
        assert isinstance(response, TextResponse)
        record["html"] = response.text
        directives = self.directives(response)
        record.update(noindex=directives.noindex, nofollow=directives.nofollow, optout=directives.optout)
        yield from self.follow(response, directives.nofollow)
        yield record  # last: the frontier commits this page's links when its score arrives

    def directives(self, response: TextResponse) -> PageDirectives:
        """What the page's headers, meta tags and its host's tdmrep.json say; counted per kind."""
        token = product_token(
            self.settings.get("ROBOTSTXT_USER_AGENT") or self.settings.get("USER_AGENT", "")
        )
        metas = [
            (m.attrib.get("name", ""), m.attrib.get("content", "")) for m in response.xpath("//meta[@name]")
        ]
        found = page_directives(
            [v.decode("latin-1") for v in response.headers.getlist(b"X-Robots-Tag")],
            (response.headers.get(TDM_HEADER.encode()) or b"").decode("latin-1"),
            metas,
            token,
            host_reserved=bool(response.meta.get(RESERVED_META)),
        )
        stats = self.crawler.stats
        for name in ("noindex", "nofollow"):
            if getattr(found, name):
                stats.inc_value(f"page/robots/{name}")
        if found.optout:
            stats.inc_value(f"page/optout/{found.optout}")
        return found

    def follow_sitemap(self, response: Response) -> Iterator[scrapy.Request]:
        """A sitemap tells a host's size and its content pages: what sampling needs to be representative.
        Its entries go to the frontier in one batch, as a page's links do: a Request each through the
        middlewares cost the reactor about 0.1 ms per entry (a 40-page crawl of one host whose sitemaps list
        20,064 URLs: 15.0 s of CPU before, 12.9 s after), 5 s of a stalled crawl for one of 50,000."""
        entries = self.sitemap_entries(response)
        if not entries:
            return
        urls, nested = entries
        if self.link_gate.batches:
            self.crawler.stats.inc_value("sitemap/batches")
        yield from self.send(response, urls, discover=nested)

    def sitemap_entries(self, response: Response) -> tuple[list[str], bool] | None:
        """The sitemap's URLs of its own host (at most MAX_SITEMAP_URLS), and whether they are sitemaps
        themselves (a sitemap index); None for a sitemap that cannot be read (counted)."""
        body = self.sitemap_body(response)
        if body is None:
            return None
        try:
            sitemap = Sitemap(body)
        except Exception:
            self.crawler.stats.inc_value("sitemap/unparsable")
            return None
        host = urlparse_cached(response).hostname
        urls = []
        for entry in itertools.islice(sitemap, MAX_SITEMAP_URLS):
            url = entry.get("loc", "")
            if urlsplit(url).hostname == host:  # sitemaps may only list their own host's URLs
                urls.append(url)
        if urls:
            self.crawler.stats.inc_value("sitemap/urls", len(urls))
        return urls, sitemap.type == "sitemapindex"

    def sitemap_body(self, response: Response) -> bytes | None:
        """The sitemap's XML: a gzipped file (`.xml.gz`, or gzip left over once Content-Encoding is
        undone) is inflated as Scrapy's SitemapSpider does, up to the decoded size cap."""
        if not gzip_magic_number(response):
            return response.body
        max_size = int(response.meta.get("download_maxsize", self.settings.getint("DOWNLOAD_MAXSIZE")))
        try:
            body = gunzip(response.body, max_size=max_size)
        except ValueError:  # Scrapy's "decompressed more than max_size"
            self.crawler.stats.inc_value("sitemap/too_large")
            return None
        except (OSError, EOFError, zlib.error):
            self.crawler.stats.inc_value("sitemap/unparsable")
            return None
        self.crawler.stats.inc_value("sitemap/gzipped")
        return body

    def follow(self, response: TextResponse, page_nofollow: bool = False) -> Iterator[scrapy.Request]:
        """The page's links, minus rel=nofollow ones; none at all from a page that asks for nofollow.
        They go to the frontier in one batch (links_found); a Request each only to a scheduler that does
        not take batches (`--policy scrapy`), through the spider middlewares as any request."""
        host = urlparse_cached(response).hostname
        links = []
        for link in self.links.extract_links(response):
            parts = urlsplit(link.url)
            if not parts.path.lower().endswith(NOT_PAGES):
                links.append((link, parts))
        stats = self.crawler.stats
        if page_nofollow:
            stats.inc_value("links/skipped/nofollow_page", len(links))
            return
        cap = self.crawler.settings.getint("HOSTCRAWL_MAX_LINKS_PER_PAGE", MAX_LINKS_PER_PAGE)
        if len(links) > cap:  # 100,000 links on one page would flood the frontier with one page's view
            stats.inc_value("links/skipped/over_page_cap", len(links) - cap)
            links = links[:cap]
        urls = []
        for link, parts in links:
            if link.nofollow:
                stats.inc_value("links/skipped/nofollow_rel")
                continue
            if parts.scheme not in ("http", "https"):
                continue
            if not self.follow_cross_host and parts.hostname != host:
                continue
            urls.append(link.url)
        yield from self.send(response, urls)

    def send(self, response: Response, urls: list[str], discover: bool = False) -> Iterator[scrapy.Request]:
        """URLs found in a response, one level deeper: to the frontier in one batch, or a Request each to a
        scheduler that takes no batches (`discover`: sitemaps, fetched before the host's pages)."""
        if self.link_gate.enqueue(urls, int(response.meta.get("depth", 0)) + 1, discover=discover):
            return
        meta = {DISCOVER_META: True} if discover else {}
        for url in urls:
            yield scrapy.Request(url, callback=self.parse, errback=self.failed, meta=meta)

    def failed(self, failure: Failure) -> Iterator[dict[str, Any]]:
        if isinstance(failure.value, StopCancelled):  # never sent: its lease stays open for a resume
            self.crawler.stats.inc_value("fetch/not_sent/stopping")
            return
        reason = failure_reason(failure.value or Exception())
        self.crawler.stats.inc_value(f"fetch/failed/{reason}")
        request = failure.request  # type: ignore[attr-defined]
        archived: dict[str, Any] = {}
        if reason == "too_large_decoded" and WARC_ID_META in request.meta:
            # refused when decoded (a gzip/brotli/zstd bomb) after its response was archived as received:
            # the row finds that record, as every archived response's row does
            archived = {
                "status": request.meta.get(WARC_STATUS_META),
                "warc_record_id": request.meta[WARC_ID_META],
                **request.meta.get(WARC_LOCATION_META, {}),
            }
        yield page_record(request.url, request.meta, error=reason, **archived)
