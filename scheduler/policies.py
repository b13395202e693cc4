"""Crawl policies: which ready host gets the next fetch. Each is small, named and versioned."""

from __future__ import annotations

import math
from collections import Counter
from urllib.parse import urlsplit

from scheduler.evidence import PASS, EvidenceBar
from scheduler.hosts import HostRecord, HostState, Phase
from scheduler.policy_base import (
    PRIOR_TIEBREAK,
    SAMPLE_WINDOW,
    CrawlProgress,
    Policy,
    PolicyConfig,
    Priority,
    linked_page,
    prior,
    shallowest,
    size_bonus,
)

__all__ = ["POLICIES", "TRUTH_POLICIES", "PolicyConfig", "make_policy"]

TURNED_BAD = "turned_bad"  # adaptive's drop reason: its estimate fell below drop_below
# Observations between looks at the aspiration: 50, or a tenth of the hosts observed, so that a crawl of
# 100,000 hosts does not re-sort them every 50 pages; the heap is rebuilt only when the level moved.
ASPIRATION_EVERY = 50
ASPIRATION_EVERY_SHARE = 0.1
ASPIRATION_TOLERANCE = 0.01
ASPIRATION_MIN_HOSTS = 10


class BreadthFirst(Policy):
    """Host-blind breadth-first: shallowest, oldest URL first (what Scrapy does by default).

    Shallowest within a host too, not its queue's order: Scrapy hands the spider's seeds to the scheduler
    while the first pages are fetched, so a host's later seeds (a recrawl's previous pages) can be queued
    behind links its home page had already found."""

    key, name = "bfs", "bfs_v2"

    def priority(self, host: HostRecord, progress: CrawlProgress) -> Priority | None:
        item = host.queue[shallowest(host)]
        return (-float(item.depth), -float(item.seq))

    def pick(self, host: HostRecord) -> int | None:
        return shallowest(host)


class UniformBreadth(Policy):
    """The same number of pages from every host: the paper's uniform breadth."""

    key, name = "uniform", "uniform_v1"

    def priority(self, host: HostRecord, progress: CrawlProgress) -> Priority | None:
        return (-float(host.fetched + host.in_flight), -float(host.queue[0].seq))


class CentralityDepth(Policy):
    """Deepen hosts in order of harmonic centrality, as Common Crawl's allocation does."""

    key, name = "hc_depth", "hc_depth_v1"

    def priority(self, host: HostRecord, progress: CrawlProgress) -> Priority | None:
        return (host.hc_percentile or 0.0, -float(host.queue[0].seq))


