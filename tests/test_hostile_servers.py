"""Servers built to misbehave, crawled by real crawls (tests/hostile_server.py), checked from the
server's side: a robots.txt served as an HTML welcome page, names that resolve to loopback behind a
proxy, a host that answers `429 Retry-After: 3600`, and SIGTERM while it is parked."""

from __future__ import annotations

import itertools
import json
import signal
import socket
import subprocess
import time
from pathlib import Path

import polars as pl
import pytest
from aiohttp import web
from hostcrawl_cli import HOSTCRAWL, hostcrawl
from hostile_server import (
    HostileServer,
    answer,
    hostile_server_fixture,  # noqa: F401  (registers the fixture)
    html_page,
)
from warcio.archiveiterator import ArchiveIterator

pytestmark = pytest.mark.slow

HTML = "text/html; charset=utf-8"
CRAWL_BOUND_S = 90.0  # each crawl below fetches a handful of pages; the cleaning pool's warm-up dominates


def _hosts_config(tmp_path: Path, *names: str, **politeness: float) -> Path:
    """A config whose hosts file puts every name on the server's loopback address (--allow-private)."""
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 " + " ".join(names) + "\n")
    config = tmp_path / "crawl.toml"
    extra = "".join(f"{k} = {v}\n" for k, v in politeness.items())
    config.write_text(f'[politeness]\nhosts_file = "{hosts}"\n{extra}')
    return config


def _crawl(run: Path, *args: str, min_delay: float = 0.2, max_pages: int = 20) -> list[str]:
    """`hostcrawl crawl` as every test here runs it: bfs, one cleaning worker, no progress line."""
    return [
        "crawl", *args, "--out", str(run), "--min-delay", str(min_delay), "--max-pages", str(max_pages),
        "--no-progress", "--policy", "bfs", "--workers", "1",
    ]  # fmt: skip


def _warc_records(run_dir: Path) -> list[str]:
    assert not list((run_dir / "warc").glob("*.open")), "a WARC was left open"
    types = []
    for path in sorted((run_dir / "warc").glob("*.warc.gz")):
        with path.open("rb") as f:
            types += [r.rec_type for r in ArchiveIterator(f)]
    return types


def test_a_robots_txt_served_as_an_html_page_does_not_stall_its_host_or_its_address(
    server: HostileServer, tmp_path: Path
) -> None:
    """It used to deadlock: the TDMRep step took the robots.txt response for a page and waited for
    tdmrep.json, which waited for that robots.txt; every host on the address stalled, SIGTERM too."""
    welcome = "<!DOCTYPE html><html><body><h1>Welcome to our site!</h1></body></html>"
    server.route("welcome.test", "/robots.txt", answer(200, welcome, Content_Type=HTML))
    for host in ("welcome.test", "plain.test"):
        server.route(host, "*", answer(200, html_page(host, ["/next.html"]), Content_Type=HTML))
    config = _hosts_config(tmp_path, "welcome.test", "plain.test")
    run = tmp_path / "run"
    seeds = [f"http://{h}:{server.port}/" for h in ("welcome.test", "plain.test")]
    started = time.monotonic()
    done = hostcrawl(*_crawl(run, *seeds, "--config", str(config), "--allow-private"), timeout=CRAWL_BOUND_S)
    assert done.returncode == 0, done.stderr[-2000:]
    assert time.monotonic() - started < CRAWL_BOUND_S
    for host in ("welcome.test", "plain.test"):
        paths = {h.path for h in server.requests_to(host)}
        assert {"/robots.txt", "/", "/next.html"} <= paths, (host, paths)
    assert _warc_records(run).count("response") >= 6


def _loopback_names_in_etc_hosts() -> list[str]:
    names = []
    for line in Path("/etc/hosts").read_text().splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) >= 2 and fields[0].startswith("127."):
            names += [n for n in fields[1:] if n != "localhost"]
    return names[:2]


