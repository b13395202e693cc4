"""When the embedded frontier frees a host: once its response has passed the downloader middlewares (which
may fetch the host's tdmrep.json first), and, for a page whose parsing raised, at once rather than never."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scrapy import Request, Spider, signals
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler
from twisted.python.failure import Failure

from scheduler.scrapy_scheduler import HostScheduler, host_address


class _Spider:
    def parse(self, response: Any) -> None:
        pass


def _scheduler(tmp_path: Path) -> HostScheduler:
    settings = {"HOSTCRAWL_RUN_DIR": str(tmp_path), "HOSTCRAWL_POLICY": "bfs", "HOSTCRAWL_MAX_PAGES": 100}
    scheduler = HostScheduler(get_crawler(Spider, settings))
    scheduler.open(_Spider())
    return scheduler


def _on_one_address(scheduler: HostScheduler, *hosts: str) -> None:
    for host in hosts:
        scheduler.enqueue_request(Request(f"http://{host}/"))
        scheduler.crawler.signals.send_catch_log(signal=host_address, host=host, address="10.9.9.9")


def _response(request: Request) -> HtmlResponse:
    return HtmlResponse(request.url, body=b"<html><body>hi</body></html>", request=request)


def test_a_host_on_a_shared_address_waits_until_the_response_has_passed_the_middlewares(
    tmp_path: Path,
) -> None:
    scheduler = _scheduler(tmp_path)
    _on_one_address(scheduler, "a.test", "b.test")
    first = scheduler.next_request()
    assert first is not None
    scheduler.left_downloader(first)  # the page's bytes are in; its tdmrep.json may be fetched now
    assert scheduler.next_request() is None, "another host on the address was sent meanwhile"
    scheduler.crawler.signals.send_catch_log(
        signal=signals.response_received, response=_response(first), request=first, spider=None
    )
    second = scheduler.next_request()
    assert second is not None and second.url != first.url
    assert scheduler.stats.get_value("frontier/fetched") == 1


def test_a_page_whose_parsing_raised_frees_its_host_and_lets_the_crawl_end(tmp_path: Path) -> None:
    scheduler = _scheduler(tmp_path)
    _on_one_address(scheduler, "a.test")
    request = scheduler.next_request()
    assert request is not None
    scheduler.left_downloader(request)
    response = _response(request)
    scheduler.crawler.signals.send_catch_log(
        signal=signals.response_received, response=response, request=request, spider=None
    )
    assert scheduler.has_pending_requests(), "its score is on its way"
    scheduler.crawler.signals.send_catch_log(
        signal=signals.spider_error, failure=Failure(ValueError("a bug")), response=response, spider=None
    )
    assert not scheduler.has_pending_requests(), "the crawl would wait for a score that never comes"
    assert scheduler.stats.get_value("frontier/settled_after_error") == 1
