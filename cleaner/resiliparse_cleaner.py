"""Resiliparse's main-content mode: a fast heuristic CPU cleaner (the `resiliparse` extra)."""

from __future__ import annotations

from cleaner.base import CleanedPage, Cleaner
from cleaner.simplify import MAX_HTML_CHARS


class ResiliparseCleaner(Cleaner):
    """One resiliparse parse per page; Markdown is its formatted text with blank lines between paragraphs."""

    name = "resiliparse_v1"

    def __init__(self) -> None:
        try:
            from resiliparse.extract.html2text import extract_plain_text
            from resiliparse.parse.html import HTMLTree
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("resiliparse_v1 needs resiliparse: pip install 'resiliparse>=2.0,<3'") from exc
        self._extract = extract_plain_text
        self._parse = HTMLTree.parse

    def extract(self, html: str, url: str | None = None) -> CleanedPage | None:
        """Main content as text, or None when resiliparse finds none."""
        if not html or html.isspace():
            return None
        tree = self._parse(html[:MAX_HTML_CHARS])
        formatted = self._extract(tree, main_content=True, alt_texts=False)
        lines = [" ".join(line.split()) for line in formatted.split("\n")]
        text = "\n".join(line for line in lines if line)
        if not text:
            return None
        markdown = "\n\n".join(line for line in lines if line)
        title = " ".join((tree.title or "").split()) or None
        return CleanedPage(text=text, markdown=markdown, title=title, cleaner=self.name)
