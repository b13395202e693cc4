"""Every policy crawls the test web for real, and the server's request log shows it stayed polite."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from hostcrawl_cli import hostcrawl

from crawler.bench.audit import audit_test_web
from crawler.testweb import SiteModel, TestWebConfig, TestWebProcess

pytestmark = pytest.mark.slow

MIN_DELAY = 0.1
BUDGET = 60
WEB = TestWebConfig(n_hosts=16, seed=21)


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestWebProcess]:
    web_dir = tmp_path_factory.mktemp("web")
    with TestWebProcess(WEB, web_dir) as process:
        yield process


@pytest.mark.parametrize("policy", ["uniform", "hc_depth", "sample_deepen", "adaptive", "oracle"])
def test_policy_crawls_within_budget_and_stays_polite(
    web: TestWebProcess, tmp_path: Path, policy: str
) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("\n".join(web.seed_urls) + "\n")
    truth = str(web.out_dir / "hosts.parquet")
    ua = f"polite-{policy}/1.0"
    run = tmp_path / "run"
    result = hostcrawl(
        "crawl",
        "--seeds",
        str(seeds),
        "--out",
        str(run),
        "--proxy",
        web.proxy_url,
        "--allow-private",
        "--min-delay",
        str(MIN_DELAY),
        "--max-pages",
        str(BUDGET),
        "--policy",
        policy,
        "--priors",
        truth,
        "--truth",
        truth,
        "--user-agent",
        ua,
        "--no-progress",
        "--timeout",
        "4",
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    stats = json.loads((run / "stats.json").read_text())
    assert stats["hostcrawl/policy"].startswith(policy)
    assert stats["frontier/fetched"] == BUDGET
    pages = pl.read_parquet(run / "pages.parquet")
    assert set(pages["policy"].drop_nulls().to_list()) == {stats["hostcrawl/policy"]}

    log, audit = audit_test_web(web.out_dir, SiteModel(WEB), MIN_DELAY, ua, ua)
    assert log.height >= BUDGET
    assert audit.clean, audit.as_dict()
