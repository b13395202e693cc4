"""Crawl policies: which ready host gets the next fetch. Each is small, named and versioned."""

from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import ClassVar
from urllib.parse import urlsplit

from scheduler.evidence import PASS, EvidenceBar
from scheduler.hosts import HostRecord, HostState, Phase
from scheduler.urls import url_shape

Priority = tuple[float, ...]  # compared lexicographically, larger first

TURNED_BAD = "turned_bad"  # adaptive's drop reason: its estimate fell below drop_below
PRIOR_TIEBREAK = 1e-3  # centrality may order hosts of equal estimated quality, never outrank quality


@dataclass(slots=True)
class PolicyConfig:
    sample_pages: int = 3  # k pages sampled per host before it can be deepened
    # sample_deepen, adaptive: share of the budget for discovering and sampling hosts; past it adaptive
    # looks at new hosts only when the crawl would otherwise idle (a 1% budget cannot look at every host)
    explore_share: float = 0.2
    exploration_bonus: float = 1.0  # adaptive: weight of the posterior's standard deviation
    deepen_min_density: float = 0.5  # sample_deepen: sampled density a host needs to be deepened
    # adaptive: stop deepening a host whose estimate falls below this (it comes back only when nothing
    # else is left). Tuning seeds 101 and 102 of the graded family (bench yield --webs graded, 10% budget),
    # adaptive / sample_deepen over the 8 webs, min and mean: 1.05 and 1.19, 0.90 and 1.10 at 0.15; 1.17 and
    # 1.41, 0.99 and 1.34 at 0.30 (with explore_share). Without explore_share 0.25 was worse on both seeds,
    # 0.35 better on one (mean +0.07) and worse on the other, 0.45 fell to 0.99x on one web.
    drop_below: float = 0.30
    min_observations: int = 1  # adaptive: observations before a host may fall below the aspiration
    # adaptive: hosts not yet observed compete with this quantile of the observed hosts' densities;
    # 0.9 was best in benchmarks/policy_sim.py at budgets of 5%, 10% and 25% of the test web
    aspiration_quantile: float = 0.9
    # adaptive: a page counts towards its host's density only when its score reaches this quantile of
    # the passing scores seen so far (scheduler/evidence.py; 0: every passing page counts). On the graded
    # webs (bench yield --webs graded, tuning seed 101 apart from the report seed 0, 10% budget) a fixed
    # bar made adaptive 0.86-1.19x sample_deepen at 0.5, 1.04-1.33x at 0.85, 1.06-1.65x at 0.9, and
    # this relative bar at the median 1.08-1.53x (a fixed 0.9 would sink a scorer whose good pages score 0.9).
    evidence_quantile: float = 0.5
    lazy_sitemaps: bool = True  # sample_deepen, adaptive: fetch a host's sitemaps only to deepen it
    truth: Mapping[str, float] = field(default_factory=dict)  # TRUTH_POLICIES only: host -> true density


@dataclass(slots=True)
class CrawlProgress:
    budget: int
    fetched: int = 0
    explore_fetches: int = 0  # fetches in the discover and sample phases


def size_bonus(host: HostRecord) -> float:
    """Hosts with more known URLs are worth sampling first: deepening them can pay off more."""
    return math.log1p(len(host.queue))


SHAPE_WINDOW = 64  # queued URLs looked at when choosing a host's next page by its URL shape
SAMPLE_WINDOW = 2000  # queued URLs looked at when choosing a host's sample
# Observations between looks at the aspiration: 50, or a tenth of the hosts observed, so that a crawl of
# 100,000 hosts does not re-sort them every 50 pages; the heap is rebuilt only when the level moved.
ASPIRATION_EVERY = 50
ASPIRATION_EVERY_SHARE = 0.1
ASPIRATION_TOLERANCE = 0.01
ASPIRATION_MIN_HOSTS = 10
BAD_SHAPE_MEAN = 0.2  # Laplace mean of a shape after 3 low pages and no high one: stop fetching it
# Pages of one shape on other hosts count as this many pages of this host when ranking its URLs:
# article shapes beat index pages from a host's first fetch, and the host's own pages soon dominate.
SHAPE_PRIOR_WEIGHT = 2.0


def _queued_pages(host: HostRecord) -> Iterator[str]:
    """URLs queued besides discovery URLs (sitemaps), within the window the policies look at."""
    return (item.url for item in itertools.islice(host.queue, SHAPE_WINDOW) if not item.discover)


def has_page(host: HostRecord) -> bool:
    """Anything to fetch besides sitemaps: a policy that defers sitemaps has something else to fetch."""
    return any(True for _ in _queued_pages(host))


