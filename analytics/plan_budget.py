"""Page budget of a recrawl plan: proportional to the missing high-quality pages, capped per host, with a
diversity guard (no TLD and no language takes more than its share of the budget).

Water-filling over numpy arrays: a host gets min(cap, s x missing) for the scale s that spends the budget;
a group above its share has its hosts scaled down to the share and frozen, and the rest is spread again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SEARCH_STEPS = 60  # bisection steps for the scale factor (2^-60 of the range: exact for page counts)


@dataclass(slots=True)
class GuardReport:
    """What the diversity guard did: per guarded column, the groups it held back to their share."""

    capped: dict[str, list[str]] = field(default_factory=dict)
    shares: dict[str, dict[str, float]] = field(default_factory=dict)


def _fill(weight: np.ndarray, cap: np.ndarray, budget: float) -> np.ndarray:
    """min(cap, s x weight) with s chosen so the sum is `budget` (or every host at its cap)."""
    if budget <= 0 or not len(weight):
        return np.zeros_like(weight)
    if cap.sum() <= budget:
        return cap.copy()
    lo, hi = 0.0, float(np.max(cap / np.maximum(weight, 1e-300)))
    for _ in range(SEARCH_STEPS):
        mid = (lo + hi) / 2
        if np.minimum(cap, mid * weight).sum() > budget:
            hi = mid
        else:
            lo = mid
    return np.minimum(cap, lo * weight)


def allocate(
    missing: np.ndarray,
    cap: np.ndarray,
    budget: int,
    groups: dict[str, tuple[np.ndarray, float]],
) -> tuple[np.ndarray, GuardReport]:
    """Integer pages per host summing to at most `budget`.

    `missing`: estimated missing high-quality pages (the weight); `cap`: most pages a host may get;
    `groups`: column name -> (group code per host, the largest share of the budget one group may take).
    """
    n = len(missing)
    weight = np.where(missing > 0, missing, 0.0).astype(np.float64)
    cap = np.where(weight > 0, cap, 0).astype(np.float64)
    frozen = np.zeros(n, dtype=bool)
    alloc = np.zeros(n)
    report = GuardReport()
    for _ in range(64):  # every round freezes at least one group, so this ends
        free = ~frozen
        alloc[free] = _fill(weight[free], cap[free], budget - alloc[frozen].sum())
        over = False
        for name, (codes, share) in groups.items():
            limit = share * budget
            sums = np.bincount(codes, weights=alloc)
            for g in np.flatnonzero(sums > limit * (1 + 1e-9)):
                members = (codes == g) & free
                fixed = alloc[(codes == g) & frozen].sum()
                room = max(limit - fixed, 0.0)
                movable = alloc[members].sum()
                alloc[members] *= room / movable if movable else 0.0
                frozen |= members
                report.capped.setdefault(name, []).append(str(g))
                over = True
        if not over:
            break
    pages = _round(alloc, cap, budget, groups)
    for name, (codes, _share) in groups.items():
        sums = np.bincount(codes, weights=pages)
        report.shares[name] = {str(g): float(v / max(pages.sum(), 1)) for g, v in enumerate(sums) if v}
    return pages, report


def _round(
    alloc: np.ndarray, cap: np.ndarray, budget: int, groups: dict[str, tuple[np.ndarray, float]]
) -> np.ndarray:
    """Floor, then hand the pages left over to the largest fractions (within caps and group shares)."""
    pages = np.floor(alloc + 1e-9).astype(np.int64)
    left = int(min(budget, round(alloc.sum())) - pages.sum())
    if left <= 0:
        return pages
    room = {
        name: share * budget - np.bincount(codes, weights=pages) for name, (codes, share) in groups.items()
    }
    order = np.argsort(-(alloc - pages), kind="stable")
    for i in order:
        if left == 0 or alloc[i] - pages[i] <= 0:
            break
        if pages[i] + 1 > cap[i]:
            continue
        if any(room[name][codes[i]] < 1 for name, (codes, _s) in groups.items()):
            continue
        pages[i] += 1
        left -= 1
        for name, (codes, _s) in groups.items():
            room[name][codes[i]] -= 1
    return pages
