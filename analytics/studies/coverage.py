"""RQ4: is Common Crawl's per-host coverage aligned with quality, and where are the uncrawled good pages?"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import polars as pl

from analytics import db, schema
from analytics.stats import spearman_ci
from analytics.studies import coverage_plots as plots
from analytics.study import Output, md_table
from analytics.study_inputs import DEFAULT_QUALITY, InputError, Inputs
from graph.duck import sql_string

GEM_QUALITY_QUANTILE = 0.9  # hidden gems: top-decile quality density ...
LOW_COVERAGE = 20  # ... and the paper's "crawled below 20%" share of the missed pages
TOP_TLDS = 20
CRAWL_RE = re.compile(r"crawl=([^/\\]+)")


def crawls_in(files: list[Path]) -> list[str]:
    return sorted({m.group(1) for f in files if (m := CRAWL_RE.search(str(f)))})


# The one definition of the estimated uncrawled high-quality pages of a host (the recrawl plan uses it too):
# its unfetched URLs are assumed as good as its fetched ones.
MISSED_HQ = "unfetched * density"


def gem_sql(median_coverage: float, gem_density: float) -> str:
    """The one definition of a hidden gem, as a condition over a coverage table's row."""
    return f"coverage < {float(median_coverage)} AND density >= {float(gem_density)}"


def coverage_table_sql(
    host_index: str, annotations: str, quality: str, crawl: str | None, extra: str = ""
) -> str:
    """One row per crawled, annotated host: coverage (nutch_fetched_pct), uncrawled URLs, quality density.

    `extra` adds select expressions over `h` (host index) and `a` (annotations), e.g. for the recrawl plan."""
    crawl_join = " AND a.crawl = h.crawl" if crawl else ""
    crawl_filter = f" AND h.crawl = {sql_string(crawl)}" if crawl else ""
    more = f", {extra}" if extra else ""
    return f"""
        SELECT h.surt_host_name AS host, h.url_host_tld AS tld, h.nutch_fetched_pct::INTEGER AS coverage,
               h.nutch_unfetched::BIGINT AS unfetched, ({quality})::DOUBLE AS density{more}
        FROM {host_index} h JOIN {annotations} a ON a.surt_host_name = h.surt_host_name{crawl_join}
        WHERE h.nutch_fetched > 0{crawl_filter} AND ({quality}) IS NOT NULL
    """


def bins_sql(table: str) -> str:
    """Quality by coverage decile bin, and each bin's share of hosts and of the missed high-quality pages."""
    return f"""
        WITH b AS (
            SELECT least(coverage // 10, 9) AS bin, density, {MISSED_HQ} AS missed FROM {table}
        )
        SELECT (bin * 10)::VARCHAR || '-' || CASE WHEN bin = 9 THEN '100' ELSE (bin * 10 + 9)::VARCHAR END
                   AS coverage_bin,
               count(*) AS hosts, count(*) / sum(count(*)) OVER () AS host_share,
               quantile_cont(density, 0.5) AS median_density, quantile_cont(density, 0.25) AS p25_density,
               quantile_cont(density, 0.75) AS p75_density, avg(density) AS mean_density,
               sum(missed) AS missed_hq, sum(missed) / nullif(sum(sum(missed)) OVER (), 0) AS missed_share
        FROM b GROUP BY bin ORDER BY bin
    """


def thresholds_sql(table: str) -> str:
    return f"""SELECT quantile_cont(coverage, 0.5) AS median_coverage,
                      quantile_cont(density, {GEM_QUALITY_QUANTILE}) AS gem_density FROM {table}"""


def gems_sql(table: str, median_coverage: float, gem_density: float) -> str:
    """Hidden gems: coverage below the median, density in the top decile; biggest missed budget first."""
    return f"""
        SELECT host, tld, coverage, density, unfetched, {MISSED_HQ} AS missed_hq FROM {table}
        WHERE {gem_sql(median_coverage, gem_density)}
        ORDER BY missed_hq DESC, host
    """


