"""A crawl (or `score`) killed outright leaves no cleaning worker behind.

kill -9 or the OOM killer gives the crawling process no chance to shut its pool down. Its workers ignore
SIGINT and SIGTERM (the crawl stops them itself) and would wait on the pool's queue for ever, each holding
its scorers' memory: every killed crawl used to leave one or two ~500 MB processes running.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hostcrawl_cli import HOSTCRAWL

from crawler.pages.batch_cleaner import EXIT_ORPHANED, PARENT_POLL_S
from crawler.testweb import TestWebConfig, TestWebProcess

GONE_WITHIN_S = 10 * PARENT_POLL_S

# a pool like the crawl's or `score`'s, started with their initializer; prints its workers' pids
POOL_SCRIPT = """
import multiprocessing, sys, time
from concurrent.futures import ProcessPoolExecutor
from {module} import {initializer} as init
if __name__ == "__main__":
    pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"), initializer=init)
    list(pool.map(abs, range(8)))
    print(" ".join(str(p) for p in pool._processes), flush=True)
    time.sleep(600)
"""


def children(pid: int) -> set[int]:
    """Live pool workers (multiprocessing's spawn_main) whose parent is `pid`, read from /proc."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            state, ppid = stat.rsplit(")", 1)[1].split()[:2]
            if int(ppid) == pid and state != "Z" and b"spawn_main" in command:
                found.add(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """Running, not a zombie awaiting its reaper (in a container pid 1 may never reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_gone(pids: set[int]) -> set[int]:
    deadline = time.monotonic() + GONE_WITHIN_S
    while (left := {p for p in pids if alive(p)}) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def kill_all(pids: set[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize(
    ("module", "initializer"),
    [("crawler.pages.batch_cleaner", "init_worker"), ("crawler.archive.score_warcs", "_init_pool_worker")],
    ids=["crawl", "score"],
)
def test_pool_workers_end_when_their_process_is_killed(module: str, initializer: str) -> None:
    script = POOL_SCRIPT.format(module=module, initializer=initializer)
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    workers = {int(p) for p in process.stdout.readline().split()}
    try:
        assert len(workers) == 2 and workers <= children(process.pid)
        time.sleep(2 * PARENT_POLL_S)
        assert all(alive(p) for p in workers), "a worker must not end while its process lives"
        process.send_signal(signal.SIGKILL)
        process.wait(10)
        left = wait_gone(workers)
        assert not left, f"pool workers {sorted(left)} outlived their killed process"
    finally:
        process.kill()
        kill_all(workers)


@pytest.mark.parametrize(
    ("module", "initializer"),
    [("crawler.pages.batch_cleaner", "init_worker"), ("crawler.archive.score_warcs", "_init_pool_worker")],
    ids=["crawl", "score"],
)
def test_a_worker_whose_process_died_while_it_started_ends_at_once(module: str, initializer: str) -> None:
    """A crawl killed while its workers were still importing (seconds, under load): each worker took its
    new parent for the crawl and never ended. The pool passes its creator's pid; here that is not ours."""
    code = (
        f"import os, time; from {module} import {initializer} as init\n"
        "init(parent=os.getppid() + 1)\ntime.sleep(60)"
    )
    worker = subprocess.Popen([sys.executable, "-c", code])
    try:
        assert worker.wait(GONE_WITHIN_S) == EXIT_ORPHANED
    finally:
        worker.kill()


@pytest.mark.slow
def test_a_crawl_killed_outright_leaves_no_cleaning_worker(tmp_path: Path) -> None:
    with TestWebProcess(TestWebConfig(n_hosts=30, seed=3), tmp_path / "web") as web:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(web.seed_urls) + "\n")
        command = [
            *HOSTCRAWL, "crawl", "--seeds", str(seeds), "--out", str(tmp_path / "run"), "--proxy",
            web.proxy_url, "--allow-private", "--min-delay", "0.2", "--max-pages", "100000",
            "--workers", "2", "--no-progress",
        ]  # fmt: skip
        crawl = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        workers: set[int] = set()
        try:
            deadline = time.monotonic() + 120
            while len(workers) < 2 and crawl.poll() is None and time.monotonic() < deadline:
                workers = children(crawl.pid)
                time.sleep(0.2)
            assert len(workers) == 2, f"the crawl started {len(workers)} cleaning workers, not 2"
            crawl.send_signal(signal.SIGKILL)  # the crawling process only, as the OOM killer does
            crawl.wait(10)
            left = wait_gone(workers)
            assert not left, f"cleaning workers {sorted(left)} outlived their killed crawl"
        finally:
            crawl.kill()
            kill_all(workers)
