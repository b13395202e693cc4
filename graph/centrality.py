"""PageRank and harmonic centrality on a host graph given as edge arrays (node ids 0..n-1).

Conventions follow Common Crawl's web-graph ranks: PageRank with damping 0.85 and dangling mass spread
uniformly (what networkx.pagerank does); harmonic centrality of v is the sum over u of 1/d(u, v), the incoming
distances, which is what networkx.harmonic_centrality returns and what CC gets by running HyperBall on the
transposed graph. Exact HC is all-sources BFS (small graphs); approximate HC is HyperBall with HyperLogLog
counters (Boldi and Vigna), vectorised in numpy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import shortest_path

DAMPING = 0.85  # as Common Crawl and networkx
PR_TOL = 1e-15  # stop when the L1 change of the rank vector (which sums to 1) falls below this
PR_MAX_ITER = 10_000
EXACT_HC_MAX_NODES = 20_000  # all-sources BFS costs n * (n + e); above this, "auto" uses HyperBall
EXACT_HC_BLOCK = 256  # BFS sources per block: bounds the dense distance block to 256 * n doubles
HYPERBALL_LOG2M = 7  # 128 registers per counter: relative error about 9% per ball size
HYPERBALL_ROUNDS = 64  # in-links per node merged by fancy-indexed rounds; beyond that, per-hub reductions
HYPERBALL_ROW_CHUNK = 1 << 16  # counters estimated at once
HYPERBALL_MAX_ITER = 10_000


@dataclass(frozen=True, slots=True)
class EdgeList:
    """A directed graph: n nodes, edges src[i] -> dst[i], no duplicate pairs."""

    n: int
    src: np.ndarray
    dst: np.ndarray

    @classmethod
    def build(cls, n: int, src: np.ndarray, dst: np.ndarray, drop_self_loops: bool = True) -> EdgeList:
        """Deduplicate (and by default drop self-loops), as CC's host graph does."""
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        if len(src) != len(dst):
            raise ValueError(f"src and dst differ in length ({len(src)} vs {len(dst)})")
        if len(src) and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n):
            raise ValueError(f"edge endpoints must lie in 0..{n - 1}")
        if drop_self_loops:
            keep = src != dst
            src, dst = src[keep], dst[keep]
        pairs = np.unique(src * np.int64(max(n, 1)) + dst)
        return cls(n, pairs // max(n, 1), pairs % max(n, 1))


def pagerank(
    graph: EdgeList, alpha: float = DAMPING, tol: float = PR_TOL, max_iter: int = PR_MAX_ITER
) -> np.ndarray:
    """PageRank by sparse power iteration; dangling nodes' mass goes to all nodes uniformly (as networkx)."""
    n = graph.n
    if n == 0:
        return np.zeros(0)
    out_degree = np.bincount(graph.src, minlength=n).astype(np.float64)
    weights = 1.0 / out_degree[graph.src]
    # transition^T: row v holds the in-links of v weighted by 1/outdeg(u), so x_new = M @ x.
    transition_t = sp.csr_array((weights, (graph.dst, graph.src)), shape=(n, n))
    dangling = out_degree == 0
    x = np.full(n, 1.0 / n)
    teleport = (1.0 - alpha) / n
    for _ in range(max_iter):
        previous = x
        x = alpha * (transition_t @ x + previous[dangling].sum() / n) + teleport
        if np.abs(x - previous).sum() < tol:
            return x
    raise RuntimeError(f"PageRank did not converge to {tol} in {max_iter} iterations")


def harmonic_exact(graph: EdgeList, progress: Callable[[int, int], None] | None = None) -> np.ndarray:
    """Exact incoming harmonic centrality: sum over sources u of 1/d(u, v), by blocks of BFS."""
    n = graph.n
    adjacency = sp.csr_array((np.ones(len(graph.src)), (graph.src, graph.dst)), shape=(n, n))
    total = np.zeros(n)
    for start in range(0, n, EXACT_HC_BLOCK):
        sources = np.arange(start, min(start + EXACT_HC_BLOCK, n))
        dist = shortest_path(adjacency, method="D", directed=True, unweighted=True, indices=sources)
        reachable = np.isfinite(dist) & (dist > 0)
        total += np.divide(1.0, dist, out=np.zeros_like(dist), where=reachable).sum(axis=0)
        if progress is not None:
            progress(int(sources[-1]) + 1, n)
    return total


def _splitmix64(values: np.ndarray) -> np.ndarray:
    z = values.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _bit_length(values: np.ndarray) -> np.ndarray:
    smeared = values.copy()
    for shift in (1, 2, 4, 8, 16, 32):
        smeared |= smeared >> np.uint64(shift)
    return np.bitwise_count(smeared).astype(np.int64)


def _initial_registers(n: int, log2m: int, seed: int) -> np.ndarray:
    """One HyperLogLog counter per node holding just that node."""
    with np.errstate(over="ignore"):
        h = _splitmix64(np.arange(n, dtype=np.uint64) ^ _splitmix64(np.array([seed], dtype=np.uint64))[0])
    bucket = (h >> np.uint64(64 - log2m)).astype(np.int64)
    rest = h << np.uint64(log2m)
    rho = np.minimum(64 - _bit_length(rest) + 1, 64 - log2m + 1)
    registers = np.zeros((n, 1 << log2m), dtype=np.uint8)
    registers[np.arange(n), bucket] = rho.astype(np.uint8)
    return registers


def _estimate(registers: np.ndarray) -> np.ndarray:
    """HyperLogLog cardinality of each row, with linear counting for small sets."""
    m = registers.shape[1]
    alpha = 0.7213 / (1 + 1.079 / m)
    powers = np.ldexp(1.0, -np.arange(66))
    out = np.empty(len(registers))
    for start in range(0, len(registers), HYPERBALL_ROW_CHUNK):
        block = registers[start : start + HYPERBALL_ROW_CHUNK]
        raw = alpha * m * m / powers[block].sum(axis=1)
        zeros = (block == 0).sum(axis=1)
        small = (raw <= 2.5 * m) & (zeros > 0)
        raw[small] = m * np.log(m / zeros[small])
        out[start : start + len(block)] = raw
    return out


@dataclass(frozen=True, slots=True)
class _InEdgeRounds:
    """In-links arranged so each round touches every target at most once (safe fancy-index updates).

    Round r holds the r-th in-link of every node; the in-links of hubs beyond HYPERBALL_ROUNDS are merged
    per hub with one vectorised max instead: a hub with 100,000 in-links costs one call, not 100,000 rounds.
    """

    round_src: list[np.ndarray]
    round_dst: list[np.ndarray]
    hubs: np.ndarray
    hub_src: list[np.ndarray]

    @classmethod
    def build(cls, graph: EdgeList, rounds: int) -> _InEdgeRounds:
        order = np.argsort(graph.dst, kind="stable")
        src, dst = graph.src[order], graph.dst[order]
        in_degree = np.bincount(dst, minlength=graph.n)
        starts = np.cumsum(in_degree) - in_degree
        rank = np.arange(len(dst)) - starts[dst]
        short = np.flatnonzero(rank < rounds)
        by_round = short[np.argsort(rank[short], kind="stable")]
        bounds = np.cumsum(np.bincount(rank[short], minlength=rounds))[:rounds]
        pieces = np.split(by_round, bounds[:-1]) if len(by_round) else []
        hubs = np.flatnonzero(in_degree > rounds)
        hub_src = [src[starts[v] + rounds : starts[v] + in_degree[v]] for v in hubs]
        return cls([src[p] for p in pieces], [dst[p] for p in pieces], hubs, hub_src)


def harmonic_hyperball(
    graph: EdgeList,
    log2m: int = HYPERBALL_LOG2M,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Approximate incoming HC: ball B_t(v) holds the nodes within distance t of v, against the links."""
    n = graph.n
    registers = _initial_registers(n, log2m, seed)
    rounds = _InEdgeRounds.build(graph, HYPERBALL_ROUNDS)
    size = _estimate(registers)
    centrality = np.zeros(n)
    changed = np.ones(n, dtype=bool)
    for t in range(1, HYPERBALL_MAX_ITER + 1):
        updated = registers.copy()
        # Only counters that grew last time can bring anything new (HyperBall's "modified" optimisation).
        for src, dst in zip(rounds.round_src, rounds.round_dst, strict=True):
            live = changed[src]
            s, d = src[live], dst[live]
            if len(s):
                updated[d] = np.maximum(updated[d], registers[s])
        for hub, src in zip(rounds.hubs.tolist(), rounds.hub_src, strict=True):
            s = src[changed[src]]
            if len(s):
                np.maximum(updated[hub], registers[s].max(axis=0), out=updated[hub])
        grew = np.flatnonzero((updated != registers).any(axis=1))
        if not len(grew):
            break
        new_size = _estimate(updated[grew])
        centrality[grew] += np.maximum(new_size - size[grew], 0.0) / t
        size[grew] = new_size
        changed = np.zeros(n, dtype=bool)
        changed[grew] = True
        registers = updated
        if progress is not None:
            progress(t, len(grew))
    return centrality


def harmonic_centrality(graph: EdgeList, method: str = "auto", seed: int = 0) -> np.ndarray:
    """'exact', 'hyperball', or 'auto' (exact up to EXACT_HC_MAX_NODES nodes)."""
    if method == "auto":
        method = "exact" if graph.n <= EXACT_HC_MAX_NODES else "hyperball"
    if method == "exact":
        return harmonic_exact(graph)
    if method == "hyperball":
        return harmonic_hyperball(graph, seed=seed)
    raise ValueError(f"unknown harmonic centrality method {method!r} (exact, hyperball, auto)")


def positions(values: np.ndarray) -> np.ndarray:
    """1-based rank positions, highest value first, ties in node order (as CC's *_pos columns)."""
    order = np.argsort(-values, kind="stable")
    pos = np.empty(len(values), dtype=np.int64)
    pos[order] = np.arange(1, len(values) + 1)
    return pos
