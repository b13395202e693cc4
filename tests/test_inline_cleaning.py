"""Inline cleaning in the crawl: batches off the reactor, backpressure, dead workers, and bad pages."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import random
import threading
from collections.abc import Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from cleaner import decode_html
from cleaner.base import MAX_CLEAN_CHARS
from cleaner.blocks_model import BlocksCleaner
from cleaner.pipeline import PageResult, process_page, process_pages
from cleaner.simplify import SimplePage
from crawler.pages.batch_cleaner import WORKER_CRASH, WORKER_NICENESS, BatchCleaner, init_worker

SCORERS = ("heuristic_v2",)
PARAGRAPH = (
    "<p>The harbour committee met on Tuesday to discuss the new ferry timetable, the cost of "
    "repairing the old pier, and whether the winter service should stop at the island twice a day.</p>"
)
GOOD = (
    "<html><head><title>Ferry timetable</title></head><body><nav><a href='/'>Home</a></nav>"
    f"<article><h1>New ferry timetable</h1>{PARAGRAPH * 6}</article>"
    "<footer>All rights reserved</footer></body></html>"
)
RUSSIAN = (
    "<html><body><article>"
    + "<p>Комитет гавани собрался во вторник, чтобы обсудить новое расписание паромов.</p>" * 20
    + "</article></body></html>"
)


def random_bytes(n: int) -> bytes:
    rng = random.Random(7)
    return bytes(rng.getrandbits(8) for _ in range(n))


BAD_PAGES = {
    "empty": ("", "cleaner/empty/empty"),
    "whitespace": (" \n\t ", "cleaner/empty/empty"),
    "binary_sniffed": (decode_html(random_bytes(20_000)), "cleaner/empty/binary"),
    "binary_as_utf8": (random_bytes(20_000).decode("utf-8", errors="replace"), "cleaner/empty/binary"),
    "script_only": (
        "<html><head><script>var a = 1;</script></head><body><script>document.write('hello there')"
        "</script><style>p { color: red }</style><noscript></noscript></body></html>",
        "cleaner/empty/no_text",
    ),
    "nested_10k": ("<div>" * 10_000 + "deep words " * 20 + "</div>" * 10_000, "cleaner/empty/too_deep"),
    "cp1251_read_as_utf8": (
        RUSSIAN.encode("cp1251").decode("utf-8", errors="replace"),
        "cleaner/empty/bad_encoding",
    ),
}


@pytest.mark.parametrize("name", list(BAD_PAGES))
def test_bad_page_gives_an_empty_result_that_names_the_reason(name: str) -> None:
    html, reason = BAD_PAGES[name]
    result = process_page(html, f"http://bad.example/{name}", "blocks_v1", SCORERS)
    assert result.error == reason
    assert result.text == "" and result.n_words == 0
    assert result.scores == {"heuristic_v2": 0.0}


def test_batch_with_every_kind_of_bad_page_still_cleans_the_good_ones() -> None:
    pages = [(GOOD, "http://good.example/a")]
    pages += [(html, f"http://bad.example/{name}") for name, (html, _) in BAD_PAGES.items()]
    pages += [
        (RUSSIAN, "http://good.example/ru"),
        (GOOD.replace("ferry", "\udc80ferry"), "http://good.example/b"),
    ]
    results = process_pages(pages, "blocks_v1", SCORERS)
    assert len(results) == len(pages)
    assert [r.error for r in results[1:-2]] == [reason for _, reason in BAD_PAGES.values()]
    for result in (results[0], results[-2], results[-1]):
        assert result.error is None and result.n_words > 50
        assert "All rights reserved" not in result.text
    assert "ferry timetable" in results[0].text and "паромов" in results[-2].text


def test_huge_page_is_cut_to_the_work_cap_and_still_cleaned() -> None:
    paragraphs = MAX_CLEAN_CHARS // len(PARAGRAPH) * 3
    html = f"<html><body><article>{PARAGRAPH * paragraphs}</article></body></html>"
    result = process_page(html, "http://huge.example/", "blocks_v1", SCORERS)
    assert result.error is None and result.truncated
    assert 0 < result.n_words < paragraphs * len(PARAGRAPH.split()) / 3


def test_disabled_cleaning_says_so_instead_of_reporting_an_empty_page() -> None:
    result = process_page(GOOD, "http://good.example/", "none", SCORERS)
    assert result.error == "cleaner/empty/disabled" and result.text == ""


class PickyLabeller:
    """Fails on any batch holding a page that mentions 'poison', like a model that chokes on one input."""

    name = "picky"

    def label(self, pages: Sequence[SimplePage]) -> list[np.ndarray]:
        if any("poison" in b.text for p in pages for b in p.blocks):
            raise RuntimeError("labeller crashed")
        return [np.ones(len(p.blocks), dtype=np.float32) for p in pages]


class PickyCleaner(BlocksCleaner):
    def labeller(self) -> Any:
        return PickyLabeller()

    def keep_threshold(self) -> float:
        return 0.5


def test_labeller_failing_on_one_page_costs_only_that_page() -> None:
    htmls = [GOOD, GOOD.replace("pier", "poison pier"), RUSSIAN]
    out = PickyCleaner().clean_batch(htmls, ["http://a.example/"] * 3)
    assert out[1].page is None and out[1].error == "cleaner/exception/RuntimeError"
    assert out[0].page is not None and "ferry timetable" in out[0].page.text
    assert out[2].page is not None and out[2].error is None


def echo_pages(pages: Sequence[tuple[str, str]], tag: str) -> list[PageResult]:
    """Stand-in for process_pages: the URL comes back as the text, so routing errors show."""
    return [PageResult(text=f"{tag}:{url}", cleaner=tag, seconds=0.001) for _, url in pages]


def crash_on_poison(pages: Sequence[tuple[str, str]], tag: str) -> list[PageResult]:
    """Kills its worker process outright (like a segfault in a parser) when a page says 'poison'."""
    if any("poison" in html for html, _ in pages):
        os._exit(3)
    return echo_pages(pages, tag)


def spawn_pool() -> Executor:
    return ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))


def batcher(work: Any, make_pool: Any = lambda: ThreadPoolExecutor(2), **kwargs: Any) -> BatchCleaner:
    return BatchCleaner(make_pool, work, ("t",), name="t", workers=2, **kwargs)


def test_pages_go_to_the_pool_in_batches_and_each_gets_its_own_result() -> None:
    sizes: list[int] = []

    def work(pages: Sequence[tuple[str, str]], tag: str) -> list[PageResult]:
        sizes.append(len(pages))
        return echo_pages(pages, tag)

    async def crawl() -> tuple[list[PageResult], dict[str, float]]:
        cleaner = batcher(work, batch_pages=16, batch_seconds=0.05)
        results = await asyncio.gather(*(cleaner.clean("<p>x</p>", f"u{i}") for i in range(40)))
        cleaner.close()
        return results, cleaner.report()

    results, report = asyncio.run(crawl())
    assert report["clean/batches"] == 3 and report["clean/batch_pages_mean"] == 13.33
    assert [r.text for r in results] == [f"t:u{i}" for i in range(40)]
    assert sorted(sizes) == [8, 16, 16]  # the last 8 went when their wait ran out


def test_a_full_cleaner_makes_new_pages_wait_instead_of_queueing_without_bound() -> None:
    release = threading.Event()
    seen: list[int] = []

    def slow(pages: Sequence[tuple[str, str]], tag: str) -> list[PageResult]:
        seen.append(len(pages))
        release.wait(10)
        return echo_pages(pages, tag)

    async def crawl() -> dict[str, float]:
        cleaner = batcher(slow, batch_pages=2, batch_seconds=0.01, max_in_flight=4)
        tasks = [asyncio.create_task(cleaner.clean("<p>x</p>", f"u{i}")) for i in range(10)]
        await asyncio.sleep(0.2)
        assert cleaner.in_flight == 4 and sum(seen) == 4  # the other six wait in process_item
        release.set()
        results = await asyncio.gather(*tasks)
        assert [r.text for r in results] == [f"t:u{i}" for i in range(10)]
        cleaner.close()
        return cleaner.report()

    report = asyncio.run(crawl())
    assert report["clean/backpressure_waits"] == 6 and report["clean/queue_peak"] == 4
    assert report["clean/backpressure_seconds"] > 0.1


def test_a_worker_that_dies_costs_only_the_page_that_killed_it() -> None:
    async def crawl() -> tuple[list[PageResult], PageResult, dict[str, float]]:
        cleaner = batcher(crash_on_poison, make_pool=spawn_pool, batch_pages=3, batch_seconds=0.05)
        pages = ["<p>fine</p>", "<p>poison</p>", "<p>also fine</p>"]
        results = await asyncio.gather(*(cleaner.clean(h, f"u{i}") for i, h in enumerate(pages)))
        after = await cleaner.clean("<p>later</p>", "u9")  # the pool was replaced
        cleaner.close()
        return results, after, cleaner.report()

    results, after, report = asyncio.run(crawl())
    assert [r.error for r in results] == [None, WORKER_CRASH, None]
    assert results[0].text == "t:u0" and results[2].text == "t:u2" and after.text == "t:u9"
    assert report["clean/worker_crashes"] == 2  # the batch, then the poison page alone
    assert report["clean/crash_retries"] == 3


def test_a_failing_batch_call_is_recorded_per_page_not_raised() -> None:
    def broken(pages: Sequence[tuple[str, str]], tag: str) -> list[PageResult]:
        raise MemoryError("no room")

    async def crawl() -> list[PageResult]:
        cleaner = batcher(broken, batch_pages=2, batch_seconds=0.01)
        try:
            return await asyncio.gather(*(cleaner.clean("<p>x</p>", f"u{i}") for i in range(3)))
        finally:
            cleaner.close()

    results = asyncio.run(crawl())
    assert [r.error for r in results] == ["cleaner/exception/MemoryError"] * 3
    assert all(r.cleaner == "t" for r in results)


def test_a_lone_page_is_not_held_back_waiting_for_a_full_batch() -> None:
    async def crawl() -> PageResult:
        cleaner = batcher(echo_pages, batch_pages=64, batch_seconds=0.05)
        try:  # without the batch timer this page would wait for 63 others forever
            return await asyncio.wait_for(cleaner.clean("<p>x</p>", "only"), timeout=10)
        finally:
            cleaner.close()

    assert asyncio.run(crawl()).text == "t:only"


def test_every_worker_is_warmed_up_before_the_first_page_and_a_failed_warm_up_costs_no_page() -> None:
    calls: list[str] = []

    def warm(tag: str) -> None:
        calls.append(tag)

    def broken(tag: str) -> None:
        raise RuntimeError("model file missing")

    async def crawl(work: Any) -> PageResult:
        cleaner = batcher(echo_pages, batch_pages=1)
        try:
            await cleaner.warm_up(work)
            assert "clean/warm_up_seconds" in cleaner.report()
            return await cleaner.clean("<p>x</p>", "u")
        finally:
            cleaner.close()

    assert asyncio.run(crawl(warm)).text == "t:u"
    assert calls == ["t", "t"], "one warm-up call per worker, with the cleaner's arguments"
    assert asyncio.run(crawl(broken)).text == "t:u"


def test_cleaning_workers_yield_the_cpu_to_the_crawler() -> None:
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context, initializer=init_worker) as pool:
        worker_niceness = pool.submit(os.nice, 0).result(timeout=60)
    assert worker_niceness >= min(os.nice(0) + WORKER_NICENESS, 19)


@pytest.mark.parametrize(("cleaner", "workers", "batch"), [("encoder_v2", 1, 64), ("blocks_v1", 0, 16)])
def test_model_cleaners_get_one_gpu_worker_with_large_batches(
    tmp_path: Any, cleaner: str, workers: int, batch: int
) -> None:
    from scrapy.utils.test import get_crawler

    from crawler.pages.store_pipeline import CleanScoreStorePipeline

    settings = {"HOSTCRAWL_RUN_DIR": str(tmp_path), "HOSTCRAWL_CLEANER": cleaner, "HOSTCRAWL_SCORERS": []}
    pipeline = CleanScoreStorePipeline(get_crawler(settings_dict=settings))
    assert pipeline.workers == (workers or os.cpu_count() or 1)  # not one copy of the model per core
    assert pipeline.batch_pages == batch
