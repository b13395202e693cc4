"""ReScraper's input: the page's visible text, one block per line, each line prefixed `<lid:N>` (paper §3.1:
render the HTML to text, strip residual markup with BeautifulSoup, one block per line).

The published renderer is MinerU-HTML's `webpage_converter`, which is not on the package registry (mineru-html
1.1.2 imports it and fails without it), so the blocks here are hostcrawl's simplifier's (cleaner/simplify.py:
visible text only, a list or a table one block), each flattened to one line. That is an approximation of the
model's training input until the release's renderer can be run for parity fixtures (issue 28).
"""

from __future__ import annotations

from dataclasses import dataclass

from cleaner.simplify import simplify

# The paper skips pages whose rendering is empty or shorter than this (Table 4, "omitted pages").
MIN_RENDER_CHARS = 20


@dataclass(slots=True)
class RenderedPage:
    """The page as the model reads it."""

    lines: list[str]
    title: str | None

    def numbered(self) -> str:
        return "\n".join(f"<lid:{i}>{line}" for i, line in enumerate(self.lines, 1))


def _strip_markup(text: str) -> str:
    """Residual markup (escaped tags shown as text, entities) removed as the paper does, by BeautifulSoup."""
    if "<" in text or "&" in text:
        from bs4 import BeautifulSoup

        text = BeautifulSoup(text, "html.parser").get_text(" ")
    return " ".join(text.split())


def render_page(html: str) -> tuple[RenderedPage | None, str | None, bool]:
    """(the rendering or None, why there is none, whether the HTML was cut short)."""
    page = simplify(html)
    lines = [line for line in (_strip_markup(block.text) for block in page.blocks) if line]
    if sum(len(line) for line in lines) < MIN_RENDER_CHARS:
        return None, page.reason or "too_short", page.truncated
    return RenderedPage(lines, page.title or None), None, page.truncated
