"""What a running crawl looks like now: one snapshot, gathered on the reactor once per second.

The progress line, the status page, `/api/status` and `/metrics` all read the same snapshot, so they never
disagree and none of them touches the crawl's state: a snapshot is a new plain dict each time (published by
swapping one reference), built from Scrapy's stats, the scheduler's host table, the politeness extension
and the cleaning pipeline. A large host table is scanned less often (every `hosts / 20,000` seconds).
"""

from __future__ import annotations

import dataclasses
import heapq
import operator
import time
from collections import Counter, deque
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Self

from scrapy import signals
from scrapy.exceptions import NotConfigured
from twisted.internet import task

from crawler.fetch.politeness import Politeness
from crawler.pages.store_pipeline import CleanScoreStorePipeline
from crawler.run.run_counts import split_failures
from scheduler.frontier_limits import KEEP_BUSY, request_slots
from scheduler.hosts import PRIOR_ALPHA, PRIOR_BETA, HostRecord, HostState
from scheduler.scrapy_scheduler import HostScheduler

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from scheduler.core import HostFrontier

SNAPSHOT_EVERY_S = 1.0
HOSTS_SCANNED_PER_SECOND = 20_000  # host-table scans are spaced so that they cost a few ms per second
RATE_WINDOW_S = 10.0  # pages/s is measured over this window
CURVE_POINTS = 600  # the curve keeps the whole crawl: older points are thinned to stay under this
TOP_HOSTS = 10
WORKER_GAUGES_EVERY_S = 2.0
HOST_STATES = tuple(state.value for state in HostState)
STATE_OF = operator.attrgetter("state")

# Scrapy stats keys -> the snapshot's counters: {label value: count}
COUNTER_PREFIXES = {
    "pages_by_status": "downloader/response_status_count/",
    "fetch_failures": "fetch/failed/",
    "fetch_attempt_errors": "fetch/error/",
    "backoffs": "politeness/backoff/",
    "host_decisions": "host/",
}
SCALAR_COUNTERS = {
    "curated": "page/curated",
    "below_threshold": "page/below_threshold",
    "recorded": "page/recorded",
    "responses": "response_received_count",
    "retry_after_honoured": "politeness/retry_after_honoured",
    "parked": "politeness/parked",
}


def policy_settings(crawler: Crawler, scheduler: Any) -> dict[str, Any]:
    """The settings the crawl's policy runs with, as a user would set them (and the policy's own)."""
    s = crawler.settings
    out: dict[str, Any] = {
        "budget_pages": s.getint("HOSTCRAWL_MAX_PAGES"),
        "sample_pages": s.getint("HOSTCRAWL_SAMPLE_PAGES"),
        "explore_share": s.getfloat("HOSTCRAWL_EXPLORE_SHARE"),
        "keep_busy": s.getfloat("HOSTCRAWL_KEEP_BUSY", KEEP_BUSY),
        "per_host_budget": s.getint("HOSTCRAWL_PER_HOST_BUDGET"),
        "concurrency": request_slots(s),
        "per_host_concurrency": s.getint("CONCURRENT_REQUESTS_PER_DOMAIN"),
        "min_delay_s": s.getfloat("DOWNLOAD_DELAY"),
        "max_crawl_delay_s": s.getfloat("HOSTCRAWL_MAX_CRAWL_DELAY"),
        "cleaner": s.get("HOSTCRAWL_CLEANER"),
        "scorers": ",".join(s.getlist("HOSTCRAWL_SCORERS")),
        "threshold": s.getfloat("HOSTCRAWL_THRESHOLD"),
        "priors": s.get("HOSTCRAWL_PRIORS") or "",
    }
    limits = getattr(scheduler, "limits", None)
    if limits is not None:
        out["fill_hosts"] = limits.fill_hosts  # requests in flight kept with the policy's fillers
    config = getattr(getattr(scheduler, "policy", None), "config", None)
    if dataclasses.is_dataclass(config):
        for field in dataclasses.fields(config):
            value = getattr(config, field.name)
            if isinstance(value, int | float | str | bool):  # not the oracle's truth table
                out.setdefault(field.name, value)
    return out


