"""`hostcrawl bench yield --webs FAMILY`: every policy replayed on a family of graded webs, one table.

A policy tuned on one web can win there and lose on the next; the family varies what the paper says
varies between crawls and classifiers: how much of quality lies between hosts (ICC), how rare good
pages are (base rate), how heavy the tail of host sizes is, and how noisy the scorer is. Every web is
a graded web (testweb/graded.py) replayed offline (crawler/bench/replay.py) with pages scored as the crawl's
cleaner and scorer score them (crawler/bench/replay_scores.py); hits are graded by the truth.
"""

from __future__ import annotations

import concurrent.futures
import functools
import json
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crawler.testweb.config import TestWebConfig, graded_config
from scheduler.frontier_limits import KEEP_BUSY as KEEP_BUSY_DEFAULT

if TYPE_CHECKING:
    from crawler.bench.replay_scores import ScoreSampler
    from crawler.testweb.model import SiteModel

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


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one replay of one web measured."""

    hq_per_fetch: float
    spent: float  # share of the budget fetched
    ceiling: float  # min(1, high-quality pages in the web / budget): no policy's hq/fetch passes it
    hq_per_hour: float  # on the simulated clock, until the last fetch is handed out
    idle_share: float  # of that time, fewer than half of the request slots busy
    tail_rate: float  # pages/s over the budget's last 20%, over the crawl's mean pages/s
    drain_share: float  # of the simulated time, after the last fetch was handed out


CLOCK_FIELDS = ("ceiling", "hq_per_hour", "idle_share", "tail_rate", "drain_share")


@dataclass(frozen=True, slots=True)
class FamilyRun:
    """What every replay of a family run shares: the webs, their size, the budget and how pages score."""

    family: str
    hosts: int
    budget_share: float
    concurrency: int
    scored: bool = True
    overrides: tuple[tuple[str, Any], ...] = ()
    score_lag: int | None = None
    labelled: bool = False  # progress lines name their seed (several seeds are replayed)
    min_delay: float = 0.0  # the simulated clock (crawler/bench/replay.py Timing) and crawl --keep-busy
    latency_s: float | None = None  # None: the replay's LATENCY_S
    keep_busy: float = KEEP_BUSY_DEFAULT

    def replay(self, seed: int, web: str, policy: str) -> Outcome | None:
        """One policy's replay of one web; None for scored_oracle with true labels (it is then
        sampled_oracle)."""
        from crawler.bench.replay import LATENCY_S, SCORE_LAG, Timing, ceiling, replay

        sampler = _sampler(seed) if self.scored else None
        model = _model(self.family, web, self.hosts, seed)
        name, truth = policy, None
        if policy == SCORED_ORACLE:
            if sampler is None:
                return None
            name, truth = "sampled_oracle", sampler.scored_density(model)
        lag = SCORE_LAG if self.score_lag is None else self.score_lag
        timing = Timing(LATENCY_S if self.latency_s is None else self.latency_s, self.min_delay)
        started = time.monotonic()
        sim = replay(model, name, self.budget_share, self.concurrency, dict(self.overrides), sampler, truth,
                     lag, timing=timing, keep_busy=self.keep_busy)  # fmt: skip
        value = sim.hq_per_fetch
        pages = sum(h.n_pages for h in model.hosts)
        label = f"seed {seed} " if self.labelled else ""
        took = time.monotonic() - started
        print(
            f"{label}{web:>16} {pages:7d} pages {policy:>14}: {value:.3f} hq/fetch, "
            f"{sim.hq_per_hour:.0f} hq/hour ({took:.0f}s)",
            flush=True,
        )
        budget = sim.frontier.limits.budget
        spent = len(sim.hits) / budget
        clock = (sim.hq_per_hour, sim.idle_share, sim.tail_rate, sim.drain_share)
        return Outcome(value, spent, ceiling(model, budget), *clock)


@functools.lru_cache(maxsize=2)
def _sampler(seed: int) -> ScoreSampler:
    """How the crawl's cleaner and scorer score each kind of page of this seed's webs (measured once per
    process and seed)."""
    from crawler.bench.replay_scores import ScoreSampler
    from crawler.testweb.model import SiteModel

    started = time.monotonic()
    sampler = ScoreSampler.measure(
        SiteModel(graded_config(n_hosts=CALIBRATION_HOSTS, seed=seed, robots_dir=""))
    )
    took = time.monotonic() - started
    print(f"seed {seed}: scored {len(sampler.cells)} (kind, language) cells in {took:.0f}s", flush=True)
    return sampler


@functools.lru_cache(maxsize=2)
def _model(family: str, web: str, hosts: int, seed: int) -> SiteModel:
    from crawler.testweb.model import SiteModel

    variant = next(v for v in FAMILIES[family] if v.name == web)
    return SiteModel(web_config(variant, hosts, seed))


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
    run = FamilyRun(
        family, hosts, budget_share, concurrency, scored, tuple((overrides or {}).items()), score_lag
    )
    return measure(run_seeds(run, policies, [seed], 1, unspent), "hq_per_fetch")[seed]


def run_seeds(
    run: FamilyRun,
    policies: list[str],
    seeds: list[int],
    jobs: int = 1,
    unspent: dict[str, float] | None = None,
) -> dict[int, dict[str, dict[str, Outcome]]]:
    """{seed: {web: {policy: outcome}}}: every (seed, web, policy) replay, `jobs` at a time in their own
    processes (one replay each, so a seed whose web has a giant host does not hold up the others)."""
    tasks = [(seed, v.name, policy) for seed in seeds for v in FAMILIES[run.family] for policy in policies]
    if jobs <= 1:
        outcomes = [run.replay(*task) for task in tasks]
    else:
        with concurrent.futures.ProcessPoolExecutor(min(jobs, len(tasks))) as pool:
            outcomes = list(pool.map(run.replay, *zip(*tasks, strict=True)))
    results: dict[int, dict[str, dict[str, Outcome]]] = {seed: {} for seed in seeds}
    for (seed, web, policy), outcome in zip(tasks, outcomes, strict=True):
        row = results[seed].setdefault(web, {})
        if outcome is None:
            continue
        row[policy] = outcome
        if unspent is not None and outcome.spent < UNSPENT:
            prefix = f"seed {seed} " if run.labelled else ""
            unspent[f"{prefix}{web} {policy}"] = outcome.spent
    return results


def measure(
    per_seed: dict[int, dict[str, dict[str, Outcome]]], name: str
) -> dict[int, dict[str, dict[str, float]]]:
    """One of the outcomes' figures, {seed: {web: {policy: value}}}."""
    return {
        seed: {web: {policy: getattr(o, name) for policy, o in row.items()} for web, row in table.items()}
        for seed, table in per_seed.items()
    }


