"""Host priors (centrality percentiles) and, for benchmarks only, the test web's true densities."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import polars as pl


class Prior(Protocol):
    @property
    def hc_percentile(self) -> float | None: ...

    @property
    def pr_percentile(self) -> float | None: ...


class PriorLookup(Protocol):
    def lookup(self, host: str) -> Prior | None: ...


@dataclass(slots=True, frozen=True)
class StaticPrior:
    hc_percentile: float | None
    pr_percentile: float | None


@dataclass(slots=True)
class StaticPriors:
    """Priors from a table already in memory (small crawls, the test web's in-link counts)."""

    table: dict[str, StaticPrior]

    def lookup(self, host: str) -> StaticPrior | None:
        return self.table.get(host.lower())


def load_priors(path: str | Path | None) -> PriorLookup | None:
    """A Common Crawl ranks parquet (graph ingest) or a test web hosts.parquet (in-link percentiles)."""
    if not path:
        return None
    columns = pl.read_parquet_schema(path)
    if "in_links" in columns:
        frame = pl.read_parquet(path, columns=["host", "in_links"]).with_columns(
            pct=(pl.col("in_links").rank("average") / pl.len())
        )
        table = {h: StaticPrior(p, p) for h, p in frame.select("host", "pct").iter_rows()}
        return StaticPriors(table)
    from graph.priors import HostPriors  # the web-graph ingest's own lookup

    priors: PriorLookup = HostPriors.load(Path(path))
    return priors


def load_truth(path: str | Path | None) -> dict[str, float]:
    """host -> true quality density from the test web's ground truth (the oracle policy only)."""
    if not path:
        return {}
    frame = pl.read_parquet(path, columns=["host", "q"])
    return dict(frame.iter_rows())
