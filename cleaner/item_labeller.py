"""Cleaners whose model labels MinerU-format blocks (`_item_id`): Pulpie's encoders, Dripper's decoders.

simplify (cleaner.mineru, as the models were trained) -> one labeller call per batch ->
{item_id: "main" | "other"} -> the main HTML cut from the marked DOM (as the packages cut it) ->
text and Markdown by hostcrawl's renderer. The model's decision is taken as it is: a block is
main when the model says so, with no relative threshold that would let a mis-fed model still
emit text.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from selectolax.lexbor import LexborHTMLParser

from cleaner.base import BatchedCleaner, CleanedPage, Cleaner, Extracted, empty, failed
from cleaner.mineru import MAIN, extract_blocks, extract_item_ids, extract_main_html, simplify_html
from cleaner.render import render_markdown, render_text
from cleaner.simplify import simplify

LOGGER = logging.getLogger(__name__)

Labels = dict[str, str]  # item id -> "main" | "other"


@dataclass(slots=True)
class ItemPage:
    """A page as the models read it: simplified HTML cut into `_item_id` blocks, and the marked DOM."""

    simplified: str
    map_html: str
    blocks: list[str]
    item_ids: list[str | None]
    source: str  # the HTML as fetched, for fallbacks and the title


def item_page(html: str) -> ItemPage:
    """Simplify one page the way Pulpie and Dripper do."""
    simplified, map_html = simplify_html(html)
    blocks = extract_blocks(simplified)
    return ItemPage(simplified, map_html, blocks, extract_item_ids(blocks), html)


class ItemLabeller(ABC):
    """Labels every block of a batch of pages; batching lets accelerator models fill their batches."""

    name: ClassVar[str]

    @abstractmethod
    def label(self, pages: Sequence[ItemPage]) -> list[Labels | None]:
        """Per page, {item_id: "main" | "other"}; None where the model gave no usable answer."""


def page_title(html: str) -> str | None:
    node = LexborHTMLParser(html).css_first("title")
    title = " ".join(node.text().split()) if node is not None else ""
    return title or None


def render_main(page: ItemPage, labels: Mapping[str, str], cleaner: str) -> CleanedPage | None:
    """The blocks labelled main, cut from the marked DOM, as text and Markdown; None if none is main."""
    if MAIN not in labels.values():
        return None
    main = simplify(extract_main_html(page.map_html, labels))
    keep = [True] * len(main.blocks)
    text = render_text(main, keep)
    if not text.strip():
        return None
    return CleanedPage(
        text=text, markdown=render_markdown(main, keep), title=page_title(page.source), cleaner=cleaner
    )


class ItemLabellerCleaner(BatchedCleaner[ItemPage, Labels | None]):
    """simplify -> label -> cut -> render; subclasses say which labeller (and which fallback) they use."""

    @abstractmethod
    def labeller(self) -> ItemLabeller:
        """The labeller, built once per cleaner instance."""

    def fallback(self) -> Cleaner | None:
        """Cleans the pages the labeller returns None for; None leaves them without text."""
        return None

    def extract_prepared(
        self, todo: list[tuple[int, str]], urls: Sequence[str], out: list[Extracted]
    ) -> None:
        pages: list[tuple[int, ItemPage]] = []
        for i, html in todo:
            try:
                page = item_page(html)
            except Exception as exc:
                out[i].error = failed("cleaner", exc)
                continue
            if page.blocks:
                pages.append((i, page))
            else:
                out[i].error = empty("no_text")
        results = self.label_each([page for _, page in pages])
        for (i, page), labels in zip(pages, results, strict=True):
            try:
                if isinstance(labels, Exception):
                    raise labels
                if labels is None:
                    fallback = self.fallback()
                    extracted = fallback.extract(page.source) if fallback is not None else None
                    if extracted is not None:
                        extracted.cleaner = self.name
                    out[i].page = extracted
                else:
                    out[i].page = render_main(page, labels, self.name)
            except Exception as exc:
                out[i].error = failed("cleaner", exc)
                continue
            if out[i].page is None:
                out[i].error = empty("no_main")
