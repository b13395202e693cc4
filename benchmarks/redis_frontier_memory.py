"""Redis memory per queued URL: hostcrawl's Redis frontier against scrapy-redis's queue and dupefilter.

Both get the same URLs into a fresh redis-server of their own (the one `make install` needs, loopback only):
ours through RedisFrontier.enqueue (per-host lists of JSON, 47-bit fingerprints in intset buckets, the host
sets), scrapy-redis's through its PriorityQueue (one sorted set of serialised requests) and RFPDupeFilter
(40-character SHA1 hex strings in one set), as a scrapy-redis spider queues them. Bytes per URL are
`used_memory` after minus before, divided by the URLs queued. Target (issue 27): <= 80 bytes per URL.

    python -m benchmarks.redis_frontier_memory [--urls 500000] [--hosts 10000]   # ~3 min (loaded), 6 at 1M
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import redis
from scrapy import Request, Spider
from scrapy_redis.dupefilter import RFPDupeFilter
from scrapy_redis.queue import PriorityQueue

from scheduler.redis_frontier import RedisFrontier
from scheduler.redis_process import RedisProcess
from scheduler.redis_requests import NewUrl, QueuedRequest

BATCH = 2000
TARGET_BYTES = 80


def urls(n: int, hosts: int) -> list[tuple[str, str]]:
    """URLs shaped like a crawl's: a few sections per host, article slugs with ids."""
    out = []
    for i in range(n):
        host = f"site-{i % hosts}.example.com"
        out.append((host, f"http://{host}/section-{i % 7}/article-{i // hosts}-a-readable-slug.html"))
    return out


def used(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def ours(client: redis.Redis, items: list[tuple[str, str]]) -> tuple[int, float]:
    frontier = RedisFrontier(client, "bench")
    frontier.start("bench", 0, {})
    before, started = used(client), time.perf_counter()
    for i in range(0, len(items), BATCH):
        batch = [NewUrl(host, QueuedRequest(url, 1, {})) for host, url in items[i : i + BATCH]]
        frontier.enqueue(batch)
    return used(client) - before, time.perf_counter() - started


def scrapy_redis(client: redis.Redis, items: list[tuple[str, str]]) -> tuple[int, float]:
    spider = Spider(name="bench")
    queue = PriorityQueue(client, spider, "bench:requests")
    dupefilter = RFPDupeFilter(client, "bench:dupefilter")
    before, started = used(client), time.perf_counter()
    for _, url in items:
        request = Request(url)
        if not dupefilter.request_seen(request):
            queue.push(request)
    return used(client) - before, time.perf_counter() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--urls", type=int, default=500_000)
    parser.add_argument("--hosts", type=int, default=10_000)
    args = parser.parse_args(argv)
    items = urls(args.urls, args.hosts)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, fill in (("hostcrawl", ours), ("scrapy-redis", scrapy_redis)):
            with RedisProcess(Path(tmp) / name, persist=False) as server:
                client = redis.Redis(host="127.0.0.1", port=server.port, decode_responses=False)
                nbytes, seconds = fill(client, items)
                results[name] = (nbytes / args.urls, args.urls / seconds)
    print(f"{args.urls:,} URLs on {args.hosts:,} hosts")
    for name, (per_url, rate) in results.items():
        print(f"  {name:13s} {per_url:7.1f} bytes/URL   {rate:9,.0f} URLs/s queued")
    ours_b, base_b = results["hostcrawl"][0], results["scrapy-redis"][0]
    verdict = "meets" if ours_b <= TARGET_BYTES else "misses"
    print(
        f"  ratio hostcrawl / scrapy-redis: {ours_b / base_b:.2f}x memory; {verdict} <= {TARGET_BYTES} B/URL"
    )


if __name__ == "__main__":
    main()
