"""Servers that break HTTP on purpose, and robots.txt files written every way the web writes them, all
crawled by one real crawl (tests/raw_server.py writes the bytes) and checked from the server's side:
what was asked for, what was never asked for, and that each misbehaviour is counted in stats.json, the
WARC reads to its last record, nothing leaks a traceback, and memory stays bounded."""

from __future__ import annotations

import itertools
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hostcrawl_cli import HOSTCRAWL
from hostile_server import html_page
from raw_server import RawServer, http, raw_server_fixture, trickle  # noqa: F401  (the fixture)
from warcio.archiveiterator import ArchiveIterator

pytestmark = pytest.mark.slow

HTML = "Content-Type: text/html; charset=utf-8"
TIMEOUT_S = 4  # the crawl's --timeout: a body that trickles in is given up after this
CRAWL_BOUND_S = 150.0  # ~40 requests, one at a time on the one loopback address, and three timeouts
RSS_BOUND_MB = 600  # the crawl process, 10 MB robots.txt and 100,000-deep HTML included
ROBOTS_HOSTS = ("redirected.test", "huge.test", "bom.test", "noagent.test", "ours.test", "theirs.test")
LINKS = ("/open.html", "/private/secret.html")


def page(title: str, *links: str) -> bytes:
    body = html_page(title, list(links)).encode()
    return http("200 OK", body, HTML, f"Content-Length: {len(body)}")


def robots(text: bytes) -> bytes:
    return http("200 OK", text, "Content-Type: text/plain", f"Content-Length: {len(text)}")


def _web(raw: RawServer) -> list[str]:
    """Routes every case; returns the seeds."""
    # bodies
    raw.route("trickle.test", "/", trickle(http("200 OK", b"<html><body>", HTML, "Content-Length: 900000"),
                                           byte_every_s=0.5, for_s=30))  # fmt: skip
    raw.route("short.test", "/", http("200 OK", b"<html><body>cut here", HTML, "Content-Length: 5000"))
    broken = b"10\r\n<html><body>hello\r\nzz-not-hex\r\nmore\r\n0\r\n\r\n"
    raw.route("chunked.test", "/", http("200 OK", broken, HTML, "Transfer-Encoding: chunked"))
    raw.route("empty.test", "/", http("200 OK", b"", HTML, "Content-Length: 0"))
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 64
    raw.route("png.test", "/", http("200 OK", png, HTML, f"Content-Length: {len(png)}"))
    mislabelled = html_page("Déjà vu: café", ["/open.html"]).encode()
    raw.route("charset.test", "/", http("200 OK", mislabelled, "Content-Type: text/html; charset=no-such-9",
                                        f"Content-Length: {len(mislabelled)}"))  # fmt: skip
    deep = b"<html><body>" + b"<div>" * 100_000 + b"deep text" + b"</div>" * 100_000 + b"</body></html>"
    raw.route("deep.test", "/", http("200 OK", deep, HTML, f"Content-Length: {len(deep)}"))
    # redirects and links nowhere a crawler may go
    away = ("file:///etc/passwd", "ftp://schemes.test/pub/", "javascript:alert(1)", "mailto:a@schemes.test")
    raw.route("schemes.test", "/", page("schemes", *away, "/to-file", "/to-ftp", "/to-js", "/open.html"))
    for path, target in (("/to-file", away[0]), ("/to-ftp", away[1]), ("/to-js", away[2])):
        raw.route("schemes.test", path, http("302 Found", b"", f"Location: {target}", "Content-Length: 0"))
    raw.route("schemes.test", "*", page("open"))
    spaced = b"HTTP/1.1 302 Found\r\nLocation: /a b/\xc3\xa9t\xc3\xa9.html\r\nContent-Length: 0\r\n"
    raw.route("spaces.test", "/", spaced + b"Connection: close\r\n\r\n")
    raw.route("spaces.test", "*", page("summer"))
    # robots.txt, every way
    rules = b"User-agent: *\nDisallow: /private/\n"
    for hop in range(5):  # RFC 9309 2.3.1.2: at least five consecutive redirects are followed
        target = f"/robots-{hop + 1}.txt" if hop < 4 else "/real-robots.txt"
        path = "/robots.txt" if hop == 0 else f"/robots-{hop}.txt"
        raw.route("redirected.test", path, http("301 Moved", b"", f"Location: {target}", "Content-Length: 0"))
    raw.route("redirected.test", "/real-robots.txt", robots(rules))
    raw.route("huge.test", "/robots.txt", robots(rules + b"# padding\n" * 1_000_000))  # 10 MB
    raw.route("bom.test", "/robots.txt", robots(b"\xef\xbb\xbfUser-agent: *\r\nDisallow: /private/\r\n"))
    raw.route("noagent.test", "/robots.txt", robots(b"Disallow: /private/\n"))  # no group: nothing applies
    ours = b"User-agent: hostcrawl\nDisallow: /private/\n\nUser-agent: *\nAllow: /\n"
    raw.route("ours.test", "/robots.txt", robots(ours))
    raw.route("theirs.test", "/robots.txt", robots(b"User-agent: otherbot\nDisallow: /\n"))
    for host in ROBOTS_HOSTS:
        raw.route(host, "/", page(host, *LINKS))
        raw.route(host, "*", page("leaf"))
    hosts = ["trickle", "short", "chunked", "empty", "png", "charset", "deep", "schemes", "spaces",
             *(h.split(".")[0] for h in ROBOTS_HOSTS)]  # fmt: skip
    return [f"http://{h}.test:{raw.port}/" for h in hosts]


