"""`hostcrawl crawl --status-port`: a real crawl of the test web watched through its status page.

One crawl is watched the way a user and Prometheus would: /api/status and /metrics are polled while it runs,
the final figures are read while the page lingers after the run directory is written, and the page itself is
opened in headless chromium. Every figure is checked against what the run directory says at the end.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import polars as pl
import pytest
from hostcrawl_cli import HOSTCRAWL, hostcrawl
from prometheus_client.parser import text_string_to_metric_families
from selectolax.lexbor import LexborHTMLParser

from crawler.monitor.status import one_line
from crawler.pages.outcomes import REFUSALS
from crawler.testweb import TestWebConfig, TestWebProcess
from scheduler.export import host_states
from scheduler.frontier_limits import KEEP_BUSY, fill_hosts

pytestmark = pytest.mark.slow

POLL_S = 0.5
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
# Prometheus counters with a label -> the Scrapy stats keys they count (label value = the key's suffix)
LABELLED = {
    "hostcrawl_pages_fetched": ("status", "downloader/response_status_count/"),
    "hostcrawl_fetch_failures": ("reason", "fetch/failed/"),
    "hostcrawl_fetch_attempt_errors": ("reason", "fetch/error/"),
    "hostcrawl_politeness_backoffs": ("reason", "politeness/backoff/"),
    "hostcrawl_host_decisions": ("decision", "host/"),
}
SCALARS = {
    "hostcrawl_pages_curated": "page/curated",
    "hostcrawl_pages_below_threshold": "page/below_threshold",
    "hostcrawl_pages_recorded": "page/recorded",
    "hostcrawl_responses_received": "response_received_count",
    "hostcrawl_politeness_parked": "politeness/parked",
}


@dataclass
class Browser:
    dom: str
    console: list[str]
    control_console: list[str]
    screenshot: Path


@dataclass
class Watched:
    run_dir: Path
    url: str
    returncode: int | None
    stderr: str
    polls: list[dict[str, Any]] = field(default_factory=list)  # /api/status while the crawl ran
    scrapes: list[str] = field(default_factory=list)  # /metrics while the crawl ran
    final: dict[str, Any] = field(default_factory=dict)
    final_metrics: str = ""
    browser: Browser | None = None
    page_source: str = ""
    not_found: int = 0
    stats: dict[str, Any] = field(default_factory=dict)


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode()


def chromium() -> str | None:
    return next((path for name in CHROMIUM_NAMES if (path := shutil.which(name))), None)


def headless(binary: str, url: str, profile: Path, *extra: str) -> tuple[str, list[str]]:
    """Chromium's DOM after the page's scripts ran (virtual time), and every console message it logged."""
    command = [
        binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
        "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", *extra, url,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    return done.stdout, [line for line in done.stderr.splitlines() if ":CONSOLE" in line]


def open_in_browser(url: str, base: Path) -> Browser | None:
    binary = chromium()
    if binary is None:
        return None
    control = base / "control.html"
    control.write_text("<script>console.error('control message'); notDefined();</script>")
    _, control_console = headless(binary, control.as_uri(), base / "profile-control", "--dump-dom")
    dom, console = headless(binary, url, base / "profile-dom", "--dump-dom")
    shot = base / "status.png"
    headless(
        binary,
        url,
        base / "profile-shot",
        "--hide-scrollbars",
        "--window-size=1280,1300",
        f"--screenshot={shot}",
    )
    return Browser(dom, console, control_console, shot)


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Watched]:
    base = tmp_path_factory.mktemp("status")
    web_dir = base / "web"
    web_dir.mkdir()
    run_dir = base / "run"
    with TestWebProcess(TestWebConfig(n_hosts=40, seed=5), web_dir) as web:
        seeds = base / "seeds.txt"
        seeds.write_text("\n".join(web.seed_urls) + "\n")
        # --min-delay 1.0: 40 hosts give at most 40 pages/s, so 300 pages take at least 7.5 s however fast
        # the machine, and the curve (a point a second) has points to draw (0.2 once ended in 4 s in CI)
        command = [
            *HOSTCRAWL, "crawl", "--seeds", str(seeds), "--out", str(run_dir), "--proxy", web.proxy_url,
            "--allow-private", "--min-delay", "1.0", "--max-pages", "300", "--timeout", "3",
            "--workers", "1", "--no-progress", "--status-port", "0", "--status-linger", "600",
        ]  # fmt: skip
        process = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        lines: list[str] = []
        assert process.stderr is not None
        threading.Thread(target=read_lines, args=(process.stderr, lines), daemon=True).start()
        try:
            yield watch(process, run_dir, lines, base)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(30)


def read_lines(stream: IO[str], lines: list[str]) -> None:
    for line in stream:
        lines.append(line)


def watch(process: subprocess.Popen[str], run_dir: Path, lines: list[str], base: Path) -> Watched:
    deadline = time.monotonic() + 400
    url = ""
    while not url and time.monotonic() < deadline and process.poll() is None:
        url = next((ln.split("status page: ", 1)[1].split()[0] for ln in lines if "status page: " in ln), "")
        time.sleep(0.1)
    assert url, "".join(lines)
    seen = Watched(run_dir, url, None, "")
    while time.monotonic() < deadline and process.poll() is None:
        status = json.loads(get(url + "api/status"))
        metrics = get(url + "metrics")
        after = json.loads(get(url + "api/status"))
        if status["state"] == "running":
            seen.polls.append(status)
        # the state only goes starting -> running -> finished, so a scrape between two "running" answers
        # was taken while the crawl ran (one taken as it finished legitimately says crawl_running 0)
        if status["state"] == after["state"] == "running":
            seen.scrapes.append(metrics)
        elif status["state"] == "finished" and any("stays up" in line for line in lines):
            break  # the run directory is written; the page lingers with the final figures
        time.sleep(POLL_S)
    seen.final = json.loads(get(url + "api/status"))
    seen.final_metrics = get(url + "metrics")
    seen.page_source = get(url)
    try:
        get(url + "nothing-here")
    except urllib.error.HTTPError as exc:
        seen.not_found = exc.code
    seen.browser = open_in_browser(url, base)
    process.send_signal(signal.SIGINT)  # Ctrl-C ends the linger
    seen.returncode = process.wait(60)
    seen.stderr = "".join(lines)
    seen.stats = json.loads((run_dir / "stats.json").read_text())
    return seen


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, by (sample name, labels); parsing it is part of the check."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def labelled(scrape: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str) -> dict[str, float]:
    return {
        dict(labels)[LABELLED[name][0]]: v
        for (sample, labels), v in scrape.items()
        if sample == f"{name}_total"
    }


def test_the_crawl_serves_its_status_while_it_runs_and_exits_cleanly(watched: Watched) -> None:
    assert watched.returncode == 0, watched.stderr[-3000:]
    assert watched.url.startswith("http://127.0.0.1:")  # loopback unless asked otherwise
    fetched = [poll["pages"]["fetched"] for poll in watched.polls]
    assert len(watched.polls) >= 3 and fetched[-1] > fetched[0], fetched
    assert fetched == sorted(fetched)
    with pytest.raises(OSError):  # the page went away with the process
        get(watched.url + "api/status")


def test_metrics_counters_match_stats_json_at_the_end(watched: Watched) -> None:
    """The final snapshot is taken when the spider closes (downloader, pipelines and scheduler closed,
    nothing counts any more), so the counters must equal stats.json exactly."""
    final, stats = samples(watched.final_metrics), watched.stats
    for name, (_, prefix) in LABELLED.items():
        expected = {k[len(prefix) :]: v for k, v in stats.items() if k.startswith(prefix)}
        assert labelled(final, name) == expected, name
    for name, key in SCALARS.items():
        assert final[(f"{name}_total", ())] == stats.get(key, 0), name
    assert labelled(final, "hostcrawl_pages_fetched")["200"] > 0
    assert final[("hostcrawl_budget_spent_pages", ())] == stats["frontier/fetched"]
    count, total = (
        final[("hostcrawl_score_lag_pages_count", ())],
        final[("hostcrawl_score_lag_pages_sum", ())],
    )
    assert count > 0 and round(total / count, 1) == stats["scheduler/score_lag_pages_mean"]
    assert final[("hostcrawl_crawl_running", ())] == 0
    info = [labels for (name, labels), _ in final.items() if name == "hostcrawl_crawl_info"]
    assert dict(info[0])["policy"] == stats["hostcrawl/policy"]


def test_metrics_parse_and_counters_never_go_down_while_running(watched: Watched) -> None:
    scrapes = [samples(text) for text in watched.scrapes]
    assert len(scrapes) >= 3, "the crawl ended before three scrapes saw it running"
    assert all(scrape[("hostcrawl_crawl_running", ())] == 1 for scrape in scrapes)
    for before, after in itertools.pairwise(scrapes):
        for key, value in before.items():
            if key[0].endswith("_total"):
                assert after.get(key, 0) >= value, key
    states = {dict(labels)["state"] for (name, labels) in scrapes[-1] if name == "hostcrawl_hosts"}
    assert {"new", "sampling", "deepening", "dropped", "blocked"} <= states


def test_api_status_matches_the_frontier(watched: Watched) -> None:
    api, stats = watched.final, watched.stats
    hosts = pl.read_parquet(watched.run_dir / "hosts.parquet")  # hosts with page rows
    saved = host_states(watched.run_dir / "frontier.sqlite3")  # every host the frontier has written
    in_store = dict(saved.group_by("state").len().iter_rows())
    with_rows = dict(hosts.group_by("state").len().iter_rows())
    by_state = api["hosts"]["by_state"]
    for state, n in by_state.items():
        if state == "new":  # a host only linked to is written to the frontier once something happens to it
            assert n >= in_store.get(state, 0)
        else:
            assert n == in_store.get(state, 0), (state, by_state, in_store)
        assert n >= with_rows.get(state, 0), (state, by_state, with_rows)
    assert api["hosts"]["known"] == sum(by_state.values()) == stats["host/discovered"]
    scored = hosts.filter(pl.col("scored_pages") > 0)
    density = dict(scored.select("host", "density_mean").iter_rows())
    top = api["hosts"]["top"]
    assert top and [h["density_mean"] for h in top] == sorted((h["density_mean"] for h in top), reverse=True)
    for h in top:
        assert h["density_mean"] == pytest.approx(density[h["host"]], abs=1e-4)
        assert h["fetched"] >= h["scored"] >= h["high_quality"] and len(h["samples"]) <= h["scored"]
    assert any(h["samples"] for h in top)
    best = sorted(density.values(), reverse=True)[: len(top)]
    assert [h["density_mean"] for h in top] == pytest.approx(best, abs=1e-4)
    pages = api["pages"]
    assert pages["fetched"] == stats["frontier/fetched"] and pages["budget"] == 300
    assert pages["high_quality"] == stats["page/curated"]
    failed = {k.split("/", 2)[2]: v for k, v in stats.items() if k.startswith("fetch/failed/")}
    # a robots.txt refusal is the crawl obeying, not an error: it is listed apart (issue 30)
    assert api["errors"] == {k: v for k, v in failed.items() if k not in REFUSALS}
    assert api["refusals"] == {k: v for k, v in failed.items() if k in REFUSALS}
    assert api["policy"]["name"] == stats["hostcrawl/policy"]
    settings = api["policy"]["settings"]
    assert settings["sample_pages"] == 3 and settings["keep_busy"] == KEEP_BUSY
    assert settings["fill_hosts"] == fill_hosts(settings["concurrency"], KEEP_BUSY) >= 1
    curve = api["curve"]
    assert curve[-1][1:] == [pages["fetched"], pages["high_quality"]]
    assert [p[1] for p in curve] == sorted(p[1] for p in curve)


def test_progress_line_says_the_same_in_the_terminal_width(watched: Watched) -> None:
    api = watched.final
    full = one_line(api, 400)
    for width in (30, 60, 80, 120):
        line = one_line(api, width)
        assert len(line) <= width and full.startswith(line)  # the least important parts go first
    assert one_line(api, 80).startswith(f"{api['pages']['fetched']}/300 (100%) pages")
    assert f"hosts known {api['hosts']['known']}" in full and api["policy"]["name"] in full
    assert f"hq/fetch {api['pages']['high_quality_per_fetch']:.2f}" in full


def test_the_page_in_headless_chromium_shows_the_figures_and_the_curve(watched: Watched) -> None:
    if watched.browser is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed (apt-get install chromium); CI must run this test")
        pytest.skip("chromium is not installed: apt-get install chromium")
    browser, api = watched.browser, watched.final
    assert browser.control_console, "chromium logged no console message of the control page"
    assert browser.console == [], browser.console
    dom = LexborHTMLParser(browser.dom)

    def text(selector: str) -> str:
        node = dom.css_first(selector)
        assert node is not None, selector
        return node.text(strip=True)

    assert text("#state") == "finished"
    assert text('[data-field="pages.fetched"]') == str(api["pages"]["fetched"])
    assert text('[data-field="hosts.known"]') == str(api["hosts"]["known"])
    assert text('[data-field="pages.high_quality"]') == str(api["pages"]["high_quality"])
    assert (
        text('[data-field="pages.high_quality_per_fetch"]') == f"{api['pages']['high_quality_per_fetch']:.3f}"
    )
    assert text('[data-field="policy.name"]') == api["policy"]["name"]
    for state, n in api["hosts"]["by_state"].items():
        assert text(f'#hosts-by-state tr[data-state="{state}"] td.n') == str(n)
    rows = [row.attributes["data-host"] for row in dom.css("#top-hosts tbody tr")]
    assert rows == [h["host"] for h in api["hosts"]["top"]]
    for table in ("errors", "refusals"):  # an empty table shows one "none" row
        shown = {row.attributes.get("data-reason") for row in dom.css(f"#{table} tr")}
        assert shown == (set(api[table]) or {None}), (table, shown)
    assert api["refusals"], "the test web's robots.txt disallows refuse some URLs"
    curve = dom.css_first("#curve-cumulative")
    assert curve is not None
    points = int(curve.attributes["data-points"] or 0)
    assert points == sum(1 for p in api["curve"] if p[1] > 0) and points >= 5
    assert (curve.attributes["d"] or "").count("L") == points - 1
    assert browser.screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert browser.screenshot.stat().st_size > 20_000  # a rendered page, not a blank one


def test_a_busy_status_port_is_a_usage_error_before_anything_is_written(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = hostcrawl(
            "crawl",
            "http://a.example/",
            "--out",
            str(tmp_path / "run"),
            "--status-port",
            str(port),
            timeout=60,
        )
    assert result.returncode == 2, result.stderr
    assert f"--status-port {port}" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists()


def test_the_page_needs_nothing_from_outside_and_unknown_paths_are_404(watched: Watched) -> None:
    page = watched.page_source
    assert "<svg" in page and "api/status" in page
    for outside in ('src="http', 'href="http', 'src="//', 'href="//', "@import", "url("):
        assert outside not in page, outside
    assert watched.not_found == 404


def test_the_demo_prints_its_status_page_and_serves_it_while_it_crawls(tmp_path: Path) -> None:
    """`hostcrawl demo` opens the page on a free port by default and says where."""
    demo = subprocess.Popen(
        [*HOSTCRAWL, "demo", "--hosts", "30", "--max-pages", "400", "--out", str(tmp_path / "run"),
         "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert demo.stdout is not None
    seen: list[str] = []
    try:
        url = None
        for line in demo.stdout:
            seen.append(line)
            if line.startswith("status page: http://127.0.0.1:"):
                url = line.split()[2]
                break
        assert url is not None, "".join(seen)[-2000:]
        snap: dict[str, Any] = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not snap.get("pages", {}).get("fetched"):
            with contextlib.suppress(OSError, ValueError):
                snap = json.loads(urllib.request.urlopen(url + "api/status", timeout=5).read())
            time.sleep(0.2)
        assert snap["state"] in ("running", "finished") and snap["pages"]["budget"] == 400, snap
        rest = demo.communicate(timeout=300)[0]
    finally:
        demo.kill()
    assert demo.returncode == 0, (("".join(seen)) + rest)[-3000:]
    assert "politeness audit (server side): clean" in rest
