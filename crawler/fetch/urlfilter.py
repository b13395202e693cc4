"""`--allow` / `--deny`: URL regexes that decide which discovered links are followed (seeds always are)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Self

from scrapy import Request
from scrapy.exceptions import NotConfigured

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response


class UrlFilter:
    """Spider middleware: a link is followed when it matches an allow regex (if any) and no deny regex."""

    def __init__(self, crawler: Crawler, allow: list[str], deny: list[str]) -> None:
        self.stats = crawler.stats
        self.allow = [re.compile(p) for p in allow]
        self.deny = [re.compile(p) for p in deny]

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        allow = crawler.settings.getlist("HOSTCRAWL_ALLOW")
        deny = crawler.settings.getlist("HOSTCRAWL_DENY")
        if not allow and not deny:
            raise NotConfigured
        return cls(crawler, allow, deny)

    def refused(self, url: str) -> str | None:
        if self.allow and not any(p.search(url) for p in self.allow):
            return "allow"
        if any(p.search(url) for p in self.deny):
            return "deny"
        return None

    def _keep(self, item: Any) -> bool:
        if not isinstance(item, Request):
            return True
        reason = self.refused(item.url)
        if reason is not None:
            self.stats.inc_value(f"links/filtered/{reason}")
        return reason is None

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Any = None
    ) -> Iterator[Any]:
        return (item for item in result if self._keep(item))

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        async for item in result:
            if self._keep(item):
                yield item
