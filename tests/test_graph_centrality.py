"""PageRank and harmonic centrality agree with networkx and with Common Crawl's conventions."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from scipy.stats import spearmanr

from graph.centrality import (
    EdgeList,
    harmonic_centrality,
    harmonic_exact,
    harmonic_hyperball,
    pagerank,
    positions,
)


def random_graph(n: int, m: int, seed: int) -> EdgeList:
    """Links into a heavy-tailed set of popular hosts, plus isolated and dangling nodes."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, m)
    dst = (rng.pareto(1.0, m) * 5).astype(np.int64) % n
    return EdgeList.build(n, src, dst)


def as_networkx(graph: EdgeList) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(range(graph.n))
    g.add_edges_from(zip(graph.src.tolist(), graph.dst.tolist(), strict=True))
    return g


def relative_error(ours: np.ndarray, theirs: dict[int, float]) -> float:
    reference = np.array([theirs[i] for i in range(len(ours))])
    scale = np.where(reference == 0, 1.0, np.abs(reference))
    return float(np.max(np.abs(ours - reference) / scale))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pagerank_equals_networkx_within_1e9(seed: int) -> None:
    graph = random_graph(400, 2000, seed)
    reference = nx.pagerank(as_networkx(graph), alpha=0.85, tol=1e-15, max_iter=10_000)
    assert relative_error(pagerank(graph), reference) < 1e-9


def test_pagerank_spreads_dangling_mass_like_networkx() -> None:
    graph = EdgeList.build(4, np.array([0, 1, 2]), np.array([1, 2, 0]))  # node 3 is isolated and dangling
    ranks = pagerank(graph)
    reference = nx.pagerank(as_networkx(graph), tol=1e-15, max_iter=10_000)
    assert relative_error(ranks, reference) < 1e-9
    assert ranks.sum() == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_exact_harmonic_centrality_equals_networkx_within_1e9(seed: int) -> None:
    graph = random_graph(300, 1500, seed)
    reference = nx.harmonic_centrality(as_networkx(graph))
    assert relative_error(harmonic_exact(graph), reference) < 1e-9


def test_harmonic_centrality_counts_incoming_distances() -> None:
    # Three hosts link to hub 0; hub 0 links on to 4. CC ranks the hub first: HC is about being linked to.
    graph = EdgeList.build(5, np.array([1, 2, 3, 0]), np.array([0, 0, 0, 4]))
    hc = harmonic_exact(graph)
    assert hc.tolist() == [3.0, 0.0, 0.0, 0.0, 2.5]
    reversed_reference = nx.harmonic_centrality(as_networkx(graph).reverse())
    assert relative_error(hc, reversed_reference) > 0.5  # the reversed graph gives out-distances instead


def test_hyperball_ranks_hosts_like_exact_harmonic_centrality() -> None:
    graph = random_graph(3000, 20_000, 7)
    exact = harmonic_exact(graph)
    approx = harmonic_hyperball(graph, seed=1)
    assert spearmanr(exact, approx).statistic >= 0.95
    linked = exact > 0
    assert np.median(np.abs(approx[linked] - exact[linked]) / exact[linked]) < 0.15
    assert np.all(approx[~linked] == 0.0)  # nobody links there: nothing to estimate


def test_hyperball_is_reproducible_for_a_seed() -> None:
    graph = random_graph(500, 3000, 3)
    assert np.array_equal(harmonic_hyperball(graph, seed=5), harmonic_hyperball(graph, seed=5))


def test_auto_method_is_exact_on_small_graphs() -> None:
    graph = random_graph(200, 800, 4)
    assert np.array_equal(harmonic_centrality(graph, "auto"), harmonic_exact(graph))
    with pytest.raises(ValueError, match="unknown harmonic centrality method"):
        harmonic_centrality(graph, "closeness")


def test_edge_list_drops_duplicates_and_self_links() -> None:
    graph = EdgeList.build(3, np.array([0, 0, 1, 2]), np.array([1, 1, 1, 0]))
    assert list(zip(graph.src.tolist(), graph.dst.tolist(), strict=True)) == [(0, 1), (2, 0)]
    with pytest.raises(ValueError, match=r"0\.\.2"):
        EdgeList.build(3, np.array([0]), np.array([3]))


def test_positions_put_the_highest_value_first() -> None:
    assert positions(np.array([0.1, 0.5, 0.3, 0.5])).tolist() == [4, 1, 3, 2]


def test_empty_graph_ranks_to_nothing() -> None:
    graph = EdgeList.build(0, np.array([], dtype=np.int64), np.array([], dtype=np.int64))
    assert len(pagerank(graph)) == 0 and len(harmonic_hyperball(graph)) == 0
