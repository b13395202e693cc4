"""Every command refuses bad input the same way: exit code 2, one plain line naming the file, nothing written.

One case per report in issue 17, each in its own working directory.
"""

from __future__ import annotations

import gzip
import json
import random
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from hostcrawl_cli import hostcrawl
from scrapy.exceptions import IgnoreRequest

from crawler.archive.warc import FetchRecord, WarcWriter
from crawler.fetch.failures import failure_reason, why_nothing
from crawler.pages.tables import with_outcome

UNWRITABLE = "/proc/hostcrawl-no-such-dir/out"  # cannot be created, even by root


@dataclass
class Case:
    name: str
    args: list[str]
    says: str  # a piece of the message: the file or flag to fix
    absent: list[str] = field(default_factory=list)  # paths (relative to the case folder) never created
    unchanged: list[str] = field(default_factory=list)  # files that existed and must keep their bytes


def _warc(folder: Path) -> Path:
    with WarcWriter(folder / "in", crawl_host="test") as writer:
        writer.write_fetch(
            FetchRecord(
                "http://a.example/",
                "GET",
                [],
                "HTTP/1.1",
                200,
                "OK",
                [("Content-Type", "text/html")],
                b"<html><body><p>" + b"Some words of a page. " * 40 + b"</p></body></html>",
                datetime.now(UTC),
            )
        )
        return writer.files[0]


def _wet(folder: Path) -> Path:
    path = folder / "CC-MAIN-x.warc.wet.gz"
    records = [
        b"WARC/1.0\r\nWARC-Type: warcinfo\r\nContent-Length: 0\r\n\r\n\r\n\r\n",
        b"WARC/1.0\r\nWARC-Type: conversion\r\nWARC-Target-URI: http://a.example/\r\n"
        b"Content-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello\r\n\r\n",
    ]
    path.write_bytes(b"".join(gzip.compress(r) for r in records))
    return path


def _ranks(folder: Path) -> Path:
    path = folder / "host-ranks.txt.gz"
    rows = "#harmonicc_pos\t#harmonicc_val\t#pr_pos\t#pr_val\t#host_rev\n1\t3.5E7\t1\t0.005\tcom.example\n"
    path.write_bytes(gzip.compress(rows.encode()))
    return path


def _wcxb(folder: Path, with_html: bool) -> Path:
    root = folder / "wcxb"
    (root / "html").mkdir(parents=True)
    (root / "ground-truth").mkdir()
    (root / "metadata.json").write_text(json.dumps({"files": {"0001": {"page_type": "article"}}}))
    (root / "ground-truth" / "0001.json").write_text(json.dumps({"ground_truth": {"main_content": "x"}}))
    if with_html:
        (root / "html" / "0001.html.gz").write_bytes(gzip.compress(b"<html><p>x</p></html>"))
    return root


def _setup(folder: Path) -> dict[str, str]:
    """The inputs every case may use, in the case's own folder."""
    (folder / "a-file").write_text("not a folder\n")
    (folder / "not.parquet").write_text("not parquet\n")
    (folder / "garbage.txt").write_text("garbage\n")
    pl.DataFrame(schema={"url": pl.String, "host": pl.String, "score_x": pl.Float64}).write_parquet(
        folder / "empty.parquet"
    )
    (folder / "existing.parquet").write_bytes(b"somebody's results")
    (folder / "exists").mkdir()
    run = folder / "old-run"  # the demo's RUN/config.toml, used from another folder
    run.mkdir()
    (run / "config.toml").write_text(
        'seeds = ["http://news-0.example/"]\n[fetch]\nproxy = "http://127.0.0.1:9"\n'
        '[policy]\npriors = "runs/demo/testweb/hosts.parquet"\n'
    )
    (folder / "dead-proxy.toml").write_text(
        'seeds = ["http://a.example/"]\n[fetch]\nproxy = "http://127.0.0.1:9"\n'
    )
    return {
        "warc": str(_warc(folder)),
        "wet": str(_wet(folder)),
        "ranks": str(_ranks(folder)),
        "wcxb": str(_wcxb(folder, with_html=True)),
        "wcxb_missing": str(_wcxb(folder / "m", with_html=False)),
    }


