"""`_item_id` blocks of a simplified page, and the main content cut from the marked DOM by label.

Ported from Pulpie 0.0.2 (`chunker.extract_blocks`, `model_utils.extract_item_ids`,
`reconstruct.extract_main_html`, `_html_utils`; Apache-2.0), which port MinerU-HTML's
`map_to_main.py` and `html_utils.py` (Apache-2.0). Kept statement for statement (see
tests/test_mineru_parity.py).
"""

from __future__ import annotations

import html as _html
import re
from collections.abc import Callable, Mapping

from lxml import html as lxml_html
from lxml.etree import ParserError

from cleaner.mineru.dom import tail_block_tag

ITEM_ID_ATTR = "_item_id"
ITEM_ID_RE = re.compile(r'_item_id="(\d+)"')
MAIN, OTHER = "main", "other"


def extract_blocks(simplified_html: str) -> list[str]:
    """Split simplified HTML into one string per block, at the `_item_id` boundaries (Pulpie's rule)."""
    matches = list(ITEM_ID_RE.finditer(simplified_html))
    blocks = []
    for i, m in enumerate(matches):
        tag_start = simplified_html.rfind("<", 0, m.start())
        if i + 1 < len(matches):
            next_tag_start = simplified_html.rfind("<", 0, matches[i + 1].start())
            block_html = simplified_html[tag_start:next_tag_start]
        else:
            block_html = simplified_html[tag_start:]
        blocks.append(block_html.strip())
    return blocks


def extract_item_ids(blocks: list[str]) -> list[str | None]:
    """The `_item_id` of each block string (None where a block carries none)."""
    item_ids: list[str | None] = []
    for block in blocks:
        m = ITEM_ID_RE.search(block)
        item_ids.append(m.group(1) if m else None)
    return item_ids


def html_to_element(html_str: str) -> lxml_html.HtmlElement:
    """Parse an HTML string with MinerU's parser options."""
    parser = lxml_html.HTMLParser(
        collect_ids=False,
        encoding="utf-8",
        remove_blank_text=True,
        remove_comments=True,
        remove_pis=True,
    )
    html_input: str | bytes = html_str
    if "<?xml" in html_str or "<meta charset" in html_str or "encoding=" in html_str:
        html_input = html_str.encode("utf-8")
    try:
        return lxml_html.fromstring(html_input, parser=parser)
    except ParserError as e:
        if "Document is empty" in str(e):
            return lxml_html.HtmlElement()
        raise


def element_to_html(root: lxml_html.HtmlElement) -> str:
    """Serialize an lxml element back to an HTML string."""
    html_bytes = lxml_html.tostring(root, pretty_print=False, encoding="utf-8")
    return html_bytes.decode("utf-8") if isinstance(html_bytes, bytes) else str(html_bytes)


def decode_http_urls_only(html_str: str) -> str:
    """Unescape HTML entities only inside http(s)/ftp/protocol-relative href/src URLs."""

    def decode_match(match: re.Match[str]) -> str:
        prefix, url, suffix = match.group(1), match.group(2), match.group(3)
        if url.startswith(("http://", "https://", "ftp://", "HTTP://", "HTTPS://", "FTP://", "//")):
            return f"{prefix}{_html.unescape(url)}{suffix}"
        return match.group(0)

    return re.sub(r'(href="|src=")(.*?)(")', decode_match, html_str, flags=re.IGNORECASE | re.DOTALL)


def _remove_recursive_by_condition(root: lxml_html.HtmlElement, remove: Callable[[object], bool]) -> None:
    """Remove elements matching `remove`; recurse only into survivors."""
    if remove(root):
        parent = root.getparent()
        if parent is not None:
            parent.remove(root)
            return
    for child in root.iterchildren():
        _remove_recursive_by_condition(child, remove)


def extract_main_html(map_html: str, labels: Mapping[str, str]) -> str:
    """Keep the elements labelled main (with their ancestors and descendants) of the marked DOM."""
    if not map_html:
        return ""
    root = html_to_element(map_html)
    id_to_element: dict[str, lxml_html.HtmlElement] = {}
    for el in root.iter():
        iid = el.get(ITEM_ID_ATTR)
        if iid is not None and iid not in id_to_element:
            id_to_element[iid] = el

    elements_to_remain: set[object] = set()
    for remained_id, label in labels.items():
        if label != MAIN:
            continue
        elem = id_to_element.get(remained_id)
        if elem is None:
            continue
        elements_to_remain.update(elem.iter())
        elements_to_remain.update(elem.iterancestors())

    # <br> tags next to kept (non-br) content are kept too.
    last_element = None
    for element in root.iter():
        if last_element is not None:
            if element.tag == "br" and (last_element in elements_to_remain and last_element.tag != "br"):
                elements_to_remain.add(element)
            if last_element.tag == "br" and (element in elements_to_remain and element.tag != "br"):
                elements_to_remain.add(last_element)
        last_element = element

    _remove_recursive_by_condition(root, lambda x: x not in elements_to_remain)
    for tail_block in root.xpath(f"//{tail_block_tag}"):
        tail_block.drop_tag()
    return decode_http_urls_only(element_to_html(root))
