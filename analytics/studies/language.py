"""RQ2, the language confound: centrality vs each classifier's host medians, pooled and by language."""

from __future__ import annotations

import duckdb
import matplotlib.pyplot as plt
import numpy as np
import polars as pl

from analytics import db
from analytics.stats import spearman_ci
from analytics.study import Output, label, md_table, pages_view, ranks_view
from analytics.study_inputs import Inputs

DEFAULT_MIN_PAGES = 3  # the paper's language table uses hosts with n >= 3
MIN_STRATUM_HOSTS = 30  # languages with fewer hosts get no row of their own
ENGLISH = "en"


def host_medians_sql(scores: list[str], min_pages: int) -> str:
    """Per host with >= min_pages pages: primary language (most frequent), median of each score, HC and PR."""
    medians = ", ".join(f"median({db.ident(s)}) AS {db.ident(s)}" for s in scores)
    return f"""
        WITH h AS (
            SELECT host, {db.www_key_sql("host")} AS key, mode(language) AS language, count(*) AS pages,
                   {medians}
            FROM pages GROUP BY host HAVING count(*) >= {int(min_pages)}
        )
        SELECT h.*, CASE WHEN h.language = '{ENGLISH}' THEN 'English' ELSE 'non-English' END AS stratum,
               r.hc, r.pr
        FROM h LEFT JOIN ranks r ON r.key = h.key
    """


def correlations(con: duckdb.DuckDBPyConnection, scores: list[str]) -> pl.DataFrame:
    """Spearman of HC and PR with each score's host median: all hosts, English or not, each big language."""
    frames = []
    strata = (("'all'", "all hosts"), ("stratum", "stratum"), ("language", "language"))
    for score in scores:
        for centrality in ("hc", "pr"):
            for group, kind in strata:
                sql = f"""
                    WITH s AS (SELECT {group} AS stratum, {centrality} AS c, {db.ident(score)} AS q
                               FROM lang_hosts WHERE {centrality} IS NOT NULL)
                    SELECT r.stratum, r.n, r.rho, m.median_score
                    FROM ({db.spearman_sql("s", "c", "q", "stratum")}) r
                    JOIN (SELECT stratum, median(q) AS median_score FROM s GROUP BY stratum) m USING (stratum)
                """
                frame = (
                    con.sql(sql)
                    .pl()
                    .with_columns(
                        classifier=pl.lit(label(score)),
                        centrality=pl.lit(centrality.upper()),
                        split=pl.lit(kind),
                    )
                )
                frames.append(frame)
    table = pl.concat(frames).filter((pl.col("split") != "language") | (pl.col("n") >= MIN_STRATUM_HOSTS))
    cis = [
        spearman_ci(r, n) if r is not None else (None, None)
        for r, n in zip(table["rho"], table["n"], strict=True)
    ]
    table = table.with_columns(
        ci_low=pl.Series([c[0] for c in cis], dtype=pl.Float64),
        ci_high=pl.Series([c[1] for c in cis], dtype=pl.Float64),
    ).select("classifier", "centrality", "split", "stratum", "n", "rho", "ci_low", "ci_high", "median_score")
    split_order = pl.col("split").replace_strict(
        {"all hosts": 0, "stratum": 1, "language": 2}, return_dtype=pl.Int8
    )
    block = pl.col("i").min().over("classifier", "centrality")
    return table.with_row_index("i").sort(block, split_order, "stratum").drop("i")


def plot_correlations(table: pl.DataFrame, out: Output) -> str:
    sub = table.filter((pl.col("centrality") == "HC") & (pl.col("split") != "language"))
    classifiers = sub["classifier"].unique(maintain_order=True).to_list()
    strata = ["all", "English", "non-English"]
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    x = np.arange(len(classifiers))
    for i, stratum in enumerate(strata):
        values = [
            (
                sub.filter((pl.col("classifier") == c) & (pl.col("stratum") == stratum))["rho"].to_list()
                or [0.0]
            )[0]
            for c in classifiers
        ]
        ax.bar(x + (i - 1) * 0.27, [v or 0.0 for v in values], width=0.27, label=stratum)
    ax.axhline(0, color="grey", linewidth=1)
    ax.set_xticks(x, classifiers)
    ax.set_ylabel("Spearman(HC, host median score)")
    ax.set_title("Centrality vs quality, pooled and by host language")
    ax.legend(fontsize=8)
    return out.figure(fig, "language_correlations")


def plot_medians(table: pl.DataFrame, out: Output) -> str:
    sub = table.filter((pl.col("centrality") == "HC") & (pl.col("split") == "stratum"))
    classifiers = sub["classifier"].unique(maintain_order=True).to_list()
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    x = np.arange(len(classifiers))
    for i, stratum in enumerate(["English", "non-English"]):
        values = [
            (
                sub.filter((pl.col("classifier") == c) & (pl.col("stratum") == stratum))[
                    "median_score"
                ].to_list()
                or [0.0]
            )[0]
            for c in classifiers
        ]
        ax.bar(x + (i - 0.5) * 0.4, values, width=0.4, label=stratum)
    ax.set_xticks(x, classifiers)
    ax.set_ylabel("median of host median scores")
    ax.set_title("Host quality scores by language")
    ax.legend(fontsize=8)
    return out.figure(fig, "language_medians")


def run(
    con: duckdb.DuckDBPyConnection,
    inputs: Inputs,
    out: Output,
    scores: list[str] | None = None,
    min_pages: int = DEFAULT_MIN_PAGES,
) -> pl.DataFrame:
    score_cols = pages_view(con, inputs.need("pages", "--pages"), scores, language=True)
    ranks_view(con, inputs.need("ranks", "--ranks"))
    con.execute(f"CREATE OR REPLACE TEMP TABLE lang_hosts AS {host_medians_sql(score_cols, min_pages)}")
    hosts, in_graph = db.one_row(con, "SELECT count(*), count(hc) FROM lang_hosts")
    table = correlations(con, score_cols)
    con.execute("DROP TABLE IF EXISTS lang_hosts")
    out.table("language", table)
    images = [plot_correlations(table, out), plot_medians(table, out)]
    pooled = table.filter((pl.col("centrality") == "HC") & (pl.col("split") != "language"))
    wide = pooled.pivot(on="stratum", index="classifier", values="rho")
    med = pooled.filter(pl.col("split") == "stratum").pivot(
        on="stratum", index="classifier", values="median_score"
    )
    markdown = f"""## Is centrality a quality signal, or a language signal? (language split)

{hosts:,} hosts with >= {min_pages} pages ({in_graph:,} found in the graph; the others are left out). A
host's language is the most frequent language of its pages; its quality under each classifier is the median
page score. Spearman correlation of harmonic centrality with those medians, pooled and within each language
group (the paper: DCLM's pooled correlation is negative, -0.083, while positive within English hosts, +0.064,
because it scores non-English hosts higher and those are less central):

{md_table(wide)}

Median host score by language group:

{md_table(med)}

![Correlations by language]({images[0]})

![Scores by language]({images[1]})

All rows, HC and PR, per language with >= {MIN_STRATUM_HOSTS} hosts, with 95% intervals: `language.parquet`.
"""
    params = {"scores": score_cols, "min_pages": min_pages}
    out.finish(markdown, params, inputs, {"hosts": hosts, "in_graph": in_graph})
    return table