def counters(stats: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {name: int(stats.get(key, 0) or 0) for name, key in SCALAR_COUNTERS.items()}
    for name, prefix in COUNTER_PREFIXES.items():
        out[name] = {k[len(prefix) :]: int(v) for k, v in stats.items() if k.startswith(prefix)}
    return out


def density(record: HostRecord) -> float:
    """The posterior mean (HostRecord.density_mean) inlined: this runs once per host per scan."""
    return (PRIOR_ALPHA + record.high) / (PRIOR_ALPHA + PRIOR_BETA + record.high + record.low)


def scan_hosts(frontier: HostFrontier, now: float) -> dict[str, Any]:
    """One pass over the host table: states, hosts waiting for politeness, the best hosts."""
    records = list(frontier.hosts.values())
    by_state = dict.fromkeys(HOST_STATES, 0)
    for state, n in Counter(map(STATE_OF, records)).items():
        by_state[state.value] = n
    waits = [r.ready_at - now for r in records if r.ready_at > now and r.queue]
    waiting, wait_total = len(waits), sum(waits)
    top = heapq.nlargest(TOP_HOSTS, [r for r in records if r.high or r.low], key=density)
    return {
        "known": len(records),
        "by_state": by_state,
        "top": [
            {
                "host": r.host,
                "state": r.state.value,
                "density_mean": round(r.density_mean(), 4),
                "density_sd": round(r.density_sd(), 4),
                "samples": [round(score, 3) for score in r.sample_scores],
                "sample_density": r.sample_density(),
                "scored": r.high + r.low,
                "high_quality": r.high,
                "fetched": r.fetched,
                "queued": len(r.queue),
            }
            for r in top
        ],
        "waiting": waiting,
        "mean_wait_s": round(wait_total / waiting, 3) if waiting else 0.0,
    }


class CrawlStatus:
    """Scrapy extension: gathers the snapshot once per second while the progress line or the page is on."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        serving = settings.get("HOSTCRAWL_STATUS_PORT") not in (None, "")
        if not (settings.getbool("HOSTCRAWL_PROGRESS") or serving):
            raise NotConfigured
        self.crawler = crawler
        self.budget = settings.getint("HOSTCRAWL_MAX_PAGES")
        self.started = time.monotonic()
        self.started_at = datetime.now(UTC)
        self.curve: list[tuple[float, int, int]] = []  # (seconds, pages fetched, high-quality pages)
        self.curve_step = SNAPSHOT_EVERY_S
        self.recent: deque[tuple[float, int]] = deque()  # (seconds, fetched) over the rate window
        self.hosts_view: dict[str, Any] = scan_hosts_empty()
        self.next_host_scan = 0.0
        self.polite_view: dict[str, int] = {}
        self.loop: task.LoopingCall | None = None
        self.snapshot: dict[str, Any] = {"state": "starting", "started_at": self.started_at.isoformat()}
        crawler.signals.connect(self.opened, signal=signals.spider_opened)
        crawler.signals.connect(self.closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def opened(self) -> None:
        self.started = time.monotonic()
        self.loop = task.LoopingCall(self.tick)
        self.loop.start(SNAPSHOT_EVERY_S, now=True)

    def closed(self, reason: str = "finished") -> None:
        if self.loop is not None and self.loop.running:
            self.loop.stop()
        self.next_host_scan = 0.0  # the final snapshot has the final host table
        self.snapshot = self.gather(finished=reason)

    def tick(self) -> None:
        self.snapshot = self.gather()

    def _scheduler(self) -> HostScheduler | None:
        engine = self.crawler.engine
        scheduler = engine.scheduler if engine is not None else None  # None until the spider opens
        return scheduler if isinstance(scheduler, HostScheduler) else None  # None for Scrapy's own

    def _track(self, elapsed: float, fetched: int, high: int, final: bool = False) -> float:
        """Adds a curve point (always the last one of a finished crawl); returns pages/s lately."""
        due = not self.curve or elapsed - self.curve[-1][0] >= self.curve_step
        if due or (final and self.curve[-1][1:] != (fetched, high)):
            self.curve.append((round(elapsed, 2), fetched, high))
            if len(self.curve) > CURVE_POINTS:
                self.curve = [*self.curve[:-1:2], self.curve[-1]]
                self.curve_step *= 2
        self.recent.append((elapsed, fetched))
        while len(self.recent) > 2 and elapsed - self.recent[1][0] >= RATE_WINDOW_S:
            self.recent.popleft()
        first_t, first_n = self.recent[0]
        return (fetched - first_n) / (elapsed - first_t) if elapsed > first_t else 0.0

    def gather(self, finished: str | None = None) -> dict[str, Any]:
        now = time.monotonic()
        elapsed = now - self.started
        stats = self.crawler.stats.get_stats()
        scheduler = self._scheduler()
        frontier = scheduler.frontier if scheduler is not None else None
        fetched = int(stats.get("frontier/fetched", stats.get("response_received_count", 0)) or 0)
        count = counters(stats)
        errors, refusals = split_failures(count["fetch_failures"])
        if now >= self.next_host_scan:
            self.polite_view = self._scan_politeness()
            self.hosts_view = scan_hosts(frontier, now) if frontier is not None else scan_hosts_empty()
            tracked = max(self.hosts_view["known"], self.polite_view["hosts_tracked"])
            spacing = tracked / HOSTS_SCANNED_PER_SECOND
            self.next_host_scan = now + max(SNAPSHOT_EVERY_S, spacing) - 0.05
        rate = self._track(elapsed, fetched, count["curated"], final=finished is not None)
        policy = stats.get("hostcrawl/policy") or self.crawler.settings.get("HOSTCRAWL_POLICY")
        return {
            "state": "finished" if finished else "running",
            "finish_reason": finished,
            "started_at": self.started_at.isoformat(),
            "updated_at": datetime.now(UTC).isoformat(),
            "elapsed_s": round(elapsed, 2),
            "pages": {
                "fetched": fetched,
                "budget": self.budget,
                "budget_spent": round(fetched / self.budget, 4) if self.budget else None,
                "per_second": round(rate, 2),
                "per_second_mean": round(fetched / elapsed, 2) if elapsed > 0 else 0.0,
                "high_quality": count["curated"],
                "high_quality_per_fetch": round(count["curated"] / fetched, 4) if fetched else None,
                "in_flight": frontier.in_flight if frontier is not None else None,
            },
            "curve": [list(point) for point in self.curve],
            "hosts": {**self.hosts_view, "discovered": int(stats.get("host/discovered", 0))},
            "politeness": self._politeness(count),
            "cleaning": self._cleaning(frontier),
            "errors": errors,
            "refusals": refusals,  # robots.txt and our own rules said no: not errors
            "policy": {"name": policy, "settings": policy_settings(self.crawler, scheduler)},
            "counters": count,
        }

    def _scan_politeness(self) -> dict[str, int]:
        """Politeness's per-host table, scanned with the scheduler's (as often, and no more)."""
        return politeness_gauges(self.crawler)

    def _politeness(self, count: dict[str, Any]) -> dict[str, Any]:
        return {
            "hosts_waiting": self.hosts_view["waiting"],
            "mean_wait_s": self.hosts_view["mean_wait_s"],
            **self.polite_view,
            "backoffs": count["backoffs"],
            "retry_after_honoured": count["retry_after_honoured"],
            "parked": count["parked"],
        }

    def _cleaning(self, frontier: HostFrontier | None) -> dict[str, Any]:
        lag = frontier.score_lag if frontier is not None else None
        return {
            **cleaning_gauges(self.crawler),
            "scores_pending": frontier.unobserved if frontier is not None else None,
            "score_lag_scored": lag.pages if lag is not None else 0,
            "score_lag_sum": lag.total if lag is not None else 0,
            "score_lag_mean": round(lag.total / lag.pages, 1) if lag is not None and lag.pages else None,
            "score_lag_max": lag.peak if lag is not None else None,
        }


def cleaning_gauges(crawler: Crawler) -> dict[str, Any]:
    """The cleaning pipeline's queue, as the status page shows it."""
    pipeline = crawler.get_item_pipeline(CleanScoreStorePipeline)
    batcher = getattr(pipeline, "batcher", None)
    return {
        "cleaner": crawler.settings.get("HOSTCRAWL_CLEANER"),
        "workers": getattr(batcher, "workers", 0),
        "queue_pages": getattr(batcher, "in_flight", 0),  # admitted, waiting for their batch's result
        "queue_limit": getattr(batcher, "max_in_flight", 0),
        "held_back_pages": getattr(batcher, "waiting", 0),  # backpressure: not admitted yet
        "batches_in_pool": getattr(batcher, "in_pool", 0),
    }


def politeness_gauges(crawler: Crawler) -> dict[str, int]:
    """Hosts the politeness extension is backing off, slowing down (Crawl-delay) or skipping."""
    politeness = crawler.get_extension(Politeness)
    if politeness is None:
        return {"hosts_tracked": 0, "hosts_backing_off": 0, "hosts_with_crawl_delay": 0, "hosts_too_slow": 0}
    states = list(politeness.hosts.values())
    return {
        "hosts_tracked": len(states),
        "hosts_backing_off": sum(1 for s in states if s.failures or s.network_failures),
        "hosts_with_crawl_delay": sum(1 for s in states if s.delay > politeness.min_delay),
        "hosts_too_slow": len(politeness.too_slow),
    }


class WorkerGauges:
    """Scrapy extension of a distributed run's worker: its cleaning and politeness gauges, computed on
    the reactor every few seconds and handed to the Redis scheduler, which sends them with its heartbeat
    so that the run's page (`hostcrawl frontier status --serve`) can add them up over the workers."""

    def __init__(self, crawler: Crawler) -> None:
        if not crawler.settings.get("HOSTCRAWL_WORKER_ID"):
            raise NotConfigured
        self.crawler = crawler
        self.loop: task.LoopingCall | None = None
        crawler.signals.connect(self.opened, signal=signals.spider_opened)
        crawler.signals.connect(self.closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def opened(self) -> None:
        self.loop = task.LoopingCall(self.tick)
        self.loop.start(WORKER_GAUGES_EVERY_S, now=True)

    def closed(self) -> None:
        if self.loop is not None and self.loop.running:
            self.loop.stop()
        self.tick()  # the last heartbeat says the queues are empty

    def tick(self) -> None:
        scheduler = getattr(self.crawler.engine, "scheduler", None)
        if scheduler is not None and hasattr(scheduler, "gauges"):  # one new dict: read by another thread
            scheduler.gauges = {
                "cleaning": cleaning_gauges(self.crawler),
                "politeness": politeness_gauges(self.crawler),
            }


def scan_hosts_empty() -> dict[str, Any]:
    return {
        "known": 0,
        "by_state": dict.fromkeys(HOST_STATES, 0),
        "top": [],
        "waiting": 0,
        "mean_wait_s": 0.0,
    }


SHORT_STATES = {"new": "new", "sampling": "smp", "scored": "scored", "deepening": "deep"}


def one_line(snap: dict[str, Any], width: int) -> str:
    """What the status page says, in one line of at most `width` characters (least important parts go)."""
    if snap.get("state") == "starting":
        return "starting (cleaning workers warming up)"[:width]
    pages, hosts, pol, clean = snap["pages"], snap["hosts"], snap["politeness"], snap["cleaning"]
    budget = f"/{pages['budget']} ({pages['budget_spent']:.0%})" if pages["budget"] else ""
    hq = pages["high_quality_per_fetch"]
    by_state = hosts["by_state"]
    states = " ".join(f"{SHORT_STATES.get(k, k)} {v}" for k, v in by_state.items() if v)
    errors = sum(snap["errors"].values())
    minutes, seconds = divmod(int(snap["elapsed_s"]), 60)
    parts = [
        f"{pages['fetched']}{budget} pages",
        f"{pages['per_second']:.1f}/s",
        f"hq/fetch {hq:.2f}" if hq is not None else "hq/fetch -",
        f"hosts known {hosts['known']}" + (f" ({states})" if states else ""),
        f"{pol['hosts_waiting']} hosts waiting {pol['mean_wait_s']:.1f}s",
        f"backoffs {sum(pol['backoffs'].values())}",
        f"clean queue {clean['queue_pages']}",
        f"score lag {clean['scores_pending']}" if clean["scores_pending"] is not None else "",
        f"errors {errors}",
        str(snap["policy"]["name"]),
        f"{minutes // 60}:{minutes % 60:02d}:{seconds:02d}",
    ]
    line = ""
    for part in filter(None, parts):  # most important first; the line stops at the first that does not fit
        candidate = f"{line}  {part}" if line else part
        if len(candidate) > width:
            return line or part[: max(0, width)]
        line = candidate
    return line