def _busy_port() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def cases(inputs: dict[str, str], port: int) -> list[Case]:
    warc, ranks, wcxb = inputs["warc"], inputs["ranks"], inputs["wcxb"]
    crawl = ["crawl", "--no-progress"]
    score = ["score", "--no-progress", "--workers", "1", "--warc", warc]
    web = ["testweb", "serve", "--port", "0"]
    return [
        # crawl
        Case("crawl_bad_ipv6_seed", [*crawl, "http://[::1/", "--out", "r"], "http://[::1/", ["r"]),
        Case("crawl_out_unwritable", [*crawl, "http://a.example/", "--out", UNWRITABLE], UNWRITABLE),
        Case("crawl_out_is_a_file", [*crawl, "http://a.example/", "--out", "a-file"], "a-file"),
        Case("crawl_out_under_a_file", [*crawl, "http://a.example/", "--out", "a-file/r"], "a-file/r"),
        Case(
            "crawl_priors_missing",
            [*crawl, "http://a.example/", "--out", "r", "--priors", "no.parquet"],
            "no.parquet",
            ["r"],
        ),
        Case(
            "crawl_priors_not_parquet",
            [*crawl, "http://a.example/", "--out", "r", "--priors", "not.parquet"],
            "not.parquet",
            ["r"],
        ),
        Case(
            "crawl_truth_missing",
            [*crawl, "http://a.example/", "--out", "r", "--policy", "oracle", "--truth", "no.parquet"],
            "no.parquet",
            ["r"],
        ),
        Case(
            "crawl_truth_not_parquet",
            [*crawl, "http://a.example/", "--out", "r", "--policy", "oracle", "--truth", "not.parquet"],
            "not.parquet",
            ["r"],
        ),
        Case(
            "crawl_demo_config_elsewhere",
            [*crawl, "--config", "old-run/config.toml", "--out", "r"],
            "old-run/config.toml:5",
            ["r"],
        ),
        Case(
            "crawl_dead_proxy",
            [*crawl, "--config", "dead-proxy.toml", "--out", "r"],
            "dead-proxy.toml",
            ["r"],
        ),
        Case("crawl_resume_with_out", [*crawl, "--resume", "old-run", "--out", "r"], "--out r", ["r"]),
        Case("crawl_seed_with_space", [*crawl, "http://exa mple.com/", "--out", "r"], "exa mple.com", ["r"]),
        Case(
            "crawl_scrapy_setting_of_politeness",
            [*crawl, "http://a.example/", "-s", "ROBOTSTXT_OBEY=False", "--out", "r"],
            "ROBOTSTXT_OBEY",
            ["r"],
        ),
        Case(
            "crawl_bad_allow_regex", [*crawl, "http://a.example/", "--allow", "(", "--out", "r"], "'('", ["r"]
        ),
        # score
        Case(
            "score_out_unwritable",
            [*score, "--out", f"{UNWRITABLE}/p.parquet"],
            "/proc/hostcrawl-no-such-dir",
        ),
        Case("score_out_is_a_directory", [*score, "--out", "exists"], "--out exists"),
        Case(
            "score_bogus_cleaner",
            [*score, "--out", "p.parquet", "--cleaner", "bogus"],
            "bogus",
            ["p.parquet"],
        ),
        Case(
            "score_existing_out", [*score, "--out", "existing.parquet"], "--force", [], ["existing.parquet"]
        ),
        Case(
            "score_wet_file", ["score", "--warc", inputs["wet"], "--out", "p.parquet"], "WET", ["p.parquet"]
        ),
        # graph
        Case(
            "graph_ingest_out_unwritable",
            ["graph", "ingest", ranks, "--out", f"{UNWRITABLE}/r.parquet"],
            "/proc/hostcrawl-no-such-dir",
        ),
        Case(
            "graph_ingest_out_is_a_directory", ["graph", "ingest", ranks, "--out", "exists"], "--out exists"
        ),
        Case(
            "graph_ingest_existing_out",
            ["graph", "ingest", ranks, "--out", "existing.parquet"],
            "--force",
            [],
            ["existing.parquet"],
        ),
        Case(
            "graph_vertices_garbage", ["graph", "vertices", "garbage.txt", "--out", "v"], "garbage.txt", ["v"]
        ),
        Case("graph_edges_garbage", ["graph", "edges", "garbage.txt", "--out", "e"], "garbage.txt", ["e"]),
        # study
        *(
            Case(
                f"study_{name}_no_rows",
                ["study", name, "--pages", "empty.parquet", "--out", "st"],
                "empty.parquet",
                ["st"],
            )
            for name in ("ksample", "yield", "icc", "depth")
        ),
        # clean
        Case(
            "clean_eval_data_is_a_file",
            ["clean", "eval", "--data", "a-file", "--cleaner", "blocks_v1"],
            "a-file",
        ),
        Case(
            "clean_eval_predictions_unwritable",
            [
                "clean",
                "eval",
                "--data",
                wcxb,
                "--cleaner",
                "blocks_v1",
                "--predictions",
                f"{UNWRITABLE}/p.jsonl",
            ],
            "--predictions",
        ),
        Case(
            "clean_eval_negative_limit",
            ["clean", "eval", "--data", wcxb, "--cleaner", "blocks_v1", "--limit", "-1"],
            "--limit -1",
        ),
        Case(
            "clean_eval_html_missing",
            ["clean", "eval", "--data", inputs["wcxb_missing"], "--cleaner", "blocks_v1"],
            "0001.html.gz",
        ),
        # testweb
        Case(
            "testweb_port_in_use",
            ["testweb", "serve", "--port", str(port), "--out", "w"],
            f"--port {port}",
            ["w"],
        ),
        Case("testweb_no_hosts", [*web, "--hosts", "0", "--out", "w"], "--hosts 0", ["w"]),
        Case("testweb_out_unwritable", [*web, "--out", UNWRITABLE], UNWRITABLE),
        Case("testweb_config_missing", [*web, "--config", "no.json", "--out", "w"], "no.json", ["w"]),
    ]


