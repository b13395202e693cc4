"""An install without the optional extras: every command starts, and one that needs an extra names it.

The extras' modules are hidden from a real `hostcrawl` process by an import hook (a sitecustomize on its
PYTHONPATH), so what runs is the installed code with `redis`, `scrapy_redis`, `torch`, `transformers`,
`tokenizers` and `vllm` missing, as after `pip install hostcrawl`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HIDDEN = ("redis", "scrapy_redis", "torch", "transformers", "tokenizers", "vllm")
HOOK = f"""
import sys

class HideExtras:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {HIDDEN!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)

sys.meta_path.insert(0, HideExtras())
"""


@pytest.fixture
def bare(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "sitecustomize.py").write_text(HOOK)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    return env


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "crawler.cli", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


def test_the_hook_really_hides_the_extras(bare: dict[str, str]) -> None:
    probe = subprocess.run([sys.executable, "-c", "import redis"], env=bare, capture_output=True, text=True)
    assert probe.returncode != 0 and "No module named 'redis'" in probe.stderr


def test_help_works_without_any_extra(bare: dict[str, str]) -> None:
    for args in (["--help"], ["crawl", "--help"], ["frontier", "--help"], ["demo", "--help"]):
        done = _run(bare, *args)
        assert done.returncode == 0, (args, done.stderr[-2000:])
        assert "usage: hostcrawl" in done.stdout


def test_a_command_that_needs_an_extra_names_it_in_one_line(bare: dict[str, str], tmp_path: Path) -> None:
    cases = [
        (["frontier", "status", "--frontier", "redis://127.0.0.1:9/0", "--run", "r"], "redis"),
        (
            [
                "crawl",
                "--frontier",
                "redis://127.0.0.1:9/0",
                "--run",
                "r",
                "http://a.example/",
                "--out",
                str(tmp_path / "w"),
            ],
            "redis",
        ),
        (["crawl", "--cleaner", "encoder_v2", "http://a.example/", "--out", str(tmp_path / "e")], "gpu"),
    ]
    for args, extra in cases:
        done = _run(bare, *args)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2, (args, done.stderr[-2000:])
        assert len(lines) == 1 and f"hostcrawl[{extra}]" in lines[0], (args, lines)
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "e").exists(), "nothing is written before the error"


# What a command's `--help` must not load: the engines its work needs (each 0.1-1 s to import; together
# they made every `--help` take 3-4 s). benchmarks/cli_startup.py measures the time.
ENGINES = (
    "scrapy", "twisted", "polars", "pyarrow", "duckdb", "numpy", "scipy", "matplotlib", "lightgbm",
    "aiohttp", "redis", "torch", "transformers", "trafilatura", "datasketch", "cdxj_indexer",
)  # fmt: skip
PROBE = """
import sys
from crawler.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print("LOADED", sorted(m for m in {engines!r} if m in sys.modules))
"""


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["crawl", "--help"],
        ["score", "--help"],
        ["study", "icc", "--help"],
        ["bench", "yield", "--help"],
        ["recrawl", "plan", "--help"],
        ["graph", "--help"],
        ["clean", "train", "--help"],
        ["testweb", "serve", "--help"],
    ],
)
def test_help_loads_none_of_the_engines(args: list[str]) -> None:
    code = PROBE.format(engines=ENGINES)
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60)
    assert "usage: hostcrawl" in done.stdout, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "LOADED []"
