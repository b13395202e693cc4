"""`hostcrawl bench yield --webs FAMILY`: every policy replayed on a family of graded webs, one table.

A policy tuned on one web can win there and lose on the next; the family varies what the paper says
varies between crawls and classifiers: how much of quality lies between hosts (ICC), how rare good
pages are (base rate), how heavy the tail of host sizes is, and how noisy the scorer is. Every web is
a graded web (testweb/graded.py) replayed offline (crawler/replay.py) with pages scored as the crawl's
cleaner and scorer score them (crawler/replay_scores.py); hits are graded by the truth.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crawler.testweb.config import TestWebConfig, graded_config

FAMILY_POLICIES = ("bfs", "sample_deepen", "adaptive", "sampled_oracle", "oracle", "scored_oracle")
# sampled_oracle that knows each host's density as the scorer sees it (share of pages scoring above the
# crawl's threshold) instead of its true density: how much of the gap is the scorer's, not the learning's
SCORED_ORACLE = "scored_oracle"
BASELINES = ("bfs", "sample_deepen", "sampled_oracle", "oracle")
FAMILY_HOSTS = 200  # hosts per web: 8 webs x 6 policies replay in about 10 minutes on 2 loaded cores
LIGHT_TAIL_SIGMA = 0.8  # lognormal spread of the light-tailed web's host sizes
NOISY_AUC = 0.78  # the noisy scorer's AUC (about the lowest a graded web's mediocre pages allow)
CALIBRATION_HOSTS = 200  # the web whose pages are scored once for every web of a family
# a run that fetched less than this share of its budget ran out of URLs it would fetch: its hq/fetch
# is not comparable with a run that spent the whole budget, and the table says so
UNSPENT = 0.99


@dataclass(frozen=True, slots=True)
class WebVariant:
    name: str
    fields: dict[str, Any] = field(default_factory=dict)  # TestWebConfig fields over graded_config()


FAMILIES: dict[str, tuple[WebVariant, ...]] = {
    # the centre: ICC 0.5, base rate 0.3, Pareto host sizes, scorer AUC 0.85; one axis moved per web
    "graded": (
        WebVariant("centre"),
        WebVariant("icc0.3", {"icc": 0.3}),
        WebVariant("icc0.6", {"icc": 0.6}),
        WebVariant("base0.1", {"mean_quality": 0.1}),
        WebVariant("base0.5", {"mean_quality": 0.5}),
        WebVariant("light_tail", {"size_tail": "lognormal", "pages_sigma": LIGHT_TAIL_SIGMA}),
        WebVariant("noisy_scorer", {"scorer_auc": NOISY_AUC}),
        WebVariant("icc0.3_base0.1", {"icc": 0.3, "mean_quality": 0.1}),
    ),
    # two small webs, for tests and a quick look
    "tiny": (WebVariant("centre"), WebVariant("icc0.3_base0.1", {"icc": 0.3, "mean_quality": 0.1})),
}


def web_config(variant: WebVariant, hosts: int, seed: int) -> TestWebConfig:
    return graded_config(n_hosts=hosts, seed=seed, robots_dir="", **variant.fields)


def run_family(
    family: str,
    policies: list[str],
    hosts: int,
    seed: int,
    budget_share: float,
    concurrency: int,
    scored: bool = True,
    overrides: dict[str, Any] | None = None,
    score_lag: int | None = None,
    unspent: dict[str, float] | None = None,
) -> dict[str, dict[str, float]]:
    """{web: {policy: high-quality pages per fetch}}, each web replayed with every policy; scores arrive
    `score_lag` pages late (None: the replay's quiet-machine lag); runs that ended with budget left
    are added to `unspent` as {"web policy": share of the budget fetched}."""
    from crawler.replay import SCORE_LAG, replay
    from crawler.replay_scores import ScoreSampler
    from crawler.testweb.model import SiteModel

    sampler = None
    if scored:
        started = time.monotonic()
        calibration = SiteModel(graded_config(n_hosts=CALIBRATION_HOSTS, seed=seed, robots_dir=""))
        sampler = ScoreSampler.measure(calibration)
        print(f"scored {len(sampler.cells)} (kind, language) cells in {time.monotonic() - started:.0f}s")
    results: dict[str, dict[str, float]] = {}
    lag = SCORE_LAG if score_lag is None else score_lag
    for variant in FAMILIES[family]:
        model = SiteModel(web_config(variant, hosts, seed))
        pages = sum(h.n_pages for h in model.hosts)
        results[variant.name] = {}
        for policy in policies:
            started = time.monotonic()
            if policy == SCORED_ORACLE:
                if sampler is None:
                    continue  # with true labels it is sampled_oracle
                truth = sampler.scored_density(model)
                sim = replay(
                    model, "sampled_oracle", budget_share, concurrency, overrides, sampler, truth, lag
                )
            else:
                sim = replay(model, policy, budget_share, concurrency, overrides, sampler, None, lag)
            value = results[variant.name][policy] = sum(sim.hits) / max(1, len(sim.hits))
            spent = len(sim.hits) / sim.frontier.limits.budget
            if unspent is not None and spent < UNSPENT:
                unspent[f"{variant.name} {policy}"] = spent
            print(
                f"{variant.name:>16} {pages:7d} pages {policy:>14}: {value:.3f} hq/fetch"
                f" ({time.monotonic() - started:.0f}s)",
                flush=True,
            )
    return results


def format_family_table(results: dict[str, dict[str, float]], mode: str) -> str:
    """One row per (web, policy): hq/fetch and its ratio to each baseline that ran."""
    header = f"{'web':<16} {'policy':<14} {'hq/fetch':>8} " + "".join(f"{'x ' + b:>17}" for b in BASELINES)
    lines = ["", f"high-quality pages per fetch ({mode})", header]
    for web, row in results.items():
        for policy, value in row.items():
            ratios = "".join(f"{value / row[b]:>17.2f}" if row.get(b) else f"{'-':>17}" for b in BASELINES)
            lines.append(f"{web:<16} {policy:<14} {value:8.3f} {ratios}")
    return "\n".join(lines)


def cmd_bench_family(args: Any) -> int:
    policies = [p for p in args.policies.split(",") if p] if args.policies else list(FAMILY_POLICIES)
    hosts = args.hosts or FAMILY_HOSTS
    scores = "true labels" if args.truth_scores else "scored pages"
    lag = "" if args.score_lag is None else f", scores {args.score_lag} pages late"
    mode = f"replay, {scores}{lag}, {args.budget_share:.0%} budget"
    unspent: dict[str, float] = {}
    results = run_family(
        args.webs, policies, hosts, args.seed, args.budget_share, args.concurrency, not args.truth_scores,
        score_lag=args.score_lag, unspent=unspent,
    )  # fmt: skip
    print(format_family_table(results, f"{mode}, {hosts} hosts per web, seed {args.seed}"))
    for run, share in unspent.items():
        print(f"{run}: ran out of URLs worth fetching after {share:.0%} of its budget")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0
