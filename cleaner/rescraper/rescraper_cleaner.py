"""`rescraper_v1`: render -> one model answer per page -> the program applied to the page's own lines.

What each page became is on its text: `operation` (keep, edit, rewrite, or extract_only when the answer broke
the grammar after a sound extraction) and `generated` (a rewrite). A page the model deletes has no text
(`cleaner/empty/deleted`); one whose answer broke before its extraction was complete is skipped
(`cleaner/empty/malformed_<reason>`); both are counted, and the reason of every set-aside answer too
(`clean/fallback/rescraper_v1/<reason>`).
"""

from __future__ import annotations

from cleaner.base import CleanedPage
from cleaner.labeller import LabellerCleaner, NoLabels
from cleaner.rescraper.generate import Engine, RescraperLabeller, default_engine
from cleaner.rescraper.page_lines import RenderedPage, render_page
from cleaner.rescraper.program import Outcome


class RescraperCleaner(LabellerCleaner[RenderedPage, Outcome | NoLabels]):
    """ReScraper from $HOSTCRAWL_RESCRAPER_MODEL (a path or hub id; default cx-cmu/ReScraper).

    $HOSTCRAWL_RESCRAPER_REVISION pins a hub commit."""

    name = "rescraper_v1"

    def __init__(self, engine: Engine | None = None) -> None:
        self._engine = engine
        self._labeller: RescraperLabeller | None = None

    def labeller(self) -> RescraperLabeller:
        if self._labeller is None:
            self._labeller = RescraperLabeller(self._engine or default_engine())
        return self._labeller

    def prepare(self, html: str) -> tuple[RenderedPage | None, str | None, bool]:
        return render_page(html)

    def render(self, page: RenderedPage, labels: Outcome | NoLabels) -> CleanedPage | None:
        if isinstance(labels, NoLabels) or labels.text is None:
            return None
        return CleanedPage(
            text=labels.text,
            markdown=labels.text,
            title=page.title,
            cleaner=self.name,
            operation=labels.operation,
            generated=labels.operation == "rewrite",
        )

    def set_aside(self, labels: Outcome | NoLabels) -> str | None:
        return labels.reason if isinstance(labels, Outcome) and labels.operation == "extract_only" else None

    def empty_reason(self, labels: Outcome | NoLabels) -> str:
        if isinstance(labels, NoLabels):
            return labels.reason
        if labels.operation == "delete":
            return "deleted"
        if labels.operation == "skipped":
            return f"malformed_{labels.reason}"
        return "no_main"
