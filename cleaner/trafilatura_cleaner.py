"""Trafilatura with default settings: the CPU baseline cleaner."""

from __future__ import annotations

import logging

from trafilatura.core import bare_extraction
from trafilatura.metadata import extract_title
from trafilatura.settings import Document
from trafilatura.utils import load_html, normalize_unicode
from trafilatura.xml import xmltotxt

from cleaner.base import CleanedPage, Cleaner

LOGGER = logging.getLogger(__name__)

# Pages above this are almost always inlined data (base64 images, JSON state); trafilatura's own
# limit is 20 MB and parsing that takes seconds, so we keep only the head of the document.
MAX_HTML_BYTES = 5_000_000


def truncate_html(html: str, max_bytes: int = MAX_HTML_BYTES) -> str:
    """Cut `html` to at most `max_bytes` of UTF-8 so one huge page cannot stall a worker."""
    if len(html) <= max_bytes // 4:  # cheap path: 4 bytes per character at most
        return html
    encoded = html.encode("utf-8", errors="ignore")
    if len(encoded) <= max_bytes:
        return html
    return encoded[:max_bytes].decode("utf-8", errors="ignore")


def _render(document: Document, formatting: bool) -> str:
    """Serialise body and comments the way trafilatura's `extract` does for txt/markdown."""
    text = xmltotxt(document.body, formatting)
    if document.commentsbody is not None:
        comments = xmltotxt(document.commentsbody, formatting)
        text = f"{text}\n{comments}".strip()
    return normalize_unicode(text)


class TrafilaturaCleaner(Cleaner):
    """One trafilatura pass per page, rendered twice (plain text and markdown)."""

    name = "trafilatura_v1"

    def extract(self, html: str, url: str | None = None) -> CleanedPage | None:
        """Parse once, take the title from the tree, extract, render; None when nothing is left."""
        if not html or not html.strip():
            return None
        tree = load_html(truncate_html(html))
        if tree is None:
            return None
        title = extract_title(tree)
        # markdown output switches on formatting, so the one tree serves both renderings
        document = bare_extraction(tree, url=url, output_format="markdown")
        if not isinstance(document, Document) or document.body is None:
            return None
        text = _render(document, formatting=False)
        if not text.strip():
            return None
        return CleanedPage(
            text=text,
            markdown=_render(document, formatting=True),
            title=title or None,
            cleaner=self.name,
        )