def _measured_crawl(args: list[str], timeout: float) -> tuple[subprocess.CompletedProcess[str], float]:
    """The crawl in a small parent that reports the peak RSS (MB) of the crawl process it waited for."""
    code = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:])\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, file=sys.stderr)\n"
        "sys.exit(done.returncode)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, *HOSTCRAWL, *args], capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip
    peak = float(done.stderr.strip().splitlines()[-1])
    return done, peak


def test_protocol_level_hostility_is_counted_bounded_and_archived(raw: RawServer, tmp_path: Path) -> None:
    raw.hold_s = 0.1
    seeds = _web(raw)
    names = sorted({s.split("//")[1].split(":")[0] for s in seeds})
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 " + " ".join(names) + "\n")
    config = tmp_path / "crawl.toml"
    config.write_text(f'[politeness]\nhosts_file = "{hosts}"\n')
    run = tmp_path / "run"
    args = ["crawl", *seeds, "--config", str(config), "--allow-private", "--out", str(run),
            "--min-delay", "0.05", "--max-pages", "120", "--timeout", str(TIMEOUT_S), "--no-progress",
            "--policy", "bfs", "--workers", "1"]  # fmt: skip
    started = time.monotonic()
    done, peak_mb = _measured_crawl(args, timeout=CRAWL_BOUND_S + 60)
    took = time.monotonic() - started
    log = (run / "crawl.log").read_text(errors="replace")
    assert done.returncode == 0, done.stderr[-3000:]
    assert took < CRAWL_BOUND_S, f"the crawl took {took:.0f} s"
    assert peak_mb < RSS_BOUND_MB, f"peak RSS {peak_mb:.0f} MB"
    assert "Traceback" not in done.stderr + log, (done.stderr + log)[-3000:]
    stats = json.loads((run / "stats.json").read_text())

    # bodies: each ends, is counted, and none holds the crawl (the trickle is cut by --timeout)
    assert 1 <= raw.requests_to("trickle.test").count("/") <= 3  # the first try and at most two retries
    assert stats.get("fetch/error/timeout", 0) >= 1, _counters(stats, "fetch/")
    assert stats.get("page/skipped/binary_as_html", 0) == 1, _counters(stats, "page/")  # the PNG
    assert stats.get("page/cleaner/empty/too_deep", 0) == 1, _counters(stats, "page/")  # 100,000 deep
    assert stats.get("page/cleaner/empty/empty", 0) == 1, _counters(stats, "page/")  # the empty 200
    # a body shorter than its Content-Length, and a chunk size that is not hex: kept as far as they came
    assert stats.get("fetch/truncated/disconnect", 0) == 2, _counters(stats, "fetch/")
    assert "/open.html" in raw.requests_to("charset.test"), "a bogus charset lost the page's links"
    for host in ("short.test", "chunked.test", "empty.test", "png.test", "deep.test"):
        assert raw.requests_to(host).count("/") <= 3, (host, raw.requests_to(host))

    # nothing but http(s) is ever fetched, and a Location of raw spaces and UTF-8 is followed as meant
    allowed = {"/robots.txt", "/.well-known/tdmrep.json", "/", "/to-file", "/to-ftp", "/to-js", "/open.html"}
    assert set(raw.requests_to("schemes.test")) <= allowed
    assert "/open.html" in raw.requests_to("schemes.test")
    for scheme in ("file", "ftp", "javascript"):  # javascript: made Scrapy's redirect raise ValueError
        assert stats.get(f"redirect/dropped/scheme/{scheme}") == 1, _counters(stats, "redirect/")
    assert not _counters(stats, "fetch/failed/exception/"), _counters(stats, "fetch/failed/")
    assert "/a%20b/%C3%A9t%C3%A9.html" in raw.requests_to("spaces.test"), raw.requests_to("spaces.test")

    # robots.txt: 5 redirects followed, 10 MB read, BOM and CRLF understood, our own group obeyed,
    # another agent's group and rules outside any group not applied to us
    for host in ROBOTS_HOSTS:
        asked = raw.requests_to(host)
        assert "/open.html" in asked, (host, asked)
        private = "/private/secret.html" in asked
        assert private == (host in ("noagent.test", "theirs.test")), (host, asked)
    assert raw.requests_to("redirected.test")[:6] == [
        "/robots.txt",
        *(f"/robots-{hop}.txt" for hop in range(1, 5)),
        "/real-robots.txt",
    ]

    # politeness from the server's side: every host is on one address, so one request at a time (each
    # answer of up to 64 KiB is held 0.1 s before it is written: a second request meanwhile would show).
    # A host's tdmrep.json, fetched before its first page is sent, goes out under that page's lease.
    assert not raw.overlaps, raw.overlaps

    # every record of the WARC reads back, and none is left open
    assert not list((run / "warc").glob("*.open"))
    responses = 0
    for path in sorted((run / "warc").glob("*.warc.gz")):
        with path.open("rb") as fh:
            for record in ArchiveIterator(fh):
                record.content_stream().read()
                responses += record.rec_type == "response"
    assert responses >= 20


