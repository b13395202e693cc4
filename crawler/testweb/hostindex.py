"""A Common Crawl host index and GneissWeb annotations of the test web itself, from the test web's seed.

Every row is a host the test web serves (`news-17.example` is `example,news-17`), so a recrawl plan made from
this index can be crawled for real and checked against the truth: Common Crawl is pretended to have fetched
a random share of each host's pages (its coverage, unrelated to quality, as the paper found), and the
annotation's density is the share of high-quality pages among exactly those fetched pages.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq

from analytics.synth import ANNOTATION_SCHEMA, HOST_INDEX_SCHEMA, annotation_rows, host_index_rows
from crawler.testweb.model import SiteModel

CRAWL = "CC-MAIN-2025-18"
OLDER_CRAWL = "CC-MAIN-2024-10"  # an older partition whose schema lacks some columns, as in the real index
TRUTH_FILE = "hostindex-truth.parquet"
COVERAGE_BETA = (1.2, 1.2)  # share of a host's pages Common Crawl fetched


@dataclass(frozen=True, slots=True)
class HostIndexFiles:
    host_index: Path
    annotations: Path
    truth: Path
    crawl: str


def _names(hosts: list[str]) -> pl.DataFrame:
    labels = [h.rsplit(".", 1) for h in hosts]
    return pl.DataFrame(
        {
            "surt_host_name": [f"{tld},{label}" for label, tld in labels],
            "url_host_registered_domain": hosts,
            "url_host_tld": [tld for _label, tld in labels],
        }
    )


def write_host_index(model: SiteModel, out: Path, seed: int | None = None) -> HostIndexFiles:
    """OUT/host_index/crawl=*/, OUT/annotations/crawl=*/ and OUT/hostindex-truth.parquet."""
    rng = np.random.default_rng([model.cfg.seed if seed is None else seed, 14])
    hosts = model.hosts
    n = len(hosts)
    n_pages = np.array([h.n_pages for h in hosts], dtype=np.int64)
    share = rng.beta(*COVERAGE_BETA, n)
    fetched = np.clip(np.rint(share * n_pages), 1, n_pages).astype(np.int64)
    fetched_high = np.empty(n, dtype=np.int64)
    for i, spec in enumerate(hosts):  # Common Crawl fetched a random subset of the host's pages
        lo = int(model.page_offset[spec.index])
        chosen = rng.permutation(spec.n_pages)[: fetched[i]]
        fetched_high[i] = int(model.page_high[lo + chosen].sum())
    observed = fetched_high / fetched
    in_links = np.array([h.in_links for h in hosts], dtype=np.float64)
    pct = (np.argsort(np.argsort(in_links, kind="stable"), kind="stable") + 1) / n
    hc, pr = 10 ** (5.0 + 3.5 * pct), 10 ** (-8.0 + 3.0 * pct)
    language = np.array([0 if h.language == "en" else 1 for h in hosts])
    names = _names([h.name for h in hosts])
    counts = {"records": n_pages, "fetched": fetched, "captured": fetched}
    index = host_index_rows(names, rng, counts, hc, pr, language)
    notes = annotation_rows(names["surt_host_name"], rng, observed)
    for sub, table in (("host_index", index), ("annotations", notes)):
        (out / sub / f"crawl={CRAWL}").mkdir(parents=True, exist_ok=True)
        pq.write_table(table, out / sub / f"crawl={CRAWL}" / "part-00000.parquet")
    older = out / "host_index" / f"crawl={OLDER_CRAWL}"
    older.mkdir(parents=True, exist_ok=True)
    dropped = [c for c in HOST_INDEX_SCHEMA.names if c.startswith("robots_")]
    pq.write_table(index.drop(dropped), older / "part-00000.parquet")
    (out / "annotations" / f"crawl={OLDER_CRAWL}").mkdir(parents=True, exist_ok=True)
    pq.write_table(
        notes.cast(ANNOTATION_SCHEMA), out / "annotations" / f"crawl={OLDER_CRAWL}" / "part-00000.parquet"
    )
    truth = pl.DataFrame(
        {
            "host": [h.name for h in hosts],
            "coverage": 100.0 * fetched / n_pages,
            "observed_density": observed,
            "true_density": [h.n_high / h.n_pages for h in hosts],
            "missing_hq_true": np.array([h.n_high for h in hosts]) - fetched_high,
            "n_pages": n_pages,
            "in_links": in_links.astype(np.int64),
            "hostile": [h.hostile for h in hosts],
        },
        schema_overrides={"hostile": pl.String},
    )
    truth.write_parquet(out / TRUTH_FILE)
    return HostIndexFiles(out / "host_index", out / "annotations", out / TRUTH_FILE, CRAWL)
