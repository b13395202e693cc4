"""The layout DESIGN.md promises, checked from a user's side: a production crawl's modules import
nothing from the bench or the test web."""

from __future__ import annotations

import json
import subprocess
import sys

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