def tld_sql(table: str, median_coverage: float, gem_density: float) -> str:
    return f"""
        SELECT tld, count(*) AS hosts, count(*) / sum(count(*)) OVER () AS host_share,
               sum({MISSED_HQ}) AS missed_hq,
               sum({MISSED_HQ}) / nullif(sum(sum({MISSED_HQ})) OVER (), 0) AS missed_share,
               quantile_cont(coverage, 0.5) AS median_coverage,
               count(*) FILTER (WHERE {gem_sql(median_coverage, gem_density)}) AS gems
        FROM {table} GROUP BY tld ORDER BY missed_hq DESC, tld LIMIT {TOP_TLDS}
    """


def missed_sql(table: str) -> str:
    """Estimated uncrawled high-quality pages, in all and on hosts crawled below LOW_COVERAGE percent."""
    return f"""SELECT coalesce(sum({MISSED_HQ}), 0),
                      coalesce(sum({MISSED_HQ}) FILTER (WHERE coverage < {LOW_COVERAGE}), 0)
               FROM {table}"""


def grid_sql(table: str) -> str:
    """Share of the missed high-quality pages per (coverage decile, quality-density decile) cell."""
    return f"""
        SELECT least(coverage // 10, 9) * 10 AS coverage_from,
               least(floor(density * 10), 9) / 10 AS density_from,
               count(*) AS hosts, sum({MISSED_HQ}) / nullif(sum(sum({MISSED_HQ})) OVER (), 0)
                   AS missed_share
        FROM {table} GROUP BY ALL ORDER BY ALL
    """


def sources(
    inputs: Inputs, quality: str, crawl: str | None, extra_index: tuple[str, ...] = ()
) -> tuple[str, str, str | None]:
    """read_parquet sources selecting only the columns needed, and the crawl to use.

    `extra_index`: further host-index columns to select where the first file has them (ranks, languages)."""
    index_files = schema.check_columns(inputs.need("host_index", "--host-index"), schema.HOST_INDEX_COLUMNS)
    note_files = schema.check_columns(inputs.need("annotations", "--annotations"), schema.ANNOTATION_COLUMNS)
    crawls = crawls_in(index_files)
    if crawl is None and len(crawls) > 1:
        raise InputError(
            f"the host index holds several crawls ({', '.join(crawls)}): choose one with --crawl"
        )
    if crawl is not None and crawl not in crawls:
        raise InputError(
            f"--crawl {crawl} is not among the host index partitions ({', '.join(crawls) or 'none'})"
        )
    crawl = crawl or (crawls[0] if crawls and crawls_in(note_files) else None)
    index_cols = {c.name for c in schema.HOST_INDEX_COLUMNS}
    index_names = set(schema.columns_of(index_files[0]))
    note_names = set(schema.columns_of(note_files[0]))
    used = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", quality))
    unknown = [
        w
        for w in used - index_names - note_names
        if not re.search(rf"\b{w}\s*\(", quality) and w.upper() not in SQL_WORDS
    ]
    if unknown:
        raise InputError(
            f"--quality {quality!r} names column(s) {', '.join(sorted(unknown))} that neither the host index "
            f"nor the annotations have (annotation columns: {', '.join(sorted(note_names))})"
        )
    index_cols |= used & index_names - note_names
    index_cols |= set(extra_index) & index_names
    extra = ["crawl"] if crawl else []
    index_sel = ", ".join(db.ident(c) for c in sorted(index_cols) + extra)
    note_sel = ", ".join(db.ident(c) for c in sorted(note_names) + extra)
    hive = crawl is not None
    return (
        f"(SELECT {index_sel} FROM {db.parquet_source(index_files, hive)})",
        f"(SELECT {note_sel} FROM {db.parquet_source(note_files, hive)})",
        crawl,
    )


SQL_WORDS = {
    "CASE",
    "WHEN",
    "THEN",
    "ELSE",
    "END",
    "AND",
    "OR",
    "NOT",
    "NULL",
    "IS",
    "DOUBLE",
    "AS",
    "TRUE",
    "FALSE",
}


