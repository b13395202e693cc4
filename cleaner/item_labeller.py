"""Cleaners whose model labels MinerU-format blocks (`_item_id`): Pulpie's encoders, Dripper's decoders.

simplify (cleaner.mineru, as the models were trained) -> one labeller call per batch ->
{item_id: "main" | "other"} -> the main HTML cut from the marked DOM (as the packages cut it) ->
text and Markdown by hostcrawl's renderer. The model's decision is taken as it is: a block is
main when the model says so, with no relative threshold that would let a mis-fed model still
emit text.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace

from selectolax.lexbor import LexborHTMLParser

from cleaner.base import CleanedPage, Cleaner
from cleaner.labeller import LabellerCleaner, NoLabels
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


class ItemLabellerCleaner(LabellerCleaner[ItemPage, Labels | NoLabels]):
    """MinerU's `_item_id` blocks, labelled main or other; subclasses say which labeller (and which
    fallback cleaner, for the pages the labeller answers NoLabels for) they use."""

    def fallback_cleaner(self) -> Cleaner | None:
        """Cleans the pages the labeller could not label; None leaves them without text."""
        return None

    def prepare(self, html: str) -> tuple[ItemPage | None, str | None, bool]:
        page = item_page(html)
        return (page if page.blocks else None), "no_text", False

    def model_input(self, page: ItemPage) -> ItemPage:
        """The labellers read the simplified HTML and its blocks; the marked DOM and the page as fetched,
        two thirds of a page's bytes, are for rendering."""
        return replace(page, map_html="", source="")

    def render(self, page: ItemPage, labels: Labels | NoLabels) -> CleanedPage | None:
        return None if isinstance(labels, NoLabels) else render_main(page, labels, self.name)

    def fallback(self, page: ItemPage) -> CleanedPage | None:
        """The fallback cleaner's text, under its own name: a page trafilatura cleaned says trafilatura."""
        cleaner = self.fallback_cleaner()
        return cleaner.extract(page.source) if cleaner is not None else None
