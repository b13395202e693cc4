"""Send every request, robots.txt included, through the configured proxy (the local test web)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

from scrapy.exceptions import NotConfigured

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler


class ProxyEverything:
    """Sets meta['proxy'] before Scrapy's HttpProxyMiddleware, also on requests Scrapy makes itself."""

    def __init__(self, proxy: str) -> None:
        self.proxy = proxy

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        proxy = crawler.settings.get("HOSTCRAWL_PROXY")
        if not proxy:
            raise NotConfigured
        return cls(proxy)

    def process_request(self, request: Request, spider: Any = None) -> None:
        request.meta.setdefault("proxy", self.proxy)
