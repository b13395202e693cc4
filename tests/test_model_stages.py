"""A model cleaner's pages parsed in CPU workers and labelled in one model process
(crawler/pages/staged_pool.py): the same results as one process doing it all, on the real transformers
path with a tiny trained encoder."""

from __future__ import annotations

import asyncio
import os
import random
import signal
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from cleaner.encoder import MODEL_ENV
from cleaner.model_stages import finish_pages, label_pages, prepare_pages
from cleaner.pipeline import PageResult, process_pages, warm_up
from crawler.pages.batch_cleaner import BatchCleaner
from crawler.pages.staged_pool import StagedPool, cleaning_pool
from tests.test_cleaner_encoder import require_encoder_stack, toy_page, train_toy_model

CLEANER = "encoder_v2"
SCORERS = ("heuristic_v2",)
MENU = "<div class='menu'>home about contact</div>"


@pytest.fixture(scope="module")
def toy_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_encoder_stack()
    path = tmp_path_factory.mktemp("toy-encoder")
    train_toy_model(path)
    return path


@pytest.fixture
def model_env(toy_model: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The toy model for this process and for every worker it spawns."""
    monkeypatch.setenv(MODEL_ENV, str(toy_model))
    return toy_model


def pages_of_every_kind() -> list[tuple[str, str]]:
    """Toy articles between menus, and pages that end before, in and after the model."""
    rng = random.Random(7)
    pages = [
        (toy_page(rng, rng.randint(1, 5), rng.randint(0, 4))[0], f"http://a.example/{i}") for i in range(12)
    ]
    pages += [
        ("", "http://a.example/empty"),  # no body: never reaches the model
        ("\x00\x01\x02" * 200, "http://a.example/binary"),
        (f"<html><body>{MENU}{MENU}</body></html>", "http://a.example/menus"),  # the model keeps nothing
        ("<html><head><title>t</title></head><body></body></html>", "http://a.example/no-text"),
    ]
    return pages


def comparable(results: list[PageResult]) -> list[tuple[Any, ...]]:
    return [
        (r.text, r.markdown, r.title, r.cleaner, r.error, r.scores, r.language, r.fallback) for r in results
    ]


def test_the_three_stages_give_what_one_process_gives_page_for_page(model_env: Path) -> None:
    pages = pages_of_every_kind()
    whole = process_pages(pages, CLEANER, SCORERS)
    batch = prepare_pages(pages, CLEANER)
    labels, seconds = label_pages(batch.inputs, CLEANER)
    staged = finish_pages(batch, labels, seconds, CLEANER, SCORERS)
    assert comparable(staged) == comparable(whole)
    texts = [r.text for r in staged]
    assert sum(bool(t) for t in texts[:12]) >= 10, "the toy articles keep their main text"
    assert [r.error for r in staged[12:]] == [
        "cleaner/empty/empty",
        "cleaner/empty/binary",
        "cleaner/empty/no_main",
        "cleaner/empty/no_text",
    ]
    assert len(batch.pages) == 13, "the empty and binary pages, and the one without text, skip the model"


def test_a_model_that_cannot_load_fails_its_pages_with_a_reason(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    require_encoder_stack()
    monkeypatch.setenv(MODEL_ENV, str(tmp_path / "no-such-model"))
    from cleaner.pipeline import cached_cleaner

    cached_cleaner.cache_clear()  # the cleaner keeps its labeller: build it anew with the missing model
    try:
        batch = prepare_pages(pages_of_every_kind()[:3], CLEANER)
        labels, _ = label_pages(batch.inputs, CLEANER)
        results = finish_pages(batch, labels, 0.0, CLEANER, SCORERS)
    finally:
        cached_cleaner.cache_clear()
    assert {r.error for r in results} == {"cleaner/exception/OSError"}
    assert all(not r.text for r in results)


def crawl_pool(niceness: int = 0) -> BatchCleaner:
    """The crawl's pool for a model cleaner, as CleanScoreStorePipeline builds it."""
    return BatchCleaner(
        lambda: cleaning_pool(CLEANER, 1, niceness),
        process_pages,
        (CLEANER, SCORERS),
        name=CLEANER,
        workers=1,
        batch_pages=8,
        batch_seconds=0.05,
    )


def test_the_crawls_model_pool_parses_in_cpu_workers_and_labels_in_one_model_process(model_env: Path) -> None:
    pages = pages_of_every_kind()
    expected = comparable(process_pages(pages, CLEANER, SCORERS))

    async def crawl() -> tuple[list[PageResult], int, int]:
        batcher = crawl_pool()
        try:
            assert isinstance(batcher.pool, StagedPool)
            await batcher.warm_up(warm_up)
            results = await asyncio.gather(*(batcher.clean(html, url) for html, url in pages))
            processes = (len(batcher.pool.cpu._processes), len(batcher.pool.model._processes))  # type: ignore[attr-defined]
            return results, *processes
        finally:
            batcher.close()

    results, cpu_processes, model_processes = asyncio.run(crawl())
    assert comparable(results) == expected
    assert cpu_processes == (os.cpu_count() or 1) and model_processes == 1  # not a model per core
    assert all(r.seconds > 0 for r in results)


def test_a_model_process_that_dies_costs_no_page(model_env: Path) -> None:
    pages = pages_of_every_kind()[:6]
    expected = comparable(process_pages(pages, CLEANER, SCORERS))

    async def crawl() -> tuple[list[PageResult], dict[str, float]]:
        batcher = crawl_pool()
        try:
            await batcher.warm_up(warm_up)
            pool = batcher.pool
            assert isinstance(pool, StagedPool)
            for pid in list(pool.model._processes):  # type: ignore[attr-defined]
                os.kill(pid, signal.SIGKILL)  # an accelerator driver crash, between two batches
            await asyncio.sleep(0.5)
            results = await asyncio.gather(*(batcher.clean(html, url) for html, url in pages))
            assert batcher.pool is not pool, "the broken pool was replaced"
            return results, batcher.report()
        finally:
            batcher.close()

    results, report = asyncio.run(crawl())
    assert comparable(results) == expected
    assert report["clean/worker_crashes"] >= 1 and report["clean/crash_retries"] == len(pages)


def test_score_labels_each_tasks_pages_in_one_model_call(
    model_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cleaner.encoder import EncoderLabeller
    from crawler.archive.score_warcs import score_pages
    from crawler.archive.score_warcs_reader import HtmlPage

    calls: list[int] = []
    label = EncoderLabeller.label

    def counted(self: EncoderLabeller, pages: Any) -> Any:
        calls.append(len(pages))
        return label(self, pages)

    monkeypatch.setattr(EncoderLabeller, "label", counted)
    pages = pages_of_every_kind()[:8]
    task = [
        HtmlPage(url, "a.example", "a.example", html.encode(), "utf-8", "x.warc.gz", i)
        for i, (html, url) in enumerate(pages)
    ]
    rows, counts = score_pages(task, CLEANER, SCORERS, None)
    assert calls == [8], "one labeller call for the task's eight pages, not one per page"
    expected = [len(r.text) for r in process_pages(pages, CLEANER, SCORERS, None)]
    assert [row["text_length"] for row in rows] == expected
    assert not [key for key in counts if "exception" in key]


class CancelledOnSubmit(ThreadPoolExecutor):
    """A model pool shut down with cancel_futures while a batch was on its way to it."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        cancelled: Future[Any] = Future()
        cancelled.cancel()
        return cancelled


class ShutDown(ThreadPoolExecutor):
    """A model pool shut down before the batch got to it."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        raise RuntimeError("cannot schedule new futures after shutdown")


@pytest.mark.parametrize("gone", [CancelledOnSubmit, ShutDown])
def test_a_batch_caught_between_a_replaced_pools_stages_is_retried_not_lost(
    model_env: Path, gone: type[ThreadPoolExecutor]
) -> None:
    """When one pool breaks, BatchCleaner shuts the whole StagedPool down: a batch already prepared then
    meets a shut model pool. Its pages must be retried on the new pool, not come back cancelled or failed."""
    pages = pages_of_every_kind()[:6]
    expected = comparable(process_pages(pages, CLEANER, SCORERS))
    pools = iter(
        [StagedPool(ThreadPoolExecutor, gone, 1), StagedPool(ThreadPoolExecutor, ThreadPoolExecutor, 1)]
    )

    async def crawl() -> tuple[list[PageResult], dict[str, float]]:
        batcher = BatchCleaner(
            lambda: next(pools), process_pages, (CLEANER, SCORERS), name=CLEANER, workers=1, batch_pages=8
        )
        try:
            results = await asyncio.gather(*(batcher.clean(html, url) for html, url in pages))
            return results, batcher.report()
        finally:
            batcher.close()

    results, report = asyncio.run(crawl())
    assert comparable(results) == expected
    assert report["clean/crash_retries"] == len(pages)
