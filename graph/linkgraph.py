"""Our own host graph: read host-to-host links a crawl recorded, rank hosts, write a ranks parquet.

The output has the columns of an ingested Common Crawl ranks file, so `HostPriors` and the studies read a
crawl's own ranks and CC's the same way.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from graph.centrality import EdgeList, harmonic_centrality, pagerank, positions
from graph.duck import connect, sql_string
from graph.ranks import RANKS_FORMAT, output_schema, percentile_expr

# Accepted column pairs, first match wins: host pairs, URL pairs, or a pages table with a list of out-links.
HOST_PAIRS = (("src_host", "dst_host"), ("from_host", "to_host"), ("source", "target"), ("src", "dst"))
URL_PAIRS = (("src_url", "dst_url"), ("from_url", "to_url"), ("url", "link"), ("url", "target_url"))
LIST_COLUMNS = (("url", "outlinks"), ("url", "links"))
# host of an absolute URL: after the scheme and any user info, up to a port, path, query or fragment.
URL_HOST_SQL = "regexp_extract({col}, '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^@/?#]*@)?([^/:?#]+)', 1)"
HOST_SQL = "rtrim(lower(regexp_replace(trim({col}), ':[0-9]*$', '')), '.')"


@dataclass(frozen=True, slots=True)
class HostGraph:
    """Host names (sorted, id = position) and the deduplicated links between them."""

    hosts: list[str]
    edges: EdgeList


@dataclass(frozen=True, slots=True)
class RankResult:
    out: Path
    hosts: int
    edges: int
    hc_method: str
    seconds: float


def _reader_sql(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(".parquet") or path.is_dir():
        target = str(path / "**" / "*.parquet") if path.is_dir() else str(path)
        return f"read_parquet({sql_string(target)})"
    if name.endswith((".jsonl", ".jsonl.gz", ".json", ".ndjson")):
        return f"read_json_auto({sql_string(path)})"
    if name.endswith((".csv", ".csv.gz", ".tsv", ".tsv.gz", ".txt", ".txt.gz")):
        return f"read_csv({sql_string(path)}, header=true)"
    raise ValueError(f"{path}: links must be parquet, CSV/TSV (with header) or JSON lines")


def _pairs_sql(path: Path, columns: Sequence[str]) -> str:
    """SQL yielding (s, d) host pairs from whichever supported layout the table has."""
    source = _reader_sql(path)
    present = set(columns)
    for a, b in HOST_PAIRS:
        if {a, b} <= present:
            return f"SELECT {HOST_SQL.format(col=a)} AS s, {HOST_SQL.format(col=b)} AS d FROM {source}"
    for a, b in URL_PAIRS:
        if {a, b} <= present:
            sa, sb = URL_HOST_SQL.format(col=a), URL_HOST_SQL.format(col=b)
            return f"SELECT {HOST_SQL.format(col=sa)} AS s, {HOST_SQL.format(col=sb)} AS d FROM {source}"
    for a, b in LIST_COLUMNS:
        if {a, b} <= present:
            sa, sb = URL_HOST_SQL.format(col=a), URL_HOST_SQL.format(col="link")
            return (
                f"SELECT {HOST_SQL.format(col=sa)} AS s, {HOST_SQL.format(col=sb)} AS d "
                f"FROM (SELECT {a}, unnest({b}) AS link FROM {source})"
            )
    expected = ", ".join(f"({a}, {b})" for a, b in (*HOST_PAIRS, *URL_PAIRS, *LIST_COLUMNS))
    raise ValueError(f"{path}: no link columns found among {sorted(present)}; expected one of {expected}")


def load_links(path: Path | str, keep_self_links: bool = False) -> HostGraph:
    """Distinct host-to-host links of a links table (host pairs, URL pairs, or url + list of links)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"links table {path} does not exist")
    con = connect()
    try:
        columns = [d[0] for d in con.sql(f"SELECT * FROM {_reader_sql(path)} LIMIT 0").description]
        pairs = _pairs_sql(path, columns)
        self_filter = "" if keep_self_links else "AND s <> d"
        con.execute(
            f"CREATE TEMP TABLE e AS SELECT DISTINCT s, d FROM ({pairs}) "
            f"WHERE s IS NOT NULL AND d IS NOT NULL AND s <> '' AND d <> '' {self_filter}"
        )
        con.execute(
            "CREATE TEMP TABLE v AS SELECT host, (row_number() OVER (ORDER BY host) - 1)::BIGINT AS id "
            "FROM (SELECT s AS host FROM e UNION SELECT d FROM e)"
        )
        hosts = [row[0] for row in con.sql("SELECT host FROM v ORDER BY id").fetchall()]
        ids = con.sql(
            "SELECT a.id AS src, b.id AS dst FROM e JOIN v a ON e.s = a.host JOIN v b ON e.d = b.host"
        ).fetchnumpy()
    finally:
        con.close()
    edges = EdgeList.build(len(hosts), ids["src"], ids["dst"], drop_self_loops=not keep_self_links)
    return HostGraph(hosts, edges)


def load_graph_dir(folder: Path | str) -> HostGraph:
    """A subgraph folder written by `extract_subgraph` (vertices.parquet + edges.parquet), ids compacted."""
    folder = Path(folder)
    vertices = pl.read_parquet(folder / "vertices.parquet", columns=["id", "host"]).sort("host")
    edges = pl.read_parquet(folder / "edges.parquet", columns=["src", "dst"])
    lookup = pl.DataFrame({"id": vertices["id"], "new": np.arange(vertices.height, dtype=np.int64)})
    mapped = (
        edges.join(lookup.rename({"id": "src", "new": "s"}), on="src")
        .join(lookup.rename({"id": "dst", "new": "d"}), on="dst")
        .select("s", "d")
    )
    edge_list = EdgeList.build(vertices.height, mapped["s"].to_numpy(), mapped["d"].to_numpy())
    return HostGraph(vertices["host"].to_list(), edge_list)


def rank_graph(
    graph: HostGraph, out: Path | str, release: str = "crawl", hc_method: str = "auto"
) -> RankResult:
    """PageRank and harmonic centrality of every host, written as a ranks parquet (in HC order)."""
    started = time.perf_counter()
    out = Path(out)
    n = len(graph.hosts)
    method = hc_method if hc_method != "auto" else ("exact" if n <= 20_000 else "hyperball")
    pr = pagerank(graph.edges)
    hc = harmonic_centrality(graph.edges, method=method)
    schema = output_schema("host")
    frame = (
        pl.DataFrame(
            {
                "host": graph.hosts,
                "hc_pos": positions(hc),
                "hc_val": hc,
                "pr_pos": positions(pr),
                "pr_val": pr,
            }
        )
        .with_columns(
            host_rev=pl.col("host").str.split(".").list.reverse().list.join("."),
            release=pl.lit(release),
            hc_percentile=percentile_expr("hc_pos", n),
            pr_percentile=percentile_expr("pr_pos", n),
        )
        .sort("hc_pos")
        .select(schema.names)
    )
    metadata = {"format": RANKS_FORMAT, "kind": "host", "release": release, "source": f"links ({method} HC)"}
    table: pa.Table = frame.to_arrow().cast(schema).replace_schema_metadata(metadata)
    tmp = out.with_name(out.name + ".partial")
    pq.write_table(table, tmp, compression="zstd")
    tmp.replace(out)
    return RankResult(out, n, len(graph.edges.src), method, time.perf_counter() - started)
