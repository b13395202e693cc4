"""The ranks file of `study synth` (graph.ranks' schema), written out of core: 100M graph hosts do not fit
in memory together with their sort, so the generator stages each chunk's centralities in a parquet file and
DuckDB numbers and sorts them under its memory limit."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pyarrow as pa

from analytics import db
from graph.duck import arrow_batches, sql_string
from graph.ranks import RANKS_FORMAT, RanksWriter

RANKS_INPUT = "ranks-input.parquet"  # staging only: never published
RANKS_INPUT_SCHEMA = pa.schema(
    [("i", pa.int64()), ("host", pa.string()), ("hc_val", pa.float64()), ("pr_val", pa.float64())]
)
RANKS_BATCH_ROWS = 1 << 20


def write_ranks(release: str, path: Path, source: Path, total: int) -> None:
    """The graph package's ranks parquet (schema, metadata, percentiles: graph.ranks.RanksWriter), sorted by
    HC, position 1 the most central (ties in host order). DuckDB numbers and sorts the rows under its memory
    limit, spilling beside `source`, so 100M hosts do not have to fit in memory (issue 27)."""
    con = db.connect(source.with_name(".ranks-tmp"))
    relation = con.sql(
        f"""
        SELECT host, hc_pos, hc_val, pr_pos, pr_val FROM (
            SELECT host, hc_val, pr_val,
                   row_number() OVER (ORDER BY hc_val DESC, i) AS hc_pos,
                   row_number() OVER (ORDER BY pr_val DESC, i) AS pr_pos
            FROM read_parquet({sql_string(str(source))})
        ) ORDER BY hc_pos
        """
    )
    rows = arrow_batches(relation, RANKS_BATCH_ROWS)
    metadata = {"format": RANKS_FORMAT, "kind": "host", "release": release, "source": "study synth"}
    writer = RanksWriter(path, "host", metadata)
    try:
        writer.set_total(total)
        for batch in rows:
            frame = pl.from_arrow(batch)
            assert isinstance(frame, pl.DataFrame)
            writer.add(
                frame.with_columns(
                    host_rev=pl.col("host").str.split(".").list.reverse().list.join("."),
                    release=pl.lit(release),
                )
            )
    finally:
        writer.close()
        con.close()
        shutil.rmtree(source.with_name(".ranks-tmp"), ignore_errors=True)
