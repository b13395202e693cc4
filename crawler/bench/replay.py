"""Offline replay of the real frontier and policies over the test web's model: policies compared in seconds.

No sockets and no Scrapy: `HostFrontier` with the chosen policy hands out URLs, the pages come from
`SiteModel.render` (the bytes the test web would send), links are pulled out of them, robots.txt rules
are applied, and a page's score is its ground-truth label, or, given a `ScoreSampler`
(crawler/bench/replay_scores.py), a score drawn from what the crawl's cleaner and scorer give pages of
its kind and language, as a live crawl sees it. A page's score reaches the frontier `score_lag` x
`score_s` seconds after its fetch (SCORE_LAG pages later at 100 pages/s), as the cleaning queue delays it
in a live crawl.

The clock is simulated (`Timing`): up to `concurrency` fetches are in flight, each takes its host's
latency (0.5-1.5x `latency_s`, a slow host's 2-6 s more, a robots.txt fetch first on first contact),
the earliest to finish completes first, and a host rests max(min_delay, its Crawl-delay) after each
fetch. So a replay says what a crawl spends in time as well as in fetches: high-quality pages per hour,
and the share of the time with fewer than half of the request slots busy.
`hostcrawl bench yield` is the reference (real crawls); this is its fast approximation, typically within
a few hundredths of high-quality pages per fetch. `hostcrawl bench yield` uses it for the yield-against-budget
curve (1% to 50%); `python -m benchmarks.policy_sim` sweeps policy settings with it.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import re
import tempfile
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import numpy as np
from protego import Protego

from crawler.bench.replay_scores import ScoreSampler
from crawler.pages.batch_cleaner import unscored_bound
from crawler.run.crawl_config import CleaningConfig
from crawler.testweb.model import SiteModel
from crawler.testweb.robots import GENERIC_UA
from scheduler.core import HostFrontier
from scheduler.frontier_limits import KEEP_BUSY, FrontierLimits, fill_hosts
from scheduler.hosts import HostRecord
from scheduler.lease import Lease
from scheduler.policies import TRUTH_POLICIES, PolicyConfig, make_policy
from scheduler.sqlite_store import SQLiteFrontier

HREF = re.compile(rb'href="([^"#]+)"')
LOC = re.compile(rb"<loc>([^<]+)</loc>")
# A page's mean answer time: 32 requests in flight then fetch about 100 pages/s, as the replay's clock did
# before it simulated each fetch (one completed fetch every 0.01 s).
LATENCY_S = 0.32
TICK = 0.01  # the clock's step when it waits for nothing in particular
# A page's score arrives score_lag x SCORE_S seconds after its fetch: score_lag pages later at 100 pages/s,
# and no later in time when the crawl is slower (the cleaning pool's delay is time, not pages).
SCORE_S = 0.01
# Pages fetched before a score arrives: `hostcrawl bench yield` on a quiet 2-core machine measured a mean
# of 40-43 (scheduler/score_lag_pages_mean; 87 pages/s); under load it grows (the cleaning queue holds 128).
SCORE_LAG = 40
REPLAY_CLEAN_WORKERS = 2  # the reference machine's cleaning pool, which bounds the pages awaiting scores


@dataclass(frozen=True, slots=True)
class Timing:
    """The simulated clock: how long a fetch takes and how long a host rests between two."""

    latency_s: float = LATENCY_S
    # the crawl's floor between two requests to one host (crawl --min-delay). 0 as in `bench yield`'s live
    # crawls of the loopback test web; a crawl of the Internet uses the crawl's default, 1 s
    min_delay: float = 0.0
    score_s: float = SCORE_S


def ceiling(model: SiteModel, budget: int) -> float:
    """The high-quality pages per fetch no policy can pass: min(1, high-quality pages in the web / budget)."""
    return min(1.0, sum(h.n_high for h in model.hosts) / max(1, budget))


class SimulatedCrawl:
    """One policy's crawl of the model; `hq` and `fetched` are graded as `bench yield` grades them."""

    def __init__(
        self,
        model: SiteModel,
        policy: str,
        budget: int,
        concurrency: int,
        db: Path,
        overrides: dict[str, Any],
        limits: FrontierLimits | None = None,
        scores: ScoreSampler | None = None,
        truth: dict[str, float] | None = None,
        score_lag: int = SCORE_LAG,
        timing: Timing = Timing(),
        keep_busy: float = KEEP_BUSY,
    ) -> None:
        """`limits`: the frontier's limits besides the budget (its memory bounds), else a live crawl's
        with `keep_busy` (crawl --keep-busy);
        `scores`: how pages are scored (None: by their truth); `truth`: the densities the oracles know;
        `score_lag`: pages fetched before a page's score arrives; `timing`: the simulated clock."""
        self.model = model
        self.scores = scores
        self.score_lag = score_lag
        self.timing = timing
        self.clock = 0.0
        self.idle_s = 0.0  # simulated seconds with fewer than half of the request slots busy
        # when the last fetch was handed out, and the idle seconds by then: what follows is the drain, the
        # wait for the last fetches (a slow host's 2-6 s), which a crawl of hours does not notice and a
        # 15 s replay does (one slow sample at the end was a fifth of light_tail's clock)
        self.handed_out_at = 0.0
        self.idle_by_then = 0.0
        self.done_at: list[tuple[float, str]] = []  # (completion time, host) of each fetch, in order
        jitter = np.random.default_rng(model.cfg.seed).uniform(0.5, 1.5, len(model.hosts))
        self.latency = {
            h.name: timing.latency_s * float(u) + (h.slow_delay if h.hostile == "slow" else 0.0)
            for h, u in zip(model.hosts, jitter, strict=True)
        }
        truth = truth or {h.name: h.q for h in model.hosts}
        config = PolicyConfig(truth=truth if policy in TRUTH_POLICIES else {}, **overrides)
        ranks = np.argsort(np.argsort([h.in_links for h in model.hosts])) / max(1, len(model.hosts) - 1)
        self.percentile = {h.name: float(r) for h, r in zip(model.hosts, ranks, strict=True)}
        self.frontier = HostFrontier(
            SQLiteFrontier(db),
            make_policy(policy, config),
            dataclasses.replace(limits or self.live_limits(concurrency, budget, keep_busy), budget=budget),
            lambda: self.clock,
            on_new_host=self.apply_prior,
        )
        self.concurrency = concurrency
        self.robots: dict[str, Protego | None] = {}
        self.hits: list[int] = []
        self.by_phase: dict[str, list[int]] = {}  # phase -> [fetches, high-quality pages, not articles]
        # (arrives at, lease, score) of fetched pages whose score has not reached the frontier yet
        self.scoring: deque[tuple[float, Lease, float | None]] = deque()
        self.in_flight: list[tuple[float, int, Lease]] = []  # (completes at, order, lease)
        self.order = itertools.count()

    @staticmethod
    def live_limits(concurrency: int, budget: int, keep_busy: float = KEEP_BUSY) -> FrontierLimits:
        """The limits a live crawl of this budget and concurrency has on the reference machine (2 cleaning
        workers)."""
        cleaner = CleaningConfig().cleaner
        return FrontierLimits(
            max_unscored=unscored_bound(concurrency, cleaner, REPLAY_CLEAN_WORKERS, budget),
            fill_hosts=fill_hosts(concurrency, keep_busy),
        )

    def apply_prior(self, record: HostRecord) -> None:
        record.hc_percentile = self.percentile.get(record.host)

    def rules(self, host: str) -> Protego | None:
        """robots.txt on first contact; its sitemaps go to the front of the host's queue."""
        if host not in self.robots:
            spec = self.model.host(host)
            body = None if spec is None else self.model.robots_txt(spec)
            parsed = None if body is None else Protego.parse(body.decode("utf-8", "replace"))
            self.robots[host] = parsed
            for sitemap in [] if parsed is None else list(parsed.sitemaps):
                if urlsplit(sitemap).hostname == host:
                    self.frontier.add(sitemap, 0, discover=True)
        return self.robots[host]

    def start(self, lease: Lease) -> None:
        """Send a fetch: it completes after its host's latency (and a robots.txt fetch on first contact);
        a URL robots.txt disallows ends at once, as the robots middleware drops it before the network."""
        host = lease.host
        self.handed_out_at, self.idle_by_then = self.clock, self.idle_s
        first_contact = host not in self.robots
        rules = self.rules(host)
        if rules is not None and not rules.can_fetch(lease.url, GENERIC_UA):
            self.frontier.fetch_ended(lease, False, 0.0)
            self.frontier.observe(lease, None)
            return
        took = self.latency.get(host, self.timing.latency_s) * (2 if first_contact else 1)
        heapq.heappush(self.in_flight, (self.clock + took, next(self.order), lease))

    def advance(self, to: float, busy: int) -> None:
        """Move the clock to `to` with `busy` requests in flight meanwhile."""
        if to > self.clock and busy < self.concurrency / 2:
            self.idle_s += to - self.clock
        self.clock = max(self.clock, to)

    def complete(self, lease: Lease) -> None:
        parts = urlsplit(lease.url)
        host = parts.hostname or ""
        rules = self.robots.get(host)
        page = self.model.render(host, parts.path + (f"?{parts.query}" if parts.query else ""))
        delay = (rules.crawl_delay(GENERIC_UA) or 0.0) if rules is not None else 0.0
        self.frontier.fetch_ended(lease, True, self.clock + max(self.timing.min_delay, float(delay)))
        self.done_at.append((self.clock, host))
        self.hits.append(int(bool(page.label)))
        tally = self.by_phase.setdefault(lease.phase.value, [0, 0, 0])
        tally[0] += 1
        tally[1] += bool(page.label)
        tally[2] += page.label is None
        if page.status == 200:
            sitemap = page.headers.get("Content-Type", "").startswith("application/xml")
            nested = sitemap and b"<sitemapindex" in page.body  # its entries are sitemaps, not pages
            pattern = LOC if sitemap else HREF
            found = (urljoin(lease.url, raw.decode("utf-8", "replace")) for raw in pattern.findall(page.body))
            links = [url for url in found if url.startswith("http")]
            self.frontier.add_links(links, lease.depth + 1, discover=nested)
        if page.label is None:
            score = None
        elif self.scores is None:
            score = float(page.label)
        else:
            score = self.scores.score(self.model, host, parts.path)
        self.scoring.append((self.clock + self.score_lag * self.timing.score_s, lease, score))

    def run(self) -> None:
        for spec in self.model.hosts:
            self.frontier.add(spec.home, 0)
        while True:
            while self.scoring and self.scoring[0][0] <= self.clock:
                _, scored, score = self.scoring.popleft()
                self.frontier.observe(scored, score)
            while len(self.in_flight) < self.concurrency:
                lease = self.frontier.next()
                if lease is None:
                    break
                self.start(lease)
            busy = len(self.in_flight)
            events = [self.in_flight[0][0]] if busy else []
            events += [self.scoring[0][0]] if self.scoring else []
            ready = self.frontier.next_ready_at()
            if ready is not None and ready > self.clock and busy < self.concurrency:
                events.append(ready)  # a host's rest ends: its slot may be filled then
            if not events and not self.frontier.has_pending():
                break
            self.advance(min(events) if events else self.clock + TICK, busy)
            if busy and self.in_flight[0][0] <= self.clock:
                self.complete(heapq.heappop(self.in_flight)[2])

    @property
    def hq_per_fetch(self) -> float:
        return sum(self.hits) / max(1, len(self.hits))

    @property
    def hq_per_hour(self) -> float:
        """High-quality pages per simulated hour while the crawl hands out fetches: the pages done by the
        time its last fetch was handed out, over that time (the crawl's rate, which a crawl of hours keeps;
        the drain after it is `drain_share`)."""
        if self.handed_out_at <= 0:
            return 0.0
        ended = zip(self.done_at, self.hits, strict=True)
        done = sum(hit for (at, _), hit in ended if at <= self.handed_out_at)
        return 3600.0 * done / self.handed_out_at

    @property
    def idle_share(self) -> float:
        """Share of the simulated time until the last fetch was handed out with fewer than half of the
        request slots busy."""
        return self.idle_by_then / self.handed_out_at if self.handed_out_at > 0 else 0.0

    @property
    def drain_share(self) -> float:
        """Share of the crawl's simulated time spent after its last fetch was handed out, waiting for
        the fetches (and scores) still on their way."""
        return 1.0 - self.handed_out_at / self.clock if self.clock > 0 else 0.0

    @property
    def tail_rate(self) -> float:
        """Pages per second over the last 20% of the fetches, over the crawl's mean pages per second."""
        return tail_pace([t for t, _ in self.done_at], 0.0, self.clock)


