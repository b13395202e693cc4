"""A Redis worker never has more pages in flight than `--concurrency`, however late its reactor runs.

The worker's link thread claims leases and hands them to the reactor a turn later. It used to size its next
claim from the inbox alone, so on a busy machine it claimed again before the last claim had arrived, and the
worker handed all of them to the downloader: the local CI saw 5 requests on the network at concurrency 4
(tests/test_request_slots.py). Here the reactor never runs, which is that busy machine at its worst."""

from __future__ import annotations

from pathlib import Path

from redis_server import (
    RedisServer,
    redis_server_fixture,  # noqa: F401  (registers the fixture)
)
from scrapy.utils.test import get_crawler

from scheduler.redis_requests import Claimed, QueuedRequest
from scheduler.redis_scheduler import RedisHostScheduler

SLOTS = 4


def _worker(redis_url: str, run_dir: Path) -> RedisHostScheduler:
    settings = {
        "REDIS_URL": redis_url, "HOSTCRAWL_REDIS_RUN": "slots", "HOSTCRAWL_WORKER_ID": "w0",
        "HOSTCRAWL_RUN_DIR": str(run_dir), "HOSTCRAWL_CONCURRENCY": SLOTS, "HOSTCRAWL_MAX_PAGES": 100,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
    }  # fmt: skip
    return RedisHostScheduler.from_crawler(get_crawler(settings_dict=settings))


def _claimed(n: int, start: int = 0) -> list[Claimed]:
    return [
        Claimed(str(i), f"h{i}.example", QueuedRequest(f"http://h{i}.example/", 0, {}), {})
        for i in range(start, start + n)
    ]


def test_a_claim_on_its_way_to_the_reactor_counts_against_the_slots(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    worker = _worker(redis_server.url, tmp_path)
    on_the_way: list[tuple[object, ...]] = []
    worker.to_reactor = lambda *call: on_the_way.append(call)  # a reactor too busy to take it yet
    assert worker._want() == SLOTS
    worker._claimed(_claimed(SLOTS), [])  # the link thread's claim
    assert len(on_the_way) == 1 and not worker.inbox
    assert worker._want() == 0, "claimed again before the last claim reached the inbox"


def test_a_full_worker_hands_out_nothing_more_from_its_inbox(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    worker = _worker(redis_server.url, tmp_path)
    worker.spider = type("Spider", (), {"parse": None, "failed": None})()
    worker.inbox.extend(_claimed(SLOTS + 2))  # more than the slots, as a late reactor once let in
    handed = [worker.next_request() for _ in range(SLOTS + 2)]
    assert sum(r is not None for r in handed) == SLOTS and worker.pages_in_flight() == SLOTS
    assert len(worker.inbox) == 2  # the rest wait for a slot
