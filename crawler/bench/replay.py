"""Offline replay of the real frontier and policies over the test web's model: policies compared in seconds.

No sockets and no Scrapy: `HostFrontier` with the chosen policy hands out URLs, the pages come from
`SiteModel.render` (the bytes the test web would send), links are pulled out of them, robots.txt rules
and Crawl-delay are applied on a simulated clock, and a page's score is its ground-truth label, or,
given a `ScoreSampler` (crawler/bench/replay_scores.py), a score drawn from what the crawl's cleaner and
scorer give pages of its kind and language, as a live crawl sees it. Up to
`concurrency` fetches are in flight, the oldest completes first, and its score reaches the frontier
SCORE_LAG pages later, as the cleaning queue delays it in a live crawl.
`hostcrawl bench yield` is the reference (real crawls); this is its fast approximation, typically within
a few hundredths of high-quality pages per fetch. `hostcrawl bench yield` uses it for the yield-against-budget
curve (1% to 50%); `python -m benchmarks.policy_sim` sweeps policy settings with it.
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
from collections import deque
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
from scheduler.frontier_limits import FrontierLimits
from scheduler.hosts import HostRecord
from scheduler.lease import Lease
from scheduler.policies import TRUTH_POLICIES, PolicyConfig, make_policy
from scheduler.sqlite_store import SQLiteFrontier

HREF = re.compile(rb'href="([^"#]+)"')
LOC = re.compile(rb"<loc>([^<]+)</loc>")
FETCH_SECONDS = 0.01  # simulated clock per completed fetch (about 100 pages/s over all hosts)
# Pages fetched before a score arrives: `hostcrawl bench yield` on a quiet 2-core machine measured a mean
# of 40-43 (scheduler/score_lag_pages_mean; 87 pages/s); under load it grows (the cleaning queue holds 128).
SCORE_LAG = 40
REPLAY_CLEAN_WORKERS = 2  # the reference machine's cleaning pool, which bounds the pages awaiting scores


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
    ) -> None:
        """`limits`: the frontier's limits besides the budget (its memory bounds), defaults otherwise;
        `scores`: how pages are scored (None: by their truth); `truth`: the densities the oracles know;
        `score_lag`: pages fetched before a page's score arrives."""
        self.model = model
        self.scores = scores
        self.score_lag = score_lag
        self.clock = 0.0
        truth = truth or {h.name: h.q for h in model.hosts}
        config = PolicyConfig(truth=truth if policy in TRUTH_POLICIES else {}, **overrides)
        ranks = np.argsort(np.argsort([h.in_links for h in model.hosts])) / max(1, len(model.hosts) - 1)
        self.percentile = {h.name: float(r) for h, r in zip(model.hosts, ranks, strict=True)}
        self.frontier = HostFrontier(
            SQLiteFrontier(db),
            make_policy(policy, config),
            dataclasses.replace(limits or self.live_limits(concurrency, budget), budget=budget),
            lambda: self.clock,
            on_new_host=self.apply_prior,
        )
        self.concurrency = concurrency
        self.robots: dict[str, Protego | None] = {}
        self.hits: list[int] = []
        self.by_phase: dict[str, list[int]] = {}  # phase -> [fetches, high-quality pages, not articles]
        self.scoring: deque[tuple[Lease, float | None]] = deque()  # fetched, score not delivered yet

    @staticmethod
    def live_limits(concurrency: int, budget: int) -> FrontierLimits:
        """The limits a live crawl of this budget and concurrency has on the reference machine (2 cleaning
        workers)."""
        cleaner = CleaningConfig().cleaner
        return FrontierLimits(max_unscored=unscored_bound(concurrency, cleaner, REPLAY_CLEAN_WORKERS, budget))

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

    def complete(self, lease: Lease) -> None:
        parts = urlsplit(lease.url)
        host = parts.hostname or ""
        rules = self.rules(host)
        if rules is not None and not rules.can_fetch(lease.url, GENERIC_UA):
            self.frontier.fetch_ended(lease, False, 0.0)
            self.frontier.observe(lease, None)
            return
        page = self.model.render(host, parts.path + (f"?{parts.query}" if parts.query else ""))
        self.clock += FETCH_SECONDS
        delay = (rules.crawl_delay(GENERIC_UA) or 0.0) if rules is not None else 0.0
        self.frontier.fetch_ended(lease, True, self.clock + float(delay))
        self.hits.append(int(bool(page.label)))
        tally = self.by_phase.setdefault(lease.phase.value, [0, 0, 0])
        tally[0] += 1
        tally[1] += bool(page.label)
        tally[2] += page.label is None
        if page.status == 200:
            sitemap = page.headers.get("Content-Type", "").startswith("application/xml")
            nested = sitemap and b"<sitemapindex" in page.body  # its entries are sitemaps, not pages
            for raw in (LOC if sitemap else HREF).findall(page.body):
                url = urljoin(lease.url, raw.decode("utf-8", "replace"))
                if url.startswith("http"):
                    self.frontier.add(url, lease.depth + 1, discover=nested)
        if page.label is None:
            score = None
        elif self.scores is None:
            score = float(page.label)
        else:
            score = self.scores.score(self.model, host, parts.path)
        self.scoring.append((lease, score))
        while len(self.scoring) > self.score_lag:
            self.frontier.observe(*self.scoring.popleft())

    def run(self) -> None:
        for spec in self.model.hosts:
            self.frontier.add(spec.home, 0)
        in_flight: deque[Lease] = deque()
        while True:
            while len(in_flight) < self.concurrency:
                lease = self.frontier.next()
                if lease is None:
                    break
                in_flight.append(lease)
            if in_flight:
                self.complete(in_flight.popleft())
            elif self.scoring:  # nothing to fetch until scores arrive
                self.frontier.observe(*self.scoring.popleft())
            elif self.frontier.has_pending():
                ready = self.frontier.next_ready_at()
                self.clock = max(self.clock + FETCH_SECONDS, ready or 0.0)
            else:
                break


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
) -> SimulatedCrawl:
    """One policy's replay with a budget of a share of the model's pages (frontier file in a temp dir);
    pages are scored by `scores` when given, else by their truth; `truth` replaces the host densities
    the oracles know; scores arrive `score_lag` pages after their fetch; `limits` replace a live
    crawl's (SimulatedCrawl.live_limits) but for the budget."""
    budget = max(1, int(sum(h.n_pages for h in model.hosts) * budget_share))
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "frontier.db"
        sim = SimulatedCrawl(
            model, policy, budget, concurrency, db, overrides or {}, limits, scores, truth, score_lag
        )
        sim.run()
        sim.frontier.store.close()
    return sim
