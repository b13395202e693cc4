"""The host table's record: what the scheduler knows and believes about one host."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import cast

from scheduler.queue_window import HostQueue

PARKED = "parked"  # hosts.parquet's drop_reason of a host the run ended while it waited (FrontierLimits)


class HostState(StrEnum):
    NEW = "new"  # known, nothing fetched yet
    SAMPLING = "sampling"  # fetching its k sample pages
    SCORED = "scored"  # samples scored, waiting for the policy to deepen it
    DEEPENING = "deepening"
    EXHAUSTED = "exhausted"  # nothing left to fetch, or its budget is spent
    DROPPED = "dropped"  # the policy decided it is not worth more fetches
    BLOCKED = "blocked"  # robots.txt or the network says no


class Phase(StrEnum):
    DISCOVER = "discover"  # the seed / home page: finds URLs, not a quality sample
    SAMPLE = "sample"
    DEEPEN = "deepen"


# What a host holds before its first score, shared by every host (a frontier of a million hosts, most never
# fetched, would otherwise hold two empty lists and a dict for each, 176 bytes). Typed as what replaces
# them: record_score swaps in a list or dict of the host's own before its first write, and a write to the
# shared ones fails loudly (a tuple has no append, a mapping proxy no setdefault) instead of reaching
# every host.
NO_SCORES = cast("list[float]", ())
NO_SHAPES = cast("dict[str, list[int]]", MappingProxyType({}))

# A weak Beta prior centred near web-wide base rates; the samples dominate after a few pages.
PRIOR_ALPHA = 0.5
PRIOR_BETA = 1.5


@dataclass(slots=True)
class HostRecord:
    host: str
    state: HostState = HostState.NEW
    queue: HostQueue = field(default_factory=HostQueue)  # in memory, or paged in from the frontier's store
    fetched: int = 0
    settled: int = 0  # fetches whose outcome is recorded: what a resumed crawl counts as spent
    in_flight: int = 0
    sample_handed: int = 0  # sample fetches handed out
    scores: list[float] = NO_SCORES  # scores of scored pages, in fetch order
    sample_scores: list[float] = NO_SCORES
    sample_high: int = 0
    high: int = 0  # scored pages above the quality threshold
    low: int = 0
    budget: int = 0  # 0 = no per-host cap
    ready_at: float = 0.0  # monotonic time before which politeness forbids a fetch
    hc_percentile: float | None = None
    pr_percentile: float | None = None
    tld: str = ""
    drop_reason: str | None = None
    version: int = 0  # bumped whenever its priority may have changed
    # URL shape -> [high, low] pages seen
    shapes: dict[str, list[int]] = field(default_factory=lambda: NO_SHAPES)
    sitemap_read: bool = False  # its URLs are all known: index pages are no longer needed to find them
    prior_alpha: float = PRIOR_ALPHA  # a recrawl plan starts a host's estimate from its density prior
    prior_beta: float = PRIOR_BETA

    def posterior(self) -> tuple[float, float]:
        return self.prior_alpha + self.high, self.prior_beta + self.low

    def density_mean(self) -> float:
        a, b = self.posterior()
        return a / (a + b)

    def density_sd(self) -> float:
        a, b = self.posterior()
        return math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1)))

    def sample_density(self) -> float | None:
        return self.sample_high / len(self.sample_scores) if self.sample_scores else None

    def shape_mean(self, shape: str, prior_mean: float = 0.5, prior_weight: float = 2.0) -> float:
        """Share of high-quality pages among this host's pages of one URL shape, smoothed towards
        `prior_mean` (Laplace by default; the policy passes what the shape is worth on other hosts)."""
        high, low = self.shapes.get(shape, (0, 0))
        return (high + prior_weight * prior_mean) / (high + low + prior_weight)

    def can_fetch_more(self) -> bool:
        return bool(self.queue) and (not self.budget or self.fetched + self.in_flight < self.budget)


PERSISTED = (
    "state", "sample_handed", "scores", "sample_scores", "sample_high", "high", "low", "sitemap_read",
)  # fmt: skip


def host_state(record: HostRecord) -> dict[str, object]:
    data = {name: getattr(record, name) for name in PERSISTED}
    data["state"] = record.state.value
    data["fetched"] = record.settled  # a fetch whose page was lost in a crash is fetched again
    data["drop_reason"] = record.drop_reason
    return data


def restore_host(record: HostRecord, data: dict[str, object]) -> None:
    for name in PERSISTED:
        if name in data:
            setattr(record, name, data[name])
    record.state = HostState(str(data.get("state", "new")))
    record.fetched = record.settled = int(data.get("fetched", 0))  # type: ignore[call-overload]
    record.sample_handed = len(record.sample_scores)  # samples lost in flight are drawn again
    record.drop_reason = data.get("drop_reason")  # type: ignore[assignment]
