"""Links and page directives through a real crawl of the test web: redirects, gzipped sitemaps, nofollow,
robots meta and X-Robots-Tag, AI-training opt-outs (noai, TDMRep), checked from the server's side."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
from hostcrawl_cli import hostcrawl

from crawler.bench.audit import audit_directives, audit_test_web, read_request_log
from crawler.pages.sinks import read_text_shards
from crawler.testweb import SiteModel, TestWebConfig, TestWebProcess
from crawler.testweb import directive_hosts as dx
from crawler.testweb.server import REQUESTS_FILE

pytestmark = pytest.mark.slow

MIN_DELAY = 0.2
USER_AGENT = "hostcrawl/1.0"  # the product token the test web's agent-scoped headers name
WEB = TestWebConfig(
    n_hosts=5,
    seed=4,
    hostile_share=0.0,
    directives_share=1.0,
    mean_quality=0.75,
    crawl_delay_share=0.0,
    real_robots_share=0.0,
    robots_dir="",
    pages_median=30,
    pages_range=(22, 34),
)


@dataclass
class Crawl:
    run_dir: Path
    web_dir: Path
    process: subprocess.CompletedProcess[str]
    stats: dict[str, int]
    log: pl.DataFrame
    pages: pl.DataFrame
    truth: pl.DataFrame


def _crawl(base: Path, *extra: str) -> Crawl:
    web_dir, run_dir = base / "web", base / "run"
    web_dir.mkdir()
    with TestWebProcess(WEB, web_dir) as web:
        seeds = base / "seeds.txt"
        seeds.write_text("\n".join(web.seed_urls) + "\n")
        process = hostcrawl(
            "crawl", "--seeds", str(seeds), "--out", str(run_dir), "--proxy", web.proxy_url,
            "--allow-private", "--min-delay", str(MIN_DELAY), "--max-pages", "400", "--timeout", "5",
            "--user-agent", USER_AGENT, "--policy", "bfs", "--no-progress", *extra,
        )  # fmt: skip
    assert process.returncode == 0, process.stderr[-3000:]
    stats = json.loads((run_dir / "stats.json").read_text())
    return Crawl(
        run_dir,
        web_dir,
        process,
        stats,
        read_request_log(web_dir / REQUESTS_FILE, USER_AGENT),
        pl.read_parquet(run_dir / "pages.parquet"),
        pl.read_parquet(web_dir / "pages.parquet"),
    )


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Crawl]:
    yield _crawl(tmp_path_factory.mktemp("links"))


def _count(stats: dict[str, int], prefix: str) -> int:
    return sum(int(v) for k, v in stats.items() if k.startswith(prefix))


def test_redirects_to_seen_urls_and_traps_are_not_fetched(crawl: Crawl) -> None:
    log = crawl.log
    hosts = log["host"].unique().to_list()
    assert len(hosts) == WEB.n_hosts
    moved = log.filter(pl.col("path").str.starts_with("/moved/") | pl.col("path").str.starts_with("/go/"))
    assert moved.height >= 5 * WEB.n_hosts, "the redirect sources were not crawled"
    # every content page and home page reached by a redirect was fetched once, not again via the redirect
    pages = log.filter(pl.col("status") == 200).group_by("host", "path").len()
    assert pages.filter(pl.col("len") > 1).height == 0, pages.filter(pl.col("len") > 1)
    assert log.filter(pl.col("path").is_in(list(dx.TRAP_TARGETS))).height == 0
    stats = crawl.stats
    assert _count(stats, "redirect/dropped/duplicate") >= 4 * WEB.n_hosts
    assert _count(stats, "redirect/dropped/trap/repeated_segment") >= WEB.n_hosts
    assert _count(stats, "redirect/dropped/trap/path_too_deep") >= WEB.n_hosts


def test_gzipped_sitemaps_are_read(crawl: Crawl) -> None:
    fetched = crawl.log.filter(pl.col("path").str.ends_with(".xml.gz"))
    assert fetched["host"].n_unique() == WEB.n_hosts
    assert _count(crawl.stats, "sitemap/gzipped") >= WEB.n_hosts
    assert _count(crawl.stats, "sitemap/unparsable") == 0
    assert _count(crawl.stats, "sitemap/urls") >= 22 * WEB.n_hosts


def test_nofollow_links_and_pages_are_not_followed(crawl: Crawl) -> None:
    hidden = crawl.log.filter(pl.col("path").str.starts_with(dx.HIDDEN_PREFIX))
    assert hidden.height == 0, hidden["path"].to_list()
    assert _count(crawl.stats, "links/skipped/nofollow_rel") >= WEB.n_hosts
    assert _count(crawl.stats, "links/skipped/nofollow_page") >= WEB.n_hosts
    nofollow = crawl.pages.join(crawl.truth.select("url", "directive"), on="url").filter(
        pl.col("directive").is_in(list(dx.NOFOLLOW_KINDS))
    )
    assert nofollow.height >= WEB.n_hosts and nofollow["nofollow"].all()


def test_noindex_and_opted_out_pages_are_archived_but_not_curated(crawl: Crawl) -> None:
    rows = crawl.pages.join(crawl.truth.select("url", "directive", "tdm_reserved"), on="url")
    assert rows.filter(pl.col("directive").is_not_null() | pl.col("tdm_reserved")).height >= 40
    noindex = rows.filter(pl.col("directive").is_in(list(dx.NOINDEX_KINDS)))
    assert noindex["noindex"].all() and not noindex["curated"].any()
    other_agent = rows.filter(pl.col("directive") == "other_agent_noindex")
    assert other_agent.height and not other_agent["noindex"].any(), "another agent's noindex applied to us"
    expected = {"meta_noai": "noai_meta", "header_noai": "noai_header", "tdm_header": "tdm_header"}
    expected["tdm_meta"] = "tdm_meta"
    for kind, reason in expected.items():
        page = rows.filter((pl.col("directive") == kind) & ~pl.col("tdm_reserved"))
        assert page.height and (page["optout"] == reason).all(), (kind, page["optout"].to_list())
    reserved = rows.filter(pl.col("tdm_reserved"))
    assert reserved.height and (reserved["optout"] == "tdmrep_json").all()
    plain = rows.filter(pl.col("directive").is_null() & ~pl.col("tdm_reserved"))
    assert plain["optout"].null_count() == plain.height and not plain["noindex"].any()
    optout = rows.filter(pl.col("optout").is_not_null())
    assert not optout["curated"].any()
    # they would have been curated: the score was there, the directive kept them out
    assert _count(crawl.stats, "page/kept_out/noindex") >= 1
    assert _count(crawl.stats, "page/kept_out/optout") >= 5
    # listing pages of a reserved section opt out too: every row, not only the content pages
    assert _count(crawl.stats, "page/optout/") == crawl.pages["optout"].is_not_null().sum()
    assert plain["curated"].sum() >= 20, "ordinary pages must still be curated"
    docs = read_text_shards(crawl.run_dir / "text")
    assert len(docs) == int(crawl.pages["curated"].sum())
    kept_out = set(noindex["url"]) | set(optout["url"])
    assert not kept_out & {d["metadata"]["url"] for d in docs}
    assert (crawl.run_dir / "warc").is_dir() and optout["warc_record_id"].is_not_null().all(), "not archived"


def test_tdmrep_json_is_fetched_once_per_host_and_politely(crawl: Crawl) -> None:
    tdmrep = crawl.log.filter(pl.col("path") == dx.TDMREP_PATH)
    assert sorted(tdmrep["host"]) == sorted(crawl.log["host"].unique()), "once per host, every host"
    assert _count(crawl.stats, "tdmrep/found") == sum(1 for h in SiteModel(WEB).hosts if dx.has_tdmrep(h))
    _, politeness = audit_test_web(crawl.web_dir, SiteModel(WEB), MIN_DELAY, USER_AGENT, USER_AGENT)
    assert politeness.clean, politeness.examples


def test_the_audit_sees_the_crawl_as_clean_and_catches_a_leak(crawl: Crawl) -> None:
    audit = audit_directives(crawl.log, crawl.truth, crawl.pages)
    assert audit.clean, audit.examples
    assert audit.noindex_fetched >= WEB.n_hosts and audit.optout_fetched >= 4 * WEB.n_hosts
    leaked_log = pl.concat([crawl.log.head(1).with_columns(path=pl.lit("/hidden/2.html")), crawl.log])
    leaked_pages = crawl.pages.with_columns(curated=pl.lit(True))
    leaky = audit_directives(leaked_log, crawl.truth, leaked_pages)
    assert leaky.nofollow_only_requested == 1 and leaky.curated_noindex and leaky.curated_optout
    assert not leaky.clean


def test_opted_out_pages_are_curated_when_the_crawl_allows_it(tmp_path: Path) -> None:
    config = tmp_path / "crawl.toml"
    config.write_text("[cleaning]\ncurate_optout = true\n")
    crawl = _crawl(tmp_path, "--config", str(config), "--max-pages", "120")
    optout = crawl.pages.filter(pl.col("optout").is_not_null())
    assert optout.height >= 5
    assert optout["curated"].any(), "allowed opt-out pages were still withheld"
    noindex = crawl.pages.filter(pl.col("noindex"))
    assert not noindex["curated"].any(), "noindex still means not curated"
