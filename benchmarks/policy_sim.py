"""Sweep policy settings on the offline replay of the test web (crawler/bench/replay.py): seconds per policy.

    python -m benchmarks.policy_sim [--hosts 1000] [--budget-share 0.1] [--policies adaptive,oracle] \\
        [--set exploration_bonus=1.0 --set aspiration_quantile=0.85]

Prints high-quality pages per fetch for each policy; fetches, high-quality pages and pages that are not
articles (home, listings, sitemaps, errors) by phase; and the ratios to `bfs` and `oracle`.
`hostcrawl bench yield` is the reference (real crawls over sockets).
"""

from __future__ import annotations

import argparse
import json
import time

from crawler.bench.replay import replay
from crawler.testweb import TestWebConfig
from crawler.testweb.model import SiteModel

POLICIES = ("bfs", "uniform", "hc_depth", "sample_deepen", "adaptive", "sampled_oracle", "oracle")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget-share", type=float, default=0.10)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=JSON", help="PolicyConfig field")
    args = parser.parse_args(argv)
    overrides = {k: json.loads(v) for k, v in (item.split("=", 1) for item in args.set)}
    model = SiteModel(TestWebConfig(n_hosts=args.hosts, seed=args.seed))
    pages = sum(h.n_pages for h in model.hosts)
    print(f"model: {args.hosts} hosts, {pages} pages, budget {args.budget_share:.0%}")
    results: dict[str, float] = {}
    for policy in args.policies.split(","):
        started = time.perf_counter()
        sim = replay(model, policy, args.budget_share, args.concurrency, overrides)
        hq, fetched = sum(sim.hits), len(sim.hits)
        results[policy] = hq / max(1, fetched)
        phases = "  ".join(f"{k} {n}/{h}/{o}" for k, (n, h, o) in sorted(sim.by_phase.items()))
        print(
            f"{policy:>14}: {hq:6d} hq / {fetched:6d} fetched = {results[policy]:.3f}"
            f"  ({time.perf_counter() - started:.0f}s)  fetched/hq/not-article by phase: {phases}",
            flush=True,
        )
    for base in ("bfs", "oracle"):
        if results.get(base):
            print(f"x {base}: " + ", ".join(f"{p} {v / results[base]:.2f}" for p, v in results.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
