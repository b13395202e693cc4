"""plan -> crawl -> report end to end: a host index of the test web's own hosts, a real plan, a real crawl."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
from hostcrawl_cli import hostcrawl

from analytics.recrawl_plan import PLAN_COLUMNS
from crawler.testweb import SiteModel, TestWebConfig, TestWebProcess
from crawler.testweb.hostindex import HostIndexFiles, write_host_index
from scheduler.host_priors import PLAN_PRIOR_PAGES, apply_prior, load_priors
from scheduler.hosts import HostRecord

pytestmark = pytest.mark.slow

BUDGET = 300
UNKNOWN_HOST = "gone-1.example"  # planned, but the test web does not serve it
WEB = TestWebConfig(n_hosts=150, seed=14, hostile_share=0, directives_share=0)


@dataclass
class PlannedCrawl:
    plan: pl.DataFrame
    index: HostIndexFiles
    web_dir: Path
    run_dir: Path
    process: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> PlannedCrawl:
    base = tmp_path_factory.mktemp("recrawl")
    cfg = WEB
    index = write_host_index(SiteModel(cfg), base / "cc")
    plan_path = base / "plan.parquet"
    made = hostcrawl(
        "recrawl", "plan", "--host-index", str(index.host_index), "--annotations", str(index.annotations),
        "--crawl", index.crawl, "--budget", str(BUDGET), "--max-tld-share", "1", "--scheme", "http",
        "--out", str(plan_path),
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    plan = pl.read_parquet(plan_path)
    gone = plan.head(1).with_columns(
        host=pl.lit(UNKNOWN_HOST), seed_url=pl.lit(f"http://{UNKNOWN_HOST}/"), budget=pl.lit(10, pl.Int64)
    )
    plan = pl.concat([plan, gone])
    plan.write_parquet(plan_path)
    run_dir = base / "run"
    with TestWebProcess(cfg, base / "web") as web:
        process = hostcrawl(
            "crawl", "--plan", str(plan_path), "--out", str(run_dir), "--proxy", web.proxy_url,
            "--allow-private", "--min-delay", "0.05", "--timeout", "3", "--no-progress",
            "--truth", str(base / "web" / "hosts.parquet"),
        )  # fmt: skip
    return PlannedCrawl(plan, index, base / "web", run_dir, process)


def test_plan_crawl_report_end_to_end(planned: PlannedCrawl) -> None:
    assert planned.process.returncode == 0, planned.process.stderr[-3000:]
    run, plan = planned.run_dir, planned.plan
    pages = pl.read_parquet(run / "pages.parquet").filter(pl.col("status").is_not_null())
    planned_hosts = set(plan["host"])
    # Only the plan's hosts are crawled, each of them is, and the budget is the plan's total.
    assert set(pages["host"]) <= planned_hosts
    assert set(plan["host"]) - {UNKNOWN_HOST} <= set(pages["host"])
    stats = json.loads((run / "stats.json").read_text())
    total = int(plan["budget"].sum())
    assert len(pages.filter(~pl.col("url").str.ends_with("/robots.txt"))) <= total
    # What the unknown host and the hosts that ran out could not use went to the next ones.
    assert stats["plan/budget_spilled"] >= 8
    per_host = pages.group_by("host").len().join(plan.select("host", "budget"), on="host")
    assert (per_host["len"] > per_host["budget"]).any()
    # The report compares the plan's expectation with what the crawl got and with the truth.
    report = (run / "report.md").read_text()
    assert "Recrawl plan: expected vs got" in report and "true_hq_got" in report
    assert f"1 planned hosts answered no page ({UNKNOWN_HOST})" in report
    table = pl.read_parquet(run / "plan_hosts.parquet")
    assert table.height == plan.height
    assert {"expected_hq", "got_hq", "true_hq_got", "true_hq_on_host"} <= set(table.columns)
    # The plan's hosts are good: high-quality pages per fetch well above the web's share of them.
    truth_pages = pl.read_parquet(planned.web_dir / "pages.parquet")
    web_share = truth_pages["high_quality"].mean()
    per_fetch = table["true_hq_got"].sum() / table["fetched"].sum()
    assert per_fetch > 1.5 * web_share  # type: ignore[operator]
    assert table.filter(pl.col("host") == UNKNOWN_HOST)["true_hq_got"].sum() == 0


def test_the_plan_sets_each_hosts_budget_and_starts_its_estimate(planned: PlannedCrawl) -> None:
    plan_file = planned.run_dir.parent / "plan.parquet"
    priors = load_priors(plan_file)
    assert priors is not None
    row = planned.plan.sort("density").row(0, named=True)
    record = HostRecord(row["host"])
    apply_prior(record, priors.lookup(row["host"]))
    assert record.budget == row["budget"]
    assert record.density_mean() == pytest.approx(max(row["density"], 0.02), abs=1e-9)
    record.high += 4  # the crawl's own scores then move it as usual
    assert record.density_mean() > max(row["density"], 0.02)
    assert record.prior_alpha + record.prior_beta == pytest.approx(PLAN_PRIOR_PAGES)


def test_bad_plans_fail_before_anything_is_written(planned: PlannedCrawl, tmp_path: Path) -> None:
    good = planned.plan
    cases = {
        "missing": good.drop("budget"),
        "empty": good.head(0),
        "zero": good.with_columns(budget=pl.lit(0, pl.Int64)),
    }
    messages = {"missing": "missing column 'budget'", "empty": "no hosts", "zero": "at least one page"}
    for name, frame in cases.items():
        path = tmp_path / f"{name}.parquet"
        frame.write_parquet(path)
        out = tmp_path / f"run-{name}"
        process = hostcrawl("crawl", "--plan", str(path), "--out", str(out), "--no-progress")
        assert process.returncode == 2, (name, process.stderr)
        assert messages[name] in process.stderr and str(path) in process.stderr
        assert not out.exists()
    assert {c.name for c in PLAN_COLUMNS} <= set(good.columns)


def plan_from_run(run_dir: Path, out: Path, budget: int) -> pl.DataFrame:
    """`recrawl plan --previous RUN` with no diversity guard, as plan.parquet's rows."""
    process = hostcrawl(
        "recrawl", "plan", "--previous", str(run_dir), "--budget", str(budget), "--max-tld-share", "1",
        "--max-language-share", "1", "--out", str(out),
    )  # fmt: skip
    assert process.returncode == 0, process.stderr
    plan = pl.read_parquet(out)
    # no --scheme: each host's seed is as the run fetched it (http here), not the https default
    assert plan.height and plan["seed_url"].str.starts_with("http://").all(), plan["seed_url"].to_list()
    return plan


