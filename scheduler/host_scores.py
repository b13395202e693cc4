"""A host's next URL, and what one scored page teaches the host table and the policy: one implementation
for every frontier (HostFrontier in memory, and the Redis frontier's workers)."""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.hosts import HostRecord, HostState, Phase
from scheduler.policy_base import Policy, has_page
from scheduler.urls import url_shape


def next_in_host(record: HostRecord, policy: Policy, index: int | None = None) -> tuple[int | None, bool]:
    """Index in the host's queue of the URL to fetch next (None: only URLs of shapes that have been bad
    on this host are left; `index`: the caller's, unless a discovery URL comes first), and whether it is a
    discovery fetch (a sitemap, before any sample)."""
    if record.queue[0].discover and not (policy.defer_discovery(record) and has_page(record)):
        return 0, True
    return (policy.pick(record) if index is None else index), False


@dataclass(slots=True, frozen=True)
class ScoreOutcome:
    sampled: bool  # this page completed the host's sample
    drop_reason: str | None  # the policy gave up on the host


def record_score(
    record: HostRecord, policy: Policy, phase: Phase, url: str, value: float, threshold: float, sitemap: bool
) -> ScoreOutcome:
    """`value` is the page's score (0.0 for a page that was not HTML or failed; `sitemap` then says
    a discovery page was read)."""
    record.scores.append(value)
    high = value > threshold
    if phase is not Phase.DISCOVER:
        record.high += high
        record.low += not high
    shape = url_shape(url)
    counts = record.shapes.setdefault(shape, [0, 0])
    counts[0 if high else 1] += 1
    policy.learn_shape(shape, high)
    sampled = False
    if phase is Phase.SAMPLE:
        record.sample_scores.append(value)
        record.sample_high += high
        if len(record.sample_scores) >= policy.config.sample_pages:
            record.state = HostState.SCORED
            sampled = True
    record.sitemap_read |= sitemap
    return ScoreOutcome(sampled, policy.observed(record))
