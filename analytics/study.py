"""What every study shares: its inputs, a DuckDB connection with the pages view, and its output folder."""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import polars as pl

from analytics import db, schema
from analytics.study_inputs import Inputs

SECTION_FILE = "section.md"
META_FILE = "study.json"


@dataclass(slots=True)
class Output:
    """One study's folder: parquet tables, PNG plots, section.md and study.json (params, inputs, timing).

    Written into a hidden staging folder and moved in place by `finish()`, so a study that fails or is
    interrupted leaves its previous complete folder (or none), never a half-written one a report would read.
    """

    root: Path
    name: str
    tables: list[str] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)

    @property
    def dir(self) -> Path:
        return self.root / f".{self.name}.partial"

    @property
    def final(self) -> Path:
        return self.root / self.name

    def __post_init__(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)  # left by a study killed before it could clean up
        self.dir.mkdir(parents=True)

    def table(self, name: str, frame: pl.DataFrame) -> Path:
        path = self.dir / f"{name}.parquet"
        frame.write_parquet(path)
        self.tables.append(path.name)
        return path

    def figure(self, fig: Any, name: str) -> str:
        fig.tight_layout()
        fig.savefig(self.dir / f"{name}.png", dpi=110)
        plt.close(fig)
        self.figures.append(f"{name}.png")
        return f"{name}.png"

    def finish(self, markdown: str, params: dict[str, Any], inputs: Inputs, summary: dict[str, Any]) -> Path:
        """Write section.md (image paths relative to the study folder) and study.json, then move the
        folder in place (replacing the previous run's)."""
        (self.dir / SECTION_FILE).write_text(markdown.rstrip() + "\n", encoding="utf-8")
        meta = {
            "study": self.name,
            "version": f"study_{self.name}_v1",
            "params": params,
            "inputs": {k: str(v) if v else None for k, v in asdict(inputs).items()},
            "tables": self.tables,
            "figures": self.figures,
            "seconds": round(time.perf_counter() - self.started, 3),
            "summary": summary,
        }
        (self.dir / META_FILE).write_text(json.dumps(meta, indent=2, default=str) + "\n", encoding="utf-8")
        old = self.root / f".{self.name}.old"
        shutil.rmtree(old, ignore_errors=True)
        if self.final.exists():
            self.final.rename(old)
        self.dir.rename(self.final)
        shutil.rmtree(old, ignore_errors=True)
        return self.final / SECTION_FILE

    def discard(self) -> None:
        """What a failed or interrupted study wrote."""
        shutil.rmtree(self.dir, ignore_errors=True)


def pages_view(
    con: duckdb.DuckDBPyConnection, path: Path, scores: list[str] | None, language: bool
) -> list[str]:
    """View `pages` (host, url, score columns[, language]) after checking the schema; returns the scores."""
    required = list(schema.PAGES_COLUMNS) + ([schema.LANGUAGE_COLUMN] if language else [])
    files = schema.check_columns(path, required)
    score_cols = schema.score_columns(path, scores)
    cols = [
        "lower(host) AS host",
        "url",
        *(f"CAST({db.ident(c)} AS DOUBLE) AS {db.ident(c)}" for c in score_cols),
    ]
    if language:
        cols.append("language")
    con.execute(f"CREATE OR REPLACE VIEW pages AS SELECT {', '.join(cols)} FROM {db.parquet_source(files)}")
    return score_cols


def ranks_view(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """View `ranks` (key, hc, pr): one row per www-insensitive host key, the most central spelling kept."""
    files = schema.check_columns(path, schema.RANKS_COLUMNS)
    con.execute(
        f"""CREATE OR REPLACE VIEW ranks AS
        SELECT {db.www_key_sql("host")} AS key, max(hc_val)::DOUBLE AS hc, max(pr_val)::DOUBLE AS pr
        FROM {db.parquet_source(files)} GROUP BY key"""
    )


def label(score: str) -> str:
    """Column name as shown to people: score_edu -> edu."""
    return score.removeprefix(schema.SCORE_PREFIX)


def md_table(frame: pl.DataFrame, digits: int = 3) -> str:
    """A markdown table; floats rounded for reading (the parquet keeps full precision)."""
    head = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = []
    for row in frame.iter_rows():
        cells = []
        for value in row:
            if isinstance(value, float):
                cells.append("" if value != value else f"{value:.{digits}f}")
            elif isinstance(value, int) and not isinstance(value, bool):
                cells.append(f"{value:,}")
            else:
                cells.append("" if value is None else str(value))
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join([head, rule, *rows])
