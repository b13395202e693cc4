"""What a run costs Redis per claim and per queued URL. A claim brings the claimed hosts' robots.txt only
when this worker does not have it yet (or it changed): bodies of up to 500 KiB were read back from Redis on
every claim of their host. A plain link is queued as its path. Real redis-server and a real three-node Redis
Cluster."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from functools import partial

import pytest
from redis_server import (
    RedisServer,
    redis_cluster_fixture,  # noqa: F401  (registers the fixture)
    redis_server_fixture,  # noqa: F401  (registers the fixture)
)

from scheduler.redis_frontier import RedisFrontier
from scheduler.redis_link import SharedUpdate
from scheduler.redis_politeness import PolitenessReader, politeness_fields
from scheduler.redis_requests import NewUrl, QueuedRequest

RUNS = itertools.count()
BIG = "User-agent: *\n" + "Disallow: /private/path/number/\n" * 12_000  # about 390 KB


@pytest.fixture(params=["one_redis", "redis_cluster"])
def server(request: pytest.FixtureRequest) -> RedisServer:
    return request.getfixturevalue("redis_server" if request.param == "one_redis" else "redis_cluster")


def save(frontier: RedisFrontier, host: str, part: str, state: dict[str, object]) -> None:
    fields = politeness_fields(host, part, json.dumps(state))
    frontier.client.hset(frontier.key("politeness"), mapping=fields)  # type: ignore[arg-type]


def test_a_robots_txt_is_read_once_per_worker_until_it_changes(server: RedisServer) -> None:
    frontier = RedisFrontier(server.client(), f"polite{next(RUNS)}", lease_seconds=30.0)
    save(frontier, "a.example", "robots", {"body": BIG, "expires_at": 1.0})
    save(frontier, "a.example", "timing", {"ready_at": 5.0, "crawl_delay": 2.0})
    save(frontier, "b.example", "timing", {"ready_at": 7.0})
    worker, other = (PolitenessReader(frontier.client, frontier.key("politeness")) for _ in range(2))

    first = worker.rows(["a.example", "b.example"])
    assert ("a.example", "robots", {"body": BIG, "expires_at": 1.0}) in first
    assert worker.bodies_read == 1 and worker.bytes_read > len(BIG)
    again = worker.rows(["a.example", "b.example"])  # the next claim of the same hosts
    assert sorted(part for _, part, _ in again) == ["timing", "timing"]  # the timing, always fresh
    assert worker.bodies_read == 1
    save(frontier, "a.example", "timing", {"ready_at": 9.0})  # another worker backed the host off
    assert ("a.example", "timing", {"ready_at": 9.0}) in worker.rows(["a.example"])

    save(frontier, "a.example", "robots", {"body": "User-agent: *\nDisallow: /\n", "expires_at": 2.0})
    changed = worker.rows(["a.example"])
    assert ("a.example", "robots", {"body": "User-agent: *\nDisallow: /\n", "expires_at": 2.0}) in changed
    assert worker.bodies_read == 2
    assert other.rows(["a.example"])[0][1] == "robots"  # each worker reads it once itself


def test_a_robots_txt_saved_without_a_digest_is_still_read(server: RedisServer) -> None:
    """A run whose robots.txt rows an older version wrote (no digest beside them) still shares them."""
    frontier = RedisFrontier(server.client(), f"polite{next(RUNS)}", lease_seconds=30.0)
    frontier.client.hset(frontier.key("politeness"), "a.example|robots", json.dumps({"body": "x"}))
    reader = PolitenessReader(frontier.client, frontier.key("politeness"))
    assert reader.rows(["a.example"]) == [("a.example", "robots", {"body": "x"})]
    assert reader.rows(["a.example"]) == [("a.example", "robots", {"body": "x"})]


def test_a_plain_link_is_queued_as_its_path_and_comes_back_whole(server: RedisServer) -> None:
    """A queued URL of the queue's own host costs its path, not a JSON object with the whole URL; what is
    not plain (another origin, kept meta, a discovery fetch) stays JSON. Each is claimed back as it went."""
    frontier = RedisFrontier(server.client(), f"compact{next(RUNS)}", lease_seconds=30.0)
    sent = [
        QueuedRequest("http://a.example/section/article-1.html?x=1", 2, {}),
        QueuedRequest("https://a.example/", 0, {}),
        QueuedRequest("http://a.example:8080/other-port", 1, {}),
        QueuedRequest("http://a.example/retried", 1, {"retry_times": 1}),
        QueuedRequest("http://a.example/sitemap.xml", 0, {}, discover=True),
    ]
    assert frontier.enqueue([NewUrl("a.example", r) for r in sent]) == [None] * len(sent)
    stored = frontier.client.lrange(frontier.key("q:a.example"), 0, -1)
    assert "2|/section/article-1.html?x=1" in stored and "0!/" in stored
    assert sum(payload.startswith("{") for payload in stored) == 3
    got = []
    for _ in sent:
        (claimed,) = frontier.claim(1, "w0", budget=0, pick=lambda host, record, requests, urgent: 0)
        assert claimed.request is not None, claimed.skipped
        got.append(claimed.request)
        frontier.fetch_ended(claimed.lease_id, 0.0, True)
        frontier.done(claimed.lease_id, "w0")
    assert sorted(got, key=lambda r: r.url) == sorted(sent, key=lambda r: r.url)
    assert QueuedRequest.decode("2|/a") is None  # a compact payload means nothing without its host


NOT_THE_CALLS = ("cmdstat_config", "cmdstat_info", "cmdstat_script", "cmdstat_eval")


def commands_run(client: object, call: Callable[[], object]) -> tuple[int, object]:
    """The Redis commands `call` ran on the server inside its Lua scripts and beside them, and its result
    (not the scripts' own calls: a script's first run in a process loads it)."""
    client.config_resetstat()  # type: ignore[attr-defined]
    result = call()
    stats = client.info("commandstats")  # type: ignore[attr-defined]
    ran = sum(v["calls"] for k, v in stats.items() if not k.startswith(NOT_THE_CALLS))
    return ran, result


def test_a_claim_costs_the_same_however_many_hosts_the_run_has_in_flight(
    redis_server: RedisServer,
) -> None:
    """A filler claim asks whether anything else is on its way: it read every busy host (O(hosts in flight),
    run-wide, on every such claim); now a counter kept as hosts go busy and come back."""
    costs = []
    for in_flight in (5, 200):
        frontier = RedisFrontier(redis_server.client(), f"claims{next(RUNS)}", lease_seconds=30.0)
        frontier.enqueue([NewUrl(f"h{i}.example", QueuedRequest(f"http://h{i}.example/", 1, {}))
                          for i in range(in_flight)])  # fmt: skip
        busy = frontier.claim(in_flight, "w0", budget=0)
        assert len(busy) == in_flight
        ran, more = commands_run(frontier.client, partial(frontier.claim, 1, "w1", 0, fill_hosts=1))
        assert more == [], "every host's last URL is in flight: nothing to claim"
        costs.append(ran)
        for claimed in busy:
            frontier.fetch_ended(claimed.lease_id, 0.0, True)
            frontier.done(claimed.lease_id, "w0")
        assert not frontier.client.exists(frontier.key("live")), "every host in flight came back"
    assert costs[1] == costs[0], f"commands per claim at 5 and 200 hosts in flight: {costs}"


def test_reading_the_runs_policy_state_costs_what_changed_not_the_runs_hosts(
    redis_server: RedisServer,
) -> None:
    """Every worker reads the run's host means and URL shapes every 10 s: that read was the whole `means`
    hash (O(hosts in the run) per worker per period); now only what changed since its last read."""
    costs = []
    for hosts in (10, 2000):
        frontier = RedisFrontier(redis_server.client(), f"shared{next(RUNS)}", lease_seconds=30.0)
        pipe = frontier.pipeline()
        for i in range(hosts):
            frontier.add_shared_policy_state(pipe, f"h{i}.example", SharedUpdate(f"1:s{i % 5}", True, 0.5))
        pipe.execute()
        means, _, since = frontier.shared_policy_state()
        assert len(means) == hosts
        pipe = frontier.pipeline()
        frontier.add_shared_policy_state(pipe, "h1.example", SharedUpdate("1:s1", False, 0.4))
        pipe.execute()
        ran, (news, shapes, _) = commands_run(frontier.client, partial(frontier.shared_policy_state, since))
        assert news == {"h1.example": 0.4} and list(shapes) == ["1:s1"]
        costs.append(ran)
    assert costs[1] == costs[0], f"commands per read at 10 and 2,000 hosts: {costs}"


def test_a_fetch_of_a_shared_address_costs_the_same_however_many_hosts_wait_for_it(
    redis_server: RedisServer,
) -> None:
    """Hosts on one address wait for its one request in flight. Its fetch ending re-parked every one of
    them (and the next claim moved them all back): O(hosts on the address) per fetch. Now its best few."""
    costs = []
    for hosts in (10, 300):
        frontier = RedisFrontier(redis_server.client(), f"farm{next(RUNS)}", lease_seconds=30.0)
        farm = [f"s{i}.farm.example" for i in range(hosts)]
        frontier.enqueue([NewUrl(h, QueuedRequest(f"http://{h}/", 1, {})) for h in farm])
        for host in farm:
            frontier.join(host, "ip:203.0.113.7")
        while frontier.client.zcard(frontier.key("gwait:ip:203.0.113.7")) < hosts - 1:
            assert len(frontier.claim(8, "w0", 0)) <= 1  # one request in flight on the address
        (busy,) = [json.loads(v)["h"] for v in frontier.client.hvals(frontier.key("lease"))]
        lease_id = frontier.client.hget(frontier.key("busy"), busy)
        ran, _ = commands_run(frontier.client, partial(frontier.fetch_ended, lease_id, 0.0, True))
        costs.append(ran)
    assert costs[1] == costs[0], f"commands per fetch end at 10 and 300 hosts on the address: {costs}"