def _counters(stats: dict[str, object], prefix: str) -> dict[str, object]:
    return {k: v for k, v in stats.items() if k.startswith(prefix)}


def test_the_raw_server_really_sends_what_no_http_library_would(raw: RawServer) -> None:
    """The cases above are only worth their name if the bytes go out as written."""
    raw.route("short.test", "/", http("200 OK", b"cut", "Content-Length: 5000"))
    with socket.create_connection(("127.0.0.1", raw.port), timeout=5) as conn:
        conn.sendall(b"GET / HTTP/1.1\r\nHost: short.test\r\n\r\n")
        got = b""
        while chunk := conn.recv(4096):
            got += chunk
    assert got.endswith(b"\r\n\r\ncut") and b"Content-Length: 5000" in got
    assert raw.requests_to("short.test") == ["/"]


def test_a_long_crawl_delay_holds_only_its_own_host_not_its_address(raw: RawServer, tmp_path: Path) -> None:
    """Hosts on one address share one request at a time, not each other's Crawl-delay: while slow.test
    rests 8 s between requests, quick.test on the same address is crawled at the crawl's own pace."""
    slow_rules = b"User-agent: *\nCrawl-delay: 8\n"
    raw.route("slow.test", "/robots.txt", robots(slow_rules))
    raw.route("slow.test", "/", page("slow", *(f"/s{i}.html" for i in range(5))))
    raw.route("slow.test", "*", page("slow leaf"))
    raw.route("quick.test", "/", page("quick", *(f"/q{i}.html" for i in range(10))))
    raw.route("quick.test", "*", page("quick leaf"))
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 slow.test quick.test\n")
    config = tmp_path / "crawl.toml"
    config.write_text(f'[politeness]\nhosts_file = "{hosts}"\n')
    run = tmp_path / "run"
    seeds = [f"http://slow.test:{raw.port}/", f"http://quick.test:{raw.port}/"]
    args = ["crawl", *seeds, "--config", str(config), "--allow-private", "--out", str(run), "--min-delay",
            "0.1", "--max-pages", "12", "--no-progress", "--policy", "bfs", "--workers", "1"]  # fmt: skip
    done = subprocess.run([*HOSTCRAWL, *args], capture_output=True, text=True, timeout=CRAWL_BOUND_S)
    assert done.returncode == 0, done.stderr[-3000:]
    policy_files = ("/robots.txt", "/.well-known/tdmrep.json")
    quick = [h.at for h in raw.hits if h.host == "quick.test" and h.path not in policy_files]
    slow = [h.at for h in raw.hits if h.host == "slow.test" and h.path != "/robots.txt"]
    assert len(quick) == 11, raw.requests_to("quick.test")
    # shared, the delay would have spaced quick.test's pages 8 s apart: 80 s
    assert max(quick) - min(quick) < 7.0, f"quick.test took {max(quick) - min(quick):.1f} s for 11 pages"
    assert len(slow) >= 2, raw.requests_to("slow.test")  # its tdmrep.json and its home page at least
    assert all(b - a >= 7.9 for a, b in itertools.pairwise(slow)), raw.requests_to("slow.test")
