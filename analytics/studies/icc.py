"""RQ1: how much of the variance of page scores lies between hosts (ICC1), and what that caps."""

from __future__ import annotations

from dataclasses import asdict

import duckdb
import matplotlib.pyplot as plt
import polars as pl

from analytics import db
from analytics.stats import correlation_ceiling, icc1_from_sums, spearman_brown
from analytics.study import Output, label, md_table, pages_view
from analytics.study_inputs import Inputs

DEFAULT_MIN_PAGES = (3, 5, 10)


def host_groups_sql(score: str) -> str:
    """Per host: pages with a score, their mean, and their within-host sum of squares."""
    x = db.ident(score)
    return f"""
        SELECT host, count({x}) AS n, avg({x}) AS mean, var_pop({x}) * count({x}) AS ss
        FROM pages WHERE {x} IS NOT NULL AND NOT isnan({x}) GROUP BY host
    """


def anova_sums_sql(groups: str, min_pages: int) -> str:
    """One-way ANOVA sums over hosts with at least `min_pages` scored pages."""
    return f"""
        WITH g AS (SELECT * FROM {groups} WHERE n >= {int(min_pages)}),
        grand AS (SELECT sum(n * mean) / sum(n) AS mu FROM g)
        SELECT count(*) AS groups, coalesce(sum(n), 0) AS observations,
               coalesce(sum(n * (mean - mu) * (mean - mu)), 0) AS ss_between,
               coalesce(sum(ss), 0) AS ss_within, coalesce(sum(n * n), 0) AS sum_n2
        FROM g, grand
    """


def icc_table(con: duckdb.DuckDBPyConnection, scores: list[str], min_pages: tuple[int, ...]) -> pl.DataFrame:
    rows = []
    for score in scores:
        con.execute(f"CREATE OR REPLACE TEMP TABLE icc_groups AS {host_groups_sql(score)}")
        for n_min in min_pages:
            groups, obs, ssb, ssw, sum_n2 = db.one_row(con, anova_sums_sql("icc_groups", n_min))
            result = icc1_from_sums(int(groups), int(obs), float(ssb), float(ssw), float(sum_n2))
            reliability = spearman_brown(result.icc1, result.mean_group_size)
            rows.append(
                {
                    "classifier": label(score),
                    "min_pages": n_min,
                    **asdict(result),
                    "reliability": reliability,
                    "correlation_ceiling": correlation_ceiling(reliability),
                }
            )
    con.execute("DROP TABLE IF EXISTS icc_groups")
    return pl.DataFrame(rows).rename({"groups": "hosts", "observations": "pages"})


def plot(table: pl.DataFrame, out: Output, min_pages: int) -> str:
    sub = table.filter(pl.col("min_pages") == min_pages)
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    x = list(range(sub.height))
    icc = sub["icc1"].to_list()
    err = [
        [i - lo for i, lo in zip(icc, sub["ci_low"], strict=True)],
        [hi - i for i, hi in zip(icc, sub["ci_high"], strict=True)],
    ]
    ax.bar(x, icc, yerr=err, color="#4c72b0", capsize=4, label="ICC1 (95% CI)")
    ax.scatter(x, sub["reliability"].to_list(), color="#c44e52", zorder=3, label="Spearman-Brown reliability")
    ax.set_xticks(x, sub["classifier"].to_list())
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of score variance between hosts")
    ax.set_title(f"ICC1 per classifier (hosts with >= {min_pages} pages)")
    ax.legend(loc="upper right", fontsize=8)
    return out.figure(fig, "icc")


def run(
    con: duckdb.DuckDBPyConnection,
    inputs: Inputs,
    out: Output,
    scores: list[str] | None = None,
    min_pages: tuple[int, ...] = DEFAULT_MIN_PAGES,
) -> pl.DataFrame:
    score_cols = pages_view(con, inputs.need("pages", "--pages"), scores, language=False)
    table = icc_table(con, score_cols, min_pages)
    out.table("icc", table)
    image = plot(table, out, min_pages[0])
    shown = table.select(
        "classifier",
        "min_pages",
        "hosts",
        "pages",
        "mean_group_size",
        "icc1",
        "ci_low",
        "ci_high",
        "reliability",
        "correlation_ceiling",
    )
    first = table.filter(pl.col("min_pages") == min_pages[0])
    icc_range = f"{min(first['icc1'].to_list()):.3f}-{max(first['icc1'].to_list()):.3f}"
    markdown = f"""## Is quality a host property? (ICC1)

ICC1 is the share of each classifier's per-page score variance that lies between hosts (Shrout-Fleiss one-way
random effects, unequal host sizes via the ANOVA's effective group size k0). 1 means a host's pages all score
alike, 0 that the host says nothing about a page. The Spearman-Brown reliability of a host mean over the mean
observed pages per host, m ICC / (1 + (m - 1) ICC), caps any host-level correlation at about its square root.

ICC1 ranges {icc_range} over {first.height} classifier(s) (hosts with >= {min_pages[0]} pages); the paper
reports 0.43-0.62 over ten classifiers.

{md_table(shown)}

![ICC1 per classifier]({image})
"""
    params = {"scores": score_cols, "min_pages": list(min_pages)}
    out.finish(markdown, params, inputs, {"icc1": dict(zip(first["classifier"], first["icc1"], strict=True))})
    return table