def test_a_plan_from_the_run_picks_the_good_hosts_it_left_shallow(
    planned: PlannedCrawl, tmp_path: Path
) -> None:
    plan = plan_from_run(planned.run_dir, tmp_path / "again.parquet", 200)
    hosts = pl.read_parquet(planned.run_dir / "hosts.parquet")
    assert set(plan["reason"]) == {"under-crawled last run"}
    chosen = plan.join(hosts, on="host")
    assert chosen.height == plan.height
    assert (chosen["queued"] > 0).all()
    assert set(chosen["state"]) <= {"new", "sampling", "scored", "deepening"}
    median = hosts.filter(pl.col("density_mean").is_not_null())["density_mean"].median()
    assert (chosen["density_mean"] >= median).all()
    assert chosen["missing_hq"].to_list() == pytest.approx(
        (chosen["queued"] * chosen["density_mean"]).to_list()
    )
    assert (plan["budget"] <= plan["unfetched"]).all() and plan["budget"].sum() <= 200


def test_a_crawl_of_a_plan_made_from_a_run_revisits_that_runs_pages_of_the_planned_hosts_only(
    planned: PlannedCrawl, tmp_path: Path
) -> None:
    plan_path = tmp_path / "again.parquet"
    plan = plan_from_run(planned.run_dir, plan_path, 120)
    before = pl.read_parquet(planned.run_dir / "pages.parquet").filter(pl.col("status") == 200)
    run = tmp_path / "recrawl"
    with TestWebProcess(WEB, tmp_path / "web") as web:  # the same web: unchanged pages answer 304
        crawl = hostcrawl(
            "crawl", "--plan", str(plan_path), "--out", str(run), "--proxy", web.proxy_url,
            "--allow-private", "--min-delay", "0.05", "--timeout", "3", "--no-progress",
        )  # fmt: skip
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    # no --previous: the plan names its source run, whose pages are revisited with conditional GETs
    assert str(planned.run_dir.resolve()) in (run / "config.toml").read_text()
    stats = json.loads((run / "stats.json").read_text())
    assert stats.get("revisit/conditional_get", 0) > 0
    pages = pl.read_parquet(run / "pages.parquet").filter(pl.col("status").is_not_null())
    not_modified = pages.filter(pl.col("status") == 304)
    assert not_modified.height > 0 and set(not_modified["url"]) <= set(before["url"])
    # the source run's pages of hosts outside the plan are not seeded: they have no budget in it
    assert set(pages["host"]) <= set(plan["host"])
