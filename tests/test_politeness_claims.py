"""What a distributed worker's claim does to its hosts' politeness timing (crawler/fetch/politeness.py).

A claim brings the timing the run's workers stored for the claimed hosts. The shared frontier hands out only
hosts whose time has come, so a claim must not make a host wait a delay more (it did: every claim moved the
host a full delay ahead and stored that back in Redis), while a later time another worker stored (a backoff)
must hold this worker's downloader too. A resumed run, by contrast, waits at least a delay from now."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from scrapy.core.downloader import Slot
from scrapy.utils.test import get_crawler

from crawler.fetch.politeness import Politeness
from scheduler.scrapy_scheduler import politeness_changed, politeness_restored

DELAY = 5.0


def _politeness() -> tuple[Politeness, list[dict[str, Any]]]:
    crawler = get_crawler(settings_dict={"DOWNLOAD_DELAY": DELAY, "HOSTCRAWL_MAX_CRAWL_DELAY": 30.0})
    # what Politeness touches of the engine: the downloader's per-host settings and its real slots (a whole
    # engine needs a running reactor; tests/test_politeness_live.py runs the same code in real crawls)
    slots = {"a.example": Slot(concurrency=1, delay=DELAY, jitter=0.0)}
    crawler.engine = SimpleNamespace(downloader=SimpleNamespace(per_slot_settings={}, slots=slots))
    politeness = Politeness.from_crawler(crawler)
    stored: list[dict[str, Any]] = []
    crawler.signals.connect(lambda host, part, state: stored.append(state), signal=politeness_changed)
    return politeness, stored


def _timing(ready_in_s: float, failures: int = 0, crawl_delay: float | None = None) -> dict[str, Any]:
    return {"ready_at": time.time() + ready_in_s, "delay": DELAY, "crawl_delay": crawl_delay,
            "failures": failures, "network_failures": 0}  # fmt: skip


def _restore(politeness: Politeness, rows: list[tuple[str, str, dict[str, Any]]], claimed: bool) -> None:
    politeness.crawler.signals.send_catch_log(signal=politeness_restored, rows=rows, claimed=claimed)


def test_a_claimed_host_whose_time_has_come_is_fetched_now_and_nothing_is_stored_back() -> None:
    politeness, stored = _politeness()
    _restore(politeness, [("a.example", "timing", _timing(-1.0))], claimed=True)
    assert politeness.hosts["a.example"].ready_at <= time.monotonic()
    assert stored == []  # no write back to the shared frontier for a claim that changed nothing


def test_a_claim_brings_another_workers_backoff_and_crawl_delay() -> None:
    politeness, stored = _politeness()
    rows = [("a.example", "timing", _timing(60.0, failures=2, crawl_delay=8.0))]
    _restore(politeness, rows, claimed=True)
    state = politeness.hosts["a.example"]
    assert 55.0 < state.ready_at - time.monotonic() <= 60.0 and state.failures == 2 and state.delay == 8.0
    assert 55.0 < politeness.send_wait("a.example") <= 60.0  # the downloader holds the host as well
    stored.clear()
    _restore(politeness, rows, claimed=True)  # the same hosts claimed again: nothing new, nothing stored
    assert stored == [] and 55.0 < state.ready_at - time.monotonic() <= 60.0


def test_a_resumed_host_waits_at_least_its_delay_from_now() -> None:
    politeness, _ = _politeness()
    _restore(politeness, [("a.example", "timing", _timing(-1.0))], claimed=False)
    assert politeness.hosts["a.example"].ready_at - time.monotonic() > DELAY - 0.5
