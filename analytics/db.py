"""DuckDB connections and the SQL pieces the studies share (parquet sources, ranks with ties, Spearman)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import duckdb

from analytics.study_inputs import InputError
from graph import duck

MEMORY_ENV = "HOSTCRAWL_DUCKDB_MEMORY"
MEMORY_RE = re.compile(r"\d+(\.\d+)?\s*(%|[KMGT]i?B|B|bytes)", re.IGNORECASE)  # what SET memory_limit takes
THREADS_ENV = "HOSTCRAWL_DUCKDB_THREADS"


def default_memory_limit() -> str:
    """A quarter of the machine's memory, between 2 and 4 GB; DuckDB spills joins and sorts beyond it. At
    Common Crawl's size (100M host-index rows, benchmarks/studies_at_scale.py) `study coverage` needs 4 GB:
    its per-bin quantiles cannot spill, and 2 GB ran out of memory. 4 GB keeps the coverage study's RSS
    near 4.6 GB there; a machine with less than 16 GB gets less and may have to raise it."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return "2GB"
    return f"{min(4, max(2, total // 4 // 2**30))}GB"


DEFAULT_MEMORY_LIMIT = default_memory_limit()


def memory_limit() -> str:
    """HOSTCRAWL_DUCKDB_MEMORY, or the default; a value DuckDB would not parse is an InputError (one line)."""
    value = os.environ.get(MEMORY_ENV, DEFAULT_MEMORY_LIMIT)
    if not MEMORY_RE.fullmatch(value.strip()):
        raise InputError(f"{MEMORY_ENV}={value!r}: give a size such as 4GB, 512MB or 80%")
    return value.strip()


def out_of_memory() -> str:
    """The one line to print when DuckDB ran out of its memory limit (duckdb.OutOfMemoryException)."""
    return (
        f"error: DuckDB ran out of its memory limit ({memory_limit()}): set {MEMORY_ENV} higher "
        f"(e.g. {MEMORY_ENV}=8GB) and run it again; nothing was written"
    )


def connect(temp_dir: Path | None = None) -> duckdb.DuckDBPyConnection:
    """graph.duck's quiet connection with the studies' memory cap (HOSTCRAWL_DUCKDB_MEMORY) and threads
    (HOSTCRAWL_DUCKDB_THREADS), spilling to `temp_dir` when a join outgrows it."""
    threads = os.environ.get(THREADS_ENV)
    con = duck.connect(memory_limit(), int(threads) if threads else None)
    con.execute("SET preserve_insertion_order = false")
    if temp_dir is not None:
        temp_dir.mkdir(parents=True, exist_ok=True)
        con.execute(f"SET temp_directory = {duck.sql_string(str(temp_dir))}")
    return con


@contextlib.contextmanager
def spill_folder(path: Path) -> Iterator[Path]:
    """`path` for DuckDB's temp directory (connect makes it), removed afterwards with every folder made
    for it that is still empty: a study or plan that fails leaves no empty output folder behind."""
    made = [folder for folder in (path, *path.parents) if not folder.exists()]  # innermost first
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        for folder in made[1:]:
            with contextlib.suppress(OSError):  # not empty: the run's output is in it
                folder.rmdir()


def interrupted(exc: BaseException) -> bool:
    """Ctrl-C, in Python or inside a query: DuckDB 2.0 raises a plain `RuntimeError("Query interrupted")`
    for a SIGINT that lands in a query (its InterruptException for some others)."""
    if isinstance(exc, KeyboardInterrupt | duckdb.InterruptException):
        return True
    return isinstance(exc, RuntimeError) and str(exc).startswith("Query interrupted")


def ident(name: str) -> str:
    """A SQL identifier, quoted so that column names such as `nutch_numRecords` keep their case."""
    return '"' + name.replace('"', '""') + '"'


def parquet_source(files: Sequence[Path], hive: bool = False) -> str:
    """read_parquet over files whose schemas may differ: columns are matched by name, missing ones NULL."""
    listing = ", ".join(duck.sql_string(str(f)) for f in files)
    return f"read_parquet([{listing}], union_by_name = true, hive_partitioning = {str(hive).lower()})"


def www_key_sql(column: str) -> str:
    """SQL twin of graph.hostnames.www_key: lowercase, no trailing dot, one leading www. dropped when a
    dot follows it. String functions, not a regular expression: over a 100M-row ranks file the regex was
    the recrawl plan's largest step."""
    host = f"rtrim(lower({column}), '.')"
    bare = f"substr({host}, 5)"
    return f"CASE WHEN starts_with({host}, 'www.') AND contains({bare}, '.') THEN {bare} ELSE {host} END"


def tld_sql(host_column: str) -> str:
    """Last label of a host name ('' for a bare label)."""
    return f"regexp_extract(rtrim(lower({host_column}), '.'), '\\.([^.]+)$', 1)"


def avg_rank_sql(column: str, partition: str = "") -> str:
    """Rank with ties averaged (what scipy's spearmanr uses), as a window expression."""
    over_part = f"PARTITION BY {partition} " if partition else ""
    part_and_value = f"{partition}, {column}" if partition else column
    return (
        f"(rank() OVER ({over_part}ORDER BY {column}) "
        f"+ (count(*) OVER (PARTITION BY {part_and_value}) - 1) / 2.0)"
    )


def spearman_sql(source: str, x: str, y: str, group: str = "") -> str:
    """SELECT [group,] n, rho: Pearson correlation of average ranks over rows where x and y are not NULL."""
    group_select = f"{group}, " if group else ""
    return f"""
        WITH base AS (
            SELECT {group_select}{x} AS x, {y} AS y FROM {source}
            WHERE {x} IS NOT NULL AND {y} IS NOT NULL AND NOT isnan({x}::DOUBLE) AND NOT isnan({y}::DOUBLE)
        ), ranked AS (
            SELECT {group_select}{avg_rank_sql("x", group)} AS rx, {avg_rank_sql("y", group)} AS ry FROM base
        )
        SELECT {group_select}count(*) AS n, corr(rx, ry) AS rho FROM ranked
        {"GROUP BY " + group if group else ""}
    """


def one_row(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[Any, ...]:
    """The single row of a query, fetched to the end (DuckDB refuses new work while a result is unread)."""
    rows = con.execute(sql).fetchall()
    if len(rows) != 1:
        raise ValueError(f"expected one row, got {len(rows)}: {sql.strip()[:200]}")
    return tuple(rows[0])
