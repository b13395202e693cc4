"""Budgeted crawl policies over host-level counts, vectorised over hosts and budgets (no loop per host).

A policy cannot pick the good pages inside a host: the expected high-quality count of a partly crawled host
is its quality density times the pages fetched there (the paper's depth-simulation rule).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RANDOM_REPEATS = 5  # random orderings averaged for the random baseline


@dataclass(frozen=True, slots=True)
class Crawl:
    """Outcome of one policy at each budget."""

    hq: np.ndarray  # expected high-quality pages collected
    hosts_touched: np.ndarray  # hosts with at least one page fetched


def crawl_in_order(n: np.ndarray, hq: np.ndarray, order: np.ndarray, budgets: np.ndarray) -> Crawl:
    """Crawl hosts fully in `order` until each budget is spent; the last host is crawled partly."""
    n_o, hq_o = n[order].astype(np.float64), hq[order].astype(np.float64)
    cum_n = np.concatenate(([0.0], np.cumsum(n_o)))
    cum_hq = np.concatenate(([0.0], np.cumsum(hq_o)))
    budgets = np.minimum(budgets.astype(np.float64), cum_n[-1])
    full = np.searchsorted(cum_n, budgets, side="right") - 1  # hosts 0..full-1 fully crawled
    got = cum_hq[full]
    partial = budgets - cum_n[full]
    has_next = full < len(n_o)
    nxt = np.minimum(full, max(len(n_o) - 1, 0))
    density_next = (
        np.divide(hq_o[nxt], n_o[nxt], out=np.zeros(len(nxt)), where=n_o[nxt] > 0) if len(n_o) else 0.0
    )
    got = got + np.where(has_next, partial * density_next, 0.0)
    touched = full + (has_next & (partial > 0))
    return Crawl(got, touched.astype(np.int64))


def uniform_breadth(n: np.ndarray, hq: np.ndarray, budgets: np.ndarray) -> Crawl:
    """Every host crawled to the same depth d; pages left over go one each to hosts deeper than d."""
    order = np.argsort(n, kind="stable")
    n_s = n[order].astype(np.float64)
    dens_s = np.divide(hq[order], n_s, out=np.zeros(len(n_s)), where=n_s > 0)
    cum_n = np.concatenate(([0.0], np.cumsum(n_s)))
    cum_hq = np.concatenate(([0.0], np.cumsum(hq[order].astype(np.float64))))
    suffix_dens = np.concatenate((np.cumsum(dens_s[::-1])[::-1], [0.0]))
    hosts = len(n_s)

    def fetched(depth: np.ndarray) -> np.ndarray:
        below = np.searchsorted(n_s, depth, side="left")  # hosts with n < depth are exhausted
        return np.asarray(cum_n[below] + depth * (hosts - below))

    budgets = np.minimum(budgets.astype(np.float64), cum_n[-1])
    low, high = np.zeros(len(budgets)), np.full(len(budgets), n_s[-1] if hosts else 0.0)
    for _ in range(64):  # integer bisection on the depth; 64 halvings cover any int64 range
        mid = np.floor((low + high + 1) / 2)
        ok = fetched(mid) <= budgets
        low, high = np.where(ok, mid, low), np.where(ok, high, mid - 1)
        if np.all(low >= high):
            break
    depth = low
    below = np.searchsorted(n_s, depth, side="left")
    got = cum_hq[below] + depth * suffix_dens[below]
    deeper = np.searchsorted(n_s, depth, side="right")  # hosts with n > depth can take one more page
    left = budgets - fetched(depth)
    count = hosts - deeper
    mean_dens = np.divide(suffix_dens[deeper], count, out=np.zeros(len(count)), where=count > 0)
    touched = np.where(depth > 0, hosts - np.searchsorted(n_s, 0, side="right"), np.minimum(left, count))
    return Crawl(got + left * mean_dens, touched.astype(np.int64))


def sample_then_deepen(
    n: np.ndarray, hq: np.ndarray, sample_hq: np.ndarray, k: int, budgets: np.ndarray, tiebreak: np.ndarray
) -> Crawl:
    """Probe k pages on every host, then crawl fully the hosts with the best sample density.

    A budget smaller than the probes samples hosts in random order, so it collects the probes' average rate.
    """
    probe = np.minimum(n, k).astype(np.float64)
    probe_total, probe_hq = probe.sum(), sample_hq.sum()
    order = order_by(probe_density(n, sample_hq, k), tiebreak)
    rest = crawl_in_order(n - probe, hq - sample_hq, order, np.maximum(budgets - probe_total, 0))
    sampling = budgets < probe_total
    rate = probe_hq / probe_total if probe_total else 0.0
    got = np.where(sampling, budgets * rate, probe_hq + rest.hq)
    touched = np.where(sampling, np.minimum(budgets / max(k, 1), len(n)), len(n))
    return Crawl(got, touched.astype(np.int64))


def probe_density(n: np.ndarray, sample_hq: np.ndarray, k: int) -> np.ndarray:
    """Quality density of each host's k-page probe (of all its pages when it has fewer)."""
    probe = np.minimum(n, k).astype(np.float64)
    return np.divide(sample_hq, probe, out=np.zeros(len(n)), where=probe > 0)


def order_by(key: np.ndarray, tiebreak: np.ndarray) -> np.ndarray:
    """Hosts by key, highest first; NaN (unknown, e.g. not in the graph) last; ties in tiebreak order."""
    filled = np.where(np.isnan(key), -np.inf, key)
    return np.lexsort((tiebreak, -filled))


def tlds_covered(order: np.ndarray, tld: np.ndarray, touched: np.ndarray) -> np.ndarray:
    """Distinct TLDs among the first `touched` hosts of `order`, for each budget."""
    _, first = np.unique(tld[order], return_index=True)
    first.sort()
    return np.searchsorted(first, touched, side="left").astype(np.int64)


def budget_pages(total: int, fractions: list[float]) -> np.ndarray:
    return np.array([round(f * total) for f in fractions], dtype=np.float64)
