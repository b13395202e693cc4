"""Worker processes crawl the test web through a real three-node Redis Cluster on loopback ports: the run's
keys share one hash tag (one slot, one node), the scripts run there, and a node killed with -9 and started
again pauses the workers without losing or repeating a page. Checked from the server's side (audit) and on
disk (the merged run)."""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl
import pytest
from redis_server import redis_cluster_fixture  # noqa: F401  (registers the fixture)
from test_distributed_crawl import (
    MIN_DELAY,
    USER_AGENT,
    Workers,
    rows_written,
    start_workers,
    wait_for_run_rows,
)

from crawler.bench.audit import audit_test_web
from crawler.testweb import SiteModel, TestWebConfig, TestWebProcess
from scheduler.redis_connect import connect, is_cluster, run_prefix
from scheduler.redis_process import RedisClusterProcess
from scheduler.redis_shards import shard_run

pytestmark = pytest.mark.slow


def check_run(workers: Workers, web_config: TestWebConfig) -> None:
    """Polite from the server's side, every page once in the merged run, nothing the web served lost."""
    _, audit = audit_test_web(workers.web_dir, SiteModel(web_config), MIN_DELAY, USER_AGENT, USER_AGENT)
    assert audit.requests > 50 and audit.clean, audit.as_dict()
    merged = workers.merged_urls()
    assert len(merged) == len(set(merged))
    served = workers.served_pages()
    lost = set(("http://" + served["host"] + served["path"]).to_list()) - set(merged)
    assert not lost, sorted(lost)[:10]


def test_redis_cluster_two_workers_share_one_run(tmp_path: Path, redis_cluster: RedisClusterProcess) -> None:
    assert is_cluster(redis_cluster.url)
    web_config = TestWebConfig(n_hosts=30, seed=7)
    with TestWebProcess(web_config, tmp_path / "web") as web:
        workers = start_workers(tmp_path, web, redis_cluster, "clustered", 2, budget=120, lease_s=20)
        codes = workers.wait()
    assert codes == [0, 0], workers.tail()
    check_run(workers, web_config)
    stats = workers.stats()
    assert stats["frontier/run/fetched"] >= 100, stats
    assert all(rows_written(workers.run_dir / "workers" / w) > 0 for w in ("w0", "w1"))
    # every key of the run is on the one node serving its hash tag's slot
    home = redis_cluster.node_of(run_prefix("clustered"))
    for node in redis_cluster.nodes:
        keys = list(node.client().scan_iter(match=run_prefix("clustered") + "*", count=1000))
        assert (len(keys) > 0) == (node is home), (node.port, len(keys))
    assert connect(redis_cluster.url).exists(run_prefix("clustered") + "meta")


@pytest.mark.parametrize("which", ["home", "other", "shard"])
def test_redis_cluster_node_killed_and_restarted_loses_nothing(
    tmp_path: Path, redis_cluster: RedisClusterProcess, which: str
) -> None:
    """`home`: the node holding the run's keys (the workers pause until it is back); `other`: another node,
    whose slots this run does not use (the workers may go on or pause, and lose nothing either way);
    `shard`: a run of three shards (--shards 3), and a node holding one of its shards but not its home."""
    web_config = TestWebConfig(n_hosts=30, seed=8)
    run = f"failing-{which}"
    home = redis_cluster.node_of(run_prefix(run))
    if which == "other":
        home = next(node for node in redis_cluster.nodes if node is not home)
    if which == "shard":
        shard_nodes = [redis_cluster.node_of(run_prefix(shard_run(run, k))) for k in (1, 2)]
        home = next(node for node in shard_nodes if node is not home)
    with TestWebProcess(web_config, tmp_path / "web") as web:
        extra: tuple[str, ...] = (
            "--policy",
            "bfs",
        )  # (as the one-Redis outage test: no long Crawl-delay last)
        if which == "shard":
            extra += ("--shards", "3")
        workers = start_workers(tmp_path, web, redis_cluster, run, 2, budget=150, lease_s=20, extra=extra)
        wait_for_run_rows(workers, 10)
        assert home.proc is not None
        home.proc.kill()  # kill -9: what the AOF (fsync always) holds is all that survives
        home.proc.wait()
        home.proc = None
        time.sleep(6)  # past the cluster's node timeout (2 s): the others mark the cluster failed too
        home.start()  # the same port, nodes.conf and AOF: it takes its slots back
        redis_cluster.wait_ok()
        codes = workers.wait()
    assert codes == [0, 0], workers.tail()
    stats = workers.stats()
    if which == "home":
        terminal = workers.logs[0].read_text() + workers.logs[1].read_text()
        assert "Redis unreachable" in terminal and "Redis is back" in terminal, terminal[-3000:]
        assert stats["frontier/redis_reconnects"] >= 1
    check_run(workers, web_config)
    # the run went on after the outage: its whole budget spent, or nothing left queued but parked hosts
    hosts = pl.read_parquet(workers.run_dir / "hosts.parquet")
    queued = hosts.filter(pl.col("drop_reason").fill_null("") != "parked")["queued"].sum()
    assert stats["frontier/run/spent"] == 150 or queued == 0, (stats["frontier/run/spent"], queued)


def test_redis_cluster_sharded_run_spreads_over_the_nodes(
    tmp_path: Path, redis_cluster: RedisClusterProcess
) -> None:
    """`--shards 3`: the run's hosts in three hash slots on different nodes, the same crawl as one slot's:
    polite from the server's side (per host and per address), every page once, the budget not passed."""
    web_config = TestWebConfig(n_hosts=30, seed=7)
    with TestWebProcess(web_config, tmp_path / "web") as web:
        extra = ("--shards", "3")
        workers = start_workers(
            tmp_path, web, redis_cluster, "sharded", 2, budget=120, lease_s=20, extra=extra
        )
        codes = workers.wait()
    assert codes == [0, 0], workers.tail()
    check_run(workers, web_config)
    stats = workers.stats()
    assert 100 <= stats["frontier/run/fetched"] <= 120, stats
    holding = set()
    for node in redis_cluster.nodes:
        if any(":q:" in key for key in node.client().scan_iter(match="hostcrawl:{sharded*", count=1000)):
            holding.add(node.port)
    assert len(holding) >= 2, holding
