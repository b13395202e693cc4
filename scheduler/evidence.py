"""Which page scores count as clear evidence of a good page: a bar set by the scores seen so far.

Scorers differ in scale (a fastText model's good pages may score 0.6, heuristic_v3's 0.93), so the bar is
not a fixed number: it is a quantile of the scores above the crawl's threshold seen so far over all hosts.
Pages that only just pass (listings, thin or short pages, which scorers half-see) then count against
their host, and hosts are ranked by their clearly good pages. Scores of 0 and 1 are unaffected.

When the passing scores are one tight cluster (the default test web's good pages all score 0.87-0.95 with
heuristic_v3: an interquartile range of 0.03, against 0.10-0.17 on every graded web), there is nothing
between "just passes" and "clearly good" to tell apart: a bar inside the cluster would count pages of
one kind at random, halve every host's density and drop good hosts (299 of the 300 hosts of a demo
crawl). The bar then stays at the crawl's threshold.
"""

from __future__ import annotations

PASS = 0.5  # scores at or below this never count (the crawl's default --threshold)
BINS = 200  # histogram of passing scores: the bar moves in steps of 0.0025
MIN_PASSED = 20  # passing scores needed before the bar rises above PASS
TOLERANCE = 0.01  # the bar moves (and hosts are re-ranked) only when it changed more than this
MIN_SPREAD = 0.05  # interquartile range of the passing scores below which they count as one cluster


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

    def score_at(self, quantile: float) -> float:
        """The lower edge of the histogram bin holding this quantile of the passing scores."""
        rank, seen = quantile * self.passed, 0
        for index, count in enumerate(self.counts):
            seen += count
            if seen > rank or seen == self.passed:
                return PASS + index * (1.0 - PASS) / BINS
        return PASS

    def update(self) -> bool:
        """Recompute the bar from the scores so far; True when it moved."""
        if self.quantile <= 0.0 or self.passed < MIN_PASSED:
            return False
        level = self.score_at(self.quantile)
        if self.score_at(0.75) - self.score_at(0.25) < MIN_SPREAD:
            level = PASS  # one cluster: every passing page counts
        if abs(level - self.level) <= TOLERANCE:
            return False
        self.level = level
        return True

    def good(self, score: float) -> bool:
        return score >= self.level if self.level > PASS else score > PASS
