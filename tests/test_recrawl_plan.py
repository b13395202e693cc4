"""`hostcrawl recrawl plan`: real DuckDB over host-index parquet in the real schemas, checked with truth."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
from hostcrawl_cli import hostcrawl

from analytics.plan_budget import allocate
from crawler.testweb import SiteModel, TestWebConfig
from crawler.testweb.hostindex import CRAWL, HostIndexFiles, write_host_index


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> HostIndexFiles:
    model = SiteModel(TestWebConfig(n_hosts=300, seed=14, hostile_share=0))
    return write_host_index(model, tmp_path_factory.mktemp("hostindex"))


def _plan(index: HostIndexFiles, out: Path, *extra: str) -> tuple[int, str]:
    args = ["recrawl", "plan", "--host-index", str(index.host_index), "--annotations", str(index.annotations)]
    process = hostcrawl(*args, "--out", str(out), *extra)
    return process.returncode, process.stderr


def test_plan_chooses_the_truly_under_covered_good_hosts(index: HostIndexFiles, tmp_path: Path) -> None:
    out = tmp_path / "plan.parquet"
    code, err = _plan(index, out, "--crawl", CRAWL, "--budget", "600", "--max-tld-share", "1")
    assert code == 0, err
    plan = pl.read_parquet(out)
    truth = pl.read_parquet(index.truth)
    median_coverage = truth["coverage"].median()
    median_density = truth["true_density"].median()
    chosen = plan.join(truth, on="host", how="left")
    assert chosen["true_density"].null_count() == 0  # every planned host exists on the test web
    # Under-covered by Common Crawl, and truly better than the median host.
    assert (chosen["coverage_right"] < median_coverage + 1).all()
    assert (chosen["true_density"] > median_density).mean() >= 0.9
    # Gems are the best of them: top-decile true density for most.
    gems = chosen.filter(pl.col("reason") == "gem")
    assert gems.height >= 5
    assert (gems["true_density"] >= truth["true_density"].quantile(0.75)).mean() >= 0.8
    # The plan holds most of the truly missing high-quality pages of the under-covered hosts.
    under = truth.filter(pl.col("coverage") < median_coverage)
    assert chosen["missing_hq_true"].sum() >= 0.6 * under["missing_hq_true"].sum()
    # Budgets: whole pages, the total, and proportional to the estimated missing pages.
    assert plan["budget"].sum() <= 600
    assert (plan["budget"] <= plan["unfetched"]).all()
    top, bottom = plan.sort("missing_hq").tail(5), plan.sort("missing_hq").head(5)
    assert top["budget"].mean() > 3 * bottom["budget"].mean()
    assert set(plan["reason"]) <= {"gem", "under-covered"}
    # Priors: HC/PR percentiles of the host index's ranks (here made from the test web's in-links).
    assert plan["hc_percentile"].is_between(0, 1).all() and plan["pr_percentile"].is_between(0, 1).all()
    by_links = chosen.sort("in_links")
    assert (
        by_links["hc_percentile"].is_sorted()
        or chosen.select(pl.corr("hc_percentile", "in_links", method="spearman")).item() > 0.99
    )
    assert plan["seed_url"].str.starts_with("https://").all()
    summary = json.loads(out.with_suffix(".json").read_text())
    assert summary["hosts"] == plan.height and summary["config"]["crawl"] == CRAWL


def test_partitions_with_different_schemas_need_a_crawl_choice(index: HostIndexFiles, tmp_path: Path) -> None:
    out = tmp_path / "plan.parquet"
    code, err = _plan(index, out)
    assert code == 2
    assert "several crawls" in err and "--crawl" in err
    assert not out.exists()


def test_diversity_guard_holds_a_language_to_its_share(index: HostIndexFiles, tmp_path: Path) -> None:
    out = tmp_path / "plan.parquet"
    code, err = _plan(
        index, out, "--crawl", CRAWL, "--budget", "400", "--max-tld-share", "1", "--max-language-share", "0.5"
    )
    assert code == 0, err
    plan = pl.read_parquet(out)
    shares = plan.group_by("language").agg(pl.col("budget").sum()).with_columns(s=pl.col("budget") / 400)
    assert shares["s"].max() <= 0.5 + 1e-9
    assert "language en held to 50%" in err
    summary = json.loads(out.with_suffix(".json").read_text())
    assert summary["capped_by_guard"] == {"language": ["en"]}


def test_allocation_is_proportional_capped_and_guarded() -> None:
    missing = np.array([100.0, 50.0, 25.0, 25.0, 0.0])
    cap = np.array([1000, 1000, 1000, 10, 1000])
    tld = np.array([0, 0, 1, 2, 1])
    pages, report = allocate(missing, cap, 100, {"tld": (tld, 0.6)})
    assert pages.sum() == 100
    assert pages[4] == 0  # nothing missing, nothing given
    assert pages[3] <= 10  # its cap
    assert pages[0] + pages[1] <= 60  # TLD 0 held to 60%
    assert pages[0] == pytest.approx(2 * pages[1], abs=1)  # proportional within the guard
    assert report.capped == {"tld": ["0"]}


def test_bad_inputs_fail_with_one_line_and_write_nothing(index: HostIndexFiles, tmp_path: Path) -> None:
    out = tmp_path / "plan.parquet"
    # a budget of 0
    code, err = _plan(index, out, "--crawl", CRAWL, "--budget", "0")
    assert code == 2 and "--budget 0" in err and len(err.strip().splitlines()) == 1
    # a host index without a column the plan needs
    broken = tmp_path / "broken" / f"crawl={CRAWL}"
    broken.mkdir(parents=True)
    table = pq.read_table(index.host_index / f"crawl={CRAWL}" / "part-00000.parquet")
    table = table.drop(["nutch_unfetched"])
    pq.write_table(table, broken / "part-00000.parquet")
    process = hostcrawl(
        "recrawl", "plan", "--host-index", str(broken.parent), "--annotations", str(index.annotations),
        "--crawl", CRAWL, "--out", str(out),
    )  # fmt: skip
    assert process.returncode == 2
    assert "missing column 'nutch_unfetched'" in process.stderr and "part-00000.parquet" in process.stderr
    assert len(process.stderr.strip().splitlines()) == 1
    # an index where every host is fully covered: the plan would be empty
    full = tmp_path / "full" / f"crawl={CRAWL}"
    full.mkdir(parents=True)
    frame = pl.read_parquet(index.host_index / f"crawl={CRAWL}" / "part-00000.parquet")
    frame = frame.with_columns(nutch_fetched_pct=pl.lit(100, pl.Int8), nutch_unfetched=pl.lit(0, pl.Int64))
    frame.write_parquet(full / "part-00000.parquet")
    process = hostcrawl(
        "recrawl", "plan", "--host-index", str(full.parent), "--annotations", str(index.annotations),
        "--crawl", CRAWL, "--out", str(out),
    )  # fmt: skip
    assert process.returncode == 2 and "plan would be empty" in process.stderr
    assert not out.exists() and not out.with_suffix(".json").exists()
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("own_percentiles", [True, False], ids=["ranks-percentiles", "values-only"])
def test_ranks_give_the_percentiles_and_synth_data_plans(tmp_path: Path, own_percentiles: bool) -> None:
    """A ranks parquet's own percentiles (graph ranks, study synth) are used as they are; a ranks file with
    only host, hc_val and pr_val gets each value's share of its hosts. Either way they follow the values."""
    data = tmp_path / "synth"
    made = hostcrawl("study", "synth", "--hosts", "3000", "--out", str(data))
    assert made.returncode == 0, made.stderr
    if not own_percentiles:
        values = pl.read_parquet(data / "ranks.parquet", columns=["host", "hc_val", "pr_val"])
        values.write_parquet(data / "ranks.parquet")
    out = tmp_path / "plan.parquet"
    process = hostcrawl("recrawl", "plan", "--data", str(data), "--budget", "2000", "--out", str(out))
    assert process.returncode == 0, process.stderr
    plan = pl.read_parquet(out)
    assert plan["hc_percentile"].null_count() <= 0.1 * plan.height
    ranks = pl.read_parquet(data / "ranks.parquet", columns=["host", "hc_val"])
    ranks = ranks.with_columns(host=pl.col("host").str.replace(r"^www\.", ""))
    joined = plan.join(ranks, on="host")
    assert joined.height >= 0.9 * plan.height  # www and bare spellings both find their rank
    assert joined.select(pl.corr("hc_percentile", "hc_val", method="spearman")).item() > 0.99
    assert plan["budget"].sum() == 2000
    shares = json.loads(out.with_suffix(".json").read_text())["shares"]
    assert max(shares["tld"].values()) <= 0.3 and max(shares["language"].values()) <= 0.6


