"""DuckDB helpers shared by the graph modules: quiet connections, literals, streaming across versions."""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import pyarrow as pa


def connect(memory_limit: str | None = None, threads: int | None = None) -> duckdb.DuckDBPyConnection:
    """In-memory connection without the progress bar (it would garble our own progress and logs)."""
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    if memory_limit:
        con.execute(f"SET memory_limit = {sql_string(memory_limit)}")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    return con


def sql_string(value: object) -> str:
    """A SQL string literal (for file paths in DuckDB queries)."""
    return "'" + str(value).replace("'", "''") + "'"


def arrow_batches(relation: duckdb.DuckDBPyRelation, rows: int) -> Iterator[pa.RecordBatch]:
    """Stream a DuckDB relation as Arrow batches (the method was renamed in DuckDB 2)."""
    if hasattr(relation, "to_arrow_reader"):
        return iter(relation.to_arrow_reader(rows))
    return iter(relation.fetch_arrow_reader(rows))
