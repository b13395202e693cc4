"""Cleaning off the reactor: pages go to a process pool in batches, with backpressure and crash retries."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from functools import partial
from typing import Any

from cleaner.pipeline import PageResult
from cleaner.registry import ACCELERATOR_BATCH_PAGES, ACCELERATOR_CLEANERS

logger = logging.getLogger(__name__)

# Pages per pool call: amortises pickling and IPC, and lets labellers batch their model calls.
CLEAN_BATCH_PAGES = 16
# A page waits at most this long for its batch to fill, so a slow (polite) crawl is not held back.
CLEAN_BATCH_MS = 50.0
# Pages admitted into cleaning at once = this x workers x batch; beyond it process_item waits.
IN_FLIGHT_BATCHES_PER_WORKER = 4
# Workers run at a lower CPU priority: cleaning can wait (backpressure bounds it), fetching cannot, so
# on a busy machine the reactor gets the cores first and the workers take what is left. On a machine
# shared with other jobs they yield to those too: HOSTCRAWL_CLEAN_NICENESS = 0 switches this off.
WORKER_NICENESS = 10
# A policy that learns from scores has at most this many batches per cleaning worker fetched and unscored
# besides the requests in flight (FrontierLimits.max_unscored): the pool always has a batch waiting, and a
# pool that falls behind makes the crawl wait for scores instead of fetching 160 pages ahead of them.
UNSCORED_BATCHES_PER_WORKER = 2
# ... and at most this share of the crawl's budget (no fewer than UNSCORED_FLOOR pages): a budget of 200
# fetched 72 pages ahead of its scores spends a third of itself on hosts it has not judged yet (chosen on
# replay seeds 101-104: at 1% budgets adaptive's hq/fetch 0.225 -> 0.283, at 2% 0.284 -> 0.331; shares
# of 0.025 and 0.05 did as well, and 0.1 leaves budgets over 960 pages to the pool's bound)
UNSCORED_BUDGET_SHARE = 0.1
UNSCORED_FLOOR = 8
# A pool worker checks this often whether the process that started it is still there, and exits with
# EXIT_ORPHANED once it is not
PARENT_POLL_S = 1.0
EXIT_ORPHANED = 3
WORKER_CRASH = "cleaner/worker_crash"  # a worker died on this page, and again when it was retried alone

Work = Callable[..., list[PageResult]]


def pool_shape(cleaner: str, workers: int = 0, batch_pages: int = 0) -> tuple[int, int]:
    """(cleaning workers, pages per batch), a 0 replaced by the cleaner's default: an accelerator model
    gets one worker and batches of 64, the others a worker per core and batches of 16."""
    accelerator = cleaner in ACCELERATOR_CLEANERS
    default_batch = ACCELERATOR_BATCH_PAGES if accelerator else CLEAN_BATCH_PAGES
    return workers or (1 if accelerator else os.cpu_count() or 1), batch_pages or default_batch


def unscored_bound(concurrency: int, cleaner: str, workers: int = 0, budget: int = 0) -> int:
    """The default FrontierLimits.max_unscored of a crawl: its requests in flight and two batches per
    cleaning worker (a quiet 2-core crawl has about 40 pages awaiting scores, a CPU-starved one 160), or
    budget_unscored_bound(budget) if that is smaller."""
    workers, batch_pages = pool_shape(cleaner, workers)
    bound = concurrency + UNSCORED_BATCHES_PER_WORKER * workers * batch_pages
    return min(bound, budget_unscored_bound(budget)) if budget > 0 else bound


def budget_unscored_bound(budget: int) -> int:
    """Pages a crawl of `budget` pages may fetch ahead of their scores: UNSCORED_BUDGET_SHARE of it, at
    least UNSCORED_FLOOR (0: no budget, no bound). A bound on the run, however many workers share it
    (FrontierLimits.run_max_unscored)."""
    return max(UNSCORED_FLOOR, round(budget * UNSCORED_BUDGET_SHARE)) if budget > 0 else 0


def exit_with_parent(parent: int = 0, poll_s: float = PARENT_POLL_S) -> None:
    """End this pool worker within `poll_s` of the process that started it (`parent`, its pid passed in
    the pool's initargs; 0: the worker's parent now) going away, and at once if it is gone already.

    A killed crawl (kill -9, the OOM killer) never shuts its pool down, and the worker would wait on the
    pool's call queue for ever: it holds the queue's write end too, so the pipe never closes. Each such
    worker keeps its scorers' memory (about 500 MB). Polling the parent's pid works wherever the worker
    was started from (PR_SET_PDEATHSIG would fire when the spawning *thread* ends, not the process). The
    pid comes from the pool's creator because a worker starts slowly (imports, under load for seconds): a
    crawl killed meanwhile left a worker that took its new parent (init) for its crawl and never ended."""
    parent = parent or os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os._exit(EXIT_ORPHANED)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def init_worker(niceness: int = WORKER_NICENESS, parent: int = 0) -> None:
    """Quiet logs (workers have no log setup; trafilatura would warn on every page) and low priority.

    Ctrl-C reaches the whole process group: the crawling process stops gracefully and shuts the pool
    down itself, so a worker ignores SIGINT and SIGTERM (else each would print a traceback and fail
    the pages of its batch). A worker whose crawl (pid `parent`) was killed outright ends by itself
    (`exit_with_parent`)."""
    exit_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.getLogger("trafilatura").setLevel(logging.CRITICAL)
    logging.getLogger("htmldate").setLevel(logging.CRITICAL)
    with contextlib.suppress(OSError):  # where not allowed, cleaning competes with fetching as equals
        os.nice(niceness)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back in this thread while it may spawn workers: a spawned worker inherits
    the mask, so a Ctrl-C during its start-up (imports, before `init_worker` runs) prints no traceback.
    A signal that arrives meanwhile is delivered to this process when the block ends."""
    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@dataclass(slots=True)