# Runs each case as `hostcrawl ARGS` would (`sys.exit(main(ARGS))` in a fresh working directory), all in
# one child process: importing Scrapy, polars and every command once instead of 36 times.
DRIVER = """
import contextlib, io, json, os, sys, traceback
from crawler.cli import main
results = []
for folder, args in json.loads(sys.stdin.read()):
    os.chdir(folder)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(args)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            traceback.print_exc()
            code = 1
    results.append([code, err.getvalue()])
print(json.dumps(results))
"""


@dataclass
class Outcome:
    case: Case
    folder: Path
    returncode: int
    stderr: str
    before: dict[str, bytes]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Outcome]]:
    root = tmp_path_factory.mktemp("cli-errors")
    busy = _busy_port()
    try:
        prepared: list[tuple[Case, Path, dict[str, bytes]]] = []
        for i in range(len(CASE_NAMES)):
            folder = root / f"case-{i:02d}"
            folder.mkdir()
            case = cases(_setup(folder), busy.getsockname()[1])[i]
            before = {name: (folder / name).read_bytes() for name in case.unchanged}
            prepared.append((case, folder, before))
        batch = json.dumps([[str(folder), case.args] for case, folder, _ in prepared])
        child = subprocess.run(
            [sys.executable, "-c", DRIVER], input=batch, capture_output=True, text=True, timeout=600
        )
        assert child.returncode == 0, child.stderr[-3000:]
        results = json.loads(child.stdout.splitlines()[-1])
        yield {
            case.name: Outcome(case, folder, code, stderr, before)
            for (case, folder, before), (code, stderr) in zip(prepared, results, strict=True)
        }
    finally:
        busy.close()


CASE_NAMES = [c.name for c in cases(dict.fromkeys(("warc", "wet", "ranks", "wcxb", "wcxb_missing"), "x"), 1)]