def test_names_that_resolve_to_loopback_are_refused_behind_a_proxy_too(
    server: HostileServer, tmp_path: Path
) -> None:
    """With --proxy, only literal addresses used to be refused: the resolver's refusal was swallowed and
    "no address, proxy set" let the proxy fetch 127.1, 0x7f.0.0.1, 2130706433, localhost. and names of
    /etc/hosts. The proxy here is the hostile server itself, so nothing leaves the machine."""
    server.route("*", "*", answer(200, html_page("anything"), Content_Type=HTML))
    private = [
        "127.1", "0x7f.0.0.1", "0177.0.0.1", "2130706433", "0", "localhost.", "LOCALHOST", "[::1]",
        "[::ffff:127.0.0.1]", "10.1", "169.254.169.254", *_loopback_names_in_etc_hosts(),
    ]  # fmt: skip
    run = tmp_path / "run"
    seeds = [*(f"http://{n}:8080/" for n in private), "http://public-name.example/"]
    proxy = f"http://127.0.0.1:{server.port}"
    done = hostcrawl(*_crawl(run, *seeds, "--proxy", proxy, max_pages=30), timeout=CRAWL_BOUND_S)
    assert done.returncode == 0, done.stderr[-2000:]
    asked = {h.host for h in server.hits}
    assert asked == {"public-name.example"}, f"the proxy was asked for {sorted(asked)}"
    stats = json.loads((run / "stats.json").read_text())
    refused = sum(v for k, v in stats.items() if k.startswith("fetch/refused/"))
    assert refused == len(private), {k: v for k, v in stats.items() if k.startswith("fetch/refused/")}


# What limited.test is asked, once each: robots.txt (404), then its tdmrep.json, which a host's first page
# fetches before it is sent, and which answers `429 Retry-After: 3600`. Nothing more before the hour is up.
LIMITED_ASKED = ["/robots.txt", "/.well-known/tdmrep.json"]


def _parked_web(server: HostileServer) -> None:
    server.route("limited.test", "/robots.txt", answer(404, "no robots.txt"))
    server.route("limited.test", "*", answer(429, "slow down\n", Retry_After="3600"))
    links = [f"/page-{i}.html" for i in range(6)]
    server.route("fine.test", "*", answer(200, html_page("fine", links), Content_Type=HTML))


def test_a_host_that_asks_for_an_hour_does_not_hold_the_crawl_open(
    server: HostileServer, tmp_path: Path
) -> None:
    """`429 Retry-After: 3600` used to keep the crawl alive for hours after every other host was done,
    and every other host then waited for the engine's 5 s heartbeat between pages."""
    _parked_web(server)
    config = _hosts_config(tmp_path, "limited.test", "fine.test", backoff_max=60)
    run = tmp_path / "run"
    seeds = [f"http://limited.test:{server.port}/", f"http://limited.test:{server.port}/more.html",
             f"http://fine.test:{server.port}/"]  # fmt: skip
    started = time.monotonic()
    done = hostcrawl(*_crawl(run, *seeds, "--config", str(config), "--allow-private"), timeout=CRAWL_BOUND_S)
    assert done.returncode == 0, done.stderr[-2000:]
    assert time.monotonic() - started < CRAWL_BOUND_S
    limited = [h.path for h in server.requests_to("limited.test")]
    assert limited == LIMITED_ASKED, "the host was asked again before its Retry-After"
    fine = sorted(h.at for h in server.requests_to("fine.test") if h.path.startswith("/page-"))
    assert len(fine) == 6
    gaps = [b - a for a, b in itertools.pairwise(fine)]
    assert max(gaps) < 2.0, f"pages of another host waited for the heartbeat: {gaps}"
    stats = json.loads((run / "stats.json").read_text())
    assert stats["frontier/parked_at_end"] == 1
    hosts = pl.read_parquet(run / "hosts.parquet")
    parked = hosts.filter(pl.col("host") == "limited.test").row(0, named=True)
    assert (parked["drop_reason"], parked["queued"]) == ("parked", 2), "hosts.parquet must say why"


