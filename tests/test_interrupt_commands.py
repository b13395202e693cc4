"""Ctrl-C in the long commands besides the crawl (tests/test_interrupt.py has the crawl, the workers and
`study synth`): `hostcrawl score` stops with exit 130, one line, no traceback from it or its worker
processes, and no output file, so a later run does not take a half-written table for a whole one."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest
from hostcrawl_cli import HOSTCRAWL
from test_score_warcs import build_warc, local_web_pages

pytestmark = pytest.mark.slow


def test_ctrl_c_in_score_leaves_no_output_and_no_traceback(tmp_path: Path) -> None:
    pages = local_web_pages(60) * 80  # 4,800 pages: about 20 s of cleaning on two quiet workers
    warc = tmp_path / "big.warc.gz"
    warc.write_bytes(build_warc(pages))
    out = tmp_path / "pages.parquet"
    process = subprocess.Popen(
        [*HOSTCRAWL, "score", "--warc", str(warc), "--out", str(out), "--workers", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(6.0)  # past start-up: the workers are cleaning
    assert process.poll() is None, "score finished before it could be interrupted: give it more pages"
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err[-2000:]
    assert "Traceback" not in err, err[-3000:]
    assert "interrupted" in err
    assert not out.exists(), "a half-written table was left behind"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.warc.gz"]