def run(
    con: duckdb.DuckDBPyConnection,
    inputs: Inputs,
    out: Output,
    quality: str = DEFAULT_QUALITY,
    crawl: str | None = None,
) -> pl.DataFrame:
    host_index, annotations, crawl = sources(inputs, quality, crawl)
    try:
        con.execute(
            "CREATE OR REPLACE TEMP TABLE cov AS "
            + coverage_table_sql(host_index, annotations, quality, crawl)
        )
    except duckdb.OutOfMemoryException:
        raise  # not the expression's fault: the caller names the memory limit
    except duckdb.Error as exc:
        raise InputError(f"--quality {quality!r} cannot be computed: {exc}") from None
    n, rho = db.one_row(con, db.spearman_sql("cov", "coverage", "density"))
    if not n:
        raise InputError(
            "no host has both a capture (nutch_fetched > 0) and an annotation: nothing to correlate"
        )
    low, high = spearman_ci(float(rho), int(n))
    median_cov, gem_density = db.one_row(con, thresholds_sql("cov"))
    bins = con.sql(bins_sql("cov")).pl()
    gems = con.sql(gems_sql("cov", median_cov, gem_density)).pl()
    tlds = con.sql(tld_sql("cov", median_cov, gem_density)).pl()
    grid = con.sql(grid_sql("cov")).pl()
    total_missed, low_cov_missed = (float(v) for v in db.one_row(con, missed_sql("cov")))
    con.execute("DROP TABLE IF EXISTS cov")
    gem_missed = float(gems["missed_hq"].sum()) if gems.height else 0.0
    summary = {
        "crawl": crawl or "",
        "quality": quality,
        "hosts": int(n),
        "spearman": float(rho),
        "ci_low": low,
        "ci_high": high,
        "median_coverage": float(median_cov),
        "gem_density_threshold": float(gem_density),
        "gems": gems.height,
        "gem_host_share": gems.height / n,
        "missed_hq": total_missed,
        "missed_share_on_gems": gem_missed / total_missed if total_missed else 0.0,
        f"missed_share_below_{LOW_COVERAGE}pct": low_cov_missed / total_missed if total_missed else 0.0,
    }
    for name, frame in (
        ("coverage_summary", pl.DataFrame([summary])),
        ("coverage_bins", bins),
        ("coverage_tld", tlds),
        ("coverage_grid", grid),
        ("gems", gems),
    ):
        out.table(name, frame)
    images = [plots.quality_by_coverage(bins, out), plots.missed_grid(grid, out), plots.tld_bars(tlds, out)]
    of_crawl = f" of {crawl}" if crawl else ""
    quality_note = (
        " (an annotation column, read as the host's share of high-quality pages; --quality takes another "
        "column or a SQL expression, e.g. a count of GneissWeb pages / fetch_200)"
        if quality == DEFAULT_QUALITY
        else ""
    )
    gem_share = summary["missed_share_on_gems"]
    low_share = summary[f"missed_share_below_{LOW_COVERAGE}pct"]
    markdown = f"""## Is the crawl budget aligned with quality? (coverage)

{n:,} hosts{of_crawl} with a capture and an annotation. Coverage is `nutch_fetched_pct`;
quality density is `{quality}`{quality_note}.
Uncrawled high-quality pages are estimated as `nutch_unfetched` x density, assuming a host's unfetched
pages are as good as its fetched ones.

- Spearman(coverage, quality density) = {rho:.3f} (95% CI {low:.3f} to {high:.3f}); the paper: -0.08.
- Hidden gems (coverage below the median {median_cov:g}%, density >= {gem_density:.3f}, the top decile):
  {gems.height:,} hosts ({100 * gems.height / n:.1f}% of hosts) hold {100 * gem_share:.0f}% of the
  estimated {total_missed:,.0f} uncrawled high-quality pages (paper: 6.5% of hosts, 62% of 58M).
- Hosts crawled below {LOW_COVERAGE}% hold {100 * low_share:.0f}% of them (paper: 50%).

{md_table(bins)}

![Quality by coverage]({images[0]})

![Missed high-quality pages by coverage and quality]({images[1]})

Top TLDs by missed high-quality pages:

{md_table(tlds)}

![Missed pages by TLD]({images[2]})
"""
    out.finish(markdown, {"quality": quality, "crawl": crawl}, inputs, summary)
    return pl.DataFrame([summary])