def tail_pace(done: Sequence[float], start: float, end: float) -> float:
    """Pages per second over the last 20% of a crawl's fetches (`done`: when each ended, in order) over its
    mean pages per second from `start` to `end`; 1.0 when there are too few to tell."""
    n = len(done)
    if n < 5 or end <= start:
        return 1.0
    tail_start = done[int(0.8 * n)]
    if end <= tail_start:
        return 1.0
    return ((n - int(0.8 * n)) / (end - tail_start)) / (n / (end - start))


def replay(
    model: SiteModel,
    policy: str,
    budget_share: float,
    concurrency: int = 32,
    overrides: dict[str, Any] | None = None,
    scores: ScoreSampler | None = None,
    truth: dict[str, float] | None = None,
    score_lag: int = SCORE_LAG,
    limits: FrontierLimits | None = None,
    timing: Timing = Timing(),
    keep_busy: float = KEEP_BUSY,
) -> SimulatedCrawl:
    """One policy's replay with a budget of a share of the model's pages (frontier file in a temp dir);
    pages are scored by `scores` when given, else by their truth; `truth` replaces the host densities
    the oracles know; scores arrive `score_lag` pages after their fetch; `limits` replace a live
    crawl's (SimulatedCrawl.live_limits, with `keep_busy`) but for the budget; `timing` sets the simulated
    clock."""
    budget = max(1, int(sum(h.n_pages for h in model.hosts) * budget_share))
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "frontier.db"
        sim = SimulatedCrawl(
            model,
            policy,
            budget,
            concurrency,
            db,
            overrides or {},
            limits,
            scores,
            truth,
            score_lag,
            timing,
            keep_busy,
        )
        sim.run()
        sim.frontier.store.close()
    return sim
