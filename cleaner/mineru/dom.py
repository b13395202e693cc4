"""MinerU-HTML simplification, part 1: tag sets, node ids, table/list kinds and cleanup helpers.

Ported from Pulpie 0.0.2 (`pulpie/simplify.py`, Apache-2.0), itself a port of MinerU-HTML's
`mineru_html/process/simplify_html.py` (Apache-2.0, MinerU-HTML / Dripper team, Ma et al., 2025).
The code is kept statement for statement so that the output stays byte-identical to both packages
(tests/test_mineru_parity.py checks it on the WCXB pages); do not "improve" it.
"""

from __future__ import annotations

import contextlib
import re
from urllib.parse import quote

from lxml import etree, html

inline_tags = {
    "map",
    "optgroup",
    "span",
    "input",
    "time",
    "u",
    "strong",
    "small",
    "sub",
    "samp",
    "blink",
    "b",
    "code",
    "nobr",
    "strike",
    "bdo",
    "basefont",
    "abbr",
    "var",
    "i",
    "cccode-inline",
    "s",
    "pic",
    "label",
    "mark",
    "object",
    "ccmath-inline",
    "svg",
    "button",
    "a",
    "font",
    "dfn",
    "sup",
    "kbd",
    "q",
    "script",
    "acronym",
    "option",
    "img",
    "big",
    "cite",
    "em",
    "marked-tail",
    "marked-text",
}

# Table-related tags that may live within tables.
table_tags_set = {
    "caption", "colgroup", "col", "thead", "tbody", "tfoot", "tr", "td", "th", "br",
}  # fmt: skip

# Tags removed wholesale before paragraph extraction.
tags_to_remove = {"title", "head", "style", "script", "link", "meta", "iframe", "frame", "nav"}

# Treated as block-level with no block children by default.
no_block_tags = {"math"}

# Tags whose text is excluded from truncation length accounting.
no_calc_text_tags = {"math", "table"}

# Standalone class/id values removed when a direct child of <body>.
ATTR_PATTERNS_TO_REMOVE = {"nav"}

# style declarations that mark an element invisible (-> removed).
ATTR_INVISIBLE = {
    "display": "none",
    "font-size": "0px",
    "color": "transparent",
    "visibility": "hidden",
    "opacity": "0",
}

# Custom wrapper tag used for unwrapped/inline text runs.
tail_block_tag = "cc-alg-uc-text"


# ── uid tracking ──────────────────────────────────────────────────────────


def add_data_uids(dom: html.HtmlElement) -> None:
    """Tag every node with a unique ``data-uid`` for cross-DOM mapping.

    The packages use uuid4 strings; any unique value gives the same output, and a counter is
    deterministic and cheaper.
    """
    for number, node in enumerate(dom.iter()):
        with contextlib.suppress(TypeError):
            node.set("data-uid", str(number))


def remove_all_uids(dom: html.HtmlElement) -> None:
    """Strip all ``data-uid`` attributes."""
    for node in dom.iter():
        if "data-uid" in node.attrib:
            del node.attrib["data-uid"]


def build_uid_map(dom: html.HtmlElement) -> dict:
    """Map ``data-uid`` -> node."""
    return {node.get("data-uid"): node for node in dom.iter() if node.get("data-uid")}


# ── table / list classification ─────────────────────────────────────────────


def judge_table_parent(table_element, node_list) -> bool:
    """True if any node is a descendant of ``table_element`` (not a nested table)."""
    for node in node_list:
        ancestor = node.getparent()
        while ancestor is not None:
            if ancestor is table_element:
                return True
            elif ancestor.tag == "table":
                break
            ancestor = ancestor.getparent()
    return False


def is_data_table(table_element: html.HtmlElement) -> bool:
    """Distinguish a data table (content) from a layout table."""
    caption_nodes = table_element.xpath(".//caption")
    if judge_table_parent(table_element, caption_nodes):
        return True

    col_nodes = table_element.xpath(".//col")
    colgroup_nodes = table_element.xpath(".//colgroup")
    if judge_table_parent(table_element, col_nodes) or judge_table_parent(table_element, colgroup_nodes):
        return True

    cell_nodes = table_element.xpath(".//*[self::td or self::th][@headers]")
    if judge_table_parent(table_element, cell_nodes):
        return True

    if table_element.get("role") == "table" or table_element.get("data-table"):
        return True

    for node in table_element.iterdescendants():
        if node.tag in table_tags_set:
            continue
        if node.tag not in inline_tags:
            return False

    return True


def has_non_listitem_children(list_element) -> bool:
    """True if a list has direct children that are not the expected item tags."""
    if list_element.tag in ("ul", "ol"):
        allowed_tags = {"li"}
    elif list_element.tag == "dl":
        allowed_tags = {"dt", "dd"}
    else:
        allowed_tags = set()

    exclude_conditions = " and ".join(f"name()!='{tag}'" for tag in allowed_tags)
    if exclude_conditions and list_element.xpath(f"./*[{exclude_conditions}]"):
        return True

    text_children = list_element.xpath("./text()")
    return any(text.strip() for text in text_children)


