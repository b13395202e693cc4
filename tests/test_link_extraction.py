"""The spider's links are the ones Scrapy's own link extractor (with its default list of extensions that are
not pages) would follow: the spider checks those extensions itself, in one call per link, and the result
must not drift from Scrapy's."""

from __future__ import annotations

from scrapy.http import HtmlResponse, Request
from scrapy.linkextractors import LinkExtractor
from scrapy.utils.test import get_crawler

from crawler.fetch.spider import HostSpider

PAGE = "http://h.example/a/index.html"
HREFS = [
    "/p/1.html", "p/2", "/img/photo.JPG", "/docs/report.pdf?v=2", "/files/data.tar.gz", "/files/archive.zip",
    "http://other.example/x", "/p/1.html", "/p/3.html#top", "mailto:x@h.example", "/style.css", "/feed.xml",
    "/p/page.php?id=4", "/video.mp4", "/deep/path/", "https://h.example/secure", "/p/4.htm", "/odd.Html",
]  # fmt: skip


class _NoBatches:
    """Scrapy's own scheduler takes no batch of links: the spider then yields a Request per link."""

    def enqueue(self, urls: list[str], depth: int, discover: bool = False) -> bool:
        return False


def _response() -> HtmlResponse:
    anchors = "".join(f'<a href="{href}">{i}</a>' for i, href in enumerate(HREFS))
    anchors += '<a href="/p/nofollow.html" rel="nofollow">n</a><area href="/map/1.html">'
    body = f"<html><body>{anchors}</body></html>".encode()
    return HtmlResponse(PAGE, body=body, encoding="utf-8", request=Request(PAGE))


def test_the_spider_follows_what_scrapys_link_extractor_would() -> None:
    spider = HostSpider.from_crawler(get_crawler(HostSpider), seeds=[])
    spider.__dict__["link_gate"] = _NoBatches()
    followed = [request.url for request in spider.follow(_response())]
    scrapys = LinkExtractor(tags=("a", "area"), attrs=("href",), unique=True).extract_links(_response())
    expected = [link.url for link in scrapys if not link.nofollow and link.url.startswith("http")]
    assert followed == expected
    assert "http://h.example/docs/report.pdf?v=2" not in followed and "http://h.example/a/p/2" in followed
    assert spider.crawler.stats.get_value("links/skipped/nofollow_rel") == 1
