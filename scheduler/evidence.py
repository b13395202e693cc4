"""Which page scores count as clear evidence of a good page: a bar set by the scores seen so far.

Scorers differ in scale (a fastText model's good pages may score 0.6, heuristic_v3's 0.93), so the bar is
not a fixed number: it is a quantile of the scores above the crawl's threshold seen so far over all hosts.
Pages that only just pass (listings, thin or short pages, which scorers half-see) then count against
their host, and hosts are ranked by their clearly good pages. Scores of 0 and 1 are unaffected.
"""

from __future__ import annotations

PASS = 0.5  # scores at or below this never count (the crawl's default --threshold)
BINS = 200  # histogram of passing scores: the bar moves in steps of 0.0025
MIN_PASSED = 20  # passing scores needed before the bar rises above PASS
TOLERANCE = 0.01  # the bar moves (and hosts are re-ranked) only when it changed more than this


class EvidenceBar:
    """A streaming quantile of the passing scores; `level` is the bar a score must reach."""

    def __init__(self, quantile: float) -> None:
        self.quantile = quantile
        self.counts = [0] * BINS
        self.passed = 0
        self.level = PASS

    def add(self, score: float) -> None:
        if score > PASS:
            self.counts[min(BINS - 1, int((score - PASS) / (1.0 - PASS) * BINS))] += 1
            self.passed += 1

    def update(self) -> bool:
        """Recompute the bar from the scores so far; True when it moved."""
        if self.quantile <= 0.0 or self.passed < MIN_PASSED:
            return False
        rank, seen = self.quantile * self.passed, 0
        for index, count in enumerate(self.counts):
            seen += count
            if seen > rank or seen == self.passed:
                level = PASS + index * (1.0 - PASS) / BINS
                break
        if abs(level - self.level) <= TOLERANCE:
            return False
        self.level = level
        return True

    def good(self, score: float) -> bool:
        return score >= self.level if self.level > PASS else score > PASS
