"""Ctrl-C in the long commands besides the crawl (tests/test_interrupt.py has the crawl, the workers and
`study synth`): `hostcrawl score` and `hostcrawl study` stop with exit 130, one line, no traceback from
them or their worker processes, and no half-written output a later run would take for a whole one."""

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


def _snapshot(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in sorted(root.rglob("*")) if p.is_file()}


def test_ctrl_c_in_a_study_keeps_the_previous_results_whole_and_leaves_no_partial_folder(
    tmp_path: Path,
) -> None:
    """Ctrl-C inside `study all` (in a DuckDB query or between them) exits 130 with one line; the study it
    stopped wrote nothing over its previous complete folder, which a report would otherwise read as new."""
    data = tmp_path / "synth"
    made = subprocess.run([*HOSTCRAWL, "study", "synth", "--out", str(data)], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    first = subprocess.run([*HOSTCRAWL, "study", "all", "--data", str(data)], capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    studies = data / "studies"
    before = _snapshot(studies)
    _interrupt_study_all(data, studies)
    after = _snapshot(studies)
    assert not [p for p in after if ".partial" in p or ".old" in p], sorted(after)
    for name in ("yield", "depth", "coverage", "language"):  # stopped or never started: as they were
        mine = {p: t for p, t in after.items() if p.startswith(f"{name}/")}
        assert mine == {p: t for p, t in before.items() if p.startswith(f"{name}/")}, name

    fresh = tmp_path / "fresh"  # no earlier results: the interrupted study leaves no folder at all
    _interrupt_study_all(data, fresh)
    assert sorted(p.name for p in fresh.iterdir()) == ["icc", "ksample"]


def _interrupt_study_all(data: Path, out: Path) -> None:
    args = [*HOSTCRAWL, "study", "all", "--data", str(data), "--out", str(out)]
    process = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    said = []
    for line in process.stderr:  # the third of six studies has started: interrupt it
        said.append(line)
        if line.startswith("study yield"):  # it takes about 0.5 s: land inside it, past its set-up
            time.sleep(0.25)
            process.send_signal(signal.SIGINT)
            break
    said.append(process.stderr.read())
    err = "".join(said)
    assert process.wait(timeout=60) == 130, err[-2000:]
    assert "Traceback" not in err and "interrupted" in err, err[-3000:]
