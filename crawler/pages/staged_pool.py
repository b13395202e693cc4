"""A model cleaner's pool: CPU workers parse, one process runs the model, and the model never waits on HTML.

One submitted batch of `process_pages` runs as three calls (cleaner/model_stages.py): `prepare_pages` in a
CPU worker, `label_pages` in the model process, `finish_pages` in a CPU worker. While the model labels a
batch, the CPU workers prepare the next ones and finish the last, so a GPU gets its batches back to back
instead of sitting idle through each batch's parsing, as it did when one process did both. The pool looks
like any Executor to BatchCleaner: a worker that dies in either pool breaks the submitted batch's future
with BrokenProcessPool, and BatchCleaner replaces the whole pool and retries the pages one by one.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from typing import Any

from cleaner.model_stages import finish_pages, label_pages, prepare_pages, warm_up_model, warm_up_prepare
from cleaner.pipeline import process_pages, warm_up
from cleaner.registry import ACCELERATOR_CLEANERS
from crawler.pages.batch_cleaner import init_worker


def spawn_pool(workers: int, niceness: int) -> ProcessPoolExecutor:
    """`workers` cleaning processes at `niceness`, each ending by itself if this process dies."""
    # spawn, not fork: the parent runs a reactor and threads that must not be copied
    context = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=init_worker, initargs=(niceness, os.getpid())
    )


def cleaning_pool(cleaner: str, workers: int, niceness: int) -> Executor:
    """The crawl's cleaning pool: for a model cleaner a StagedPool (a CPU worker per core, and `workers`
    model processes: one unless asked), for the others `workers` processes doing everything."""
    if cleaner not in ACCELERATOR_CLEANERS:
        return spawn_pool(workers, niceness)
    cpus = os.cpu_count() or 1
    return StagedPool(partial(spawn_pool, cpus, niceness), partial(spawn_pool, workers, niceness), cpus)


class StagedPool(Executor):
    """Runs `process_pages(pages, cleaner, scorers[, langid])` and `warm_up(cleaner, scorers[, langid])`
    across a CPU pool of `cpu_workers` processes and a model pool of one."""

    def __init__(
        self, make_cpu: Callable[[], Executor], make_model: Callable[[], Executor], cpu_workers: int
    ) -> None:
        self.cpu = make_cpu()
        self.model = make_model()
        self.cpu_workers = max(1, cpu_workers)
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if kwargs:
            raise TypeError("StagedPool takes positional arguments only")
        if fn is warm_up:
            return self._warm_up(*args)
        if fn is not process_pages:
            raise TypeError(f"StagedPool runs process_pages and warm_up, not {fn!r}")
        pages, cleaner, *rest = args
        result: Future[Any] = Future()
        first = self.cpu.submit(prepare_pages, pages, cleaner)
        first.add_done_callback(partial(self._prepared, result, cleaner, tuple(rest)))
        return result

    def _warm_up(self, cleaner: str, *rest: Any) -> Future[Any]:
        """Every CPU worker and the model process started and run once; done when all of them are."""
        calls = [self.cpu.submit(warm_up_prepare, cleaner, *rest) for _ in range(self.cpu_workers)]
        calls.append(self.model.submit(warm_up_model, cleaner))
        result: Future[Any] = Future()
        left = [len(calls)]

        def one_done(call: Future[Any]) -> None:
            with self._lock:
                left[0] -= 1
                last = left[0] == 0
            if last:
                errors = [c.exception() for c in calls if not c.cancelled() and c.exception() is not None]
                if errors:
                    result.set_exception(errors[0])
                else:
                    result.set_result(None)

        for call in calls:
            call.add_done_callback(one_done)
        return result

    def _prepared(self, result: Future[Any], cleaner: str, rest: tuple[Any, ...], call: Future[Any]) -> None:
        if _passed_on(call, result):
            return
        batch = call.result()
        if not batch.inputs:  # every page ended before the model: nothing to wait in its queue for
            self._labelled(result, batch, cleaner, rest, _done(([], 0.0)))
            return
        try:
            labelled = self.model.submit(label_pages, batch.inputs, cleaner)
        except BaseException as exc:
            result.set_exception(_gone(exc))
            return
        labelled.add_done_callback(partial(self._labelled, result, batch, cleaner, rest))

    def _labelled(
        self, result: Future[Any], batch: Any, cleaner: str, rest: tuple[Any, ...], call: Future[Any]
    ) -> None:
        if _passed_on(call, result):
            return
        labels, seconds = call.result()
        try:
            finished = self.cpu.submit(finish_pages, batch, labels, seconds, cleaner, *rest)
        except BaseException as exc:
            result.set_exception(_gone(exc))
            return
        finished.add_done_callback(partial(self._finished, result))

    @staticmethod
    def _finished(result: Future[Any], call: Future[Any]) -> None:
        if not _passed_on(call, result):
            result.set_result(call.result())

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.cpu.shutdown(wait=wait, cancel_futures=cancel_futures)
        self.model.shutdown(wait=wait, cancel_futures=cancel_futures)


def _gone(exc: BaseException) -> BaseException:
    """A stage that could not be submitted: its pool broke, or was shut down because BatchCleaner replaced
    the pool after the other one broke. Either way the batch is retried (BrokenProcessPool), not lost."""
    if isinstance(exc, RuntimeError) and not isinstance(exc, BrokenProcessPool):
        return BrokenProcessPool(f"a cleaning stage's pool was shut down: {exc}")
    return exc


def _done(value: Any) -> Future[Any]:
    done: Future[Any] = Future()
    done.set_result(value)
    return done


def _passed_on(call: Future[Any], result: Future[Any]) -> bool:
    """A stage that failed ends the batch's future the same way; True when it did. A stage is cancelled
    only when its pool was shut down with work pending, after the other pool broke: the batch is retried."""
    if call.cancelled():
        result.set_exception(BrokenProcessPool("a cleaning stage was cancelled: its pool was replaced"))
        return True
    exc = call.exception()
    if exc is not None:
        result.set_exception(exc)
        return True
    return False
