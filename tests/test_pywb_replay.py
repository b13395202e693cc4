"""A run's WARCs replay in pywb as the pages they archived: pywb's `wayback`, pointed at the run's warc/
folder and the CDXJ files beside each WARC, serves each URL's archived HTML, and its CDX server lists only
captures a replay can serve (no cleaner-verdict metadata lines under the page's URL)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from hostcrawl_cli import hostcrawl

from crawler.archive.warc_files import read_record
from crawler.testweb import TestWebConfig, TestWebProcess
from scheduler.redis_process import free_port
from tests.shared_data import REPO_ROOT

pytestmark = pytest.mark.slow

PYWB_VERSION = "2.10.0"
PYWB_VENV = REPO_ROOT / ".venv-pywb"
INSTALL_HINT = f"python3 -m venv {PYWB_VENV} && {PYWB_VENV}/bin/pip install pywb=={PYWB_VERSION}"


def _wayback() -> Path:
    """pywb lives in a virtualenv of its own: it pins redis==2.10.6, which the `redis` extra cannot share."""
    path = Path(os.environ.get("HOSTCRAWL_PYWB_WAYBACK", PYWB_VENV / "bin" / "wayback"))
    if path.is_file():
        return path
    message = f"pywb's wayback not found at {path} (.ci/run installs it: {INSTALL_HINT})"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("pywb")
    out = base / "run"
    with TestWebProcess(TestWebConfig(n_hosts=6, seed=9), base / "web") as web:
        process = hostcrawl(
            "crawl", *web.seed_urls,
            "--out", str(out),
            "--proxy", web.proxy_url,
            "--allow-private",
            "--min-delay", "0.05",
            "--max-pages", "60",
            "--timeout", "3",
            "-s", "LOG_LEVEL=WARNING",
            "--no-progress",
        )  # fmt: skip
    assert process.returncode == 0, process.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def wayback(run_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    executable = _wayback()
    root = tmp_path_factory.mktemp("pywb-root")
    warc = run_dir / "warc"
    config = {"collections": {"hc": {"archive_paths": f"{warc}/", "index_paths": f"{warc}/"}}}
    (root / "config.yaml").write_text(json.dumps(config))  # YAML is a superset of JSON
    port = free_port()
    log = (root / "wayback.log").open("w")
    process = subprocess.Popen(
        [str(executable), "--port", str(port), "--bind", "127.0.0.1", "--threads", "2"],
        cwd=root,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"wayback did not start: {(root / 'wayback.log').read_text()[-2000:]}")
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/hc"
    finally:
        process.terminate()
        process.wait(timeout=20)
        log.close()


def _get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read()


def _archived_html(run_dir: Path) -> pl.DataFrame:
    pages = pl.read_parquet(run_dir / "pages.parquet")
    return pages.filter(
        (pl.col("status") == 200) & (pl.col("kind") == "html") & pl.col("warc_record_id").is_not_null()
    )


def test_wayback_replays_the_archived_page_not_the_cleaners_verdict(run_dir: Path, wayback: str) -> None:
    pages = _archived_html(run_dir)
    assert pages.height >= 20
    cleaned = pl.read_parquet(run_dir / "pages.parquet").filter(pl.col("cleaner").is_not_null())
    assert cleaned.height, "the run must have written cleaner metadata records for this test to mean anything"
    for row in pages.head(12).iter_rows(named=True):
        record = read_record(run_dir / "warc", row["warc_filename"], row["warc_offset"], row["warc_length"])
        archived = record.content_stream().read()
        # No timestamp: pywb serves the latest capture of the URL, which a metadata record used to shadow.
        status, mime, body = _get(f"{wayback}/id_/{row['url']}")
        assert status == 200, (row["url"], status, body[:200])
        assert mime.startswith("text/html"), (row["url"], mime, body[:200])
        assert body == archived, row["url"]


def test_pywb_cdx_server_lists_only_replayable_captures(run_dir: Path, wayback: str) -> None:
    pages = _archived_html(run_dir)
    for row in pages.head(12).iter_rows(named=True):
        query = urllib.parse.urlencode({"url": row["url"], "output": "json"})
        status, _, body = _get(f"{wayback}/cdx?{query}")
        assert status == 200, body[:200]
        lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
        assert lines, row["url"]
        assert all(line.get("mime") != "application/json" for line in lines), lines
        assert {line["status"] for line in lines} == {"200"}, lines