class SampleThenDeepen(Policy):
    """Discover, sample k pages, rank by sampled density, deepen the best (the paper's policy)."""

    key, name = "sample_deepen", "sample_deepen_v3"
    learns_from_scores = True

    def __init__(self, config: PolicyConfig) -> None:
        super().__init__(config)
        self.widened = False  # exploration budget spent and every good host exhausted

    def exploring(self, progress: CrawlProgress) -> bool:
        return self.widened or progress.explore_fetches < self.config.explore_share * progress.budget

    def epoch(self, progress: CrawlProgress) -> int:
        return 0 if self.exploring(progress) else 1

    def widen(self) -> bool:
        if self.widened:
            return False
        self.widened = True
        return True

    def defer_discovery(self, host: HostRecord) -> bool:
        # a sitemap pays only for a host worth deepening (not a dropped host's filler); samples come from
        # the links found so far
        worth = self.phase(host) is Phase.DEEPEN and host.state is not HostState.DROPPED
        return self.config.lazy_sitemaps and not worth

    def phase_of(self, host: HostRecord, url: str) -> Phase:
        phase = self.phase(host)
        if phase is Phase.DISCOVER and urlsplit(url).path not in ("", "/"):
            return Phase.SAMPLE  # a page linked from another host: a sample, and it finds links too
        return phase

    def phase(self, host: HostRecord) -> Phase:
        if host.fetched + host.in_flight == 0 and host.sample_handed == 0:
            return Phase.DISCOVER
        if host.sample_handed < self.config.sample_pages:
            return Phase.SAMPLE
        return Phase.DEEPEN

    def pick(self, host: HostRecord) -> int | None:
        if self.phase(host) is not Phase.SAMPLE:
            return self.best_shaped(host)  # deepen with the kind of page that has been good here
        # sample the host's most common kind of page (what deepening would fetch), spread over the
        # queue rather than the first links of the home page
        shapes = host.queue.shapes(SAMPLE_WINDOW)  # read, not paged in: the sample takes one of them
        common = Counter(s for s in shapes if s is not None).most_common(1)[0][0]
        candidates = [index for index, shape in enumerate(shapes) if shape == common]
        step = max(1, len(candidates) // (self.config.sample_pages + 1))
        return candidates[min(len(candidates) - 1, step * (host.sample_handed + 1) - 1)]

    def priority(self, host: HostRecord, progress: CrawlProgress) -> Priority | None:
        if host.state is HostState.DROPPED:
            return None
        phase = self.phase(host)
        if phase is not Phase.DEEPEN:
            if not self.exploring(progress):
                return None  # the exploration share is spent: deepen what was found
            return (2.0, size_bonus(host), -float(host.queue[0].seq))
        if host.state is not HostState.SCORED and host.state is not HostState.DEEPENING:
            return None  # samples handed out, their scores not back yet
        density = host.sample_density() or 0.0
        return (1.0, density + prior(host), size_bonus(host))

    def fill_priority(self, host: HostRecord) -> Priority | None:
        if host.state is HostState.DROPPED or self.phase(host) is Phase.DEEPEN:
            return None
        return (size_bonus(host), -float(host.queue[0].seq))

    def observed(self, host: HostRecord) -> str | None:
        if host.state is HostState.SCORED and (host.sample_density() or 0.0) < self.config.deepen_min_density:
            return "low_sample"
        return None


class AdaptiveIndex(SampleThenDeepen):
    """Beta posterior per host from every scored page; fetch the host with the best index
    (posterior mean + bonus x standard deviation), re-ranked after every page; drop hosts gone bad.

    A host not yet known well enough competes with an aspiration level: the density of the better
    hosts found so far (a quantile of their posterior means). Deepening a middling host while better
    ones are likely still undiscovered wastes budget; the aspiration keeps the search going, until the
    explore share of the budget is spent. No drop is for good: a dropped host's pages fill request slots
    the better hosts leave idle (FrontierLimits.fill_hosts, crawl --keep-busy), best estimate first, and
    all of them come back when the crawl has nothing else left; one whose new page lifts its estimate back
    over drop_below is deepened again (host/rejudged).
    """

    # v10: its fillers no longer wait while `fill_hosts` hosts have scores on their way. That wait made the
    # cleaner's speed, not --keep-busy, set the trade-off: under load (score lag 160) it gained up to 13%
    # per fetch and lost 34-42% per hour; without it, 0-6% less per fetch and 10-19% less per hour, and
    # the same per fetch quiet (tuning seeds 104-108; max_unscored still keeps the crawl near its scores)
    key, name = "adaptive", "adaptive_v10"

    def __init__(self, config: PolicyConfig) -> None:
        super().__init__(config)
        self.means: dict[str, float] = {}
        self.bar = EvidenceBar(config.evidence_quantile)
        self.evidence: dict[str, tuple[float, int, int]] = {}  # host -> (bar, scores counted, good ones)
        self.aspiration = 0.0
        self.changes = 0
        self.updates = 0
        self.explored = False  # the explore share is spent: the heap was rebuilt without new hosts

    def epoch(self, progress: CrawlProgress) -> int:
        if not self.explored and not self.exploring(progress):
            self.explored = True
            self.updates += 1
        due = max(ASPIRATION_EVERY, ASPIRATION_EVERY_SHARE * len(self.means))
        if self.changes >= due and len(self.means) >= ASPIRATION_MIN_HOSTS:
            ranked = sorted(self.means.values())
            level = ranked[int(self.config.aspiration_quantile * (len(ranked) - 1))]
            self.changes = 0
            if self.bar.update():
                self.updates += 1
            if abs(level - self.aspiration) > ASPIRATION_TOLERANCE:
                self.aspiration = level
                self.updates += 1
        return self.updates

    def priority(self, host: HostRecord, progress: CrawlProgress) -> Priority | None:
        # a crawl with nothing else left (widened) goes back to the hosts it dropped, best estimate first:
        # the budget is spent on the next-best pages rather than left over
        revived = self.widened and host.drop_reason == TURNED_BAD
        if host.state is HostState.DROPPED and not revived:
            return None
        observations = host.high + host.low
        if host.fetched + host.in_flight - host.settled >= max(1, observations):
            return None  # its pages' scores are on their way: more fetches now would be blind deepening
        if host.state is HostState.DROPPED:
            return self.revive_priority(host)
        mean, sd = self.estimate(host)
        index = mean + self.config.exploration_bonus * sd
        if observations < self.config.min_observations:
            if not self.exploring(progress):
                return None  # the budget's share for looking at new hosts is spent (a filler now)
            index = max(index, self.aspiration)
        discovered = 0.0 if host.fetched + host.in_flight == 0 else 1e-6
        if not observations and linked_page(host):
            discovered += 2 * PRIOR_TIEBREAK  # its first fetch is a sample, not a home page
        return (index + prior(host) + discovered, size_bonus(host))

    def estimate(self, host: HostRecord) -> tuple[float, float]:
        """The host's density: posterior mean and standard deviation of its share of pages that reach
        the evidence bar."""
        observations = host.high + host.low
        level = self.bar.level
        if observations == 0 or level <= PASS:
            return host.density_mean(), host.density_sd()
        counted_at, seen, good = self.evidence.get(host.host, (level, 0, 0))
        if counted_at != level or seen > len(host.scores):
            seen, good = 0, 0  # the bar moved (or the crawl resumed): count again
        if seen < len(host.scores):
            good += sum(self.bar.good(s) for s in host.scores[seen:])
            self.evidence[host.host] = (level, len(host.scores), good)
        good = min(good, observations)
        a, b = host.prior_alpha + good, host.prior_beta + observations - good
        return a / (a + b), math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1)))

    def fill_priority(self, host: HostRecord) -> Priority | None:
        """Hosts waiting for their samples' scores first; then the hosts it dropped, best estimate first
        (no drop is for good): a crawl whose best hosts rest between fetches keeps `fill_hosts` requests
        in flight with the next-best pages rather than sit idle, one page of a dropped host at a time,
        each scored before the next, so a host dropped on thin evidence is judged again."""
        waiting = super().fill_priority(host)  # (size bonus >= log 2, ...)
        if waiting is not None or host.state is not HostState.DROPPED or host.drop_reason != TURNED_BAD:
            return waiting
        if host.fetched + host.in_flight - host.settled >= 1:
            return None  # one page at a time, each scored before the next
        return self.revive_priority(host)  # below every host waiting for scores

    def revive_priority(self, host: HostRecord) -> Priority | None:
        if host.state is not HostState.DROPPED or host.drop_reason != TURNED_BAD:
            return None
        return (self.estimate(host)[0] - 1.0, size_bonus(host))  # after every host still deepened

    def observed(self, host: HostRecord) -> str | None:
        observations = host.high + host.low
        if host.scores:
            self.bar.add(host.scores[-1])
        if observations >= self.config.min_observations:
            mean = self.means[host.host] = self.estimate(host)[0]
            self.changes += 1
            if mean < self.config.drop_below:
                return TURNED_BAD
        return None


