"""Workers on machines that share no file system: each worker writes its own --out, and the run is merged
from wherever those folders are (`frontier merge RUN --from OTHER`), never with a worker's pages left out."""

from __future__ import annotations

import json
import time
from pathlib import Path

import polars as pl
import pytest
from hostcrawl_cli import hostcrawl
from redis_server import (
    RedisServer,
    redis_server_fixture,  # noqa: F401  (registers the fixture)
)
from test_distributed_crawl import start_workers

from crawler.run.crawl_config import CrawlConfig
from crawler.run.worker_merge import WRITING_S, live_workers, merge_if_last, outputs_written
from crawler.testweb import TestWebConfig, TestWebProcess
from scheduler.redis_connect import connect
from scheduler.redis_frontier import RedisFrontier

pytestmark = pytest.mark.slow

BUDGET = 160


def test_workers_on_two_machines_are_merged_from_both_folders(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    with TestWebProcess(TestWebConfig(n_hosts=30, seed=13), tmp_path / "web") as web:
        extra = ("--policy", "bfs")  # the leases and the merge are tested, not a policy
        (tmp_path / "one").mkdir()
        (tmp_path / "two").mkdir()
        one = start_workers(tmp_path / "one", web, redis_server, "apart", 1, BUDGET, 20, extra, first_id=0)
        two = start_workers(tmp_path / "two", web, redis_server, "apart", 1, BUDGET, 20, extra, first_id=1)
        codes = one.wait() + two.wait()
        served = one.served_pages()
    assert codes == [0, 0], one.tail() + two.tail()
    run_a, run_b = one.run_dir, two.run_dir
    folders = [run_a / "workers" / "w0", run_b / "workers" / "w1"]
    rows = [pl.read_parquet(folder / "pages.parquet") for folder in folders]
    assert all(frame.height > 0 for frame in rows), [frame.height for frame in rows]
    # each machine's --out names the run, so the merge can run on either
    for run_dir in (run_a, run_b):
        assert json.loads((run_dir / "distributed.json").read_text())["run"] == "apart"
        assert (run_dir / "config.toml").is_file()
    # the last worker did not merge half the run: it said where the other worker wrote
    assert not (run_a / "pages.parquet").exists() and not (run_b / "pages.parquet").exists()
    logs = " ".join((one.tail() + two.tail()).split())  # the terminal wraps long lines
    assert "the run is not merged" in logs, logs
    elsewhere = [str((run_a / "workers" / "w0").resolve()), str((run_b / "workers" / "w1").resolve())]
    assert any(path in logs.replace(" ", "") for path in elsewhere), logs

    refused = hostcrawl("frontier", "merge", str(run_a))
    assert refused.returncode == 2, refused.stderr
    assert "w1 at " in refused.stderr and str(run_b.resolve()) in refused.stderr
    assert "--from" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    assert not (run_a / "pages.parquet").exists()  # nothing half-written

    merged = hostcrawl("frontier", "merge", str(run_a), "--from", str(run_b))
    assert merged.returncode == 0, merged.stderr
    pages = pl.read_parquet(run_a / "pages.parquet")
    assert pages.height == sum(frame.height for frame in rows)
    assert set(pages["url"]) == set(rows[0]["url"]) | set(rows[1]["url"])
    fetched = set(("http://" + served["host"] + served["path"]).to_list())
    assert fetched <= set(pages["url"]), sorted(fetched - set(pages["url"]))[:5]
    warcs = sorted(path.name for path in (run_a / "warc").glob("*.warc.gz"))
    assert any("-w0-" in name for name in warcs) and any("-w1-" in name for name in warcs), warcs
    stats = json.loads((run_a / "stats.json").read_text())
    assert stats["frontier/workers"] == 2
    assert stats["frontier/run/fetched"] == stats["frontier/fetched"] <= BUDGET


def test_a_worker_still_writing_its_tables_is_not_merged_under_it(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """A worker's crawl ends (finished in Redis) a few seconds before its tables are written. Under load the
    last worker to end merged the run in that gap and failed on the other's half-written hosts.parquet; it
    now leaves the merge to the worker still writing, which merges once its own tables are whole."""
    frontier = RedisFrontier(connect(redis_server.url, decode_responses=True), "writing", 60.0)
    run_dir = tmp_path / "run"
    for worker in ("w0", "w1"):
        (run_dir / "workers" / worker).mkdir(parents=True)
    (run_dir / "workers" / "w0" / "hosts.parquet").write_bytes(b"PAR1")  # being written
    frontier.heartbeat("w0", {"finished": True, "writing": True})  # its crawl is over, tables not yet
    frontier.heartbeat("w1", {"finished": True})
    assert merge_if_last(run_dir, frontier, "w1", CrawlConfig()) is None
    assert not (run_dir / "pages.parquet").exists() and not (run_dir / "stats.json").exists()
    assert live_workers(frontier, but="w1") == {"w0": 0.0}

    outputs_written(frontier, "w0")  # what the worker says once its tables are whole
    assert live_workers(frontier, but="w1") == {}
    assert frontier.workers()["w0"]["finished"] and "writing" not in frontier.workers()["w0"]

    # a worker that died while writing does not hold the run for ever: `frontier merge` cuts it back
    died = {"finished": True, "writing": True, "seen": time.time() - WRITING_S - 1}
    frontier.client.hset(frontier.key("workers"), "w0", json.dumps(died))
    assert live_workers(frontier, but="w1") == {}
