"""Generated data meets the real schemas, and every study recovers the truth it was generated with."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analytics import db
from analytics.studies import coverage, depth, icc, ksample, language
from analytics.study import Output
from analytics.study_inputs import Inputs
from analytics.synth import ANNOTATION_SCHEMA, SynthResult, generate
from analytics.synth_config import SynthConfig

CONFIGURED_COVERAGE_RHO = 0.3  # far from the default, so recovering it cannot be an accident


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> SynthResult:
    cfg = SynthConfig(hosts=30_000, page_hosts=20_000, coverage_quality_rho=CONFIGURED_COVERAGE_RHO, seed=3)
    return generate(cfg, tmp_path_factory.mktemp("synth"))


@pytest.fixture(scope="module")
def deep_synth(tmp_path_factory: pytest.TempPathFactory) -> SynthResult:
    cfg = SynthConfig(hosts=6_000, pages_per_host=30, link_only_ratio=0.1, seed=4)
    return generate(cfg, tmp_path_factory.mktemp("deep"))


def test_host_index_has_the_real_columns_and_physical_types(synth: SynthResult) -> None:
    files = list((synth.out / "host_index").rglob("*.parquet"))
    assert [f.parent.name for f in files] == ["crawl=CC-MAIN-2024-10"]
    schema = pq.read_schema(files[0])
    assert len(schema.names) == 42  # HOST-INDEX.md's columns; the 43rd, crawl, is the partition
    assert schema.field("nutch_fetched_pct").type == pa.int8()
    assert schema.field("nutch_numRecords").type == pa.int64()
    assert schema.field("hcrank").type == pa.float64()
    assert schema.field("surt_host_name").type == pa.string()
    table = pl.read_parquet(files[0])
    assert table.height == synth.host_index_rows == 60_000
    link_only = table.filter(pl.col("nutch_numRecords") == 0)
    assert link_only.height == 30_000  # about half the rows: known from links, never crawled
    assert (link_only["fetch_200"] == 0).all() and (link_only["hcrank"] > 0).all()
    crawled = table.filter(pl.col("nutch_numRecords") > 0)
    assert (crawled["nutch_fetched"] <= crawled["nutch_numRecords"]).all()
    assert (crawled["nutch_fetched_pct"].cast(pl.Int64).is_between(0, 100)).all()
    assert not table["surt_host_name"].str.starts_with("com,www").any()  # SURT strips www


def test_annotations_ranks_and_pages_have_their_schemas(synth: SynthResult) -> None:
    notes = pq.read_schema(next((synth.out / "annotations").rglob("*.parquet")))
    assert notes.names == ANNOTATION_SCHEMA.names
    ranks = pl.read_parquet(synth.out / "ranks.parquet")
    assert ranks.columns[:7] == ["host", "host_rev", "hc_pos", "hc_val", "pr_pos", "pr_val", "release"]
    assert ranks["hc_pos"].to_list() == list(range(1, ranks.height + 1))
    # positions rank the values (1 = most central), for both measures; numbered out of core by DuckDB
    assert ranks["hc_val"].is_sorted(descending=True)
    by_pr = ranks.sort("pr_pos")
    assert by_pr["pr_pos"].to_list() == list(range(1, ranks.height + 1))
    assert by_pr["pr_val"].is_sorted(descending=True)
    assert ranks.height == synth.host_index_rows and ranks["host"].n_unique() == ranks.height
    assert ranks["hc_percentile"][0] == 1.0 and ranks["pr_percentile"].min() == 1 / ranks.height
    assert pq.read_schema(synth.out / "ranks.parquet").metadata[b"format"] == b"hostcrawl.graph.ranks_v1"
    assert sorted(p.name for p in synth.out.iterdir()) == [
        "annotations", "host_index", "pages.parquet", "ranks.parquet", "truth.json"
    ]  # fmt: skip
    pages = pl.read_parquet(synth.out / "pages.parquet")
    assert pages.columns == ["url", "host", "language", "score_edu", "score_biased"]
    assert pages["host"].n_unique() == 20_000
    assert 4.0 < pages.height / 20_000 < 6.0  # about five pages per host


def test_icc_recovers_the_configured_icc(synth: SynthResult, tmp_path: Path) -> None:
    table = icc.run(
        db.connect(), Inputs.from_dir(synth.out), Output(tmp_path, "icc"), scores=["edu"], min_pages=(3,)
    )
    assert table["icc1"][0] == pytest.approx(0.5, abs=0.03)


def test_ksample_at_three_pages_lands_near_the_papers_053(synth: SynthResult, tmp_path: Path) -> None:
    table = ksample.run(db.connect(), Inputs.from_dir(synth.out), Output(tmp_path, "ks"), scores=["edu"])
    rho = dict(table.select("k", "rho").iter_rows())
    assert rho[3] == pytest.approx(0.53, abs=0.06)
    assert rho[1] < rho[3] < rho[10]  # the curve climbs with k


def test_coverage_recovers_the_configured_correlation(synth: SynthResult, tmp_path: Path) -> None:
    summary = coverage.run(db.connect(), Inputs.from_dir(synth.out), Output(tmp_path, "cov")).row(
        0, named=True
    )
    assert summary["hosts"] == 30_000
    assert summary["spearman"] == pytest.approx(CONFIGURED_COVERAGE_RHO, abs=0.03)
    gems = pl.read_parquet(tmp_path / "cov" / "gems.parquet")
    assert gems.height == summary["gems"] > 0
    assert (gems["coverage"] < summary["median_coverage"]).all()
    assert (gems["density"] >= summary["gem_density_threshold"]).all()


def test_language_split_shows_the_biased_classifiers_sign_flip(synth: SynthResult, tmp_path: Path) -> None:
    table = language.run(db.connect(), Inputs.from_dir(synth.out), Output(tmp_path, "lang"))
    hc = table.filter((pl.col("classifier") == "biased") & (pl.col("centrality") == "HC"))
    rho = dict(hc.select("stratum", "rho").iter_rows())
    assert rho["all"] < 0 < rho["English"]  # as DCLM in the paper: negative pooled, positive within English


def test_depth_sample_then_deepen_beats_uniform_and_nears_the_oracle(
    deep_synth: SynthResult, tmp_path: Path
) -> None:
    table = depth.run(
        db.connect(), Inputs.from_dir(deep_synth.out), Output(tmp_path, "depth"), scores=["edu"]
    )
    at = table.filter(pl.col("budget_fraction") == 0.3)
    ratio = dict(at.select("policy", "vs_uniform").iter_rows())
    of_oracle = dict(at.select("policy", "vs_oracle").iter_rows())
    assert ratio["sample-then-deepen (k=3)"] > 1.5
    assert of_oracle["sample-then-deepen (k=3)"] > 0.7
    assert of_oracle["sample-then-deepen (k=3, probes known)"] > 0.8
    assert ratio["HC depth"] < ratio["sample-then-deepen (k=3)"]
