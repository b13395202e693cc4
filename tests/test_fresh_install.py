"""`pip install hostcrawl` in a new virtualenv, no extras: `--help` and the demo work, and a command
that needs an extra says which one, in one line.

A real install, not the editable one of the checkout: the package is built from the repository
(pinned by requirements.lock) into a virtualenv of its own, so a module or data file missing from
the wheel, or an extra imported where the base install runs, fails here as it would for a user.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
# what the wheel is built from, copied out first: a build in the checkout leaves build/ behind
SOURCES = ("pyproject.toml", "README.md", "crawler", "scheduler", "cleaner", "graph", "analytics")
JUNK = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
EXTRA_MODULES = ("redis", "scrapy_redis", "torch", "transformers", "tokenizers", "vllm")


def run(*args: str | Path, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("fresh")
    source = where / "hostcrawl"
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=JUNK)
        else:
            source.mkdir(exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    env_dir = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, timeout=120)
    install = run(
        env_dir / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
        "-c", REPO / "requirements.lock", source,
        cwd=where, timeout=1200,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr[-3000:]
    return env_dir


def test_the_fresh_install_has_no_extra(venv: Path, tmp_path: Path) -> None:
    probe = f"import importlib.util as u; print([m for m in {EXTRA_MODULES!r} if u.find_spec(m)])"
    done = run(venv / "bin" / "python", "-c", probe, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr


def test_help_and_the_demo_work_without_extras(venv: Path, tmp_path: Path) -> None:
    hostcrawl = venv / "bin" / "hostcrawl"
    for args in (["--help"], ["crawl", "--help"], ["frontier", "--help"]):
        done = run(hostcrawl, *args, cwd=tmp_path)
        assert done.returncode == 0 and "usage: hostcrawl" in done.stdout, (args, done.stderr[-2000:])
    out = tmp_path / "demo"
    demo = run(
        hostcrawl, "demo", "--max-pages", "200", "--no-progress", "--no-status", "--out", out, cwd=tmp_path
    )
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "Traceback" not in demo.stderr
    for name in ("pages.parquet", "hosts.parquet", "report.md", "stats.json"):
        assert (out / name).is_file(), name
    assert list((out / "warc").glob("*.warc.gz")) and list((out / "text").glob("*.jsonl.zst"))


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (["frontier", "status", "--frontier", "redis://127.0.0.1:9/0", "--run", "r"], "redis"),
        (["crawl", "--frontier", "redis://127.0.0.1:9/0", "--run", "r", "http://a.example/"], "redis"),
        (["crawl", "--cleaner", "encoder_v2", "http://a.example/"], "gpu"),
    ],
)
def test_a_command_of_a_missing_extra_names_it(
    venv: Path, tmp_path: Path, args: list[str], extra: str
) -> None:
    out = tmp_path / "run"
    done = run(
        venv / "bin" / "hostcrawl", *args, *(["--out", out] if args[0] == "crawl" else []), cwd=tmp_path
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(lines) == 1 and f"pip install 'hostcrawl[{extra}]'" in lines[0], lines
    assert not out.exists() or not any(out.iterdir()), "nothing is written before the error"
