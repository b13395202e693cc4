"""A page's links to the frontier in one batch, checked as Scrapy's spider middlewares check a Request.

A link sent as a Scrapy Request each went through the spider middlewares, `engine.crawl`, a signal and the
scheduler: about 30% of the crawling process's CPU at 256 requests in flight, for pages of 68 links
(benchmarks/network_bound.py --profile). The frontier only needs the URL and its depth, so the spider hands it
the page's links at once (`links_found`), and a sitemap's entries too (up to 50,000 of them), after the same
checks: Scrapy's DEPTH_LIMIT (DepthMiddleware) and URLLENGTH_LIMIT (UrlLengthMiddleware), and `--allow` /
`--deny` (crawler/fetch/urlfilter.py), counted under the same stats.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crawler.fetch.urlfilter import UrlFilter
from scheduler.scrapy_scheduler import links_found

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


class LinkGate:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.max_depth = crawler.settings.getint("DEPTH_LIMIT")
        self.max_length = crawler.settings.getint("URLLENGTH_LIMIT")
        self.url_filter = crawler.get_spider_middleware(UrlFilter)
        # the crawl's scheduler takes batches if it answers one (an empty one changes nothing)
        self.batches = bool(crawler.signals.send_catch_log(signal=links_found, urls=[], depth=0))

    def enqueue(self, urls: list[str], depth: int, discover: bool = False) -> bool:
        """Sends the links that pass to the frontier; False if no scheduler takes batches of links (the
        caller then yields a Request per link, which Scrapy's middlewares check). `discover`: they are
        sitemaps (a sitemap index's entries), queued in front of their hosts' pages."""
        if not self.batches:
            return False
        if self.max_depth and depth > self.max_depth:
            self.stats.inc_value("depth/request_ignored_count", len(urls))
            return True
        kept = []
        for url in urls:
            if self.max_length and len(url) > self.max_length:
                self.stats.inc_value("urllength/request_ignored_count")
                continue
            reason = None if self.url_filter is None else self.url_filter.refused(url)
            if reason is not None:
                self.stats.inc_value(f"links/filtered/{reason}")
                continue
            kept.append(url)
        if kept:
            self.stats.max_value("request_depth_max", depth)
            self.stats.inc_value("links/batches")
            self.crawler.signals.send_catch_log(signal=links_found, urls=kept, depth=depth, discover=discover)
        return True