# ── cleanup helpers ───────────────────────────────────────────────────────────


def remove_xml_declaration(html_string: str) -> str:
    return re.sub(r"<\?xml\s+.*?\??>", "", html_string, flags=re.DOTALL)


def post_process_html(html_content: str) -> str:
    if not html_content:
        return html_content

    def replace_outside_tag_space(match):
        if match.group(1):
            return match.group(1)
        elif match.group(2):
            return re.sub(r"\s+", " ", match.group(2))
        return match.group(0)

    html_content = re.sub(r"(<[^>]+>)|([^<]+)", replace_outside_tag_space, html_content)
    return html_content.strip()


def remove_tags(dom) -> None:
    for tag in tags_to_remove:
        for node in dom.xpath(f".//{tag}"):
            parent = node.getparent()
            if parent is not None:
                parent.remove(node)


def is_meaningful_content(element) -> bool:
    if element.text and element.text.strip():
        return True
    if element.tag == "img":
        src = element.get("src", "")
        return bool(src and src.strip())
    for child in element:
        if is_meaningful_content(child):
            return True
    return bool(element.tail and element.tail.strip())


def clean_attributes(element, short_src: bool = False) -> None:
    """Keep only class/id (and src/alt for img); drop everything else."""
    if element.tag == "img":
        src = element.get("src", "").strip()
        alt = element.get("alt", "").strip()
        class_attr = element.get("class", "").strip()
        id_attr = element.get("id", "").strip()
        element.attrib.clear()
        if src and not src.startswith("data:image/"):
            if short_src:
                if len(quote(src)) <= 10:
                    element.set("src", src)
                else:
                    element.set("src", src[:5] + "..." + src[-5:])
            else:
                element.set("src", src)
        if alt:
            element.set("alt", alt)
        if class_attr:
            element.set("class", class_attr)
        if id_attr:
            element.set("id", id_attr)
    else:
        class_attr = element.get("class", "").strip()
        id_attr = element.get("id", "").strip()
        element.attrib.clear()
        if class_attr:
            element.set("class", class_attr)
        if id_attr:
            element.set("id", id_attr)

    for child in element:
        clean_attributes(child)


def simplify_list(element) -> None:
    """Collapse long lists to first+last item with an ellipsis."""
    if element.tag in ("ul", "ol"):
        items = list(element.iterchildren())
        if len(items) > 2:
            for item in items[1:-1]:
                element.remove(item)
            ellipsis = etree.Element("span")
            ellipsis.text = "..."
            items[-1].addprevious(ellipsis)
    elif element.tag == "dl":
        items = list(element.iterchildren())
        if len(items) > 2:
            dts = [item for item in items if item.tag == "dt"]
            if len(dts) > 1:
                first_dt_index = items.index(dts[0])
                next_dt_index = items.index(dts[1])
                first_group = items[first_dt_index:next_dt_index]
                last_dt_index = items.index(dts[-1])
                last_group = items[last_dt_index:]
                for child in list(element.iterchildren()):
                    element.remove(child)
                for item in first_group:
                    element.append(item)
                ellipsis = etree.Element("span")
                ellipsis.text = "..."
                element.append(ellipsis)
                for item in last_group:
                    element.append(item)

    for child in element:
        simplify_list(child)


def should_remove_element(element) -> bool:
    class_name = element.get("class", "")
    id_name = element.get("id", "")

    if class_name in ATTR_PATTERNS_TO_REMOVE or id_name in ATTR_PATTERNS_TO_REMOVE:
        parent = element.getparent()
        if parent is not None and parent.tag == "body":
            return True

    style_attr = element.get("style", "")
    if style_attr:
        for attr in style_attr.split(";"):
            if ":" not in attr:
                continue
            split_items = attr.split(":")
            key = split_items[0]
            value = ":".join(split_items[1:])
            if ATTR_INVISIBLE.get(key.strip()) == value.strip():
                return True

    parent = element.getparent()
    if parent is not None and parent.tag == "details":
        if element.tag == "summary":
            return False
        else:
            return parent.get("open") is None

    return False


def remove_specific_elements(element) -> None:
    for child in list(element.iterchildren()):
        remove_specific_elements(child)

    if should_remove_element(element):
        parent = element.getparent()
        if parent is not None:
            tail_text = element.tail or ""
            element.tail = None
            prev_sibling = element.getprevious()
            if prev_sibling is not None:
                if prev_sibling.tail is not None:
                    prev_sibling.tail += tail_text
                else:
                    if prev_sibling.text is not None:
                        prev_sibling.text += tail_text
                    else:
                        prev_sibling.text = tail_text
            else:
                if parent.text is not None:
                    parent.text += tail_text
                else:
                    parent.text = tail_text
            parent.remove(element)