def linked_page(host: HostRecord) -> bool:
    """A page other than the home page and sitemaps is known: sampling needs no discovery fetch."""
    return any(urlsplit(url).path not in ("", "/") for url in _queued_pages(host))


def prior(host: HostRecord) -> float:
    return PRIOR_TIEBREAK * (host.hc_percentile or 0.0)


class Policy(ABC):
    key: ClassVar[str]  # the --policy name
    name: ClassVar[str]  # versioned name written into every output
    needs_truth: ClassVar[bool] = False  # reads the test web's ground truth: benchmarks only

    def __init__(self, config: PolicyConfig) -> None:
        self.config = config
        self.shape_totals: dict[str, list[int]] = {}  # URL shape -> [high, low] pages over all hosts

    def learn_shape(self, shape: str, high: bool) -> None:
        counts = self.shape_totals.setdefault(shape, [0, 0])
        counts[0 if high else 1] += 1

    def shape_prior(self, shape: str) -> float:
        """Laplace mean of a URL shape over every host crawled so far."""
        high, low = self.shape_totals.get(shape, (0, 0))
        return (high + 1) / (high + low + 2)

    def best_shaped(self, host: HostRecord) -> int | None:
        """Index of the queued URL whose shape should pay off best on this host: its own pages of
        that shape, smoothed towards other hosts' (first one on ties). None when every URL in view is
        of a shape that has been bad on this host itself (a junk section, a trap), or, once the host's
        sitemap is read and index pages find nothing new, bad on the other hosts too."""
        best, best_mean = None, -1.0
        for index, item in enumerate(itertools.islice(host.queue, SHAPE_WINDOW)):
            shape = url_shape(item.url)
            if item.discover or host.shape_mean(shape) <= BAD_SHAPE_MEAN:
                continue
            mean = host.shape_mean(shape, self.shape_prior(shape), SHAPE_PRIOR_WEIGHT)
            if host.sitemap_read and mean <= BAD_SHAPE_MEAN:
                continue
            if mean > best_mean:
                best, best_mean = index, mean
        return best

    def defer_discovery(self, host: HostRecord) -> bool:
        """True: fetch other queued URLs before the host's sitemaps (they cost a fetch and yield no text)."""
        return False

    @abstractmethod
    def priority(self, host: HostRecord, progress: CrawlProgress) -> Priority | None:
        """Larger is fetched sooner; None means not now (waiting for scores, or dropped)."""

    def phase(self, host: HostRecord) -> Phase:
        return Phase.DISCOVER if host.fetched + host.in_flight == 0 else Phase.DEEPEN

    def pick(self, host: HostRecord) -> int | None:
        """Index in the host's queue of the URL to fetch next; None: nothing left worth fetching."""
        return 0

    def phase_of(self, host: HostRecord, url: str) -> Phase:
        """The phase a fetch of `url` (just picked) belongs to."""
        return self.phase(host)

    def epoch(self, progress: CrawlProgress) -> int:
        """Changes when global progress changes every host's priority (the heap is rebuilt)."""
        return 0

    def observed(self, host: HostRecord) -> str | None:
        """Called after a page's score arrives; returns a drop reason to stop fetching the host."""
        return None

    def widen(self) -> bool:
        """Nothing is eligible and nothing is coming: relax the rules if that lets the crawl go on."""
        return False

    def fill_priority(self, host: HostRecord) -> Priority | None:
        """For hosts `priority` says not now: their order when the crawl would otherwise sit idle."""
        return None


class BreadthFirst(Policy):
    """Host-blind breadth-first: shallowest, oldest URL first (what Scrapy does by default)."""

    key, name = "bfs", "bfs_v1"

    def priority(self, host: HostRecord, progress: CrawlProgress) -> Priority | None:
        head = host.queue[0]
        return (-float(head.depth), -float(head.seq))


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
        # a sitemap pays only for a host worth deepening; samples come from the links found so far
        return self.config.lazy_sitemaps and self.phase(host) is not Phase.DEEPEN

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
        window = list(itertools.islice(host.queue, SAMPLE_WINDOW))
        shapes = [None if item.discover else url_shape(item.url) for item in window]
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
    explore share of the budget is spent. A dropped host comes back, after every other, when the crawl
    has nothing else left.
    """

    key, name = "adaptive", "adaptive_v6"

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
        mean, sd = self.estimate(host)
        if host.state is HostState.DROPPED:
            return (mean - 1.0, size_bonus(host))  # after every host still deepened
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
