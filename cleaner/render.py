"""Block labels -> main content as plain text, Markdown, or pruned HTML."""

from __future__ import annotations

from collections.abc import Sequence

from selectolax.lexbor import LexborNode

from cleaner.simplify import HEADINGS, Block, SimplePage


def _list_lines(node: LexborNode, depth: int, markdown: bool, out: list[str]) -> None:
    """Items of a list, nested lists indented under their item."""
    ordered = node.tag == "ol"
    index = 0
    child = node.child
    while child is not None:
        if child.tag in ("li", "dt", "dd"):
            index += 1
            own: list[str] = []
            nested: list[LexborNode] = []
            part = child.child
            while part is not None:
                if part.tag in ("ul", "ol", "dl"):
                    nested.append(part)
                elif part.is_text_node:
                    own.append(part.text_content or "")
                elif part.is_element_node:
                    own.append(part.text(deep=True, separator=" "))
                part = part.next
            text = " ".join(" ".join(own).split())
            if text:
                if markdown:
                    bullet = f"{index}." if ordered else "-"
                    out.append(f"{'  ' * depth}{bullet} {text}")
                else:
                    out.append(text)
            for sub in nested:
                _list_lines(sub, depth + 1, markdown, out)
        elif child.tag in ("ul", "ol", "dl"):
            _list_lines(child, depth, markdown, out)
        child = child.next


def _table_lines(node: LexborNode, markdown: bool) -> list[str]:
    rows: list[list[str]] = []
    for row in node.css("tr"):
        cells = [" ".join(c.text(deep=True, separator=" ").split()) for c in row.css("th, td")]
        if any(cells):
            rows.append([c.replace("|", "\\|") for c in cells] if markdown else cells)
    if not markdown:
        return [" ".join(c for c in r if c) for r in rows]
    if not rows:
        return []
    width = max(len(r) for r in rows)
    lines = ["| " + " | ".join(r + [""] * (width - len(r))) + " |" for r in rows]
    lines.insert(1, "|" + " --- |" * width)
    return lines


def block_text(block: Block, markdown: bool) -> str:
    """One block rendered on its own; lists and tables keep one line per item or row."""
    if block.atomic and block.nodes:
        node = block.nodes[0]
        if block.tag == "pre":
            return f"```\n{block.text}\n```" if markdown else block.text
        if block.tag == "table":
            return "\n".join(_table_lines(node, markdown)) or block.text
        lines: list[str] = []
        _list_lines(node, 0, markdown, lines)
        return "\n".join(lines) or block.text
    if not markdown:
        return block.text
    level = HEADINGS.get(block.tag)
    if level is not None:
        return f"{'#' * level} {' '.join(block.text.split())}"
    if block.tag == "li":
        return f"- {block.text}"
    if block.tag == "blockquote":
        return "\n".join(f"> {line}" for line in block.text.split("\n"))
    return block.text


def render_text(page: SimplePage, keep: Sequence[bool]) -> str:
    """Plain text of the kept blocks, one block per paragraph line."""
    return "\n".join(block_text(b, False) for b, k in zip(page.blocks, keep, strict=True) if k)


def render_markdown(page: SimplePage, keep: Sequence[bool]) -> str:
    """Markdown of the kept blocks, paragraphs separated by blank lines."""
    parts = [block_text(b, True) for b, k in zip(page.blocks, keep, strict=True) if k]
    return "\n\n".join(p for p in parts if p)


def main_html(page: SimplePage, keep: Sequence[bool]) -> str:
    """Prune the page's tree to the kept blocks with their ancestors and descendants; mutates the tree."""
    if page.tree is None or page.tree.body is None:
        return ""
    kept_text: set[int] = set()
    whole: set[int] = set()
    ancestors: set[int] = set()
    for block, k in zip(page.blocks, keep, strict=True):
        if not k:
            continue
        for kept in block.nodes:
            (whole if block.atomic else kept_text).add(kept.mem_id)
            parent = kept.parent
            while parent is not None and parent.mem_id not in ancestors:
                ancestors.add(parent.mem_id)
                parent = parent.parent
    doomed: list[LexborNode] = []
    stack: list[LexborNode | None] = [page.tree.body.child]
    while stack:
        node = stack.pop()
        if node is None:
            continue
        stack.append(node.next)
        ident = node.mem_id
        if ident in whole:
            continue
        if node.is_text_node:
            if ident not in kept_text and not (node.text_content or "").isspace():
                doomed.append(node)
        elif ident in ancestors:
            stack.append(node.child)
        elif node.tag != "br":
            doomed.append(node)
    for node in doomed:
        node.decompose()
    return page.tree.body.html or ""
