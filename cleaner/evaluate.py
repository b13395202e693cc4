"""Score a cleaner on WCXB-format pages: macro word-F1 overall and per type, snippets, pages/s."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TextIO

from cleaner.base import Cleaner
from cleaner.wcxb import TruthPage, snippet_hits, word_f1


@dataclass(slots=True)
class PageScore:
    """One page's scores; `f1` is None for pages that carry only snippets."""

    id: str
    page_type: str
    precision: float | None
    recall: float | None
    f1: float | None
    with_found: int
    with_total: int
    without_avoided: int
    without_total: int
    empty: bool


@dataclass(frozen=True, slots=True)
class TypeScores:
    """Macro precision, recall and F1 over the pages of one type that have a truth text."""

    pages: int
    precision: float
    recall: float
    f1: float


def type_scores(pages: Iterable[PageScore]) -> dict[str, TypeScores]:
    """Page type -> macro scores, plus "all" over every page with a truth text."""
    groups: dict[str, list[PageScore]] = {}
    for p in pages:
        if p.f1 is not None:
            groups.setdefault(p.page_type, []).append(p)
            groups.setdefault("all", []).append(p)
    return {
        t: TypeScores(
            len(v),
            statistics.mean(p.precision or 0.0 for p in v),
            statistics.mean(p.recall or 0.0 for p in v),
            statistics.mean(p.f1 or 0.0 for p in v),
        )
        for t, v in sorted(groups.items(), key=lambda kv: (kv[0] == "all", kv[0]))
    }


@dataclass(slots=True)
class EvalReport:
    """Scores of one cleaner over a set of pages."""

    cleaner: str
    pages: list[PageScore] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def macro_f1(self) -> float:
        scores = [p.f1 for p in self.pages if p.f1 is not None]
        return statistics.mean(scores) if scores else 0.0

    def per_type(self) -> dict[str, TypeScores]:
        """Page type -> macro precision, recall and F1; "all" last."""
        return type_scores(self.pages)

    @property
    def with_share(self) -> float:
        total = sum(p.with_total for p in self.pages)
        return sum(p.with_found for p in self.pages) / total if total else 1.0

    @property
    def without_share(self) -> float:
        total = sum(p.without_total for p in self.pages)
        return sum(p.without_avoided for p in self.pages) / total if total else 1.0

    @property
    def pages_per_second(self) -> float:
        return len(self.pages) / self.seconds if self.seconds > 0 else 0.0

    @property
    def empty(self) -> int:
        return sum(p.empty for p in self.pages)

    def to_dict(self) -> dict[str, object]:
        return {
            "cleaner": self.cleaner,
            "pages": len(self.pages),
            "macro_f1": round(self.macro_f1, 4),
            "per_type": {t: _rounded(s) for t, s in self.per_type().items() if t != "all"},
            "with_found": round(self.with_share, 4),
            "without_avoided": round(self.without_share, 4),
            "empty": self.empty,
            "pages_per_second": round(self.pages_per_second, 2),
        }


def _rounded(scores: TypeScores) -> dict[str, float | int]:
    return {"pages": scores.pages, "precision": round(scores.precision, 4), "recall": round(scores.recall, 4),
            "f1": round(scores.f1, 4)}  # fmt: skip


def score_page(page: TruthPage, text: str) -> PageScore:
    """Compare one extraction with the page's truth."""
    precision = recall = f1 = None
    if page.main_content:
        precision, recall, f1 = word_f1(text, page.main_content)
    with_found = snippet_hits(text, page.with_snippets)
    without_hit = snippet_hits(text, page.without_snippets)
    return PageScore(
        id=page.id,
        page_type=page.page_type,
        precision=precision,
        recall=recall,
        f1=f1,
        with_found=with_found,
        with_total=len(page.with_snippets),
        without_avoided=len(page.without_snippets) - without_hit,
        without_total=len(page.without_snippets),
        empty=not text.strip(),
    )


def evaluate(
    cleaner: Cleaner,
    pages: Iterable[TruthPage],
    predictions: TextIO | None = None,
    progress: Callable[[], None] | None = None,
) -> EvalReport:
    """Clean every page (timing only the cleaner) and score it; `predictions` gets one JSON line per page."""
    report = EvalReport(cleaner.name)
    for page in pages:
        start = time.perf_counter()
        cleaned = cleaner.clean(page.html, page.url or None)
        report.seconds += time.perf_counter() - start
        text = cleaned.text if cleaned is not None else ""
        report.pages.append(score_page(page, text))
        if predictions is not None:
            predictions.write(json.dumps({"id": page.id, "text": text}, ensure_ascii=False) + "\n")
        if progress is not None:
            progress()
    return report
