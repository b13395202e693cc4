"""The crawl's snapshot as Prometheus metrics (prometheus-client), in a registry of the crawl's own.

A custom collector turns the latest snapshot (monitor/status.py) into metric families at scrape time, so a
scrape costs the crawl nothing and /metrics says exactly what /api/status and the page say. Counters are
Scrapy's stats under Prometheus names; `rate(hostcrawl_pages_curated_total[5m]) /
rate(hostcrawl_budget_spent_pages[5m])` is the high-quality pages per fetch the page draws.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector

# (metric name without _total, help, the snapshot counter it reads, its label)
LABELLED_COUNTERS = (
    ("hostcrawl_pages_fetched", "Responses received, by HTTP status", "pages_by_status", "status"),
    ("hostcrawl_fetch_failures", "Requests that failed for good, by reason", "fetch_failures", "reason"),
    ("hostcrawl_fetch_attempt_errors", "Failed attempts, retried or not", "fetch_attempt_errors", "reason"),
    ("hostcrawl_politeness_backoffs", "Backoffs after a 429/503 or a network error", "backoffs", "reason"),
    ("hostcrawl_host_decisions", "The scheduler's decisions about hosts", "host_decisions", "decision"),
)
SCALAR_COUNTERS = (
    ("hostcrawl_pages_curated", "Pages scoring above the quality threshold (kept)", "curated"),
    ("hostcrawl_pages_below_threshold", "Pages scored at or below the threshold", "below_threshold"),
    ("hostcrawl_pages_recorded", "Rows written to pages.parquet", "recorded"),
    ("hostcrawl_responses_received", "Responses received, robots.txt included", "responses"),
    ("hostcrawl_politeness_parked", "Hosts parked for a Retry-After beyond the backoff maximum", "parked"),
)
FINISHED = "finished"


class SnapshotCollector(Collector):
    """Metric families from whatever `snapshot()` returns now; nothing is stored between scrapes."""

    def __init__(self, snapshot: Callable[[], dict[str, Any]]) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        snap = self.snapshot()
        if "pages" not in snap:  # the crawl has not started yet
            yield gauge("hostcrawl_crawl_running", "1 while the crawl runs, 0 once it has finished", 0)
            return
        count = snap["counters"]
        for name, doc, key, label in LABELLED_COUNTERS:
            family = CounterMetricFamily(name, doc, labels=[label])
            for value, n in sorted(count[key].items()):
                family.add_metric([value], n)
            yield family
        for name, doc, key in SCALAR_COUNTERS:
            yield CounterMetricFamily(name, doc, value=count[key])
        pages, hosts, pol, clean = snap["pages"], snap["hosts"], snap["politeness"], snap["cleaning"]
        running = 0 if snap["state"] == FINISHED else 1
        yield gauge("hostcrawl_crawl_running", "1 while the crawl runs, 0 once it has finished", running)
        yield gauge("hostcrawl_crawl_elapsed_seconds", "Seconds since the crawl started", snap["elapsed_s"])
        yield gauge("hostcrawl_budget_pages", "The crawl's page budget", pages["budget"])
        yield gauge(
            "hostcrawl_budget_spent_pages", "Fetches that counted against the budget", pages["fetched"]
        )
        yield gauge("hostcrawl_requests_in_flight", "Requests handed out, not yet back", pages["in_flight"])
        states = GaugeMetricFamily(
            "hostcrawl_hosts", "Hosts in the scheduler's table, by state", labels=["state"]
        )
        for state, n in hosts["by_state"].items():
            states.add_metric([state], n)
        yield states
        yield gauge("hostcrawl_hosts_known", "Hosts in the scheduler's table", hosts["known"])
        yield gauge(
            "hostcrawl_politeness_hosts_waiting",
            "Hosts with URLs, waiting for their delay",
            pol["hosts_waiting"],
        )
        yield gauge(
            "hostcrawl_politeness_wait_seconds_mean",
            "Mean time the waiting hosts still wait",
            pol["mean_wait_s"],
        )
        yield gauge(
            "hostcrawl_politeness_hosts_backing_off",
            "Hosts after a 429/503, backing off",
            pol["hosts_backing_off"],
        )
        yield gauge(
            "hostcrawl_clean_queue_pages", "Pages at the cleaner, waiting for a result", clean["queue_pages"]
        )
        yield gauge(
            "hostcrawl_clean_held_back_pages", "Pages held back by backpressure", clean["held_back_pages"]
        )
        yield gauge("hostcrawl_clean_batches_in_pool", "Batches being cleaned", clean["batches_in_pool"])
        yield gauge("hostcrawl_clean_workers", "Cleaning processes", clean["workers"])
        yield gauge(
            "hostcrawl_scores_pending_pages",
            "Fetched pages whose score has not reached the scheduler",
            clean["scores_pending"],
        )
        lag = SummaryMetricFamily(
            "hostcrawl_score_lag_pages",
            "Pages fetched between a page's arrival and its score reaching the scheduler",
            count_value=clean["score_lag_scored"],
            sum_value=clean["score_lag_sum"],
        )
        yield lag
        info = {"policy": str(snap["policy"]["name"]), "cleaner": str(clean["cleaner"])}
        yield InfoMetricFamily("hostcrawl_crawl", "The crawl's policy and cleaner", value=info)
        settings = GaugeMetricFamily(
            "hostcrawl_policy_setting", "Numeric policy settings", labels=["setting"]
        )
        for key, value in snap["policy"]["settings"].items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                settings.add_metric([key], float(value))
        yield settings


def gauge(name: str, doc: str, value: float | None) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=float("nan") if value is None else value)


def metrics_registry(snapshot: Callable[[], dict[str, Any]]) -> CollectorRegistry:
    """A registry of this crawl's own (not prometheus-client's global one, which other code may fill)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(snapshot))
    return registry


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