class _Job:
    html: str
    url: str
    future: asyncio.Future[PageResult]
    retried: bool = False


class BatchCleaner:
    """Groups pages into one pool call per batch and admits a bounded number of pages at a time.

    `clean` is awaited on the reactor; pickling, cleaning and unpickling happen in the pool and its
    threads. When `max_in_flight` pages are admitted, `clean` waits: Scrapy keeps the waiting responses in
    its scraper slot, and once they pass SCRAPER_SLOT_MAX_ACTIVE_SIZE bytes the engine fetches no more.
    """

    def __init__(
        self,
        make_pool: Callable[[], Executor],
        work: Work,
        args: tuple[Any, ...],
        *,
        name: str,
        workers: int,
        batch_pages: int = CLEAN_BATCH_PAGES,
        batch_seconds: float = CLEAN_BATCH_MS / 1000,
        max_in_flight: int = 0,
    ) -> None:
        self.make_pool = make_pool
        self.pool = make_pool()
        self.work = work
        self.args = args
        self.name = name  # the cleaner's, for the results of pages no worker could answer
        self.workers = max(1, workers)
        self.batch_pages = max(1, batch_pages)
        self.batch_seconds = batch_seconds
        self.max_in_flight = max_in_flight or IN_FLIGHT_BATCHES_PER_WORKER * self.workers * self.batch_pages
        self.slots = asyncio.Semaphore(self.max_in_flight)
        self.pending: list[_Job] = []
        self.timer: asyncio.TimerHandle | None = None
        self.retries: deque[_Job] = deque()
        self.retrying = False
        self.in_flight = 0  # pages admitted and not yet answered
        self.in_pool = 0  # batches submitted and not yet answered
        self.waiting = 0  # process_item calls held back because the cleaner is full
        self.full_since = 0.0
        self.mark = time.monotonic()
        self.counts: Counter[str] = Counter()
        self.seconds: defaultdict[str, float] = defaultdict(float)

    async def warm_up(self, work: Callable[..., object]) -> None:
        """Start every worker and run `work(*args)` once in each before the crawl sends pages: a page
        fetched while workers are still importing waits seconds for its score, and the scheduler
        decides blind meanwhile (a 374-page crawl got no score back before its budget was spent)."""
        started = time.monotonic()
        loop = asyncio.get_running_loop()
        with signals_held():
            calls = [loop.run_in_executor(self.pool, work, *self.args) for _ in range(self.workers)]
        for outcome in await asyncio.gather(*calls, return_exceptions=True):
            if isinstance(outcome, BaseException):  # a broken model shows on the first page, with its reason
                logger.warning("warming up the cleaning workers failed: %r", outcome)
        self.seconds["clean/warm_up_seconds"] += time.monotonic() - started

    async def clean(self, html: str, url: str) -> PageResult:
        """This page's result, once its batch comes back; never raises for a bad page or a dead worker."""
        if self.slots.locked():
            self.counts["clean/backpressure_waits"] += 1
            if not self.waiting:
                self.full_since = time.monotonic()
            self.waiting += 1
            try:
                await self.slots.acquire()
            finally:
                self.waiting -= 1
                if not self.waiting:  # wall time with pages held back, however many waited
                    self.seconds["clean/backpressure_seconds"] += time.monotonic() - self.full_since
        else:
            await self.slots.acquire()
        try:
            job = _Job(html, url, asyncio.get_running_loop().create_future())
            self.in_flight += 1
            self.counts["clean/queue_peak"] = max(self.counts["clean/queue_peak"], self.in_flight)
            self.pending.append(job)
            if len(self.pending) >= self.batch_pages:
                self.flush()
            elif self.timer is None:
                self.timer = asyncio.get_running_loop().call_later(self.batch_seconds, self.flush)
            return await job.future
        finally:
            self.in_flight -= 1
            self.slots.release()

    def flush(self) -> None:
        """Send the pages waiting for a batch now (the batch is full or its time is up)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.pending:
            batch, self.pending = self.pending, []
            self._submit(batch)

    def _tick(self, delta: int) -> None:
        """Account the time since the last change to the pool's state, then change it."""
        now = time.monotonic()
        if self.in_pool >= self.workers:
            self.seconds["clean/pool_saturated_seconds"] += now - self.mark
        elif self.in_pool == 0:
            self.seconds["clean/pool_idle_seconds"] += now - self.mark
        self.mark = now
        self.in_pool += delta

    def _submit(self, batch: list[_Job]) -> None:
        pages = [(job.html, job.url) for job in batch]
        with signals_held():  # a submit may spawn a worker (the first batches, after a crash)
            try:
                future = self.pool.submit(self.work, pages, *self.args)
            except BrokenProcessPool:  # it died between two batches; a fresh pool takes this one
                self._restart(self.pool)
                future = self.pool.submit(self.work, pages, *self.args)
        pool = self.pool
        self.counts["clean/batches"] += 1
        self.counts["clean/pages"] += len(batch)
        self._tick(+1)
        asyncio.wrap_future(future).add_done_callback(partial(self._done, batch, pool))

    def _done(self, batch: list[_Job], pool: Executor, future: asyncio.Future[list[PageResult]]) -> None:
        self._tick(-1)
        if batch[0].retried:
            self.retrying = False
        if future.cancelled():
            for job in batch:
                job.future.cancel()
        elif isinstance(future.exception(), BrokenProcessPool):
            self._restart(pool)
            self._crashed(batch)
        elif (exc := future.exception()) is not None:
            logger.error("cleaning a batch of %d pages failed: %r", len(batch), exc)
            self._answer(batch, [self._failed(f"cleaner/exception/{type(exc).__name__}") for _ in batch])
        else:
            results = future.result()
            self.seconds["clean/worker_seconds"] += sum(r.seconds for r in results)
            self._answer(batch, results)
        self._next_retry()

    def _answer(self, batch: list[_Job], results: list[PageResult]) -> None:
        for job, result in zip(batch, results, strict=True):
            if not job.future.done():
                job.future.set_result(result)

    def _failed(self, error: str) -> PageResult:
        return PageResult(cleaner=self.name, error=error)

    def _restart(self, broken: Executor) -> None:
        """A worker died: replace the pool once, however many batches report it."""
        if self.pool is broken:
            self.counts["clean/worker_crashes"] += 1
            logger.warning("a cleaning worker died; restarting the pool")
            broken.shutdown(wait=False, cancel_futures=True)
            self.pool = self.make_pool()

    def _crashed(self, batch: list[_Job]) -> None:
        """Pages of a batch a worker died on get one more try each, alone and one at a time."""
        for job in batch:
            if job.retried:
                self._answer([job], [self._failed(WORKER_CRASH)])
            else:
                job.retried = True
                self.counts["clean/crash_retries"] += 1
                self.retries.append(job)

    def _next_retry(self) -> None:
        """One retry in the pool at a time, so a page that kills its worker again takes only itself."""
        if not self.retrying and self.retries:
            self.retrying = True
            self._submit([self.retries.popleft()])

    def report(self) -> dict[str, float]:
        """Counters and seconds for the crawl's stats: where the cleaning time went."""
        self._tick(0)
        out: dict[str, float] = dict(self.counts)
        out.update({k: round(v, 3) for k, v in self.seconds.items()})
        if self.counts["clean/batches"]:
            mean = self.counts["clean/pages"] / self.counts["clean/batches"]
            out["clean/batch_pages_mean"] = round(mean, 2)
        return out

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.pool.shutdown(wait=True, cancel_futures=True)
