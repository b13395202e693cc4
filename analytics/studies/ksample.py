"""RQ3 part one: does the quality density of k sampled pages predict the density of the host's other pages?"""

from __future__ import annotations

import duckdb
import matplotlib.pyplot as plt
import polars as pl

from analytics import db
from analytics.stats import spearman_ci
from analytics.study import Output, label, md_table, pages_view
from analytics.study_inputs import DEFAULT_SEED, DEFAULT_THRESHOLD, Inputs

DEFAULT_MAX_K = 20
DEFAULT_MIN_REST = 1  # the paper: hosts with >= 10 pages so that k reaches 9, i.e. at least one page left


def positions_sql(score: str, threshold: float, seed: int) -> str:
    """Pages in a seeded random order per host (the order a crawler would sample them), with cumulative HQ."""
    x = db.ident(score)
    return f"""
        WITH p AS (
            SELECT host, ({x} > {float(threshold)})::INTEGER AS hq, hash(url, {int(seed)}) AS draw
            FROM pages WHERE {x} IS NOT NULL AND NOT isnan({x})
        )
        SELECT host,
               row_number() OVER w AS pos,
               sum(hq) OVER (w ROWS UNBOUNDED PRECEDING) AS cum_hq,
               count(*) OVER (PARTITION BY host) AS n,
               sum(hq) OVER (PARTITION BY host) AS total_hq
        FROM p WINDOW w AS (PARTITION BY host ORDER BY draw, hq)
    """


def samples_sql(positions: str, max_k: int, min_rest: int) -> str:
    """One row per (k, host): density of the first k pages and of the remaining n - k (n >= k + min_rest)."""
    return f"""
        SELECT pos AS k, host, cum_hq / pos AS sample_density, (total_hq - cum_hq) / (n - pos) AS rest_density
        FROM {positions} WHERE pos <= {int(max_k)} AND n >= pos + {int(min_rest)}
    """


def curve(
    con: duckdb.DuckDBPyConnection, score: str, threshold: float, seed: int, max_k: int, min_rest: int
) -> pl.DataFrame:
    con.execute(f"CREATE OR REPLACE TEMP TABLE ks_pos AS {positions_sql(score, threshold, seed)}")
    con.execute(f"CREATE OR REPLACE TEMP TABLE ks_samples AS {samples_sql('ks_pos', max_k, min_rest)}")
    frame = con.sql(
        db.spearman_sql("ks_samples", "sample_density", "rest_density", group="k") + " ORDER BY k"
    ).pl()
    con.execute("DROP TABLE IF EXISTS ks_pos")
    con.execute("DROP TABLE IF EXISTS ks_samples")
    lows, highs = zip(
        *(spearman_ci(r, n) for r, n in zip(frame["rho"], frame["n"], strict=True)), strict=True
    )
    return frame.rename({"n": "hosts"}).with_columns(
        classifier=pl.lit(label(score)), ci_low=pl.Series(lows), ci_high=pl.Series(highs)
    )


def plot(table: pl.DataFrame, out: Output) -> str:
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for name, sub in table.group_by("classifier", maintain_order=True):
        ks = sub["k"].to_list()
        line = ax.plot(ks, sub["rho"].to_list(), marker="o", ms=3, label=str(name[0]))
        ax.fill_between(
            ks, sub["ci_low"].to_list(), sub["ci_high"].to_list(), alpha=0.2, color=line[0].get_color()
        )
    ax.set_xlabel("pages sampled per host (k)")
    ax.set_ylabel("Spearman: sample vs rest of host")
    ax.set_ylim(0, 1)
    ax.set_title("How well a k-page sample predicts a host")
    ax.legend(fontsize=8)
    return out.figure(fig, "ksample")


def run(
    con: duckdb.DuckDBPyConnection,
    inputs: Inputs,
    out: Output,
    scores: list[str] | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    max_k: int = DEFAULT_MAX_K,
    min_rest: int = DEFAULT_MIN_REST,
    seed: int = DEFAULT_SEED,
) -> pl.DataFrame:
    score_cols = pages_view(con, inputs.need("pages", "--pages"), scores, language=False)
    table = pl.concat([curve(con, s, threshold, seed, max_k, min_rest) for s in score_cols])
    table = table.select("classifier", "k", "hosts", "rho", "ci_low", "ci_high")
    out.table("ksample", table)
    image = plot(table, out)
    at = {k: dict(table.filter(pl.col("k") == k).select("classifier", "rho").iter_rows()) for k in (3, 5)}
    primary = label(score_cols[0])
    k3 = at[3].get(primary, float("nan"))
    markdown = f"""## Does a small sample predict a host? (k-sample curve)

For each k, hosts with at least k + {min_rest} scored pages; the k pages a crawler would sample (a seeded
random order per host) give a sample quality density (share of pages scoring above {threshold:g}), the
host's other pages the rest density. The curve is their Spearman correlation over hosts, with 95% Fisher-z
intervals.

{primary}: rho = {k3:.3f} at k = 3 and {at[5].get(primary, float("nan")):.3f} at k = 5 (paper, FineWeb-Edu:
0.53 at k = 3, 0.57 at k = 5, plateau near k = 15-20).

{md_table(table.filter(pl.col("k").is_in([1, 2, 3, 5, 10, 15, 20])))}

![k-sample curve]({image})
"""
    params = {
        "scores": score_cols,
        "threshold": threshold,
        "max_k": max_k,
        "min_rest": min_rest,
        "seed": seed,
    }
    out.finish(markdown, params, inputs, {"rho_k3": at[3], "rho_k5": at[5]})
    return table