@pytest.mark.parametrize("name", CASE_NAMES)
def test_bad_input_exits_2_with_one_line_naming_it_and_writes_nothing(
    outcomes: dict[str, Outcome], name: str
) -> None:
    outcome = outcomes[name]
    case = outcome.case
    lines = [line for line in outcome.stderr.splitlines() if line.strip()]
    assert outcome.returncode == 2, f"{case.args}: exit {outcome.returncode}\n{outcome.stderr[-2000:]}"
    assert len(lines) == 1, f"{case.args}: not one line:\n{outcome.stderr}"
    assert lines[0].startswith("error: "), lines[0]
    assert case.says in lines[0], f"{lines[0]!r} does not name {case.says!r}"
    assert "Traceback" not in outcome.stderr
    for path in case.absent:
        assert not (outcome.folder / path).exists(), f"{case.name} left {path} behind"
    for path, data in outcome.before.items():
        assert (outcome.folder / path).read_bytes() == data, f"{case.name} overwrote {path}"


def test_config_error_keeps_its_section_name_on_one_line(tmp_path: Path) -> None:
    config = tmp_path / "crawl.toml"
    config.write_text('seeds = ["http://a.example/"]\n[politeness]\nmin_dely = 2\n')
    result = hostcrawl("crawl", "--config", str(config), "--out", str(tmp_path / "r"), cwd=tmp_path)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2
    assert len(lines) == 1
    assert f"{config}:3: unknown key 'min_dely' in [politeness]" in lines[0]


def test_a_crawl_that_fetched_nothing_says_why() -> None:
    stats = {"fetch/refused/loopback": 1, "fetch/failed/private_address": 1, "response_received_count": 0}
    why = why_nothing(stats)
    assert "fetch/refused/loopback 1" in why and "--allow-private" in why


def test_a_crawl_that_fetched_nothing_names_robots_and_dns_failures_without_a_false_hint() -> None:
    stats = {"robotstxt/unavailable/timeout": 3, "fetch/refused/unresolvable": 1}
    why = why_nothing(stats)
    assert "robotstxt/unavailable/timeout 3" in why and "fetch/refused/unresolvable 1" in why
    assert "--allow-private" not in why and "does not resolve" in why


def test_classifier_train_blames_a_tiny_bucket_not_the_learning_rate(tmp_path: Path) -> None:
    rng = random.Random(0)
    words = [f"w{i}" for i in range(300)]
    with (tmp_path / "labelled.jsonl").open("w") as fh:
        for i in range(400):
            label, vocab = ("good", words[:200]) if i % 2 else ("bad", words[100:])
            fh.write(
                json.dumps({"text": " ".join(rng.choice(vocab) for _ in range(50)), "label": label}) + "\n"
            )
    args = ["classifier", "train", "--data", "labelled.jsonl", "--out", "m.bin", "--bucket", "10"]
    result = hostcrawl(*args, cwd=tmp_path)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr[-2000:]
    assert len(lines) == 1 and "--bucket 10 is too small" in lines[0], result.stderr
    assert not (tmp_path / "m.bin").exists()


def test_an_unreachable_robots_txt_is_not_recorded_as_a_refusal_by_the_host() -> None:
    unavailable = failure_reason(IgnoreRequest("robots.txt unavailable: Forbidden by robots.txt for now"))
    forbidden = failure_reason(IgnoreRequest("Forbidden by robots.txt"))
    assert (unavailable, forbidden) == ("robots_unavailable", "robots_forbidden")
    rows = pl.DataFrame(
        {"status": [None, None, 200], "error": [unavailable, forbidden, "sitemap"]},
        schema={"status": pl.Int32, "error": pl.String},
    )
    outcome = with_outcome(rows)
    assert outcome["outcome"].to_list() == ["failed", "robots_refused", "fetched"]
    assert outcome["kind"].to_list() == [None, None, "sitemap"] and outcome["error"][2] is None


def test_workers_of_one_run_create_its_directory_together(tmp_path: Path) -> None:
    """Workers of a distributed run start at once with the same --out: creating and probing it must not
    trip over another process doing the same (one worker once failed with 'cannot create')."""
    code = (
        "import sys\nfrom pathlib import Path\nfrom crawler.cli import create_run_dir\n"
        "for _ in range(300):\n    create_run_dir(Path(sys.argv[1]))\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(tmp_path / "run")], stderr=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errors
    assert list((tmp_path / "run").iterdir()) == [], "a probe file was left behind"
