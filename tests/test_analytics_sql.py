"""Every study query on a table small enough to work out by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats as sps

from analytics import db
from analytics import simulate as sim
from analytics.hosttable import host_counts_sql, surt_sql
from analytics.studies import coverage, ksample, language
from analytics.study import Output, pages_view, ranks_view
from analytics.study_inputs import Inputs
from graph.hostnames import surt_host, www_key


def _pages_con(tmp_path: Path, rows: list[tuple[str, float, str]]) -> db.duckdb.DuckDBPyConnection:
    frame = pl.DataFrame(
        [
            {"url": f"https://{h}/{i}", "host": h, "score_q": s, "language": lang}
            for i, (h, s, lang) in enumerate(rows)
        ]
    )
    frame.write_parquet(tmp_path / "pages.parquet")
    con = db.connect()
    pages_view(con, tmp_path / "pages.parquet", None, language=True)
    return con


def test_host_name_sql_agrees_with_graph_hostnames() -> None:
    hosts = [
        "www.example.com",
        "WWW.Example.COM.",
        "www.com",
        "blog.example.co.uk",
        "www2.example.org",
        "a.b",
        "www.a",
    ]
    con = db.connect()
    con.register("h", pl.DataFrame({"host": hosts}).to_arrow())
    rows = con.execute(
        f"SELECT {db.www_key_sql('host')}, {surt_sql(db.www_key_sql('host'))} FROM h"
    ).fetchall()
    assert [r[0] for r in rows] == [www_key(h) for h in hosts]
    assert [r[1] for r in rows] == [surt_host(h) for h in hosts]
    tlds = con.execute(f"SELECT {db.tld_sql('host')} FROM h").fetchall()
    assert [t[0] for t in tlds] == ["com", "com", "com", "uk", "org", "b", "a"]


def test_ksample_rows_split_each_host_into_sample_and_rest(tmp_path: Path) -> None:
    # a: 4 pages all HQ; b: 3 pages with one HQ (0.5 itself is not above the threshold); c: 1 page.
    rows = (
        [("a.example", 0.9, "en")] * 4
        + [("b.example", s, "en") for s in (0.9, 0.5, 0.1)]
        + [("c.example", 0.9, "en")]
    )
    con = _pages_con(tmp_path, rows)
    positions = f"({ksample.positions_sql('score_q', 0.5, 0)})"
    got = con.execute(f"{ksample.samples_sql(positions, 3, 1)} ORDER BY k, host").fetchall()
    expected = [(1, "a.example"), (1, "b.example"), (2, "a.example"), (2, "b.example"), (3, "a.example")]
    assert [(k, h) for k, h, _, _ in got] == expected
    for k, host, sample, rest in got:
        n, total = (4, 4) if host == "a.example" else (3, 1)
        assert sample * k + rest * (n - k) == pytest.approx(total)
        if host == "a.example":
            assert (sample, rest) == (1.0, 1.0)


def test_host_counts_count_pages_hq_and_the_probe(tmp_path: Path) -> None:
    rows = [("www.a.example", s, "en") for s in (0.9, 0.9, 0.1, 0.5)] + [
        ("b.example", s, "en") for s in (0.6, 0.7)
    ]
    con = _pages_con(tmp_path, rows)
    got = {r[0]: r[1:] for r in con.execute(host_counts_sql("score_q", 0.5, 2, 0)).fetchall()}
    key, tld, n, hq, sample_hq, _ = got["www.a.example"]
    assert (key, tld, n, hq) == ("a.example", "example", 4, 2)
    assert 0 <= sample_hq <= 2
    assert got["b.example"][2:5] == (2, 2, 2)  # both pages sampled, both HQ


def test_language_medians_take_the_main_language_and_join_ranks_without_www(tmp_path: Path) -> None:
    rows = [("www.a.example", 0.2, "en"), ("www.a.example", 0.4, "en"), ("www.a.example", 0.9, "de")]
    rows += [("b.example", 0.3, "fr")] * 2
    con = _pages_con(tmp_path, rows)
    pl.DataFrame({"host": ["a.example"], "hc_val": [5.0], "pr_val": [1e-9]}).write_parquet(
        tmp_path / "ranks.parquet"
    )
    ranks_view(con, tmp_path / "ranks.parquet")
    got = con.sql(language.host_medians_sql(["score_q"], 3)).pl()
    assert got.height == 1  # b has 2 pages
    row = got.row(0, named=True)
    assert (row["language"], row["score_q"], row["stratum"], row["hc"]) == ("en", 0.4, "English", 5.0)


def _write_cc(tmp_path: Path) -> Inputs:
    crawl = tmp_path / "hi" / "crawl=CC-MAIN-2024-10"
    crawl.mkdir(parents=True)
    pl.DataFrame(
        {
            "surt_host_name": ["com,a", "com,b", "org,c", "org,d", "de,e", "de,f"],
            "url_host_tld": ["com", "com", "org", "org", "de", "de"],
            "nutch_numRecords": [100, 10, 10, 20, 5, 5],
            "nutch_fetched": [10, 5, 10, 19, 0, 5],
            "nutch_fetched_pct": pl.Series([10, 50, 100, 95, 0, 100], dtype=pl.Int8),
            "nutch_unfetched": [90, 5, 0, 1, 5, 0],
            "fetch_200": [5, 3, 6, 10, 0, 3],
        }
    ).write_parquet(crawl / "part-0.parquet")
    notes = tmp_path / "ann" / "crawl=CC-MAIN-2024-10"
    notes.mkdir(parents=True)
    pl.DataFrame(
        {
            "surt_host_name": ["com,a", "com,b", "org,c", "org,d", "de,e"],
            "gneissweb_education": [0.95, 0.1, 0.9, 0.8, 0.5],
        }
    ).write_parquet(notes / "part-0.parquet")
    return Inputs(host_index=tmp_path / "hi", annotations=tmp_path / "ann")


def test_coverage_tables_match_the_hand_computed_answer(tmp_path: Path) -> None:
    # de,e was never fetched and de,f has no annotation: four hosts remain.
    summary = coverage.run(db.connect(), _write_cc(tmp_path), Output(tmp_path, "coverage")).row(0, named=True)
    cover, density = [10, 50, 100, 95], [0.95, 0.1, 0.9, 0.8]
    assert summary["hosts"] == 4
    assert summary["spearman"] == pytest.approx(sps.spearmanr(cover, density).statistic)
    assert summary["median_coverage"] == pytest.approx(72.5)  # (50 + 95) / 2
    assert summary["gem_density_threshold"] == pytest.approx(
        0.9 + 0.7 * 0.05
    )  # quantile_cont(0.9) of 4 values
    missed = 90 * 0.95 + 5 * 0.1 + 0 + 1 * 0.8
    assert summary["missed_hq"] == pytest.approx(missed)
    assert summary["gems"] == 1  # com,a: coverage 10 < 72.5 and density 0.95 >= 0.935
    assert summary["missed_share_on_gems"] == pytest.approx(85.5 / missed)
    assert summary["missed_share_below_20pct"] == pytest.approx(85.5 / missed)
    bins = pl.read_parquet(tmp_path / "coverage" / "coverage_bins.parquet")
    assert bins["coverage_bin"].to_list() == ["10-19", "50-59", "90-100"]
    assert bins["hosts"].to_list() == [1, 1, 2]
    assert bins["median_density"].to_list() == pytest.approx([0.95, 0.1, 0.85])
    tld = pl.read_parquet(tmp_path / "coverage" / "coverage_tld.parquet")
    assert tld.select("tld", "hosts").rows() == [("com", 2), ("org", 2)]
    assert tld["missed_hq"].to_list() == pytest.approx([86.0, 0.8])
    gems = pl.read_parquet(tmp_path / "coverage" / "gems.parquet")
    assert gems["host"].to_list() == ["com,a"]


def test_crawl_in_order_crawls_the_last_host_partly() -> None:
    n, hq = np.array([2, 4, 1]), np.array([2, 1, 0])
    got = sim.crawl_in_order(n, hq, np.array([0, 1, 2]), np.array([0, 1, 2, 4, 7, 10]))
    assert got.hq.tolist() == pytest.approx([0, 1, 2, 2.5, 3, 3])
    assert got.hosts_touched.tolist() == [0, 1, 1, 2, 3, 3]


def test_uniform_breadth_fills_every_host_to_the_same_depth() -> None:
    n, hq = np.array([1, 3, 5]), np.array([1, 0, 5])
    got = sim.uniform_breadth(n, hq, np.array([2, 5, 6, 9]))
    # 2: depth 0, two pages over three hosts (mean density 2/3); 5: depth 2 -> 1 + 0 + 2;
    # 6: depth 2 plus one page on a host deeper than 2 (mean density 0.5); 9: everything.
    assert got.hq.tolist() == pytest.approx([4 / 3, 3, 3.5, 6])


def test_sample_then_deepen_pays_for_probes_then_deepens_the_best_host() -> None:
    n, hq, sample_hq = np.array([4, 4]), np.array([4, 0]), np.array([2, 0])
    got = sim.sample_then_deepen(n, hq, sample_hq, 2, np.array([2, 6, 8]), np.array([0, 1], dtype=np.uint64))
    assert got.hq.tolist() == pytest.approx([1.0, 4.0, 4.0])  # 2 pages at the probe rate 2/4; then host 0


def test_tlds_covered_counts_distinct_tlds_among_touched_hosts() -> None:
    got = sim.tlds_covered(np.array([2, 0, 1]), np.array([0, 0, 1]), np.array([0, 1, 2, 3]))
    assert got.tolist() == [0, 1, 2, 2]


def test_hosts_missing_from_the_graph_come_last() -> None:
    order = sim.order_by(np.array([np.nan, 3.0, 5.0]), np.array([0, 1, 2], dtype=np.uint64))
    assert order.tolist() == [2, 1, 0]
