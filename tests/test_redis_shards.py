"""One run's frontier over several hash slots of a real three-node Redis Cluster (`--shards`): its hosts
spread over the nodes, and what spans shards holds run-wide: the budget, one request per politeness group,
the policy's shared counts, a worker's latest checkpoint."""

from __future__ import annotations

import itertools
import time

import pytest
from redis_server import redis_cluster_fixture  # noqa: F401  (registers the fixture)

from scheduler.redis_connect import run_prefix
from scheduler.redis_frontier import RedisFrontier
from scheduler.redis_link import SharedUpdate
from scheduler.redis_process import RedisClusterProcess
from scheduler.redis_requests import NewUrl, QueuedRequest
from scheduler.redis_shards import ShardedFrontier, open_frontier, shard_of, shard_run

RUNS = itertools.count()
HOSTS = [f"h{i}.example" for i in range(60)]


def new_run(cluster: RedisClusterProcess, shards: int = 3, budget: int = 0) -> ShardedFrontier:
    run = f"sharded{next(RUNS)}"
    frontier = open_frontier(cluster.client(), run, lease_seconds=30.0, shards=shards)
    assert isinstance(frontier, ShardedFrontier)
    frontier.start("w0", budget, {})
    return frontier


def urls(hosts: list[str], pages: int = 2) -> list[NewUrl]:
    return [NewUrl(h, QueuedRequest(f"http://{h}/{p}", 0, {})) for h in hosts for p in range(pages)]


def test_a_sharded_run_spreads_its_hosts_over_the_cluster_nodes(redis_cluster: RedisClusterProcess) -> None:
    frontier = new_run(redis_cluster, shards=6)
    assert all(reason is None for reason in frontier.enqueue(urls(HOSTS)))
    nodes = {redis_cluster.node_of(run_prefix(shard_run(frontier.run, k))).port for k in range(6)}
    assert len(nodes) > 1  # six hash tags on three nodes
    holding = set()
    for node in redis_cluster.nodes:
        for key in node.client().scan_iter(match=f"hostcrawl:{{{frontier.run}*", count=1000):
            if ":q:" in key:
                holding.add(node.port)
    assert holding == nodes
    # a worker joining later sees the run's shards, whatever it asks for
    again = open_frontier(redis_cluster.client(), frontier.run, shards=2)
    assert isinstance(again, ShardedFrontier) and len(again.parts) == 6
    assert again.queued() == 2 * len(HOSTS)
    # every host's URLs are in its own shard, and duplicates are found there
    assert all(r == "duplicate" for r in again.enqueue(urls(HOSTS[:5])))
    claimed = [c for _ in range(10) for c in again.claim(30, "w1", 0)]
    assert sorted(c.host for c in claimed) == sorted(HOSTS)  # one lease per host, every shard asked
    for c in claimed:
        part, k, _ = again.part_of_lease(c.lease_id)
        assert k == shard_of(c.host, 6) and part is again.parts[k]


def test_two_workers_never_spend_more_than_the_run_budget(redis_cluster: RedisClusterProcess) -> None:
    frontier = new_run(redis_cluster, budget=25)
    frontier.enqueue(urls(HOSTS))
    other = open_frontier(redis_cluster.client(), frontier.run, lease_seconds=30.0)
    leases = []
    for _ in range(6):
        leases += frontier.claim(4, "w0", 25) + other.claim(4, "w1", 25)
    assert len(leases) == 25 and frontier.spent() == 25
    assert frontier.claim(4, "w0", 25) == []
    # a fetch that never reached the network gives its budget back to the run, whichever shard it was in
    frontier.fetch_ended(leases[0].lease_id, 0.0, fetched=False)
    frontier.done(leases[0].lease_id, "w0")
    assert frontier.spent() == 24
    assert len(other.claim(4, "w1", 25)) == 1
    assert frontier.counters()["handed_out"] == 26 and frontier.spent() == 25


def test_one_request_per_address_in_flight_across_shards(redis_cluster: RedisClusterProcess) -> None:
    frontier = new_run(redis_cluster)
    a = HOSTS[0]
    b = next(h for h in HOSTS if shard_of(h, 3) != shard_of(a, 3))  # the same address, another shard
    frontier.enqueue(urls([a, b]))
    frontier.join(a, "ip:192.0.2.1")
    frontier.join(b, "ip:192.0.2.1")
    first = frontier.claim(2, "w0", 0)
    assert len(first) == 1 and first[0].request is not None
    assert frontier.counters()["politeness/group_busy_in_another_shard"] == 1
    assert frontier.claim(2, "w1", 0) == []  # the address is busy; the other host waits
    frontier.fetch_ended(first[0].lease_id, 30.0, fetched=True)  # its host now waits its Crawl-delay
    frontier.done(first[0].lease_id, "w0")
    time.sleep(1.1)  # GROUP_RETRY_MS
    second = frontier.claim(2, "w1", 0)
    assert [c.host for c in second] == [b if first[0].host == a else a]
    # nothing was lost on the way: both hosts still have their second page queued
    assert frontier.queued() == 2


def test_shared_counts_and_checkpoints_span_shards(redis_cluster: RedisClusterProcess) -> None:
    frontier = new_run(redis_cluster)
    hosts = HOSTS[:12]
    shards = {shard_of(h, 3) for h in hosts}
    assert len(shards) == 3
    pipes = {}
    for h in hosts:
        part = frontier.part_of_host(h)
        pipe = pipes.setdefault(id(part), part.pipeline())
        part.add_shared_policy_state(pipe, h, SharedUpdate("/p/*", True, 0.5))
    for pipe in pipes.values():
        pipe.execute()
    means, shapes, since = frontier.shared_policy_state()
    assert shapes == {"/p/*": [12, 0]} and sorted(means) == sorted(hosts)
    assert frontier.shared_policy_state(since)[:2] == ({}, {})
    frontier.enqueue(urls(hosts, pages=1))
    leases = frontier.claim(12, "w0", 0)
    for i, lease in enumerate(leases):
        frontier.fetch_ended(lease.lease_id, 0.0, fetched=True)
        assert frontier.done(lease.lease_id, "w0", {"where": str(i)})
    assert frontier.worker_meta("w0")["where"] == str(len(leases) - 1)  # the last, whatever its shard


@pytest.mark.parametrize("first", ["plain", "sharded"])
def test_workers_started_at_once_agree_on_the_first_ones_shard_count(
    redis_cluster: RedisClusterProcess, first: str
) -> None:
    run = f"race{next(RUNS)}"
    client = redis_cluster.client()
    plain, sharded = open_frontier(client, run), open_frontier(client, run, shards=3)  # neither started it
    assert type(plain) is RedisFrontier and isinstance(sharded, ShardedFrontier)
    order = [plain, sharded] if first == "plain" else [sharded, plain]
    for worker, frontier in enumerate(order):
        frontier.start(f"w{worker}", 0, {})
    again = open_frontier(client, run, shards=5)  # what every worker does after start()
    assert len(again.parts) == (1 if first == "plain" else 3)
