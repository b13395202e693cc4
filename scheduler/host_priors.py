"""Host priors (centrality percentiles; a recrawl plan's density and page budget) and, for benchmarks only,
the test web's true densities."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import polars as pl

from scheduler.hosts import HostRecord

# A recrawl plan's density estimate counts as this many pages seen; the host's own scores soon outweigh it.
PLAN_PRIOR_PAGES = 4.0
PLAN_DENSITY_RANGE = (0.02, 0.98)


class HostPrior(Protocol):
    @property
    def hc_percentile(self) -> float | None: ...

    @property
    def pr_percentile(self) -> float | None: ...


class PriorLookup(Protocol):
    def lookup(self, host: str) -> HostPrior | None: ...


@dataclass(slots=True, frozen=True)
class StaticPrior:
    hc_percentile: float | None
    pr_percentile: float | None


@dataclass(slots=True)
class StaticPriors:
    """Priors from a table already in memory (small crawls, the test web's in-link counts)."""

    table: dict[str, StaticPrior] | dict[str, PlanPrior]

    def lookup(self, host: str) -> StaticPrior | PlanPrior | None:
        return self.table.get(host.lower())


@dataclass(slots=True, frozen=True)
class PlanPrior:
    """A recrawl plan's row: centrality percentiles, estimated density and the page budget given."""

    hc_percentile: float | None
    pr_percentile: float | None
    density: float | None
    budget: int


def apply_prior(record: HostRecord, prior: HostPrior | None) -> None:
    """The on_new_host hook's work: centrality, and for a planned host its budget and density prior."""
    if prior is None:
        return
    record.hc_percentile, record.pr_percentile = prior.hc_percentile, prior.pr_percentile
    if isinstance(prior, PlanPrior):
        record.budget = prior.budget
        if prior.density is not None:
            lo, hi = PLAN_DENSITY_RANGE
            density = min(max(prior.density, lo), hi)
            record.prior_alpha, record.prior_beta = (
                density * PLAN_PRIOR_PAGES,
                (1 - density) * PLAN_PRIOR_PAGES,
            )


def load_priors(path: str | Path | None) -> PriorLookup | None:
    """A Common Crawl ranks parquet (graph ingest), a test web hosts.parquet (in-link percentiles), or a
    recrawl plan (`hostcrawl recrawl plan`: percentiles, density and budget per host)."""
    if not path:
        return None
    columns = pl.read_parquet_schema(path)
    if "budget" in columns and "density" in columns:
        plan = pl.read_parquet(path, columns=["host", "hc_percentile", "pr_percentile", "density", "budget"])
        return StaticPriors({h.lower(): PlanPrior(hc, pr, d, int(b)) for h, hc, pr, d, b in plan.iter_rows()})
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
