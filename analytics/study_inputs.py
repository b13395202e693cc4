"""What a study reads and its defaults, without the study engine (DuckDB, matplotlib): the command line
imports this to build its options, so `hostcrawl --help` loads neither."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

STUDY_ORDER = ("icc", "ksample", "yield", "depth", "coverage", "language")
DEFAULT_THRESHOLD = 0.5  # a page is high quality when its score exceeds this (the paper's convention)
DEFAULT_SEED = 0
# The host index annotation the coverage study and recrawl plans rank by, unless told another.
DEFAULT_QUALITY = "gneissweb_education"


class InputError(ValueError):
    """A study was asked to run without the input it needs; the message says which flag provides it."""


@dataclass(slots=True)
class Inputs:
    """Where a study's tables come from; `--data DIR` fills the ones its layout provides."""

    pages: Path | None = None
    hosts: Path | None = None  # a crawl's hosts.parquet (first_fetch gives the crawl's own allocation)
    host_index: Path | None = None
    annotations: Path | None = None
    ranks: Path | None = None

    @classmethod
    def from_dir(cls, data: Path) -> Inputs:
        """The layout of `study synth` output and of a crawl run directory."""
        found = cls()
        for name, attr in (
            ("pages.parquet", "pages"),
            ("hosts.parquet", "hosts"),
            ("ranks.parquet", "ranks"),
        ):
            if (data / name).is_file():
                setattr(found, attr, data / name)
        for name in ("host_index", "annotations"):
            if (data / name).is_dir():
                setattr(found, name, data / name)
        return found

    def need(self, attr: str, flag: str) -> Path:
        path = getattr(self, attr)
        if path is None:
            raise InputError(f"this study needs {flag} (or --data DIR holding it)")
        return Path(path)
