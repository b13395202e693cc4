"""Redirects through the Scrapy scheduler: a redirect names a new URL, so it goes through dedup, trap
guards and its host's budget like any link; only a retry of the same URL skips them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scrapy import Request, Spider
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from scheduler.scrapy_scheduler import HostScheduler


class _Spider:
    def parse(self, response: Any) -> None:
        pass


def _scheduler(tmp_path: Path) -> HostScheduler:
    crawler = get_crawler(
        Spider,
        {
            "HOSTCRAWL_RUN_DIR": str(tmp_path),
            "HOSTCRAWL_POLICY": "bfs",
            "HOSTCRAWL_MAX_PAGES": 100,
            "HOSTCRAWL_PER_HOST_BUDGET": 4,
            "HOSTCRAWL_THRESHOLD": 0.5,
        },
    )
    scheduler = HostScheduler(crawler)
    scheduler.open(_Spider())
    return scheduler


def _fetch_all(scheduler: HostScheduler) -> dict[str, Request]:
    """Hand out everything that is ready and let its response leave the downloader and pass the
    downloader middlewares, as a crawl would (the host is free again then)."""
    out = {}
    assert scheduler.frontier is not None
    while (request := scheduler.next_request()) is not None:
        scheduler.left_downloader(request)
        scheduler.response_received(HtmlResponse(request.url, body=b"", request=request), request)
        out[request.url] = request
        for record in scheduler.frontier.hosts.values():
            record.ready_at = 0.0  # politeness is not what this test is about
    return out


def _redirect(request: Request, url: str) -> Request:
    """What Scrapy's RedirectMiddleware sends back: same meta, `dont_filter` copied."""
    redirected = request.replace(url=url)
    redirected.meta["redirect_urls"] = [*request.meta.get("redirect_urls", ()), request.url]
    redirected.meta["redirect_times"] = len(redirected.meta["redirect_urls"])
    return redirected


def _stat(scheduler: HostScheduler, key: str) -> int:
    return int(scheduler.stats.get_value(key, 0))


def test_redirects_are_checked_like_links_and_retries_are_not(tmp_path: Path) -> None:
    scheduler = _scheduler(tmp_path)
    for url in (
        "http://a.example/",
        "http://a.example/seen.html",
        *(f"http://c.example/{i}" for i in range(4)),
    ):
        assert scheduler.enqueue_request(Request(url))
    fetched = _fetch_all(scheduler)
    home = fetched["http://a.example/"]
    assert home.dont_filter  # handed-out requests skip Scrapy's own dupe filter; ours decides

    assert not scheduler.enqueue_request(_redirect(home, "http://a.example/seen.html"))
    assert _stat(scheduler, "redirect/dropped/duplicate") == 1
    assert not scheduler.enqueue_request(_redirect(home, "http://a.example/t/t/t/t/t.html"))
    assert _stat(scheduler, "redirect/dropped/trap/repeated_segment") == 1
    # c.example has fetched its four pages: a redirect there could never be fetched
    assert not scheduler.enqueue_request(_redirect(home, "http://c.example/elsewhere"))
    assert _stat(scheduler, "redirect/dropped/host_budget") == 1

    assert scheduler.enqueue_request(_redirect(home, "http://a.example/new.html"))
    assert _stat(scheduler, "redirect/followed") == 1
    moved = _fetch_all(scheduler)["http://a.example/new.html"]
    assert moved.meta["redirect_urls"] == ["http://a.example/"]  # the chain survives the frontier

    retry = moved.replace(dont_filter=True)
    retry.meta["retry_times"] = 1
    assert scheduler.enqueue_request(retry), "a retry of the same URL must not be deduplicated"
    assert _stat(scheduler, "redirect/followed") == 1
    back = _redirect(moved, "http://a.example/")
    assert not scheduler.enqueue_request(back)
    assert _stat(scheduler, "frontier/dropped/redirect_loop") == 1  # the chain came back to its start
    assert _stat(scheduler, "redirect/dropped/redirect_loop") == 1
    scheduler.close("finished")


def test_a_redirect_to_itself_is_not_queued_again(tmp_path: Path) -> None:
    """A self-redirect (or an empty Location, which Scrapy resolves to the same URL) used to be fetched
    again until the redirect limit: six fetches of one URL. Without cookies it can only redirect again."""
    scheduler = _scheduler(tmp_path)
    assert scheduler.enqueue_request(Request("http://a.example/self"))
    home = _fetch_all(scheduler)["http://a.example/self"]
    assert not scheduler.enqueue_request(_redirect(home, "http://a.example/self"))
    assert _stat(scheduler, "redirect/dropped/redirect_loop") == 1
    assert _fetch_all(scheduler) == {}
    scheduler.close("finished")
