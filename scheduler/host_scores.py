"""A host's next URL, and what one scored page teaches the host table and the policy: one implementation
for every frontier (HostFrontier in memory, and the Redis frontier's workers)."""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.hosts import NO_SCORES, NO_SHAPES, HostRecord, HostState, Phase
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
    rejudged: bool = False  # a dropped host's page lifted it back over the drop level: deepened again


def record_score(
    record: HostRecord, policy: Policy, phase: Phase, url: str, value: float, threshold: float, sitemap: bool
) -> ScoreOutcome:
    """`value` is the page's score (0.0 for a page that was not HTML or failed; `sitemap` then says
    a discovery page was read)."""
    # the host's first score (or first since a resume restored its scores but not its shapes): its own
    # containers replace the shared empty ones
    if record.scores is NO_SCORES:
        record.scores = []
    if record.sample_scores is NO_SCORES:
        record.sample_scores = []
    if record.shapes is NO_SHAPES:
        record.shapes = {}
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
            if record.state not in (HostState.DROPPED, HostState.BLOCKED):  # dropped: until re-judged
                record.state = HostState.SCORED
            sampled = True
    record.sitemap_read |= sitemap
    reason = policy.observed(record)
    rejudged = (
        reason is None and record.state is HostState.DROPPED and policy.revive_priority(record) is not None
    )
    if rejudged:
        sampled_all = record.sample_handed >= policy.config.sample_pages
        record.state = HostState.DEEPENING if sampled_all else HostState.SAMPLING
        record.drop_reason = None
    return ScoreOutcome(sampled, reason, rejudged)
