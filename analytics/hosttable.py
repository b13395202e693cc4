"""Pages aggregated to hosts (pages, high-quality pages, a k-page probe) joined with ranks and allocations."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np

from analytics import db, schema
from analytics.study import ranks_view
from analytics.study_inputs import Inputs

HOSTS_COLUMNS = (schema.Column("host", schema.STRING, "string"),)


def host_counts_sql(score: str, threshold: float, sample_pages: int, seed: int) -> str:
    """Per host: scored pages, pages above threshold, HQ pages among the first k of a seeded random order."""
    x = db.ident(score)
    return f"""
        WITH p AS (
            SELECT host, ({x} > {float(threshold)})::INTEGER AS hq, hash(url, {int(seed)}) AS draw
            FROM pages WHERE {x} IS NOT NULL AND NOT isnan({x})
        )
        SELECT host, {db.www_key_sql("host")} AS key, {db.tld_sql("host")} AS tld,
               count(*) AS n, sum(hq) AS hq,
               list_sum(min_by(hq, draw, {max(int(sample_pages), 1)})) AS sample_hq,
               hash(host, {int(seed)}) AS tiebreak
        FROM p GROUP BY host
    """


@dataclass(slots=True)
class HostArrays:
    """Host-level arrays in one fixed host order (by host name), ready for the policies."""

    host: np.ndarray
    n: np.ndarray
    hq: np.ndarray
    sample_hq: np.ndarray
    tld: np.ndarray  # integer codes
    tiebreak: np.ndarray
    hc: np.ndarray | None  # NaN where the host is not in the graph
    pr: np.ndarray | None
    current: np.ndarray | None  # higher = earlier in the observed allocation
    current_source: str


def current_allocation_sql(inputs: Inputs) -> tuple[str, str] | None:
    """(SQL giving key, current) and a description, from a crawl's hosts.parquet or the host index."""
    if inputs.hosts is not None and schema.has_column(inputs.hosts, "first_fetch"):
        files = schema.check_columns(inputs.hosts, HOSTS_COLUMNS)
        return (
            f"SELECT {db.www_key_sql('host')} AS key, -epoch(min(first_fetch)) AS current "
            f"FROM {db.parquet_source(files)} GROUP BY key",
            "this crawl's own order (first fetch per host, hosts.parquet)",
        )
    if inputs.host_index is not None:
        cols = [c for c in schema.HOST_INDEX_COLUMNS if c.name in ("surt_host_name", "nutch_fetched")]
        files = schema.check_columns(inputs.host_index, cols)
        return (
            f"SELECT surt_host_name AS key, max(nutch_fetched)::DOUBLE AS current "
            f"FROM {db.parquet_source(files)} GROUP BY key",
            "Common Crawl's allocation (nutch_fetched per host, host index)",
        )
    return None


def surt_sql(key_column: str) -> str:
    """SQL twin of graph.hostnames.surt_host: 'www.blog.example.co.uk' -> 'uk,co,example,blog'."""
    bare = f"regexp_replace({key_column}, '^www\\d*\\.', '')"
    return f"array_to_string(list_reverse(string_split({bare}, '.')), ',')"


def load_hosts(
    con: duckdb.DuckDBPyConnection, inputs: Inputs, score: str, threshold: float, sample_pages: int, seed: int
) -> HostArrays:
    """Aggregate the `pages` view to hosts and attach HC, PR and the current allocation where known."""
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE host_counts AS {host_counts_sql(score, threshold, sample_pages, seed)}"
    )
    joins, cols = [], ["h.host", "h.n", "h.hq", "h.sample_hq", "h.tld", "h.tiebreak"]
    if inputs.ranks is not None:
        ranks_view(con, inputs.ranks)
        joins.append("LEFT JOIN ranks r ON r.key = h.key")
        cols += ["r.hc", "r.pr"]
    current = current_allocation_sql(inputs)
    if current is not None:
        sql, _ = current
        on = (
            "c.key = h.key"
            if inputs.hosts is not None and "first_fetch" in sql
            else f"c.key = {surt_sql('h.key')}"
        )
        joins.append(f"LEFT JOIN ({sql}) c ON {on}")
        cols.append("c.current")
    frame = con.execute(
        f"SELECT {', '.join(cols)} FROM host_counts h {' '.join(joins)} ORDER BY h.host"
    ).fetchnumpy()
    con.execute("DROP TABLE IF EXISTS host_counts")
    _, tld_codes = np.unique(np.asarray(frame["tld"], dtype=object), return_inverse=True)

    def floats(name: str) -> np.ndarray | None:
        if name not in frame:
            return None
        return np.asarray(np.ma.filled(np.ma.asarray(frame[name], dtype=np.float64), np.nan))

    return HostArrays(
        host=np.asarray(frame["host"], dtype=object),
        n=np.asarray(frame["n"], dtype=np.int64),
        hq=np.asarray(frame["hq"], dtype=np.int64),
        sample_hq=np.asarray(frame["sample_hq"], dtype=np.int64),
        tld=tld_codes.astype(np.int64),
        tiebreak=np.asarray(frame["tiebreak"], dtype=np.uint64),
        hc=floats("hc"),
        pr=floats("pr"),
        current=floats("current"),
        current_source=current[1] if current else "",
    )
