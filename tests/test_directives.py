"""Fast tests of page directives: robots meta and X-Robots-Tag, AI-training opt-outs, tdmrep.json, and the
test web pages that carry them."""

from __future__ import annotations

import gzip
import re

import polars as pl
import pytest
from scrapy.http import HtmlResponse
from scrapy.utils.sitemap import Sitemap

from cleaner.quality.language_profiles import LanguageThresholds
from crawler.bench.audit import audit_directives
from crawler.fetch.directives import (
    header_directives,
    kept_out,
    meta_directives,
    page_directives,
    parse_tdmrep,
    product_token,
    tdm_reserved,
)
from crawler.pages.store_pipeline import crawl_value
from crawler.testweb import SiteModel, TestWebConfig
from crawler.testweb import directive_hosts as dx
from crawler.testweb.model import HostSpec
from scheduler.urls import TrapGuard


def test_product_token_is_the_name_before_the_version() -> None:
    assert product_token("hostcrawl/0.1 (+https://example.org/bot)") == "hostcrawl"
    assert product_token("MyBot/2.0") == "mybot"
    assert product_token("solo") == "solo"


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["noindex"], {"noindex"}),
        (["NoIndex, NOFOLLOW"], {"noindex", "nofollow"}),
        (["none"], {"none"}),
        (["hostcrawl: noindex"], {"noindex"}),
        (["otherbot: noindex, nofollow"], set()),  # scoped to another agent: both directives are its
        (["googlebot: noindex", "nofollow"], {"nofollow"}),  # a second header starts unscoped again
        (["noai, otherbot: noindex"], {"noai"}),
        (["otherbot: noindex, hostcrawl: nofollow"], {"nofollow"}),
        (["unavailable_after: 25 Jun 2010 15:00:00 PST"], {"unavailable_after"}),
        (["max-snippet: 20, noindex"], {"max-snippet", "noindex"}),
    ],
)
def test_x_robots_tag_applies_unscoped_and_own_agent_directives_only(
    values: list[str], expected: set[str]
) -> None:
    assert header_directives(values, "hostcrawl") == expected


def test_agent_scope_is_the_exact_product_token() -> None:
    assert header_directives(["host: noindex"], "hostcrawl") == set()
    assert header_directives(["hostcrawl-test: noindex"], "hostcrawl") == set()


def test_meta_robots_agent_meta_and_tdm_meta() -> None:
    metas = [("ROBOTS", "noindex, NoFollow"), ("viewport", "width=device-width"), ("tdm-reservation", " 1 ")]
    assert meta_directives(metas, "hostcrawl") == ({"noindex", "nofollow"}, True)
    assert meta_directives([("hostcrawl", "noai")], "hostcrawl") == ({"noai"}, False)
    assert meta_directives([("otherbot", "noindex"), ("tdm-reservation", "0")], "hostcrawl") == (set(), False)


def test_page_verdict_names_the_first_opt_out_and_expands_none() -> None:
    plain = page_directives([], None, [], "hostcrawl")
    assert (plain.noindex, plain.nofollow, plain.optout) == (False, False, None)
    assert page_directives(["none"], None, [], "hostcrawl").nofollow
    assert page_directives([], "1", [], "hostcrawl").optout == "tdm_header"
    assert page_directives([], "0", [], "hostcrawl").optout is None
    assert page_directives(["noai"], None, [], "hostcrawl").optout == "noai_header"
    assert page_directives([], None, [("robots", "noai")], "hostcrawl").optout == "noai_meta"
    assert page_directives([], None, [("robots", "noimageai")], "hostcrawl").optout is None
    assert page_directives(["noai"], None, [], "hostcrawl", host_reserved=True).optout == "tdmrep_json"


def test_kept_out_of_curated_text() -> None:
    assert kept_out({"noindex": True, "optout": None}, curate_optout=True) == "noindex"
    assert kept_out({"noindex": False, "optout": "noai_meta"}, curate_optout=False) == "optout"
    assert kept_out({"noindex": False, "optout": "noai_meta"}, curate_optout=True) is None
    assert kept_out({"noindex": False, "optout": None}, curate_optout=False) is None


