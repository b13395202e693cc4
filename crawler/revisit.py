"""Revisits: pages a previous run fetched are requested again with conditional GETs."""

from __future__ import annotations

from pathlib import Path

from crawler.config import ConfigError


def check_previous(run: Path) -> Path:
    """A previous run directory with its pages table and WARC files."""
    if not (run / "pages.parquet").is_file() or not (run / "warc").is_dir():
        raise ConfigError(f"--previous {run}: not a hostcrawl run directory (needs pages.parquet and warc/)")
    return run.resolve()
