"""The local test web: deterministic sites of known quality, real sockets, every hostile trick."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
import urllib.request
import zlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import polars as pl
import pytest
from protego import Protego
from shared_data import require_shared_data

from crawler.testweb import SiteModel, TestWeb, TestWebConfig, TestWebProcess, register_cli
from crawler.testweb.cli import config_from_args, run_serve
from crawler.testweb.hostile import HOSTILE_KINDS, HUGE_BYTES
from crawler.testweb.model import HostSpec
from crawler.testweb.text import LOW_TYPES, load_lexicons

UA = "hostcrawl/0.1 (+https://example.org/bot)"
FAST = {"slow_seconds": (0.3, 0.4), "retry_after_range": (1, 1), "robots_dir": ""}


@pytest.fixture(scope="module")
def model_2000() -> SiteModel:
    return SiteModel(TestWebConfig(n_hosts=2000, seed=7, robots_dir=""))


def _hostile(model: SiteModel, kind: str) -> HostSpec:
    return next(h for h in model.hosts if h.hostile == kind)


def _serve(cfg: TestWebConfig, out: Path, body: Callable[[SiteModel, str], Awaitable[None]]) -> None:
    """Run `body(model, proxy_url)` against an in-process TestWeb on a real socket."""

    async def main() -> None:
        web = TestWeb(cfg, out)
        port = await web.start("127.0.0.1", 0)
        try:
            await body(web.model, f"http://127.0.0.1:{port}")
        finally:
            await web.stop()

    asyncio.run(main())


def _icc1(sizes: np.ndarray, highs: np.ndarray) -> float:
    """One-way ANOVA ICC(1) of binary labels grouped by host, for unequal group sizes."""
    n_total, groups = sizes.sum(), len(sizes)
    p_i, p = highs / sizes, highs.sum() / sizes.sum()
    msb = (sizes * (p_i - p) ** 2).sum() / (groups - 1)
    msw = (highs * (1 - p_i)).sum() / (n_total - groups)
    n0 = (n_total - (sizes**2).sum() / n_total) / (groups - 1)
    return float((msb - msw) / (msb + (n0 - 1) * msw))


def test_same_seed_gives_the_same_bytes_and_another_seed_a_different_web() -> None:
    a, b = (
        SiteModel(TestWebConfig(n_hosts=60, seed=1)),
        SiteModel(TestWebConfig(n_hosts=60, seed=1)),
    )
    other = SiteModel(TestWebConfig(n_hosts=60, seed=2))
    for h in a.hosts[:20]:
        for path in ("/", "/robots.txt", "/sitemap.xml", h.page_path(h.n_pages - 1)):
            assert a.render(h.name, path).body == b.render(h.name, path).body
    assert a.hosts_frame().equals(b.hosts_frame())
    assert a.pages_frame().equals(b.pages_frame())
    assert not a.hosts_frame().equals(other.hosts_frame())
    assert a.seed_urls() != other.seed_urls() or any(
        a.render(h.name, "/").body != other.render(h.name, "/").body for h in a.hosts[:5]
    )


def test_page_labels_cluster_by_host_with_the_configured_icc(model_2000: SiteModel) -> None:
    truth = model_2000.hosts_frame()
    icc = _icc1(truth["n_pages"].to_numpy(), truth["n_high"].to_numpy())
    assert 0.35 <= icc <= 0.65, icc
    share = truth["n_high"].sum() / truth["n_pages"].sum()
    assert 0.2 <= share <= 0.4, share


def test_page_counts_are_heavy_tailed_within_bounds(model_2000: SiteModel) -> None:
    pages = model_2000.hosts_frame()["n_pages"]
    assert pages.min() >= 5 and pages.max() <= 5000
    assert pages.max() >= 20 * pages.median()


def test_in_links_are_unrelated_to_quality(model_2000: SiteModel) -> None:
    truth = model_2000.hosts_frame()
    rho = truth.select(pl.corr("in_links", "q", method="spearman")).item()
    assert abs(rho) < 0.15, rho
    assert truth["in_links"].max() >= 10 * max(1.0, truth["in_links"].median())


def test_in_link_counts_match_the_links_pages_actually_carry() -> None:
    model = SiteModel(TestWebConfig(n_hosts=30, seed=5, robots_dir="", hostile_share=0))
    counted = dict.fromkeys((h.name for h in model.hosts), 0)
    for h in model.hosts:
        for j in range(h.n_pages):
            body = model.render(h.name, h.page_path(j)).body.decode()
            for target in re.findall(r'href="http://([^/"]+)/', body):
                counted[target] += 1
    assert counted == {h.name: h.in_links for h in model.hosts}


def test_high_and_low_pages_are_told_apart_by_a_simple_heuristic(model_2000: SiteModel) -> None:
    stop = set().union(*(lex.stop for lex in load_lexicons().values()))
    rng = np.random.default_rng(0)
    correct, seen_low = 0, set()
    hosts = [model_2000.hosts[i] for i in rng.choice(2000, 300, replace=False)]
    hosts = [h for h in hosts if h.hostile is None]
    for h in hosts:
        r = model_2000.render(h.name, h.page_path(int(rng.integers(h.n_pages))))
        lines = [ln for ln in r.main_text.splitlines()[1:] if ln.strip()]
        words = r.main_text.lower().split()
        punct = sum(ln.rstrip()[-1] in ".!?" for ln in lines) / max(1, len(lines))
        stop_share = sum(w in stop for w in words) / max(1, len(words))
        unique_lines = len(set(lines)) / max(1, len(lines))
        guess = len(words) >= 60 and punct >= 0.8 and stop_share >= 0.15 and unique_lines >= 0.9
        correct += guess == r.label
        seen_low.add(r.low_type)
    assert correct / len(hosts) >= 0.97
    assert seen_low >= set(LOW_TYPES)


def test_hosts_mix_languages_templates_and_kinds(model_2000: SiteModel) -> None:
    truth = model_2000.hosts_frame()
    langs = truth["language"].value_counts(normalize=True).rows()
    assert dict(langs)["en"] > 0.5 and {"de", "fr", "es"} <= set(dict(langs))
    assert set(truth["template"]) == {"semantic", "divsoup", "legacy"}
    assert truth["kind"].n_unique() == 8
    names = truth["host"].to_list()
    assert all(re.fullmatch(r"[a-z]+-\d+\.example", n) for n in names)
    html = {
        h.template: model_2000.render(h.name, h.page_path(0)).body for h in model_2000.hosts if not h.hostile
    }
    assert b"<article>" in html["semantic"] and b"<article>" not in html["divsoup"]
    assert b"post-body" in html["divsoup"] and b"<table" in html["legacy"]


def test_pages_ground_truth_matches_what_is_served(model_2000: SiteModel) -> None:
    pages = model_2000.pages_frame()
    assert pages.height == model_2000.hosts_frame()["n_pages"].sum()
    assert pages.schema["high_quality"] == pl.Boolean
    assert pages.filter(pl.col("high_quality"))["low_type"].null_count() == pages["high_quality"].sum()
    for row in pages.sample(200, seed=1).iter_rows(named=True):
        if model_2000.host(row["host"]).hostile is None:  # type: ignore[union-attr]
            r = model_2000.render(row["host"], row["path"])
            assert r.status == 200 and r.label == row["high_quality"]
            assert r.low_type == row["low_type"]


def test_sitemaps_list_every_page_and_big_hosts_get_an_index(model_2000: SiteModel) -> None:
    small = min(model_2000.hosts, key=lambda h: h.n_pages)
    big = max(model_2000.hosts, key=lambda h: h.n_pages)
    locs = re.findall(r"<loc>(.*?)</loc>", model_2000.render(small.name, "/sitemap.xml").body.decode())
    assert f"http://{small.name}{small.page_path(small.n_pages - 1)}" in locs
    index = model_2000.render(big.name, "/sitemap.xml").body.decode()
    assert "<sitemapindex" in index
    children = re.findall(r"<loc>http://[^/]+(/sitemap-\d+\.xml)</loc>", index)
    urls = [
        u
        for c in children
        for u in re.findall(r"<loc>(.*?)</loc>", model_2000.render(big.name, c).body.decode())
    ]
    assert f"http://{big.name}{big.page_path(big.n_pages - 1)}" in urls


def test_generated_robots_txt_rules_are_what_protego_sees() -> None:
    model = SiteModel(TestWebConfig(n_hosts=300, seed=3, robots_dir=""))
    sources = {h.robots_source for h in model.hosts}
    assert sources == {"generated", "missing"}
    for h in model.hosts:
        r = model.render(h.name, "/robots.txt")
        if h.robots_source == "missing":
            assert r.status == 404 and h.crawl_delay is None
            continue
        rp = Protego.parse(r.body.decode())
        assert not rp.can_fetch(f"http://{h.name}/private/edit/1", UA)
        assert rp.can_fetch(f"http://{h.name}{h.page_path(0)}", UA)
        assert rp.crawl_delay(UA) == h.crawl_delay
        for prefix in h.disallow:
            assert not rp.can_fetch(f"http://{h.name}{prefix}x", UA)
    delays = [h.crawl_delay for h in model.hosts if h.crawl_delay is not None]
    assert 0.1 <= len(delays) / len(model.hosts) <= 0.3
    assert all(0.2 <= d <= 1.0 for d in delays)


def test_real_robots_files_are_served_as_bytes_with_our_rules_merged(tmp_path: Path) -> None:
    (tmp_path / "oldsite.fr").write_bytes(
        "User-agent: *\nDisallow: /café/\nCrawl-delay: 30\n".encode("latin-1")
    )
    (tmp_path / "LICENSE-x.txt").write_text("not a robots file")
    cfg = TestWebConfig(n_hosts=80, seed=2, real_robots_share=0.5, robots_dir=str(tmp_path))
    model = SiteModel(cfg)
    real = [h for h in model.hosts if h.robots_source == "real:oldsite.fr"]
    assert real and not any("LICENSE" in h.robots_source for h in model.hosts)
    for h in real:
        body = model.render(h.name, "/robots.txt").body
        assert b"/caf\xe9/" in body  # the original bytes, not re-encoded
        rp = Protego.parse(body.decode("utf-8", "ignore"))
        assert not rp.can_fetch(f"http://{h.name}/private/x", UA)
        assert h.crawl_delay is not None and 0.2 <= h.crawl_delay <= 1.0
        assert rp.crawl_delay(UA) == h.crawl_delay
        assert "/private/" in h.disallow


def test_shared_real_robots_files_keep_protego_and_ground_truth_in_step() -> None:
    folder = require_shared_data("robots")
    model = SiteModel(TestWebConfig(n_hosts=400, seed=4, robots_dir=str(folder)))
    real = [h for h in model.hosts if h.robots_source.startswith("real:")]
    assert len(real) >= 40
    for h in real:
        rp = Protego.parse(model.render(h.name, "/robots.txt").body.decode("utf-8", "ignore"))
        assert not rp.can_fetch(f"http://{h.name}/private/x", UA), h.robots_source
        assert rp.crawl_delay(UA) == h.crawl_delay, h.robots_source


def test_every_hostile_kind_exists_and_its_home_links_to_the_trap() -> None:
    model = SiteModel(TestWebConfig(n_hosts=40, seed=9, robots_dir=""))
    assert {h.hostile for h in model.hosts if h.hostile} == set(HOSTILE_KINDS)
    for path, kind in (
        ("/loop/a", "redirect_loop"),
        ("/huge/stream", "huge"),
        ("/bomb.html", "gzip_bomb"),
    ):
        assert f'href="{path}"'.encode() in model.render(_hostile(model, kind).name, "/").body
    assert (
        SiteModel(TestWebConfig(n_hosts=200, hostile_share=0.0)).hosts_frame()["hostile"].null_count() == 200
    )


def test_proxy_requests_reach_the_right_host_and_are_logged(tmp_path: Path) -> None:
    cfg = TestWebConfig(n_hosts=50, seed=1, **FAST)  # type: ignore[arg-type]

    async def body(model: SiteModel, proxy: str) -> None:
        hosts = [h for h in model.hosts if h.hostile is None][:3]
        async with aiohttp.ClientSession(headers={"User-Agent": UA}) as s:
            for h in hosts:
                async with s.get(f"http://{h.name}/?from=test", proxy=proxy) as r:
                    assert r.status == 200
                    assert f"&copy; 2024 {h.name}." in await r.text()
                async with s.get(f"http://{h.name}{h.page_path(1)}", proxy=proxy) as r:
                    assert await r.read() == model.render(h.name, h.page_path(1)).body
            async with s.get("http://nowhere.example/", proxy=proxy) as r:
                assert r.status == 502
        await asyncio.sleep(0.6)  # the log is flushed on a timer, without waiting for stop
        lines = (tmp_path / "requests.jsonl").read_text().splitlines()
        assert len(lines) == 7

    _serve(cfg, tmp_path, body)
    log = [json.loads(ln) for ln in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert log[0]["path"] == "/?from=test" and log[-1]["status"] == 502
    for rec in log:
        assert rec["ts_start"] <= rec["ts_end"]
        assert rec["user_agent"] == UA and rec["client"].startswith("127.0.0.1:")
        assert rec["method"] == "GET" and rec["bytes"] > 0
    for name in ("hosts.parquet", "pages.parquet", "testweb-config.json"):
        assert (tmp_path / name).is_file()
    truth = pl.read_parquet(tmp_path / "hosts.parquet")
    assert truth.schema["disallow"] == pl.List(pl.String)
    assert set(truth.columns) >= {"host", "kind", "language", "q", "n_pages", "n_high", "hostile"}


def test_hostile_hosts_misbehave_as_specified(tmp_path: Path) -> None:
    cfg = TestWebConfig(n_hosts=60, seed=3, **FAST)  # type: ignore[arg-type]
    results: dict[str, Any] = {}

    async def body(model: SiteModel, proxy: str) -> None:
        def url(kind: str, path: str) -> str:
            return f"http://{_hostile(model, kind).name}{path}"

        async with aiohttp.ClientSession(auto_decompress=False) as s:
            t0 = time.monotonic()
            async with s.get(url("slow", "/"), proxy=proxy) as r:
                await r.read()
            results["slow"] = time.monotonic() - t0

            h = _hostile(model, "error5xx")
            statuses = set()
            for j in range(min(h.n_pages, 20)):
                async with s.get(url("error5xx", h.page_path(j)), proxy=proxy) as r:
                    statuses.add(r.status)
            results["error5xx"] = statuses

            rl = []
            for _ in range(cfg.ratelimit_requests + 2):
                async with s.get(url("ratelimit", "/"), proxy=proxy) as r:
                    rl.append((r.status, r.headers.get("Retry-After")))
            async with s.get(url("ratelimit", "/robots.txt"), proxy=proxy) as r:
                assert r.status == 200  # robots.txt is never rate limited
            await asyncio.sleep(1.05)
            async with s.get(url("ratelimit", "/"), proxy=proxy) as r:
                rl.append((r.status, None))
            results["ratelimit"] = rl

            with pytest.raises(aiohttp.ClientPayloadError):
                async with s.get(url("reset", "/download/report.html"), proxy=proxy) as r:
                    await r.read()
            h = _hostile(model, "reset")
            early = next(
                h.page_path(j)
                for j in range(h.n_pages)
                if model.render(h.name, h.page_path(j)).effect == "reset_early"
            )
            with pytest.raises((aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)):
                async with s.get(url("reset", early), proxy=proxy) as r:
                    await r.read()

            hops = []
            target = url("redirect_loop", "/loop/a")
            for _ in range(4):
                async with s.get(target, proxy=proxy, allow_redirects=False) as r:
                    target = r.headers["Location"]
                    hops.append((r.status, target.rsplit("/", 1)[1]))
            results["loop"] = hops

            months, target = [], url("calendar", "/calendar/2024/01")
            for _ in range(30):
                async with s.get(target, proxy=proxy) as r:
                    assert r.status == 200
                    html = await r.text()
                months.append(target)
                target = url("calendar", re.findall(r'href="(/calendar/\d+/\d+)"', html)[-1])
            results["calendar"] = months

            async with s.get(url("huge", "/huge/stream"), proxy=proxy) as r:
                assert "Content-Length" not in r.headers
                assert r.headers.get("Transfer-Encoding") == "chunked"
                total = 0
                async for chunk in r.content.iter_chunked(1 << 20):
                    total += len(chunk)
                results["huge"] = total
            async with s.get(url("huge", "/huge/length"), proxy=proxy) as r:
                assert int(r.headers["Content-Length"]) == HUGE_BYTES
                assert len(await r.content.read(65536)) > 0

            async with s.get(url("gzip_bomb", "/bomb.html"), proxy=proxy) as r:
                assert r.headers["Content-Encoding"] == "gzip"
                raw = await r.read()
            inflater, inflated, buf = zlib.decompressobj(16 + zlib.MAX_WBITS), 0, raw
            while buf and inflated <= 100 * 2**20:
                inflated += len(inflater.decompress(buf, 1 << 24))
                buf = inflater.unconsumed_tail
            results["bomb"] = (len(raw), inflated)

            h = _hostile(model, "bad_charset")
            async with s.get(url("bad_charset", h.page_path(0)), proxy=proxy) as r:
                results["charset"] = (r.headers["Content-Type"], await r.read())
            async with s.get(url("binary", "/image.html"), proxy=proxy) as r:
                results["binary"] = (r.headers["Content-Type"], await r.read())
            h = _hostile(model, "malformed")
            async with s.get(url("malformed", h.page_path(0)), proxy=proxy) as r:
                results["malformed"] = await r.read()

    _serve(cfg, tmp_path, body)
    assert results["slow"] >= 0.3
    assert results["error5xx"] & {500, 502, 503} and 200 in results["error5xx"]
    budget = cfg.ratelimit_requests
    assert [status for status, _ in results["ratelimit"]] == [200] * budget + [429, 429, 200]
    assert results["ratelimit"][budget] == (429, "1")
    assert results["loop"] == [(302, "b?r=0"), (302, "a?r=1"), (302, "b?r=1"), (302, "a?r=2")]
    assert len(set(results["calendar"])) == 30
    assert results["huge"] >= 50 * 2**20
    size, inflated = results["bomb"]
    assert size < 2 * 2**20 and inflated > 100 * 2**20
    ctype, raw = results["charset"]
    if ctype.endswith("utf-8"):
        with pytest.raises(UnicodeDecodeError):
            raw.decode("utf-8")
    else:
        assert "Ã" in raw.decode("cp1252", "replace")
    ctype, raw = results["binary"]
    assert ctype.startswith("text/html") and raw.count(b"\x00") > 10
    raw = results["malformed"]
    assert raw.count(b"<p>") != raw.count(b"</p>") or b"\x00" in raw
    log = [json.loads(ln) for ln in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert any(rec["aborted"] and rec["path"] == "/download/report.html" for rec in log)
    assert any(rec["status"] == 429 for rec in log)
    assert all(rec["ts_start"] <= rec["ts_end"] for rec in log)


def test_ten_thousand_hosts_are_ready_in_seconds() -> None:
    t0 = time.perf_counter()
    model = SiteModel(TestWebConfig(n_hosts=10_000, seed=0))
    elapsed = time.perf_counter() - t0
    assert elapsed < 5.0, elapsed
    assert len(model.seed_urls()) == 10_000
    last = model.hosts[-1]
    assert model.render(last.name, last.page_path(last.n_pages - 1)).status in (200, 500, 502, 503)


def test_process_starts_serves_stops_cleanly_and_logs_every_request(tmp_path: Path) -> None:
    cfg = TestWebConfig(n_hosts=30, seed=2, hostile_share=0.0, robots_dir="")
    with TestWebProcess(cfg, tmp_path) as tw:
        assert tw.proxy_url == f"http://127.0.0.1:{tw.port}" and tw.out_dir == tmp_path
        hosts = pl.read_parquet(tmp_path / "hosts.parquet")["host"].to_list()
        assert tw.seed_urls == [f"http://{h}/" for h in hosts] and len(hosts) == 30  # seeds.txt
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": tw.proxy_url}))
        for url in tw.seed_urls[:10]:
            with opener.open(url, timeout=10) as resp:
                assert resp.status == 200
        proc = tw.proc
    assert proc is not None and proc.returncode == 0
    log = pl.read_ndjson(tmp_path / "requests.jsonl")
    assert log.height == 10
    assert set(log["host"]) == {u.split("/")[2] for u in tw.seed_urls[:10]}
    pages = pl.read_parquet(tmp_path / "pages.parquet")
    assert pages.columns == [
        "url",
        "host",
        "path",
        "high_quality",
        "low_type",
        "grade",
        "directive",
        "tdm_reserved",
    ]


def test_cli_registers_testweb_serve_with_its_flags() -> None:
    parser = argparse.ArgumentParser(prog="hostcrawl")
    register_cli(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        ["testweb", "serve", "--hosts", "7", "--seed", "3", "--hostile-share", "0.1", "--port", "0"]
    )
    assert args.func is run_serve
    cfg = config_from_args(args)
    assert (cfg.n_hosts, cfg.seed, cfg.hostile_share) == (7, 3, 0.1)
    assert args.bind == "127.0.0.1" and args.port == 0