def test_a_page_kept_out_is_worth_nothing_to_the_scheduler() -> None:
    thresholds = LanguageThresholds(0.5, {"zh": 0.25})
    assert crawl_value(thresholds, 0.9, "en", "optout") == 0.0
    assert crawl_value(thresholds, 0.9, "en", "noindex") == 0.0
    assert crawl_value(thresholds, 0.9, "en", None) == 0.9
    assert crawl_value(thresholds, 0.25, "zh", None) == 0.5  # its own language's bar, on the default scale
    assert crawl_value(thresholds, None, "en", "optout") is None  # not scored: nothing to say


def test_tdmrep_json_first_matching_rule_decides() -> None:
    body = b"""[
      {"location": "/news/*", "tdm-reservation": 1, "tdm-policy": "https://example.org/policy"},
      {"location": "/free/exact.html$", "tdm-reservation": 0},
      {"location": "/free/", "tdm-reservation": "1"},
      {"location": "/", "tdm-reservation": 0},
      {"location": "/bad", "tdm-reservation": 7},
      {"tdm-reservation": 1}
    ]"""
    rules = parse_tdmrep(body)
    assert rules is not None and len(rules) == 4
    assert tdm_reserved(rules, "http://h.example/news/1.html")
    assert tdm_reserved(rules, "http://h.example/news/")
    assert not tdm_reserved(rules, "http://h.example/newsletter")
    assert not tdm_reserved(rules, "http://h.example/free/exact.html")
    assert tdm_reserved(rules, "http://h.example/free/exact.html?x=1")
    assert not tdm_reserved(rules, "http://h.example/other")
    assert tdm_reserved(
        parse_tdmrep(b'[{"location": "/", "tdm-reservation": 1}]') or [], "http://h.example/x"
    )
    assert tdm_reserved(
        parse_tdmrep(b'[{"location": "/caf%C3%A9/*", "tdm-reservation": 1}]') or [],
        "http://h.example/caf%C3%A9/1",
    )


@pytest.mark.parametrize("body", [b"", b"{", b'{"location": "/"}', b"\xff\xfe", b"null"])
def test_tdmrep_json_that_is_not_a_rule_array_is_unparsable(body: bytes) -> None:
    assert parse_tdmrep(body) is None


@pytest.fixture(scope="module")
def model() -> SiteModel:
    return SiteModel(TestWebConfig(n_hosts=12, seed=5, directives_share=0.5, robots_dir=""))


def _directive_host(model: SiteModel, tdmrep: bool) -> HostSpec:
    return next(
        h for h in model.hosts if h.directives and dx.has_tdmrep(h) == tdmrep and h.n_pages >= dx.CYCLE
    )


def test_test_web_pages_carry_their_directives_as_the_ground_truth_says(model: SiteModel) -> None:
    spec = _directive_host(model, tdmrep=True)
    truth = model.pages_frame().filter(pl.col("host") == spec.name)
    seen: set[str] = set()
    for row in truth.filter(pl.col("directive").is_not_null()).iter_rows(named=True):
        r = model.render(spec.name, row["path"])
        response = HtmlResponse(f"http://{spec.name}{row['path']}", body=r.body, headers=r.headers)
        metas = [
            (m.attrib.get("name", ""), m.attrib.get("content", "")) for m in response.xpath("//meta[@name]")
        ]
        found = page_directives(
            r.headers.get("X-Robots-Tag", "").split("\n"),
            r.headers.get("tdm-reservation"),
            metas,
            "hostcrawl",
        )
        kind = row["directive"]
        seen.add(kind)
        assert found.noindex == (kind in dx.NOINDEX_KINDS), kind
        assert found.nofollow == (kind in dx.NOFOLLOW_KINDS), kind
        assert (found.optout is not None) == (kind in dx.OPTOUT_KINDS), kind
    assert seen == set(dx.PAGE_KINDS)
    rules = parse_tdmrep(model.render(spec.name, dx.TDMREP_PATH).body)
    assert rules
    for row in truth.iter_rows(named=True):
        assert tdm_reserved(rules, f"http://{spec.name}{row['path']}") == row["tdm_reserved"]
    assert truth["tdm_reserved"].any() and not truth["tdm_reserved"].all()
    assert model.render(_directive_host(model, tdmrep=False).name, dx.TDMREP_PATH).status == 404
    plain = next(h for h in model.hosts if not h.directives and h.hostile is None)
    assert model.render(plain.name, dx.TDMREP_PATH).status == 404
    assert model.render(plain.name, "/go/trap").status == 404


