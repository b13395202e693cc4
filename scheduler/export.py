"""The scheduler's host table as a frame, for hosts.parquet and reports."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import polars as pl

from scheduler.hosts import PRIOR_ALPHA, PRIOR_BETA
from scheduler.sqlite_store import SQLiteFrontier

HOST_STATE_SCHEMA: dict[str, type[pl.DataType]] = {
    "host": pl.String,
    "state": pl.String,
    "drop_reason": pl.String,
    "sample_pages": pl.Int64,
    "sample_density": pl.Float64,
    "scored_pages": pl.Int64,
    "density_mean": pl.Float64,
    "density_sd": pl.Float64,
    "queued": pl.Int64,  # URLs still queued when the run ended (a recrawl plan's "left shallow")
}


def host_states(db_path: Path) -> pl.DataFrame:
    """One row per host of a run's SQLite frontier (none if it has no frontier file)."""
    if not db_path.exists():
        return pl.DataFrame(schema=HOST_STATE_SCHEMA)
    store = SQLiteFrontier(db_path)
    try:
        queued = Counter(url.host for url in store.pending())
        return host_state_frame(store.hosts(), queued)
    finally:
        store.close()


def host_state_frame(
    records: Iterable[tuple[str, dict[str, Any]]], queued: Mapping[str, int]
) -> pl.DataFrame:
    """One row per host: state, sample and posterior density estimates (Beta prior, scored pages)."""
    rows = []
    for host, data in records:
        samples = list(data.get("sample_scores", []))
        high, low = int(data.get("high", 0)), int(data.get("low", 0))
        a, b = PRIOR_ALPHA + high, PRIOR_BETA + low
        rows.append(
            {
                "host": host,
                "state": data.get("state"),
                "drop_reason": data.get("drop_reason"),
                "sample_pages": len(samples),
                "sample_density": int(data.get("sample_high", 0)) / len(samples) if samples else None,
                "scored_pages": high + low,
                "density_mean": a / (a + b),
                "density_sd": (a * b / ((a + b) ** 2 * (a + b + 1))) ** 0.5,
                "queued": queued.get(host, 0),
            }
        )
    return pl.DataFrame(rows, schema=HOST_STATE_SCHEMA)
