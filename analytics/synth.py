"""`hostcrawl study synth`: host index, GneissWeb annotations, ranks and pages in the real schemas."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from analytics import db
from analytics import synth_model as m
from analytics.stats import spearman
from analytics.synth_config import SynthConfig
from analytics.synth_ranks import RANKS_INPUT, RANKS_INPUT_SCHEMA, write_ranks

CHUNK_HOSTS = 500_000
WWW_SHARE = 0.3
SUBDOMAIN_SHARE = 0.1
PAGE_LANGUAGE_STAY = 0.9  # share of a host's pages written in the host's own language
WORDS = ("news", "blog", "shop", "uni", "lab", "wiki", "forum", "docs", "club", "press", "edu", "city")
COUNT_COLUMNS = (
    "fetch_200",
    "fetch_200_lote",
    "fetch_3xx",
    "fetch_4xx",
    "fetch_5xx",
    "fetch_gone",
    "fetch_notModified",
    "fetch_other",
    "fetch_redirPerm",
    "fetch_redirTemp",
)
NUTCH = (
    "nutch_fetched",
    "nutch_unfetched",
    "nutch_gone",
    "nutch_redirTemp",
    "nutch_redirPerm",
    "nutch_notModified",
)
ROBOTS = (
    "robots_200",
    "robots_3xx",
    "robots_4xx",
    "robots_5xx",
    "robots_gone",
    "robots_notModified",
    "robots_other",
    "robots_redirPerm",
    "robots_redirTemp",
)
HOST_INDEX_SCHEMA = pa.schema(
    [
        ("surt_host_name", pa.string()),
        ("url_host_registered_domain", pa.string()),
        ("url_host_tld", pa.string()),
    ]
    + [(c, pa.float64()) for c in ("hcrank", "prank", "hcrank10", "prank10")]
    + [("warc_record_length_av", pa.int64()), ("warc_record_length_median", pa.int64())]
    + [(c, pa.int64()) for c in COUNT_COLUMNS[:2]]
    + [("fetch_200_lote_pct", pa.int8())]
    + [(c, pa.int64()) for c in COUNT_COLUMNS[2:]]
    + [("nutch_numRecords", pa.int64())]
    + [p for c in NUTCH for p in ((c, pa.int64()), (c + "_pct", pa.int8()))]
    + [(c, pa.int64()) for c in ROBOTS]
)
ANNOTATION_SCHEMA = pa.schema(
    [("surt_host_name", pa.string())]
    + [(f"gneissweb_{t}", pa.float64()) for t in ("technology", "science", "education", "medical")]
    + [("in_gneissweb", pa.bool_())]
)


@dataclass(frozen=True, slots=True)
class SynthResult:
    out: Path
    host_index_rows: int
    annotated_hosts: int
    pages: int
    page_hosts: int
    truth: dict[str, object]


def _names(cfg: SynthConfig, rng: np.random.Generator, index: np.ndarray, tld: np.ndarray) -> pl.DataFrame:
    """host, surt_host_name, registered domain and TLD, built column-wise (no Python loop per host)."""
    n = len(index)
    roll = rng.random(n)
    frame = pl.DataFrame(
        {
            "i": index,
            "word": np.array(WORDS)[rng.integers(0, len(WORDS), n)],
            "tld": np.array(m.TLDS)[tld],
            "www": roll < WWW_SHARE,
            "sub": roll > 1 - SUBDOMAIN_SHARE,
        }
    )
    label = pl.concat_str(pl.col("word"), pl.lit("-"), pl.col("i").cast(pl.String))
    suffix = pl.when(pl.col("tld") == "uk").then(pl.lit("co.uk")).otherwise(pl.col("tld"))
    surt_suffix = pl.when(pl.col("tld") == "uk").then(pl.lit("uk,co")).otherwise(pl.col("tld"))
    registered = pl.concat_str(label, pl.lit("."), suffix)
    return frame.select(
        host=pl.when(pl.col("www"))
        .then(pl.concat_str(pl.lit("www."), registered))
        .when(pl.col("sub"))
        .then(pl.concat_str(pl.lit("blog."), registered))
        .otherwise(registered),
        graph_host=pl.when(pl.col("sub"))
        .then(pl.concat_str(pl.lit("blog."), registered))
        .otherwise(registered),
        surt_host_name=pl.concat_str(
            surt_suffix,
            pl.lit(","),
            label,
            pl.when(pl.col("sub")).then(pl.lit(",blog")).otherwise(pl.lit("")),
        ),
        url_host_registered_domain=registered,
        url_host_tld=pl.col("tld"),
    )


def _pct(part: np.ndarray, whole: np.ndarray) -> np.ndarray:
    return np.rint(100 * part / np.maximum(whole, 1)).astype(np.int8)


def host_index_rows(
    names: pl.DataFrame,
    rng: np.random.Generator,
    counts: dict[str, np.ndarray] | None,
    hc: np.ndarray,
    pr: np.ndarray,
    language: np.ndarray,
) -> pa.Table:
    """Host index rows; link-only hosts (counts None) are all-zero but key and ranks, as in the real data."""
    n = names.height
    zero = np.zeros(n, dtype=np.int64)
    cols: dict[str, np.ndarray] = {c: zero for c in HOST_INDEX_SCHEMA.names[3:]}
    cols.update(
        hcrank=hc,
        prank=pr,
        hcrank10=np.clip(10 * (np.log10(hc) - 5.0) / 3.5, 0, 10),
        prank10=np.clip(10 * (np.log10(pr) + 8.0) / 3.0, 0, 10),
    )
    if counts is not None:
        records, fetched, captured = counts["records"], counts["fetched"], counts["captured"]
        rest = records - fetched
        gone = np.minimum(rng.binomial(rest, 0.15), rest)
        redir_perm = rng.binomial(rest - gone, 0.05)
        redir_temp = rng.binomial(rest - gone - redir_perm, 0.03)
        unfetched = rest - gone - redir_perm - redir_temp
        nutch = dict(zip(NUTCH, (fetched, unfetched, gone, redir_temp, redir_perm, zero), strict=True))
        for name, value in nutch.items():
            cols[name], cols[name + "_pct"] = value, _pct(value, records)
        length = np.exp(rng.normal(10.2, 0.6, n)).astype(np.int64)
        # 200s whose first content language is not English: nearly all of a non-English host's captures.
        lote = np.where(language != 0, captured, rng.binomial(captured, 0.05))
        cols.update(
            nutch_numRecords=records,
            fetch_200=captured,
            fetch_200_lote=lote,
            fetch_3xx=rng.poisson(0.4, n),
            fetch_4xx=rng.poisson(0.2, n),
            fetch_5xx=rng.poisson(0.02, n),
            fetch_redirPerm=rng.poisson(0.5, n),
            fetch_redirTemp=rng.poisson(0.2, n),
            robots_200=1 + rng.poisson(1.5, n),
            robots_redirPerm=rng.poisson(0.2, n),
            robots_4xx=rng.poisson(0.1, n),
            warc_record_length_av=length,
            warc_record_length_median=(length * rng.uniform(0.8, 1.1, n)).astype(np.int64),
        )
        cols["fetch_200_lote_pct"] = _pct(lote, captured)
    arrays = [pa.array(names[c].to_numpy()) for c in HOST_INDEX_SCHEMA.names[:3]]
    arrays += [pa.array(np.asarray(cols[f.name]), type=f.type) for f in list(HOST_INDEX_SCHEMA)[3:]]
    return pa.Table.from_arrays(arrays, schema=HOST_INDEX_SCHEMA)


def annotation_rows(surt: pl.Series, rng: np.random.Generator, density: np.ndarray) -> pa.Table:
    """GneissWeb columns; gneissweb_education carries the host's observed quality density."""
    n = len(surt)
    topic = rng.dirichlet((1.0, 1.0, 1.0), n)
    return pa.Table.from_arrays(
        [
            pa.array(surt.to_numpy()),
            pa.array(topic[:, 0]),
            pa.array(topic[:, 1]),
            pa.array(density),
            pa.array(topic[:, 2]),
            pa.array(density > 0),
        ],
        schema=ANNOTATION_SCHEMA,
    )


