"""One labeller interface (simplified pages -> main-content probability per block) and its cleaner."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from cleaner.base import BatchedCleaner, CleanedPage, Extracted, empty, failed
from cleaner.render import render_markdown, render_text
from cleaner.simplify import SimplePage, simplify

LOGGER = logging.getLogger(__name__)

# A block is kept when its main-content probability reaches this.
KEEP_THRESHOLD = 0.5
# ... or this share of the page's best probability, so an unsure model still keeps its best blocks.
RELATIVE_KEEP = 0.5


def keep_mask(probs: np.ndarray, threshold: float) -> list[bool]:
    """Blocks to keep: above the threshold, or near the page's best when nothing clears it."""
    if len(probs) == 0:
        return []
    cut = min(threshold, RELATIVE_KEEP * float(np.max(probs)))
    return [bool(p >= cut) for p in probs]


class BlockLabeller(ABC):
    """Labels every block of a batch of pages; batching lets GPU labellers fill their chunks."""

    name: ClassVar[str]

    @abstractmethod
    def label(self, pages: Sequence[SimplePage]) -> list[np.ndarray]:
        """One float array per page, P(main content) for each of its blocks, in block order."""


class LabellerCleaner(BatchedCleaner[SimplePage, np.ndarray]):
    """simplify -> label -> render; subclasses only say which labeller they use."""

    @abstractmethod
    def labeller(self) -> BlockLabeller:
        """The labeller, built once per cleaner instance."""

    def keep_threshold(self) -> float:
        """P(main) at which a block is kept."""
        return KEEP_THRESHOLD

    def extract_prepared(
        self, todo: list[tuple[int, str]], urls: Sequence[str], out: list[Extracted]
    ) -> None:
        """simplify -> one labeller call -> render, keeping the simplifier's reason for empty pages."""
        simple: list[tuple[int, SimplePage]] = []
        for i, html in todo:
            try:
                page = simplify(html)
            except Exception as exc:
                out[i].error = failed("cleaner", exc)
                continue
            out[i].truncated |= page.truncated
            if page.blocks:
                simple.append((i, page))
            else:
                out[i].error = empty(page.reason or "no_text")
        probs = self.label_each([page for _, page in simple])
        for (i, page), p in zip(simple, probs, strict=True):
            if isinstance(p, Exception):
                out[i].error = failed("cleaner", p)
                continue
            try:
                out[i].page = self.render(page, p)
            except Exception as exc:
                out[i].error = failed("cleaner", exc)
                continue
            if out[i].page is None:
                out[i].error = empty("no_main")

    def render(self, page: SimplePage, probs: np.ndarray) -> CleanedPage | None:
        """Kept blocks as text and Markdown; None when no block is kept."""
        keep = keep_mask(probs, self.keep_threshold())
        if not any(keep):
            return None
        text = render_text(page, keep)
        if not text.strip():
            return None
        return CleanedPage(
            text=text, markdown=render_markdown(page, keep), title=page.title or None, cleaner=self.name
        )