def test_hidden_pages_are_linked_only_through_nofollow(model: SiteModel) -> None:
    spec = _directive_host(model, tdmrep=False)
    linked_plainly, linked_nofollow = set(), set()
    for path in ["/", *(spec.page_path(j) for j in range(spec.n_pages)), *(f"/{s}/" for s in spec.sections)]:
        r = model.render(spec.name, path)
        response = HtmlResponse(f"http://{spec.name}{path}", body=r.body, headers=r.headers)
        page_nofollow = page_directives(
            r.headers.get("X-Robots-Tag", "").split("\n"),
            None,
            [
                (m.attrib.get("name", ""), m.attrib.get("content", ""))
                for m in response.xpath("//meta[@name]")
            ],
            "hostcrawl",
        ).nofollow
        for a in response.xpath("//a[@href]"):
            href = a.attrib["href"]
            if href.startswith(dx.HIDDEN_PREFIX):
                nofollow = page_nofollow or "nofollow" in a.attrib.get("rel", "")
                (linked_nofollow if nofollow else linked_plainly).add(href)
    assert linked_nofollow and not linked_plainly
    assert model.render(spec.name, next(iter(linked_nofollow))).status == 200


def test_redirects_point_at_seen_pages_and_traps(model: SiteModel) -> None:
    spec = _directive_host(model, tdmrep=False)
    home = model.render(spec.name, "/").body.decode()
    guard = TrapGuard()
    for source, target in dx.redirects(spec).items():
        assert f'href="{source}"' in home
        r = model.render(spec.name, source)
        assert r.status in (301, 302) and r.headers["Location"] == f"http://{spec.name}{target}"
        if target in dx.TRAP_TARGETS:
            assert guard.reason(r.headers["Location"]) is not None
        elif not target.startswith("/moved/"):
            assert target == "/" or f'href="{target}"' in home  # the home page links the target too


def test_gzipped_sitemaps_are_named_in_robots_txt_and_list_every_page(model: SiteModel) -> None:
    spec = _directive_host(model, tdmrep=False)
    robots = model.render(spec.name, "/robots.txt").body.decode()
    assert f"Sitemap: http://{spec.name}/sitemap.xml.gz" in robots
    r = model.render(spec.name, "/sitemap.xml.gz")
    assert r.status == 200 and r.body[:2] == b"\x1f\x8b"
    sitemap = Sitemap(gzip.decompress(r.body))
    locs = [entry["loc"] for entry in sitemap]
    assert f"http://{spec.name}{spec.page_path(spec.n_pages - 1)}" in locs
    assert not [u for u in locs if dx.HIDDEN_PREFIX in u]
    assert re.search(rb"<loc>[^<]*\.xml\.gz</loc>", gzip.decompress(r.body)) is None  # small host: no index


def test_directives_share_zero_leaves_the_web_as_it_was() -> None:
    plain = SiteModel(TestWebConfig(n_hosts=12, seed=5, directives_share=0.0, robots_dir=""))
    assert not any(h.directives for h in plain.hosts)
    assert plain.pages_frame()["directive"].null_count() == plain.pages_frame().height
    spec = plain.hosts[0]
    assert b'<meta name="robots"' not in plain.render(spec.name, spec.page_path(1)).body


def test_audit_counts_tdmrep_refetches_only_after_a_readable_answer() -> None:
    rows = [  # host a: 503 then retried once (fine); host b: read, then fetched again (a refetch)
        ("a.example", dx.TDMREP_PATH, 503, 1.0),
        ("a.example", dx.TDMREP_PATH, 404, 2.0),
        ("b.example", dx.TDMREP_PATH, 200, 1.0),
        ("b.example", "/hidden/4.html", 200, 1.5),
        ("b.example", dx.TDMREP_PATH, 200, 2.0),
    ]
    log = pl.DataFrame(
        {
            "host": [r[0] for r in rows],
            "path": [r[1] for r in rows],
            "status": [r[2] for r in rows],
            "ts_start": [r[3] for r in rows],
            "aborted": [False] * len(rows),
        }
    )
    audit = audit_directives(log, pl.DataFrame(), pl.DataFrame())
    assert (audit.tdmrep_refetched, audit.nofollow_only_requested) == (1, 1)
    assert not audit.clean and audit.examples