def _pages(
    cfg: SynthConfig,
    rng: np.random.Generator,
    hosts: pl.Series,
    language: np.ndarray,
    means: list[np.ndarray],
) -> pa.Table:
    counts = m.pages_per_host(cfg, rng, len(hosts))
    host_col = np.repeat(hosts.to_numpy(), counts)
    page_no = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    host_lang = np.repeat(language, counts)
    stay = rng.random(len(host_lang)) < PAGE_LANGUAGE_STAY
    other = np.where(host_lang == 0, rng.integers(1, len(m.LANGUAGES), len(host_lang)), 0)
    lang = np.array(m.LANGUAGES)[np.where(stay, host_lang, other)]
    frame = pl.DataFrame({"host": host_col, "n": page_no}).select(
        url=pl.concat_str(pl.lit("https://"), pl.col("host"), pl.lit("/page/"), pl.col("n").cast(pl.String)),
        host=pl.col("host"),
    )
    columns = {"url": frame["url"].to_arrow(), "host": frame["host"].to_arrow(), "language": pa.array(lang)}
    for name, mean in zip(cfg.classifiers, means, strict=False):
        columns[f"score_{name}"] = pa.array(m.page_scores(cfg, rng, mean, counts))
    return pa.table(columns)


def generate(cfg: SynthConfig, out: Path, progress: Callable[[str], None] | None = None) -> SynthResult:
    """Write DIR/host_index/, DIR/annotations/, DIR/ranks.parquet, DIR/pages.parquet and DIR/truth.json.

    All of it is written into a staging folder beside DIR and moved in once complete, so an interrupted
    run leaves nothing a study would read as data (another crawl's partitions in DIR are kept).
    """
    cfg.validate()
    db.memory_limit()  # a bad HOSTCRAWL_DUCKDB_MEMORY says so now, not after the rows (the ranks use DuckDB)
    staging = out.with_name(f".{out.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        result = _generate(cfg, staging, progress)
        _publish(staging, out, f"crawl={cfg.crawl}")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return replace(result, out=out)


def _publish(staging: Path, out: Path, part: str) -> None:
    """Move a finished staging folder's outputs into `out`, replacing the same files and partition."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "truth.json").unlink(missing_ok=True)  # written last: present only beside complete data
    for sub in ("host_index", "annotations"):
        target = out / sub / part
        shutil.rmtree(target, ignore_errors=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging / sub / part, target)
    for name in ("ranks.parquet", "pages.parquet", "truth.json"):
        if (staging / name).exists():
            os.replace(staging / name, out / name)


def _generate(cfg: SynthConfig, out: Path, progress: Callable[[str], None] | None) -> SynthResult:
    latent = m.calibrate(cfg)
    part = f"crawl={cfg.crawl}"
    for sub in ("host_index", "annotations"):
        (out / sub / part).mkdir(parents=True, exist_ok=True)
    link_only = round(cfg.hosts * cfg.link_only_ratio)
    total, page_hosts = cfg.hosts + link_only, cfg.resolved_page_hosts()
    index_writer = pq.ParquetWriter(out / "host_index" / part / "part-00000.parquet", HOST_INDEX_SCHEMA)
    notes_writer = pq.ParquetWriter(out / "annotations" / part / "part-00000.parquet", ANNOTATION_SCHEMA)
    pages_writer: pq.ParquetWriter | None = None
    # each graph host's centralities, in host order, ranked at the end out of core (_write_ranks)
    ranks_input = pq.ParquetWriter(out / RANKS_INPUT, RANKS_INPUT_SCHEMA)
    cover, dens_obs, dens_true, hc_crawled = [], [], [], []
    pages = 0
    try:
        for start in range(0, total, CHUNK_HOSTS):
            stop = min(start + CHUNK_HOSTS, total)
            rng = np.random.default_rng([cfg.seed, start])
            crawled = min(stop, cfg.hosts) - start  # rows of this chunk that have captures
            d = m.HostDraws.draw(rng, stop - start, cfg.english_share)
            names = _names(cfg, rng, np.arange(start, stop), d.tld)
            hc, pr = m.centrality(d, latent.centrality)
            hc[max(crawled, 0) :] /= 10 ** (0.35 * 1.0)  # link-only hosts sit lower in the graph
            ranks_input.write_table(
                pa.table(
                    [
                        pa.array(np.arange(start, stop)),
                        names["graph_host"].to_arrow(),
                        pa.array(hc),
                        pa.array(pr),
                    ],
                    schema=RANKS_INPUT_SCHEMA,
                )
            )
            if crawled > 0:
                block = _subset(d, crawled)
                primary, second = m.host_means(cfg, block)
                density = m.true_density(cfg, primary)
                counts = m.coverage_counts(block, latent.coverage, density)
                observed = m.observed_density(counts)
                cover.append(np.rint(100 * counts["fetched"] / counts["records"]))
                dens_obs.append(observed)
                dens_true.append(density)
                hc_crawled.append(hc[:crawled])
                index_writer.write_table(
                    host_index_rows(names[:crawled], rng, counts, hc[:crawled], pr[:crawled], block.language)
                )
                notes_writer.write_table(annotation_rows(names["surt_host_name"][:crawled], rng, observed))
                in_pages = min(crawled, max(page_hosts - start, 0))
                if in_pages:
                    table = _pages(
                        cfg,
                        rng,
                        names["host"][:in_pages],
                        block.language[:in_pages],
                        [primary[:in_pages], second[:in_pages]],
                    )
                    if pages_writer is None:
                        pages_writer = pq.ParquetWriter(out / "pages.parquet", table.schema)
                    pages_writer.write_table(table)
                    pages += table.num_rows
            if crawled < stop - start:
                lo = max(crawled, 0)
                index_writer.write_table(
                    host_index_rows(names[lo:], rng, None, hc[lo:], pr[lo:], d.language[lo:])
                )
            if progress:
                progress(f"hosts {stop:,}/{total:,}")
    finally:
        index_writer.close()
        notes_writer.close()
        ranks_input.close()
        if pages_writer is not None:
            pages_writer.close()
    write_ranks(cfg.release, out / "ranks.parquet", out / RANKS_INPUT, total)
    (out / RANKS_INPUT).unlink()
    truth = _truth(
        cfg,
        latent,
        np.concatenate(cover),
        np.concatenate(dens_obs),
        np.concatenate(dens_true),
        np.concatenate(hc_crawled),
        pages,
        page_hosts,
    )
    (out / "truth.json").write_text(json.dumps(truth, indent=2) + "\n", encoding="utf-8")
    return SynthResult(out, total, cfg.hosts, pages, page_hosts, truth)


def _subset(d: m.HostDraws, n: int) -> m.HostDraws:
    return m.HostDraws(**{f: getattr(d, f)[..., :n] for f in m.HostDraws.__slots__})


def _truth(
    cfg: SynthConfig,
    latent: m.Latent,
    coverage: np.ndarray,
    observed: np.ndarray,
    density: np.ndarray,
    hc: np.ndarray,
    pages: int,
    page_hosts: int,
) -> dict[str, object]:
    c, k = cfg.page_concentration(), cfg.quality_concentration
    return {
        "config": asdict(cfg),
        "latent": asdict(latent),
        "population_icc1_primary": (c + 1) / (c + 1 + k),
        "coverage_quality_spearman": spearman(coverage, observed),
        "centrality_quality_spearman": spearman(hc, density),
        "mean_true_density": float(density.mean()),
        "quality_column": "gneissweb_education",
        "primary_score": f"score_{cfg.classifiers[0]}",
        "pages": pages,
        "page_hosts": page_hosts,
    }
