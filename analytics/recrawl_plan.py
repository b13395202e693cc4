"""`hostcrawl recrawl plan`: which under-covered good hosts to recrawl, and how many pages each gets.

Sources: Common Crawl's host index with GneissWeb annotations (the coverage study's table, its definitions
of a hidden gem and of the missing high-quality pages), or a previous hostcrawl run's hosts.parquet (hosts
whose estimated density is high but which the budget left with pages still queued).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pyarrow.parquet as pq

from analytics import db, schema
from analytics.plan_budget import GuardReport, allocate
from analytics.plan_config import PlanConfig
from analytics.studies import coverage
from analytics.study_inputs import InputError, Inputs
from graph.duck import sql_string
from graph.ranks import PERCENTILE_COLUMNS

PLAN_FORMAT = "hostcrawl-recrawl-plan-v1"
GEM, UNDER_COVERED, UNDER_CRAWLED = "gem", "under-covered", "under-crawled last run"
# Columns a plan must have: what `crawl --plan` reads.
PLAN_COLUMNS = (
    schema.Column("host", schema.STRING, "string"),
    schema.Column("seed_url", schema.STRING, "string"),
    schema.Column("reason", schema.STRING, "string"),
    schema.Column("missing_hq", schema.NUMBER, "double"),
    schema.Column("budget", schema.INTEGER, "int64"),
    schema.Column("expected_hq", schema.NUMBER, "double"),
    schema.Column("density", schema.NUMBER, "double"),
    schema.Column("hc_percentile", schema.NUMBER, "double"),
    schema.Column("pr_percentile", schema.NUMBER, "double"),
    schema.Column("tld", schema.STRING, "string"),
    schema.Column("language", schema.STRING, "string"),
)
# Hosts that may be chosen: coverage below the median and density at least the median (gems among them).
LEFT_SHALLOW = ("new", "sampling", "scored", "deepening")  # run states with pages still queued
RUN_HOST_COLUMNS = (
    schema.Column("host", schema.STRING, "string"),
    schema.Column("fetched", schema.INTEGER, "int64"),
    schema.Column("density_mean", schema.FLOAT, "double"),
    schema.Column("state", schema.STRING, "string"),
    schema.Column("queued", schema.INTEGER, "int64"),  # URLs the run still had queued for the host
)


@dataclass(slots=True)
class Plan:
    frame: pl.DataFrame
    summary: dict[str, Any]


HOST_FROM_SURT = "array_to_string(list_reverse(string_split(host, ',')), '.')"


def _index_candidates(con: duckdb.DuckDBPyConnection, inputs: Inputs, cfg: PlanConfig) -> pl.DataFrame:
    """Under-covered hosts of the host index with the coverage study's missing-pages estimate."""
    extra = ("hcrank", "prank", "fetch_200_lote_pct", "language")
    host_index, annotations, crawl = coverage.sources(inputs, cfg.quality, cfg.crawl, extra)
    names = set(schema.columns_of(schema.parquet_files(inputs.need("host_index", "--host-index"))[0]))
    language = (
        "h.language"
        if "language" in names
        else "CASE WHEN h.fetch_200_lote_pct >= 50 THEN 'non-en' ELSE 'en' END"
        if "fetch_200_lote_pct" in names
        else "NULL"
    )
    hc = "h.hcrank::DOUBLE" if "hcrank" in names else "NULL::DOUBLE"
    pr = "h.prank::DOUBLE" if "prank" in names else "NULL::DOUBLE"
    table = coverage.coverage_table_sql(
        host_index, annotations, cfg.quality, crawl, f"{language} AS language, {hc} AS hc, {pr} AS pr"
    )
    try:
        con.execute(f"CREATE OR REPLACE TEMP TABLE cov AS {table}")
    except duckdb.OutOfMemoryException:
        raise  # not the expression's fault: the caller names the memory limit
    except duckdb.Error as exc:
        raise InputError(f"--quality {cfg.quality!r} cannot be computed: {exc}") from None
    median_cov, gem_density, median_density = db.one_row(
        con,
        f"""SELECT quantile_cont(coverage, 0.5), quantile_cont(density, {coverage.GEM_QUALITY_QUANTILE}),
                   quantile_cont(density, 0.5) FROM cov""",
    )
    if median_cov is None:
        raise InputError("no host has both a capture (nutch_fetched > 0) and an annotation: nothing to plan")
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE candidates AS
        SELECT {HOST_FROM_SURT} AS host,
               CASE WHEN {coverage.gem_sql(median_cov, gem_density)} THEN '{GEM}' ELSE '{UNDER_COVERED}' END
                   AS reason,
               ({coverage.MISSED_HQ})::DOUBLE AS missing_hq, unfetched::BIGINT AS unfetched,
               density, coverage::DOUBLE AS coverage, hc, pr,
               coalesce(tld, '') AS tld, coalesce(language, '') AS language
        FROM cov
        WHERE coverage < {float(median_cov)} AND density >= {float(median_density)} AND unfetched > 0
        """
    )
    if inputs.ranks is None:  # the host index's own hcrank / prank, as percentiles among its hosts
        frame = con.sql("SELECT * FROM candidates").pl()
        frame = frame.with_columns(
            hc_percentile=_percentiles(con, "SELECT hc FROM cov WHERE hc IS NOT NULL", frame["hc"]),
            pr_percentile=_percentiles(con, "SELECT pr FROM cov WHERE pr IS NOT NULL", frame["pr"]),
        )
    elif _has_own_percentiles(inputs.ranks):
        con.execute("DROP TABLE cov")  # its memory is the join's now
        frame = _with_ranks(con, inputs.ranks)
    else:
        frame = _with_rank_values(con, inputs.ranks, con.sql("SELECT * FROM candidates").pl())
    con.execute("DROP TABLE IF EXISTS cov")
    con.execute("DROP TABLE candidates")
    cfg.crawl = crawl
    return frame.drop("hc", "pr").with_columns(
        pl.lit(float(median_cov)).alias("_median_coverage"), pl.lit(float(gem_density)).alias("_gem_density")
    )


def _percentiles(con: duckdb.DuckDBPyConnection, sql: str, values: pl.Series) -> pl.Series:
    """Share of all rows of `sql` at or below each value (one sort and a binary search, not a window).
    The population (the ranks file: 100M rows at Common Crawl's size) is sorted in place, and the values
    are looked up in sorted order, so the searches walk the population once: in host order each step of
    each search was a cache miss (12.6M values in 100M: 26 s, against 4 s sorted, argsort included)."""
    column = con.execute(sql).fetchnumpy()
    population = np.asarray(next(iter(column.values())), dtype=np.float64)
    population.sort()
    x = values.cast(pl.Float64).fill_null(np.nan).to_numpy()
    order = np.argsort(x, kind="stable")
    share = np.empty(len(x))
    share[order] = np.searchsorted(population, x[order], side="right") / max(len(population), 1)
    return pl.Series(np.where(np.isnan(x), np.nan, share)).fill_nan(None)


def _has_own_percentiles(ranks: Path) -> bool:
    """The ranks parquet carries each host's percentile in its release (`graph ranks`, `study synth`)."""
    files = schema.check_columns(ranks, schema.RANKS_COLUMNS)
    return set(PERCENTILE_COLUMNS) <= set(schema.columns_of(files[0]))


def _with_ranks(con: duckdb.DuckDBPyConnection, ranks: Path) -> pl.DataFrame:
    """The `candidates` table with the HC/PR percentiles of the ranks parquet's most central spelling of
    each host (joined on the www-insensitive name), as the parquet has them: each host's position in its
    whole release over the release's host count, what the crawl's priors read.

    The join stays in DuckDB, under its memory limit, and only the candidates come out. At 100M ranks rows
    (benchmarks/studies_at_scale.py) grouping every ranks row by host key and sorting each column in numpy
    took 110 s and an 8.4 GB peak; one hash join probed by the ranks rows takes a third of that."""
    files = schema.parquet_files(ranks)
    return con.sql(
        f"""WITH k AS (SELECT host, {db.www_key_sql("host")} AS key FROM candidates),
                 r AS (SELECT {db.www_key_sql("host")} AS key, hc_percentile, pr_percentile
                       FROM {db.parquet_source(files)}),
                 p AS (SELECT k.host, max(r.hc_percentile)::DOUBLE AS hc_percentile,
                              max(r.pr_percentile)::DOUBLE AS pr_percentile
                       FROM k JOIN r ON r.key = k.key GROUP BY k.host)
            SELECT c.*, p.hc_percentile, p.pr_percentile FROM candidates c LEFT JOIN p ON p.host = c.host"""
    ).pl()


def _with_rank_values(con: duckdb.DuckDBPyConnection, ranks: Path, frame: pl.DataFrame) -> pl.DataFrame:
    """HC/PR percentiles from a ranks file without its own (only host, hc_val, pr_val): each value's share
    of the file's hosts, joined on the www-insensitive host name."""
    from analytics.study import ranks_view

    ranks_view(con, ranks)
    con.execute("CREATE OR REPLACE TEMP TABLE plan_ranks AS SELECT * FROM ranks")  # the view's work, once
    con.register("plan_hosts", frame.select("host").to_arrow())
    joined = con.sql(
        f"""SELECT c.host, r.hc AS rank_hc, r.pr AS rank_pr FROM plan_hosts c
            LEFT JOIN plan_ranks r ON r.key = {db.www_key_sql("c.host")}"""
    ).pl()
    con.unregister("plan_hosts")
    frame = frame.join(joined, on="host", how="left")
    frame = frame.with_columns(
        hc_percentile=_percentiles(con, "SELECT hc FROM plan_ranks WHERE hc IS NOT NULL", frame["rank_hc"]),
        pr_percentile=_percentiles(con, "SELECT pr FROM plan_ranks WHERE pr IS NOT NULL", frame["rank_pr"]),
    ).drop("rank_hc", "rank_pr")
    con.execute("DROP TABLE plan_ranks")
    return frame


def _run_candidates(con: duckdb.DuckDBPyConnection, hosts: Path) -> pl.DataFrame:
    """A previous run: hosts with pages still queued and an estimated density at least the median."""
    files = schema.check_columns(hosts, RUN_HOST_COLUMNS)
    source = db.parquet_source(files)
    frame = con.sql(
        f"""
        WITH run AS (
            SELECT host, fetched, density_mean AS density, state, queued AS unfetched,
                   language FROM {source} WHERE density_mean IS NOT NULL
        ), m AS (SELECT quantile_cont(density, 0.5) AS median FROM run)
        SELECT host, '{UNDER_CRAWLED}' AS reason, ({coverage.MISSED_HQ})::DOUBLE AS missing_hq,
               unfetched::BIGINT AS unfetched, density,
               (100.0 * fetched / nullif(fetched + unfetched, 0))::DOUBLE AS coverage,
               NULL::DOUBLE AS hc_percentile, NULL::DOUBLE AS pr_percentile,
               {db.tld_sql("host")} AS tld, coalesce(language, '') AS language
        FROM run, m
        WHERE state IN ({", ".join(sql_string(s) for s in LEFT_SHALLOW)}) AND density >= m.median
              AND unfetched > 0
        """
    ).pl()
    frame = frame.with_columns(
        pl.lit(None, pl.Float64).alias("_median_coverage"), pl.lit(None, pl.Float64).alias("_gem_density")
    )
    return frame.join(_run_origins(con, hosts), on="host", how="left")


def _run_origins(con: duckdb.DuckDBPyConnection, hosts: Path) -> pl.DataFrame:
    """Each host's origin (scheme://host[:port]) as the previous run fetched it, from its pages.parquet
    beside hosts.parquet: an http crawl is planned as http, not as the --scheme default."""
    pages = hosts.parent / "pages.parquet" if hosts.is_file() else hosts / "pages.parquet"
    if not pages.is_file():
        return pl.DataFrame(schema={"host": pl.String, "origin": pl.String})
    return con.sql(
        f"""SELECT host, mode(regexp_extract(url, '^(https?://[^/?#]+)', 1)) AS origin
            FROM read_parquet({sql_string(str(pages))}) WHERE status BETWEEN 200 AND 399 GROUP BY host"""
    ).pl()


def _seed_origin(candidates: pl.DataFrame, scheme: str | None) -> pl.Expr:
    """--scheme when given; else the previous run's origin of the host, else https."""
    default = pl.lit(f"{scheme or 'https'}://") + pl.col("host")
    if scheme is not None or "origin" not in candidates.columns:
        return default
    return pl.coalesce(pl.col("origin"), default)


def build_plan(
    inputs: Inputs, cfg: PlanConfig, previous: Path | None = None, spill: Path | None = None
) -> Plan:
    """Choose hosts and give each its budget; raises InputError (nothing written) when there is no plan.
    DuckDB works under its memory limit (analytics.db) and spills to `spill`, the caller's to remove."""
    cfg.check()
    con = db.connect(spill)
    try:
        if previous is not None:
            candidates = _run_candidates(con, previous)
            source = str(previous.resolve())
        else:
            candidates = _index_candidates(con, inputs, cfg)
            source = str(inputs.host_index)
    finally:
        con.close()
    if not candidates.height:
        raise InputError(
            f"{source}: no under-covered host with an above-median density: the plan would be empty"
        )
    candidates = candidates.sort(["missing_hq", "host"], descending=[True, False])
    groups: dict[str, tuple[np.ndarray, float]] = {}
    labels: dict[str, list[str]] = {}
    for column, share in (("tld", cfg.max_tld_share), ("language", cfg.max_language_share)):
        values = candidates[column].unique(maintain_order=True)
        codes = candidates[column].replace_strict(values, pl.int_range(len(values), eager=True))
        groups[column] = (codes.to_numpy().astype(np.int64), share)
        labels[column] = values.to_list()
    cap = np.minimum(candidates["unfetched"].to_numpy(), cfg.per_host_cap)
    pages, guard = allocate(candidates["missing_hq"].to_numpy(), cap, cfg.budget, groups)
    plan = (
        candidates.with_columns(budget=pl.Series(pages, dtype=pl.Int64))
        .filter(pl.col("budget") > 0)
        .with_columns(
            seed_url=_seed_origin(candidates, cfg.scheme) + pl.lit("/"),
            expected_hq=pl.col("budget") * pl.col("density"),
        )
    )
    if not plan.height:
        raise InputError(f"{source}: no host got a page of the budget: the plan would be empty")
    source_run = str(previous.resolve().parent) if previous is not None else None
    summary = _summary(plan, cfg, guard, labels, source, source_run, candidates.height)
    columns = [c.name for c in PLAN_COLUMNS] + ["unfetched", "coverage"]
    return Plan(plan.select(columns), summary)


def _summary(
    plan: pl.DataFrame,
    cfg: PlanConfig,
    guard: GuardReport,
    labels: dict[str, list[str]],
    source: str,
    source_run: str | None,
    candidates: int,
) -> dict[str, Any]:
    def named(column: str, codes: list[str]) -> list[str]:
        return [labels[column][int(c)] for c in codes]

    return {
        "format": PLAN_FORMAT,
        "source": source,
        # the run directory a plan from `--previous RUN` was made from: `crawl --plan` revisits its pages
        "source_run": source_run,
        "config": asdict(cfg),
        "candidates": candidates,
        "hosts": plan.height,
        "budget_given": int(plan["budget"].sum()),
        "budget_unspent": cfg.budget - int(plan["budget"].sum()),
        "missing_hq": float(plan["missing_hq"].sum()),
        "expected_hq": float(plan["expected_hq"].sum()),
        "reasons": dict(plan.group_by("reason").len().sort("reason").iter_rows()),
        "density_estimate_from": cfg.quality,
        "median_coverage": plan["_median_coverage"].first() if "_median_coverage" in plan.columns else None,
        "capped_by_guard": {k: named(k, v) for k, v in guard.capped.items()},
        "shares": {
            k: {labels[k][int(g)]: round(v, 4) for g, v in s.items()} for k, s in guard.shares.items()
        },
    }


def write_plan(plan: Plan, out: Path) -> Path:
    """plan.parquet (the summary in its metadata) and a plan.json beside it; written whole or not at all."""
    out.parent.mkdir(parents=True, exist_ok=True)
    table = plan.frame.to_arrow()
    meta = {b"hostcrawl_plan": json.dumps(plan.summary, default=str).encode()}
    table = table.replace_schema_metadata(meta)
    tmp = out.with_name(out.name + ".tmp")
    pq.write_table(table, tmp, compression="zstd")
    side = out.with_suffix(".json")
    side_tmp = side.with_name(side.name + ".tmp")
    side_tmp.write_text(json.dumps(plan.summary, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, out)
    os.replace(side_tmp, side)
    return out