def test_a_plan_is_not_written_over_an_existing_one_without_force(
    index: HostIndexFiles, tmp_path: Path
) -> None:
    """`recrawl plan` overwrote --out silently, unlike `score` and `graph ingest`."""
    out = tmp_path / "plan.parquet"
    assert _plan(index, out, "--crawl", CRAWL, "--budget", "300")[0] == 0
    first = out.read_bytes()
    code, err = _plan(index, out, "--crawl", CRAWL, "--budget", "600")
    assert code == 2 and "exists; pass --force" in err and len(err.strip().splitlines()) == 1
    assert out.read_bytes() == first
    assert _plan(index, out, "--crawl", CRAWL, "--budget", "600", "--force")[0] == 0
    assert out.read_bytes() != first


def test_percentiles_count_the_population_at_or_below_each_value_as_a_sort_would() -> None:
    """The HC/PR percentiles of a plan: DuckDB's count and ASOF join give what sorting the whole population
    and a binary search per host gave (ties, NaN in the population, values outside it, missing values)."""
    from analytics import db
    from analytics.recrawl_plan import _percentiles

    rng = np.random.default_rng(7)
    population = np.round(rng.normal(size=5000), 2)  # many ties
    population[:20] = np.nan
    wanted = np.concatenate(
        [rng.choice(population[20:], 300), rng.normal(size=300) * 3, [np.nan, -99.0, 99.0]]
    )
    con = db.connect()
    con.register("pop", pl.DataFrame({"v": population}).to_arrow())
    got = _percentiles(con, "SELECT v FROM pop", pl.Series(wanted).fill_nan(None).append(pl.Series([0.5])))
    expected = np.searchsorted(np.sort(population), np.append(wanted, 0.5), side="right") / len(population)
    expected[np.isnan(np.append(wanted, 0.5))] = np.nan
    assert got.null_count() == 1 and got[len(wanted) - 3] is None
    assert np.allclose(got.fill_null(np.nan).to_numpy(), expected, equal_nan=True, rtol=0, atol=1e-12)
    assert got[len(wanted) - 2] == 0.0 and got[len(wanted) - 1] == 1.0 - 20 / 5000  # NaN sorts above all