class SampledOracle(AdaptiveIndex):
    """adaptive that knows a host's true density once one of its pages is scored (benchmark only).

    The bound for any policy that must look at a host before it knows it: what is left between this
    and `oracle` is the price of discovery and sampling, between `adaptive` and this the price of
    learning a density from a few pages.
    """

    key, name = "sampled_oracle", "sampled_oracle_v2"
    needs_truth = True

    def estimate(self, host: HostRecord) -> tuple[float, float]:
        if host.high + host.low == 0:
            return super().estimate(host)
        return self.config.truth.get(host.host, 0.0), 0.0


class Oracle(Policy):
    """Knows every host's true quality density (the test web's ground truth): the upper bound."""

    key, name = "oracle", "oracle_v3"
    needs_truth = True

    def pick(self, host: HostRecord) -> int | None:
        return self.best_shaped(host)  # the same page choice as the learning policies: only hosts differ

    def priority(self, host: HostRecord, progress: CrawlProgress) -> Priority | None:
        return (self.config.truth.get(host.host, 0.0), size_bonus(host))


POLICIES: dict[str, type[Policy]] = {
    cls.key: cls
    for cls in (
        BreadthFirst, UniformBreadth, CentralityDepth, SampleThenDeepen, AdaptiveIndex, SampledOracle, Oracle
    )
}  # fmt: skip
TRUTH_POLICIES = frozenset(key for key, cls in POLICIES.items() if cls.needs_truth)


def make_policy(key: str, config: PolicyConfig | None = None) -> Policy:
    try:
        cls = POLICIES[key]
    except KeyError:
        raise ValueError(f"unknown policy {key!r}; choose one of {', '.join(POLICIES)}") from None
    return cls(config or PolicyConfig())
