"""RQ2: which hosts to crawl; graph-centrality orders vs random, the current allocation and the oracle."""

from __future__ import annotations

import duckdb
import matplotlib.pyplot as plt
import numpy as np
import polars as pl
from matplotlib.ticker import ScalarFormatter

from analytics import simulate as sim
from analytics.hosttable import HostArrays, load_hosts
from analytics.study import Output, label, md_table, pages_view
from analytics.study_inputs import DEFAULT_SEED, DEFAULT_THRESHOLD, Inputs

DEFAULT_BUDGETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
REFERENCE_BUDGET = 0.1  # the paper's Table 3 fixes the budget at 10% of pages


def orderings(hosts: HostArrays, seed: int) -> dict[str, list[np.ndarray]]:
    """Host orders per policy; random has several, averaged later."""
    rng = np.random.default_rng(seed)
    density = np.divide(hosts.hq, hosts.n, out=np.zeros(len(hosts.n)), where=hosts.n > 0)
    result = {"random": [rng.permutation(len(hosts.n)) for _ in range(sim.RANDOM_REPEATS)]}
    if hosts.hc is not None:
        result["HC"] = [sim.order_by(hosts.hc, hosts.tiebreak)]
    if hosts.pr is not None:
        result["PR"] = [sim.order_by(hosts.pr, hosts.tiebreak)]
    if hosts.current is not None:
        result["current"] = [sim.order_by(hosts.current, hosts.tiebreak)]
    result["oracle"] = [sim.order_by(density, hosts.tiebreak)]
    return result


def yield_table(hosts: HostArrays, fractions: tuple[float, ...], seed: int) -> pl.DataFrame:
    budgets = sim.budget_pages(int(hosts.n.sum()), list(fractions))
    measured: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for policy, orders in orderings(hosts, seed).items():
        runs = [sim.crawl_in_order(hosts.n, hosts.hq, o, budgets) for o in orders]
        covered = [sim.tlds_covered(o, hosts.tld, r.hosts_touched) for o, r in zip(orders, runs, strict=True)]
        measured[policy] = (np.mean([r.hq for r in runs], axis=0), np.mean(covered, axis=0))
    random_hq, random_tlds = measured["random"]
    rows = []
    for policy, (hq, tlds) in measured.items():
        for i, fraction in enumerate(fractions):
            rows.append(
                {
                    "policy": policy,
                    "budget_fraction": fraction,
                    "budget_pages": int(budgets[i]),
                    "hq_pages": float(hq[i]),
                    "hq_share": float(hq[i] / budgets[i]) if budgets[i] else float("nan"),
                    "vs_random": float(hq[i] / random_hq[i]) if random_hq[i] else float("nan"),
                    "tlds": float(tlds[i]),
                    "tlds_vs_random": float(tlds[i] / random_tlds[i]) if random_tlds[i] else 0.0,
                }
            )
    return pl.DataFrame(rows)


def plot(table: pl.DataFrame, out: Output, title: str) -> str:
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for name, sub in table.group_by("policy", maintain_order=True):
        ax.plot(
            [100 * f for f in sub["budget_fraction"]],
            sub["vs_random"].to_list(),
            marker="o",
            ms=3,
            label=str(name[0]),
        )
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.set_yscale("log")
    ax.set_xlabel("budget (% of all pages)")
    ax.set_ylabel("high-quality pages, multiple of random")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return out.figure(fig, "yield")


def run(
    con: duckdb.DuckDBPyConnection,
    inputs: Inputs,
    out: Output,
    scores: list[str] | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    budgets: tuple[float, ...] = DEFAULT_BUDGETS,
    seed: int = DEFAULT_SEED,
) -> pl.DataFrame:
    score_cols = pages_view(con, inputs.need("pages", "--pages"), scores, language=False)
    tables = []
    sources = ""
    for score in score_cols:
        hosts = load_hosts(con, inputs, score, threshold, 1, seed)
        tables.append(yield_table(hosts, budgets, seed).with_columns(classifier=pl.lit(label(score))))
        missing = int(np.isnan(hosts.hc).sum()) if hosts.hc is not None else len(hosts.n)
        sources = hosts.current_source
    table = pl.concat(tables)
    out.table("yield", table)
    primary = label(score_cols[0])
    image = plot(table.filter(pl.col("classifier") == primary), out, f"Crawl yield ({primary})")
    ref = min(budgets, key=lambda b: abs(b - REFERENCE_BUDGET))
    at_ref = table.filter(pl.col("budget_fraction") == ref)
    wide = at_ref.pivot(on="policy", index="classifier", values="vs_random")
    tld = at_ref.filter(pl.col("classifier") == primary).select("policy", "tlds", "tlds_vs_random")
    notes = []
    if "HC" not in table["policy"]:
        notes.append("HC and PR orderings need --ranks.")
    else:
        notes.append(
            f"{missing:,} of {len(hosts.n):,} hosts are not in the graph and come last in HC/PR order."
        )
    notes.append(
        f"current = {sources}." if sources else "No current allocation known (--hosts or --host-index)."
    )
    markdown = f"""## Which hosts to crawl? (crawl-yield simulation)

Hosts are crawled fully in the order each policy defines until the budget is spent (random: mean of
{sim.RANDOM_REPEATS} orders; oracle: true quality density). A page is high quality when its score exceeds
{threshold:g}. {" ".join(notes)}

High-quality pages at a {100 * ref:g}% budget, as a multiple of random (paper: HC 0.7-1.8x, oracle 4.0-8.0x):

{md_table(wide)}

TLDs covered at that budget ({primary}; the paper finds HC ordering roughly halves them):

{md_table(tld, digits=1)}

![Crawl yield]({image})
"""
    params = {"scores": score_cols, "threshold": threshold, "budgets": list(budgets), "seed": seed}
    summary = dict(at_ref.filter(pl.col("classifier") == primary).select("policy", "vs_random").iter_rows())
    out.finish(markdown, params, inputs, {"vs_random_at_reference_budget": summary})
    return table
