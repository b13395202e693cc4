"""The formulas behind the studies, on numbers DuckDB has already aggregated (no data frames here)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95


@dataclass(frozen=True, slots=True)
class Icc1:
    """Shrout-Fleiss ICC(1,1) from a one-way ANOVA with unequal group sizes."""

    icc1: float
    ci_low: float
    ci_high: float
    f_value: float
    msb: float
    msw: float
    k0: float  # the ANOVA's effective group size, (N - sum n_i^2 / N) / (g - 1); equals n when balanced
    groups: int
    observations: int
    mean_group_size: float


def icc1_from_sums(
    groups: int, observations: int, ss_between: float, ss_within: float, sum_n2: float
) -> Icc1:
    """ICC1 = (MSB - MSW) / (MSB + (k0 - 1) MSW), with Shrout and Fleiss's F-based confidence interval."""
    if groups < 2 or observations <= groups:
        nan = float("nan")
        return Icc1(nan, nan, nan, nan, nan, nan, nan, groups, observations, nan)
    df_b, df_w = groups - 1, observations - groups
    msb, msw = ss_between / df_b, ss_within / df_w
    k0 = (observations - sum_n2 / observations) / df_b
    icc = (msb - msw) / (msb + (k0 - 1) * msw) if msb + (k0 - 1) * msw else float("nan")
    f_value = msb / msw if msw > 0 else float("inf")
    alpha = 1 - CONFIDENCE
    if math.isfinite(f_value):
        from scipy import stats as sps  # 1 s to import: only where an interval is asked for

        f_low = f_value / sps.f.ppf(1 - alpha / 2, df_b, df_w)
        f_high = f_value * sps.f.ppf(1 - alpha / 2, df_w, df_b)
        low, high = (f_low - 1) / (f_low + k0 - 1), (f_high - 1) / (f_high + k0 - 1)
    else:
        low = high = 1.0
    return Icc1(
        float(icc),
        float(low),
        float(high),
        float(f_value),
        float(msb),
        float(msw),
        float(k0),
        groups,
        observations,
        observations / groups,
    )


def spearman_brown(icc: float, pages: float) -> float:
    """Reliability of a host mean over `pages` pages: m ICC / (1 + (m - 1) ICC)."""
    return pages * icc / (1 + (pages - 1) * icc)


def correlation_ceiling(reliability: float) -> float:
    """The largest correlation any host-level signal can reach against a mean of this reliability."""
    return math.sqrt(reliability) if reliability > 0 else 0.0


def spearman_ci(rho: float, n: int) -> tuple[float, float]:
    """Fisher-z interval with the Bonett-Wright standard error sqrt((1 + rho^2 / 2) / (n - 3))."""
    if n <= 3 or not math.isfinite(rho) or abs(rho) >= 1:
        return (float("nan"), float("nan"))
    z = math.atanh(rho)
    from scipy import stats as sps

    half = sps.norm.ppf(0.5 + CONFIDENCE / 2) * math.sqrt((1 + rho * rho / 2) / (n - 3))
    return (math.tanh(z - half), math.tanh(z + half))


def average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n with ties averaged, as scipy.stats.rankdata does, in O(n log n)."""
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    starts = np.r_[True, sorted_values[1:] != sorted_values[:-1]]
    group = np.cumsum(starts) - 1
    first = np.flatnonzero(starts)
    counts = np.diff(np.r_[first, len(values)])
    mean_rank = first + (counts + 1) / 2.0
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = mean_rank[group]
    return ranks


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho (Pearson correlation of average ranks) of two equally long arrays."""
    if len(x) < 2:
        return float("nan")
    rx, ry = average_ranks(np.asarray(x)), average_ranks(np.asarray(y))
    rx -= rx.mean()
    ry -= ry.mean()
    denom = math.sqrt(float(rx @ rx) * float(ry @ ry))
    return float(rx @ ry) / denom if denom else float("nan")
