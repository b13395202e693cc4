"""PageRank and approximate harmonic centrality at scale (targets: PR on 1M nodes / 10M edges < 60 s;
HyperBall HC on the same graph < 5 min; Spearman >= 0.95 against exact HC on a 10,000-node graph).

Baselines measured in the same run: networkx.pagerank and networkx.harmonic_centrality on a smaller graph
(ratio against ours on that graph), and exact all-sources BFS HC on the 10,000-node graph.

    python -m benchmarks.graph_centrality [--nodes 1000000 --edges 10000000] [--skip-hyperball]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

import numpy as np
from scipy.stats import spearmanr

from graph.centrality import EdgeList, harmonic_exact, harmonic_hyperball, pagerank

POPULARITY_SKEW = 3.0  # dst = n * u**skew before shuffling ids: a few hosts get most links, as on the web
TARGET_PR_S = 60.0
TARGET_HC_S = 300.0
TARGET_SPEARMAN = 0.95


def web_like_graph(n: int, m: int, seed: int) -> EdgeList:
    """Heavy-tailed in- and out-degrees, ids shuffled so popularity is unrelated to node order."""
    rng = np.random.default_rng(seed)
    src = (n * rng.random(m) ** 1.5).astype(np.int64)
    dst = (n * rng.random(m) ** POPULARITY_SKEW).astype(np.int64)
    shuffle = rng.permutation(n)
    return EdgeList.build(n, shuffle[src], shuffle[dst])


def timed(label: str, fn, *args):  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    value = fn(*args)
    took = time.perf_counter() - started
    print(f"{label}: {took:.2f} s", flush=True)
    return value, took


def networkx_baselines(seed: int) -> None:
    import networkx as nx

    graph = web_like_graph(2000, 20_000, seed)
    g = nx.DiGraph()
    g.add_nodes_from(range(graph.n))
    g.add_edges_from(zip(graph.src.tolist(), graph.dst.tolist(), strict=True))
    _, nx_pr = timed("networkx.pagerank, 2k nodes / 20k edges", nx.pagerank, g)
    _, our_pr = timed("graph.pagerank (tol 1e-15), same graph", pagerank, graph)
    _, nx_hc = timed("networkx.harmonic_centrality, same graph", nx.harmonic_centrality, g)
    _, our_hc = timed("graph.harmonic_exact, same graph", harmonic_exact, graph)
    print(f"speed-up vs networkx: PageRank {nx_pr / our_pr:.1f}x, exact HC {nx_hc / our_hc:.1f}x")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--edges", type=int, default=10_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-hyperball", action="store_true")
    args = parser.parse_args(argv)

    networkx_baselines(args.seed)

    small = web_like_graph(10_000, 100_000, args.seed + 1)
    exact, _ = timed(f"exact HC, 10k nodes / {len(small.src):,} edges", harmonic_exact, small)
    approx, _ = timed("HyperBall HC (128 registers), same graph", harmonic_hyperball, small)
    rho = float(spearmanr(exact, approx).statistic)
    linked = exact > 0
    rho_linked = float(spearmanr(exact[linked], approx[linked]).statistic)
    median_err = float(np.median(np.abs(approx[linked] - exact[linked]) / exact[linked]))
    print(
        f"HyperBall vs exact on 10k nodes: Spearman {rho:.4f} (over the {linked.mean():.1%} of nodes with "
        f"in-links: {rho_linked:.4f}), median relative error {median_err:.3f}"
    )

    graph, _ = timed(
        f"generate + dedupe {args.nodes:,} nodes / {args.edges:,} edges",
        web_like_graph,
        args.nodes,
        args.edges,
        args.seed,
    )
    print(f"distinct edges: {len(graph.src):,}")
    _, pr_s = timed("PageRank (tol 1e-15)", pagerank, graph)
    hc_s = float("nan")
    if not args.skip_hyperball:
        _, hc_s = timed("HyperBall HC", harmonic_hyperball, graph)
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB")
    print(f"PR < {TARGET_PR_S:.0f} s: {'PASS' if pr_s < TARGET_PR_S else 'FAIL'} ({pr_s:.1f} s)")
    if not args.skip_hyperball:
        print(f"HyperBall < {TARGET_HC_S:.0f} s: {'PASS' if hc_s < TARGET_HC_S else 'FAIL'} ({hc_s:.1f} s)")
    print(f"Spearman >= {TARGET_SPEARMAN}: {'PASS' if rho >= TARGET_SPEARMAN else 'FAIL'} ({rho:.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
