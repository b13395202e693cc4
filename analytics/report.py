"""`hostcrawl report DIR`: the study sections of a folder (or of a crawl run) assembled into one report.

A crawl run directory already has the crawler's own report.md; its study report goes to study-report.md
beside it, with the studies' files under RUN/studies/, so neither overwrites the other.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from analytics.study import META_FILE, SECTION_FILE
from analytics.study_inputs import STUDY_ORDER

STUDIES_SUBDIR = "studies"
RUN_REPORT = "study-report.md"
STUDY_REPORT = "report.md"
RUN_MARKERS = ("stats.json", "config.toml", "report.md")
IMAGE_LINK = re.compile(r"(!\[[^\]]*\]\()([^)/:]+\.png)\)")


class ReportError(ValueError):
    """The folder holds neither study sections nor a crawl's pages table."""


def is_run_dir(path: Path) -> bool:
    return (path / "pages.parquet").is_file() and any((path / m).exists() for m in RUN_MARKERS)


def study_dirs(root: Path) -> list[Path]:
    """Study folders under root, in the canonical order, then any others by name."""
    found = {p.parent.name: p.parent for p in root.glob(f"*/{SECTION_FILE}")}
    ordered = [found.pop(name) for name in STUDY_ORDER if name in found]
    return ordered + [found[name] for name in sorted(found)]


def _section(study: Path, link_prefix: str) -> str:
    text = (study / SECTION_FILE).read_text(encoding="utf-8")
    prefix = f"{link_prefix}{study.name}/"
    return IMAGE_LINK.sub(lambda m: f"{m.group(1)}{prefix}{m.group(2)})", text)


def _provenance(studies: list[Path]) -> str:
    rows = ["| study | version | seconds | inputs |", "|---|---|---|---|"]
    for study in studies:
        meta_path = study / META_FILE
        if not meta_path.is_file():
            continue
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        inputs = ", ".join(f"{k}={v}" for k, v in meta.get("inputs", {}).items() if v)
        rows.append(f"| {meta.get('study')} | {meta.get('version')} | {meta.get('seconds')} | {inputs} |")
    return "\n".join(rows)


def assemble(root: Path, target: Path, title: str) -> Path:
    """Concatenate the sections under `root` into `target`, rewriting image links relative to `target`."""
    studies = study_dirs(root)
    if not studies:
        raise ReportError(
            f"{root}: no study sections (*/{SECTION_FILE}); run `hostcrawl study NAME --out {root}`"
        )
    rel = root.resolve().relative_to(target.parent.resolve()).as_posix()
    link_prefix = "" if rel == "." else f"{rel}/"
    toc = "\n".join(f"- [{s.name}](#{s.name})" for s in studies)
    parts = [f"# {title}", "", f"Generated {datetime.now(UTC):%Y-%m-%d %H:%M} UTC by hostcrawl.", "", toc, ""]
    for study in studies:
        parts += [f'<a id="{study.name}"></a>', "", _section(study, link_prefix), ""]
    parts += ["## Provenance", "", _provenance(studies), ""]
    target.write_text("\n".join(parts), encoding="utf-8")
    return target


def report(
    path: Path, run_studies: Callable[[Path, Path], list[str]] | None = None, rerun: bool = False
) -> Path:
    """Report for a study folder (DIR/report.md) or a crawl run (RUN/study-report.md, RUN/studies/).

    `run_studies(data_dir, out_dir)` runs the studies a run's tables allow when none ran yet (or `rerun`).
    """
    if not path.is_dir():
        raise ReportError(f"{path}: not a folder")
    if study_dirs(path):
        return assemble(path, path / STUDY_REPORT, f"Study report: {path.resolve().name}")
    if is_run_dir(path):
        studies = path / STUDIES_SUBDIR
        if (rerun or not study_dirs(studies)) and run_studies is not None:
            run_studies(path, studies)
        return assemble(studies, path / RUN_REPORT, f"Study report of crawl run {path.resolve().name}")
    if study_dirs(path / STUDIES_SUBDIR):
        return assemble(
            path / STUDIES_SUBDIR, path / STUDIES_SUBDIR / STUDY_REPORT, f"Study report: {path.name}"
        )
    raise ReportError(
        f"{path}: neither study sections (*/{SECTION_FILE}) nor a crawl run (pages.parquet + report.md)"
    )
