"""Run `hostcrawl` as a user does: in its own process (Scrapy's reactor runs once per process)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HOSTCRAWL = [sys.executable, "-m", "crawler.cli"]


def hostcrawl(*args: str, timeout: float = 400, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HOSTCRAWL, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)