def seed_means(per_seed: dict[int, dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Each (web, policy)'s hq/fetch averaged over the seeds it ran on."""
    first = next(iter(per_seed.values()))
    return {
        web: {policy: statistics.fmean(run[web][policy] for run in per_seed.values()) for policy in row}
        for web, row in first.items()
    }


def ratio_interval(policy: list[float], base: list[float], level: float = 0.9) -> tuple[float, float] | None:
    """How far mean(policy) / mean(base) moves with the seeds drawn: a paired bootstrap interval over the
    seeds (scipy.stats.bootstrap, percentile, fixed generator: the same table for the same runs). None
    under three seeds or with a zero base."""
    if len(policy) < 3 or min(base) <= 0:
        return None
    import numpy as np
    from scipy.stats import bootstrap

    def ratio(p: Any, b: Any, axis: int) -> Any:
        return np.mean(p, axis=axis) / np.mean(b, axis=axis)

    found = bootstrap(
        (np.asarray(policy), np.asarray(base)), ratio, paired=True, vectorized=True,
        confidence_level=level, n_resamples=2000, method="percentile", rng=np.random.default_rng(0),
    )  # fmt: skip
    return float(found.confidence_interval.low), float(found.confidence_interval.high)


def format_family_table(
    results: dict[str, dict[str, float]],
    mode: str,
    per_seed: dict[int, dict[str, dict[str, float]]] | None = None,
) -> str:
    """One row per (web, policy): hq/fetch and its ratio to each baseline that ran. With `per_seed`,
    `results` are the seeds' means; from three seeds on a column gives the 90% bootstrap interval of the
    ratio to sample_deepen (`ratio_interval`: what the seeds drawn could have made of it), and a last one
    says on how many seeds the policy fell below sample_deepen on that web."""
    below = per_seed is not None and len(per_seed) > 1
    header = f"{'web':<16} {'policy':<14} {'hq/fetch':>8} " + "".join(f"{'x ' + b:>17}" for b in BASELINES)
    header += f"{'90% interval':>14}{'seeds < sample_deepen':>23}" if below else ""
    lines = ["", f"high-quality pages per fetch ({mode})", header]
    for web, row in results.items():
        for policy, value in row.items():
            ratios = "".join(f"{value / row[b]:>17.2f}" if row.get(b) else f"{'-':>17}" for b in BASELINES)
            line = f"{web:<16} {policy:<14} {value:8.3f} {ratios}"
            if below and per_seed is not None and "sample_deepen" in row:
                runs = [run[web] for run in per_seed.values()]
                fell = sum(run[policy] < run["sample_deepen"] for run in runs)
                bounds = None
                if policy != "sample_deepen":
                    bounds = ratio_interval([r[policy] for r in runs], [r["sample_deepen"] for r in runs])
                interval = "-" if bounds is None else f"{bounds[0]:.2f}-{bounds[1]:.2f}"
                line += f"{interval:>14}{f'{fell}/{len(runs)}':>23}"
            lines.append(line)
    return "\n".join(lines)


def clock_means(per_seed: dict[int, dict[str, dict[str, Outcome]]]) -> dict[str, dict[str, dict[str, float]]]:
    """{web: {policy: {figure: mean over the seeds}}} of the clock's figures and the share of the ceiling."""
    first = next(iter(per_seed.values()))
    means: dict[str, dict[str, dict[str, float]]] = {}
    for web, row in first.items():
        for policy in row:
            runs = [table[web][policy] for table in per_seed.values()]
            figures = {name: statistics.fmean(getattr(o, name) for o in runs) for name in CLOCK_FIELDS}
            figures["share_of_ceiling"] = statistics.fmean(o.hq_per_fetch / o.ceiling for o in runs)
            means.setdefault(web, {})[policy] = figures
    return means


def format_clock_table(clock: dict[str, dict[str, dict[str, float]]], mode: str) -> str:
    """One row per (web, policy): the ceiling, the policy's share of it, high-quality pages per hour and
    their ratio to sample_deepen's, the idle share, the pace of the budget's last 20% and the drain."""
    header = (
        f"{'web':<16} {'policy':<14} {'ceiling':>8} {'of ceiling':>11} {'hq/hour':>9} "
        f"{'x sample_deepen':>16} {'idle':>6} {'last 20% pace':>14} {'drain':>6}"
    )
    lines = ["", f"the clock and the ceiling ({mode})", header]
    for web, row in clock.items():
        base = row.get("sample_deepen", {}).get("hq_per_hour")
        for policy, f in row.items():
            ratio = f"{f['hq_per_hour'] / base:>16.2f}" if base else f"{'-':>16}"
            lines.append(
                f"{web:<16} {policy:<14} {f['ceiling']:8.3f} {f['share_of_ceiling']:11.2f} "
                f"{f['hq_per_hour']:9.0f} {ratio} {f['idle_share']:6.2f} {f['tail_rate']:14.2f} "
                f"{f['drain_share']:6.2f}"
            )
    return "\n".join(lines)


def cmd_bench_family(args: Any) -> int:
    policies = [p for p in args.policies.split(",") if p] if args.policies else list(FAMILY_POLICIES)
    hosts = args.hosts or FAMILY_HOSTS
    scores = "true labels" if args.truth_scores else "scored pages"
    lag = "" if args.score_lag is None else f", scores {args.score_lag} pages late"
    mode = f"replay, {scores}{lag}, {args.budget_share:.0%} budget"
    seeds = list(range(args.seed, args.seed + args.seeds))
    jobs = args.jobs or os.cpu_count() or 1
    unspent: dict[str, float] = {}
    run = FamilyRun(args.webs, hosts, args.budget_share, args.concurrency, not args.truth_scores,
                    score_lag=args.score_lag, labelled=len(seeds) > 1, min_delay=args.min_delay,
                    latency_s=args.latency,
                    keep_busy=KEEP_BUSY_DEFAULT if args.keep_busy is None else args.keep_busy)  # fmt: skip
    outcomes = run_seeds(run, policies, seeds, jobs, unspent)
    per_seed = measure(outcomes, "hq_per_fetch")
    results = seed_means(per_seed)
    span = f"seed {args.seed}" if len(seeds) == 1 else f"means over seeds {seeds[0]}-{seeds[-1]}"
    print(format_family_table(results, f"{mode}, {hosts} hosts per web, {span}", per_seed))
    clock = clock_means(outcomes)
    timing = f"min delay {args.min_delay:g} s, keep busy {run.keep_busy:g}"
    print(format_clock_table(clock, f"simulated, {args.concurrency} requests in flight, {timing}, {span}"))
    for name, share in unspent.items():
        print(f"{name}: ran out of URLs worth fetching after {share:.0%} of its budget")
    if args.json:
        saved = {
            "mean": results,
            "seeds": {str(seed): table for seed, table in per_seed.items()},
            "clock": clock,
        }
        Path(args.json).write_text(json.dumps(saved, indent=2) + "\n")
    return 0
