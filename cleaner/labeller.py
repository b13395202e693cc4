"""The one labeller stack: a model labels the blocks of a batch of prepared pages in one call, and a
cleaner turns each page's labels into its main text.

    html -> prepare (the page as the model reads it) -> one Labeller.label call per batch
         -> render (the blocks labelled main, as text and Markdown), or the fallback where a model gave
            no usable answer

Two page formats share it: hostcrawl's own simplified blocks with a P(main) per block (blocks_v1,
`BlockLabellerCleaner` here), and MinerU's `_item_id` blocks with a main/other label per item (Pulpie's
encoders and Dripper's decoders, cleaner/item_labeller.py).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Generic, TypeVar

import numpy as np

from cleaner.base import BatchedCleaner, CleanedPage, Extracted, empty, failed
from cleaner.render import render_markdown, render_text
from cleaner.simplify import SimplePage, simplify

LOGGER = logging.getLogger(__name__)

P = TypeVar("P")
L = TypeVar("L")

# A block is kept when its main-content probability reaches this.
KEEP_THRESHOLD = 0.5
# ... or this share of the page's best probability, so an unsure model still keeps its best blocks.
RELATIVE_KEEP = 0.5


@dataclass(frozen=True, slots=True)
class LabelFailure:
    """The labeller raised on this page (`cleaner/exception/<type>`), carried as a reason: an exception
    from a model library may not survive pickling between processes."""

    reason: str


@dataclass(frozen=True, slots=True)
class NoLabels:
    """A labeller's answer for a page it could not label, and why (`overflow`, `parse`, `engine_error`,
    ...): the cleaner's fallback cleans the page, and the page says so (Extracted.fallback)."""

    reason: str


def keep_mask(probs: np.ndarray, threshold: float) -> list[bool]:
    """Blocks to keep: above the threshold, or near the page's best when nothing clears it."""
    if len(probs) == 0:
        return []
    cut = min(threshold, RELATIVE_KEEP * float(np.max(probs)))
    return [bool(p >= cut) for p in probs]


class Labeller(ABC, Generic[P, L]):
    """Labels every block of a batch of pages; batching lets accelerator models fill their batches."""

    name: ClassVar[str]

    @abstractmethod
    def label(self, pages: Sequence[P]) -> list[L]:
        """One answer per page, in order (what an answer is depends on the page format)."""


class LabellerCleaner(BatchedCleaner[P, L]):
    """prepare -> label -> render; subclasses say how a page is prepared and rendered, and which
    labeller (and fallback) they use."""

    @abstractmethod
    def labeller(self) -> Labeller[P, L]:
        """The labeller, built once per cleaner instance."""

    @abstractmethod
    def prepare(self, html: str) -> tuple[P | None, str | None, bool]:
        """The page as the labeller reads it (None: it has no blocks, and the reason), and whether
        preparing it cut the page short."""

    @abstractmethod
    def render(self, page: P, labels: L) -> CleanedPage | None:
        """The blocks the labels keep, as text and Markdown; None when none is kept."""

    def fallback(self, page: P) -> CleanedPage | None:
        """The page's text, under the fallback cleaner's name, when the labeller answered NoLabels for it
        (None: no text)."""
        return None

    def set_aside(self, labels: L | NoLabels) -> str | None:
        """Why the labels' own answer was set aside for a lesser one the cleaner made itself (counted as
        clean/fallback/<cleaner>/<this>); None when it was used as given."""
        return None

    def empty_reason(self, labels: L | NoLabels) -> str:
        """Why a page ends without text (`cleaner/empty/<this>`)."""
        return "no_main"

    def extract_prepared(
        self, todo: list[tuple[int, str]], urls: Sequence[str], out: list[Extracted]
    ) -> None:
        """prepare -> one labeller call -> render, keeping the preparation's reason for empty pages."""
        pages = self.prepare_each(todo, out)
        self.render_each(pages, self.label_each([page for _, page in pages]), out)

    def prepare_each(self, todo: list[tuple[int, str]], out: list[Extracted]) -> list[tuple[int, P]]:
        """(index, page as the labeller reads it) of each page worth labelling; the others get their
        reason in `out`. CPU work only: no model is loaded."""
        pages: list[tuple[int, P]] = []
        for i, html in todo:
            try:
                page, reason, truncated = self.prepare(html)
            except Exception as exc:
                out[i].error = failed("cleaner", exc)
                continue
            out[i].truncated |= truncated
            if page is None:
                out[i].error = empty(reason or "no_text")
            else:
                pages.append((i, page))
        return pages

    def render_each(
        self,
        pages: Sequence[tuple[int, P]],
        results: Sequence[L | NoLabels | LabelFailure | Exception],
        out: list[Extracted],
    ) -> None:
        """Each page's text from its labels (or its fallback's, or the reason it has none) into `out`."""
        for (i, page), labels in zip(pages, results, strict=True):
            if isinstance(labels, LabelFailure):
                out[i].error = labels.reason
                continue
            try:
                if isinstance(labels, Exception):
                    raise labels
                if isinstance(labels, NoLabels):
                    out[i].page = self.fallback(page)
                    out[i].fallback = f"{self.name}/{labels.reason}" if out[i].page is not None else None
                else:
                    out[i].page = self.render(page, labels)
                    reason = self.set_aside(labels)
                    out[i].fallback = f"{self.name}/{reason}" if reason else None
            except Exception as exc:
                out[i].error = failed("cleaner", exc)
                continue
            if out[i].page is None:
                out[i].error = empty(self.empty_reason(labels))

    def model_input(self, page: P) -> P:
        """What of a prepared page the labeller reads, to send to a model process (the rest stays with
        the process that renders it): the page itself unless a subclass can slim it."""
        return page

    def label_sendable(self, pages: Sequence[P]) -> list[L | NoLabels | LabelFailure]:
        """`label_each` with a labeller's exceptions as LabelFailure, which any process can unpickle."""
        return [
            LabelFailure(failed("cleaner", x)) if isinstance(x, Exception) else x
            for x in self.label_each(list(pages))
        ]


class BlockLabellerCleaner(LabellerCleaner[SimplePage, np.ndarray]):
    """hostcrawl's simplified blocks, one P(main) per block; subclasses say which labeller."""

    def keep_threshold(self) -> float:
        """P(main) at which a block is kept."""
        return KEEP_THRESHOLD

    def prepare(self, html: str) -> tuple[SimplePage | None, str | None, bool]:
        page = simplify(html)
        return (page if page.blocks else None), page.reason, page.truncated

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
