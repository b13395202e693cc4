"""Gzipped sitemaps are read with Scrapy's gunzip under the decoded size cap; a bomb or a broken file is
counted, not followed."""

from __future__ import annotations

import gzip

from scrapy.http import Request, Response
from scrapy.utils.test import get_crawler

from crawler.fetch.spider import HostSpider

HOST = "http://h.example"


def _spider(max_size: int) -> HostSpider:
    crawler = get_crawler(HostSpider, {"DOWNLOAD_MAXSIZE": max_size})
    return HostSpider.from_crawler(crawler, seeds=[])


def _sitemap(n: int) -> bytes:
    locs = "".join(f"<url><loc>{HOST}/p/{i}.html</loc></url>" for i in range(n))
    locs += "<url><loc>http://other.example/x.html</loc></url>"  # another host's URL: never followed
    return f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{locs}</urlset>'.encode()


def _response(url: str, body: bytes) -> Response:
    return Response(url, body=body, request=Request(url))


def test_a_gzipped_sitemap_lists_its_hosts_pages() -> None:
    spider = _spider(2**20)
    response = _response(f"{HOST}/sitemap.xml.gz", gzip.compress(_sitemap(30)))
    urls, nested = spider.sitemap_entries(response) or ([], None)
    assert not nested and urls == [f"{HOST}/p/{i}.html" for i in range(30)]
    assert spider.crawler.stats.get_value("sitemap/gzipped") == 1


def test_a_plain_sitemap_is_read_as_before() -> None:
    spider = _spider(2**20)
    urls, _ = spider.sitemap_entries(_response(f"{HOST}/sitemap.xml", _sitemap(3))) or ([], None)
    assert len(urls) == 3 and spider.crawler.stats.get_value("sitemap/gzipped") is None


def test_a_sitemap_inflating_past_the_cap_is_refused() -> None:
    spider = _spider(64 * 1024)
    body = gzip.compress(_sitemap(5000))  # ~300 KB decoded, a few KB on the wire
    assert len(body) < 64 * 1024
    assert spider.sitemap_entries(_response(f"{HOST}/sitemap.xml.gz", body)) is None
    assert spider.crawler.stats.get_value("sitemap/too_large") == 1


def test_a_broken_gzip_sitemap_is_counted_unparsable() -> None:
    spider = _spider(2**20)
    body = b"\x1f\x8b\x08" + b"\x00" * 40
    assert spider.sitemap_entries(_response(f"{HOST}/sitemap.xml.gz", body)) is None
    assert spider.crawler.stats.get_value("sitemap/unparsable") == 1
