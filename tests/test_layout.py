"""The layout DESIGN.md promises: a production crawl's modules import nothing from the bench or the
test web, and the team's layout check (circles, forbidden arrows, long files, twin names) finds nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# What a crawl runs: the run (single process and worker), the fetch path, the archive, the page path
# and the monitor, as the Scrapy settings name them.
CRAWL_MODULES = (
    "crawler.run.crawl_run",
    "crawler.run.worker",
    "crawler.run.settings",
    "crawler.fetch.spider",
    "crawler.pages.store_pipeline",
    "crawler.monitor.status_server",
)


def _loaded_after(code: str) -> list[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_crawl_imports_nothing_from_the_bench_or_the_test_web() -> None:
    # and every component the Scrapy settings name, as Scrapy loads them
    settings = (
        "import importlib\n"
        "from crawler.run.settings import DOWNLOADER_MIDDLEWARES, EXTENSIONS, SPIDER_MIDDLEWARES\n"
        "for path in [*DOWNLOADER_MIDDLEWARES, *EXTENSIONS, *SPIDER_MIDDLEWARES]:\n"
        "    if path.startswith(('crawler.', 'scheduler.')):\n"
        "        importlib.import_module(path.rpartition('.')[0])\n"
    )
    loaded = _loaded_after("\n".join(f"import {m}" for m in CRAWL_MODULES) + "\n" + settings)
    assert "crawler.fetch.spider" in loaded and "crawler.archive.warc_capture" in loaded
    harness = [m for m in loaded if m.startswith(("crawler.bench", "crawler.testweb"))]
    assert harness == [], f"a crawl loads the harness: {harness}"


def _layout_check() -> Path | None:
    """The team's layout checker (shared/tools, beside the shared data): not part of the package."""
    data = Path(os.environ.get("HOSTCRAWL_SHARED_DATA", Path(__file__).parents[2] / "shared" / "data"))
    tool = data.parent / "tools" / "layout_check.py"
    return tool if tool.is_file() else None


def test_the_layout_check_finds_no_circle_no_forbidden_arrow_no_long_file_no_twin_name() -> None:
    tool = _layout_check()
    if tool is None:
        pytest.skip("shared/tools/layout_check.py is not beside this checkout (a developer tool)")
    root = Path(__file__).parents[1]
    done = subprocess.run([sys.executable, str(tool), str(root)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