def test_sigterm_while_a_host_is_parked_stops_at_once_and_resume_goes_on(
    server: HostileServer, tmp_path: Path
) -> None:
    """A stop leaves a whole run: stats.json, a closed and readable WARC; the parked host's URLs stay."""
    _parked_web(server)
    slow_links = [f"/slow-{i}.html" for i in range(40)]
    server.route("fine.test", "/", answer(200, html_page("fine", slow_links), Content_Type=HTML))
    config = _hosts_config(tmp_path, "limited.test", "fine.test")
    run = tmp_path / "run"
    seeds = [f"http://limited.test:{server.port}/", f"http://fine.test:{server.port}/"]
    args = _crawl(run, *seeds, "--config", str(config), "--allow-private", min_delay=0.5, max_pages=60)
    proc = subprocess.Popen([*HOSTCRAWL, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + CRAWL_BOUND_S
        while (
            not any(h.path.startswith("/slow-") for h in server.hits)
            or not server.requests_to("limited.test")[1:]
        ):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr and proc.stderr.read()
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        stopped_at = time.time()
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert not [h for h in server.hits if h.at > stopped_at + 1.5], "requests sent long after SIGTERM"
    assert (run / "stats.json").exists() and (run / "report.md").exists()
    assert "response" in _warc_records(run)
    resumed = hostcrawl("crawl", "--resume", str(run), "--no-progress", timeout=CRAWL_BOUND_S)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    paths = [h.path for h in server.requests_to("fine.test")]
    assert {p for p in paths if p.startswith("/slow-")} == set(slow_links), "a page was lost in the stop"
    assert paths.count("/robots.txt") == 1, "the resume asked robots.txt again"
    assert paths.count("/.well-known/tdmrep.json") == 1, "the resume asked tdmrep.json again"
    assert [h.path for h in server.requests_to("limited.test")] == LIMITED_ASKED


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_link_to_the_same_host_on_a_closed_port_costs_only_that_link(
    server: HostileServer, tmp_path: Path
) -> None:
    """Politeness is kept by host name and robots.txt by origin: a closed port's robots.txt used to get
    the whole host blocked, so any third-party page could remove a site from a crawl with one link."""
    closed = _closed_port()
    links = [f"http://site.test:{closed}/trap.html", *(f"/page-{i}.html" for i in range(5))]
    server.route("site.test", "*", answer(200, html_page("site", links), Content_Type=HTML))
    config = _hosts_config(tmp_path, "site.test")
    run = tmp_path / "run"
    seed = f"http://site.test:{server.port}/"
    done = hostcrawl(*_crawl(run, seed, "--config", str(config), "--allow-private"), timeout=CRAWL_BOUND_S)
    assert done.returncode == 0, done.stderr[-2000:]
    fetched = {h.path for h in server.requests_to("site.test")}
    assert {f"/page-{i}.html" for i in range(5)} <= fetched, fetched
    stats = json.loads((run / "stats.json").read_text())
    assert "host/blocked/robots_unavailable" not in stats
    assert stats.get("robotstxt/origin_unavailable", 0) >= 1
    state = pl.read_parquet(run / "hosts.parquet").filter(pl.col("host") == "site.test")["state"].item()
    assert state != "blocked"


def test_a_self_redirect_and_an_empty_location_are_fetched_once(
    server: HostileServer, tmp_path: Path
) -> None:
    """Both used to be fetched six times (the redirect limit): a redirect back to its own URL."""
    host = "loops.test"
    server.route(
        host, "/", answer(200, html_page(host, ["/self", "/empty", "/fine.html"]), Content_Type=HTML)
    )
    server.route(host, "/self", answer(301, b"", Location="/self"))
    server.route(host, "/empty", answer(302, b"", Location=""))
    server.route(host, "*", answer(200, html_page(host), Content_Type=HTML))
    config = _hosts_config(tmp_path, host)
    run = tmp_path / "run"
    seeds = [f"http://{host}:{server.port}/"]
    done = hostcrawl(*_crawl(run, *seeds, "--config", str(config), "--allow-private"), timeout=CRAWL_BOUND_S)
    assert done.returncode == 0, done.stderr[-2000:]
    paths = [h.path for h in server.requests_to(host)]
    assert paths.count("/self") == 1 and paths.count("/empty") == 1, paths
    assert "/fine.html" in paths
    stats = json.loads((run / "stats.json").read_text())
    assert stats["redirect/dropped/redirect_loop"] == 2


def test_session_ids_in_every_link_do_not_turn_a_site_into_copies_of_itself(
    server: HostileServer, tmp_path: Path
) -> None:
    """Each response links every page again under a new ;jsessionid= (a server that sees no cookie):
    the crawl spent 149 of 150 pages on copies of 11 pages. Now each page is fetched once."""
    host = "sessions.test"
    counter = itertools.count()

    async def page(request: web.BaseRequest) -> web.StreamResponse:
        session = f"{next(counter):08X}"
        links = [f"/p/{i}.html;jsessionid={session}" for i in range(10)]
        return web.Response(body=html_page(host, links).encode(), content_type="text/html", charset="utf-8")

    server.route(host, "*", page)
    config = _hosts_config(tmp_path, host)
    run = tmp_path / "run"
    seeds = [f"http://{host}:{server.port}/"]
    crawl = _crawl(run, *seeds, "--config", str(config), "--allow-private", min_delay=0.05, max_pages=40)
    done = hostcrawl(*crawl, timeout=CRAWL_BOUND_S)
    assert done.returncode == 0, done.stderr[-2000:]
    pages = [h.path for h in server.requests_to(host) if h.path.startswith("/p/")]
    assert sorted(pages) == sorted({p.split(";")[0] for p in pages}), pages  # each page once
    assert len(pages) == 10


def test_a_robots_txt_down_for_a_while_costs_its_host_a_pause_not_the_run(
    server: HostileServer, tmp_path: Path
) -> None:
    """robots.txt answering 500 for a while used to get its host blocked for the whole run after four
    tries. Now the host is parked and tried again while the crawl goes on (here backoff_max is 1 s, so
    the pauses are 2 s and 4 s; 20 minutes and more by default), and its pages are crawled once
    robots.txt is back. It answers 500 five times, one more than the attempts before parking."""
    answers = itertools.count()

    async def robots(request: web.BaseRequest) -> web.StreamResponse:
        if next(answers) < 5:
            return web.Response(status=500, text="maintenance")
        return web.Response(text="User-agent: *\nAllow: /\n")

    server.route("flaky.test", "/robots.txt", robots)
    for host, pages in (("flaky.test", 3), ("busy.test", 40)):
        links = [f"/page-{i}.html" for i in range(pages)]
        server.route(host, "*", answer(200, html_page(host, links), Content_Type=HTML))
    config = _hosts_config(tmp_path, "flaky.test", "busy.test", backoff_base=0.5, backoff_max=1.0)
    run = tmp_path / "run"
    seeds = [f"http://{h}:{server.port}/" for h in ("flaky.test", "busy.test")]
    crawl = _crawl(run, *seeds, "--config", str(config), "--allow-private", min_delay=0.4, max_pages=60)
    done = hostcrawl(*crawl, timeout=CRAWL_BOUND_S)
    assert done.returncode == 0, done.stderr[-2000:]
    robots_hits = [h for h in server.requests_to("flaky.test") if h.path == "/robots.txt"]
    assert len(robots_hits) == 6, "robots.txt was not tried again after the first four failures"
    pages = {h.path for h in server.requests_to("flaky.test")} - {"/robots.txt"}
    assert {"/", "/page-0.html"} <= pages, pages
    stats = json.loads((run / "stats.json").read_text())
    assert stats["robotstxt/parked"] >= 1 and "host/blocked/robots_unavailable" not in stats


def test_a_crawl_whose_every_robots_txt_fails_fetched_no_page_and_says_why(
    server: HostileServer, tmp_path: Path
) -> None:
    """It exited 0 (the robots.txt answers counted as responses), though no page was ever fetched."""
    server.route("down.test", "/robots.txt", answer(502, "bad gateway"))
    server.route("down.test", "*", answer(200, html_page("down"), Content_Type=HTML))
    config = _hosts_config(tmp_path, "down.test", backoff_base=0.1, backoff_max=0.3)
    run = tmp_path / "run"
    seed = f"http://down.test:{server.port}/"
    done = hostcrawl(*_crawl(run, seed, "--config", str(config), "--allow-private"), timeout=CRAWL_BOUND_S)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "no page was fetched" in done.stderr and "robotstxt/unavailable/http_502" in done.stderr
    assert {h.path for h in server.requests_to("down.test")} == {"/robots.txt"}


def test_a_closed_port_queued_ahead_of_the_main_origin_does_not_hold_the_host(
    server: HostileServer, tmp_path: Path
) -> None:
    """robots.txt's "not now" used to put the URL back at the front of its host's queue: a closed port
    seen before the host's own origin was asked again and again, and the host was parked for the run."""
    closed = _closed_port()
    server.route("site.test", "*", answer(200, html_page("site", ["/a.html", "/b.html"]), Content_Type=HTML))
    config = _hosts_config(tmp_path, "site.test")
    run = tmp_path / "run"
    seeds = [f"http://site.test:{closed}/", f"http://site.test:{server.port}/"]
    started = time.monotonic()
    done = hostcrawl(*_crawl(run, *seeds, "--config", str(config), "--allow-private"), timeout=CRAWL_BOUND_S)
    assert done.returncode == 0, done.stderr[-2000:]
    assert time.monotonic() - started < 60.0
    fetched = {h.path for h in server.requests_to("site.test")}
    assert {"/robots.txt", "/", "/a.html", "/b.html"} <= fetched, fetched
    stats = json.loads((run / "stats.json").read_text())
    assert stats.get("robotstxt/parked", 0) == 0
    assert stats.get("robotstxt/origin_unavailable", 0) >= 1
    state = pl.read_parquet(run / "hosts.parquet").filter(pl.col("host") == "site.test")["state"].item()
    assert state not in ("blocked", "parked")


def test_links_per_page_and_url_length_are_capped(server: HostileServer, tmp_path: Path) -> None:
    """`[fetch] max_links_per_page` and `max_url_length` (README's table of caps): a page of 50,000
    links queues only the first ones, and a URL over the length is never asked for."""
    long_path = "/long-" + "x" * 300 + ".html"
    links = [long_path, *(f"/p{i}.html" for i in range(50_000))]
    server.route("links.test", "/", answer(200, html_page("links", links), Content_Type=HTML))
    server.route("links.test", "*", answer(200, html_page("leaf"), Content_Type=HTML))
    config = _hosts_config(tmp_path, "links.test")
    config.write_text(config.read_text() + "[fetch]\nmax_links_per_page = 30\nmax_url_length = 200\n")
    run = tmp_path / "run"
    seed = f"http://links.test:{server.port}/"
    args = _crawl(run, seed, "--config", str(config), "--allow-private", max_pages=100, min_delay=0.05)
    done = hostcrawl(*args, timeout=CRAWL_BOUND_S)
    assert done.returncode == 0, done.stderr[-2000:]
    pages = {h.path for h in server.requests_to("links.test")} - {"/robots.txt", "/.well-known/tdmrep.json"}
    assert long_path not in pages
    assert pages == {"/", *(f"/p{i}.html" for i in range(29))}, sorted(pages)[:40]
    stats = json.loads((run / "stats.json").read_text())
    assert stats["links/skipped/over_page_cap"] == 50_001 - 30  # the body (2 MB) is under the 4 MiB cut
    assert stats["frontier/dropped/trap/url_too_long"] == 1


def test_a_redirect_chain_and_a_host_are_cut_at_their_caps(server: HostileServer, tmp_path: Path) -> None:
    """`[fetch] max_redirects` ends a 50-hop chain, and `[policy] per_host_budget` caps a host's pages,
    both as the server sees them (README's table of caps)."""
    for hop in range(50):
        server.route("chain.test", f"/hop-{hop}", answer(302, b"", Location=f"/hop-{hop + 1}"))
    server.route("chain.test", "*", answer(200, html_page("end"), Content_Type=HTML))
    wide = [f"/w{i}.html" for i in range(40)]
    server.route("wide.test", "*", answer(200, html_page("wide", wide), Content_Type=HTML))
    config = _hosts_config(tmp_path, "chain.test", "wide.test")
    config.write_text(config.read_text() + "[fetch]\nmax_redirects = 5\n[policy]\nper_host_budget = 8\n")
    run = tmp_path / "run"
    seeds = [f"http://chain.test:{server.port}/hop-0", f"http://wide.test:{server.port}/"]
    args = _crawl(run, *seeds, "--config", str(config), "--allow-private", max_pages=100, min_delay=0.05)
    done = hostcrawl(*args, timeout=CRAWL_BOUND_S)
    assert done.returncode == 0, done.stderr[-2000:]
    policy_files = {"/robots.txt", "/.well-known/tdmrep.json"}
    chain = [h.path for h in server.requests_to("chain.test") if h.path not in policy_files]
    assert chain == [f"/hop-{hop}" for hop in range(6)], chain  # the first request and 5 redirects
    wide_pages = [h.path for h in server.requests_to("wide.test") if h.path not in policy_files]
    assert len(wide_pages) == 8, wide_pages
    stats = json.loads((run / "stats.json").read_text())
    assert stats["redirect/followed"] == 5
    assert stats["fetch/failed/redirect_loop"] == 1  # Scrapy's "max redirections reached"
    fetched = pl.read_parquet(run / "hosts.parquet").filter(pl.col("host") == "wide.test")["fetched"].item()
    assert fetched == 8


def test_a_crawl_delay_over_the_maximum_skips_the_host(server: HostileServer, tmp_path: Path) -> None:
    """`[politeness] max_crawl_delay` (60 s): a host asking for 120 s between requests is skipped, not
    crawled at its pace and not rushed; the other host on the address is crawled as usual."""
    server.route("slow.test", "/robots.txt", answer(200, "User-agent: *\nCrawl-delay: 120\n"))
    for host in ("slow.test", "quick.test"):
        server.route(host, "*", answer(200, html_page(host, ["/a.html"]), Content_Type=HTML))
    config = _hosts_config(tmp_path, "slow.test", "quick.test")
    run = tmp_path / "run"
    seeds = [f"http://{h}:{server.port}/" for h in ("slow.test", "quick.test")]
    started = time.monotonic()
    done = hostcrawl(*_crawl(run, *seeds, "--config", str(config), "--allow-private"), timeout=CRAWL_BOUND_S)
    assert done.returncode == 0, done.stderr[-2000:]
    assert time.monotonic() - started < 60.0
    assert [h.path for h in server.requests_to("slow.test")] == ["/robots.txt"]
    assert {"/", "/a.html"} <= {h.path for h in server.requests_to("quick.test")}
    stats = json.loads((run / "stats.json").read_text())
    assert stats["robotstxt/crawl_delay_too_long"] == 1
