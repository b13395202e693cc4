"""MinerU-HTML simplification, part 3: paragraphs -> `_item_id` blocks, and the entry point.

Ported from Pulpie 0.0.2 (`pulpie/simplify.py`, Apache-2.0), itself a port of MinerU-HTML's
`mineru_html/process/simplify_html.py` (Apache-2.0, MinerU-HTML / Dripper team, Ma et al., 2025).
The code is kept statement for statement so that the output stays byte-identical to both packages
(tests/test_mineru_parity.py checks it on the WCXB pages); do not "improve" it.
"""

from __future__ import annotations

import copy

from lxml import etree, html
from selectolax.lexbor import LexborHTMLParser

from cleaner.mineru.dom import (
    add_data_uids,
    build_uid_map,
    clean_attributes,
    inline_tags,
    is_meaningful_content,
    no_calc_text_tags,
    post_process_html,
    remove_all_uids,
    remove_specific_elements,
    remove_tags,
    remove_xml_declaration,
    simplify_list,
    tail_block_tag,
)
from cleaner.mineru.paragraphs import extract_paragraphs

# Characters of text kept per block (both packages' default); longer blocks end in "...".
CUTOFF_LENGTH = 500


def truncate_html_element_selective(element, max_length, ellipsis="...", exclude_tags=None):
    """Truncate text to ``max_length`` chars, ignoring text inside ``exclude_tags``."""
    if exclude_tags is None:
        exclude_tags = set()

    def _is_excluded(node):
        current = node
        while current is not None:
            if current.tag in exclude_tags:
                return True
            current = current.getparent()
        return False

    def _is_inside_excluded_tag(node):
        return _is_excluded(node.getparent()) if node.getparent() is not None else False

    def _calculate_text_length(node):
        total_length = 0
        if node.text and not _is_excluded(node):
            total_length += len(node.text)
        for child in node:
            total_length += _calculate_text_length(child)
        if node.tail:
            total_length += len(node.tail)
        return total_length

    current_length = [0]
    ellipsis_added = [False]
    nodes_to_process = []

    def _collect_text_nodes(node):
        if node.text and not _is_excluded(node):
            nodes_to_process.append(
                {
                    "type": "text",
                    "node": node,
                    "original_text": node.text,
                    "can_modify": not _is_inside_excluded_tag(node),
                }
            )
        for child in node:
            _collect_text_nodes(child)
        if node.tail:
            nodes_to_process.append(
                {
                    "type": "tail",
                    "node": node,
                    "original_text": node.tail,
                    "can_modify": not _is_inside_excluded_tag(node),
                }
            )

    def _clean_ancestors_following_siblings(node):
        parent = node.getparent()
        if parent is None:
            return
        grandparent = parent.getparent()
        if grandparent is None:
            return
        children = list(grandparent)
        try:
            index = children.index(parent)
            for sibling in children[index + 1 :]:
                grandparent.remove(sibling)
        except ValueError:
            pass
        _clean_ancestors_following_siblings(parent)

    def _mark_truncation_point(truncate_node):
        parent = truncate_node.getparent()
        if parent is not None:
            children = list(parent)
            try:
                index = children.index(truncate_node)
                for sibling in children[index + 1 :]:
                    parent.remove(sibling)
            except ValueError:
                pass
        _clean_ancestors_following_siblings(truncate_node)

    def _process_text_nodes():
        for node_info in nodes_to_process:
            if ellipsis_added[0]:
                if node_info["type"] == "text":
                    node_info["node"].text = None
                else:
                    node_info["node"].tail = None
                continue
            text_len = len(node_info["original_text"])
            if current_length[0] + text_len <= max_length:
                current_length[0] += text_len
            else:
                if node_info["can_modify"]:
                    remaining = max_length - current_length[0]
                    truncated_text = node_info["original_text"][:remaining] + ellipsis
                    if node_info["type"] == "text":
                        node_info["node"].text = truncated_text
                    else:
                        node_info["node"].tail = truncated_text
                    current_length[0] = max_length
                    ellipsis_added[0] = True
                    _mark_truncation_point(node_info["node"])
                else:
                    current_length[0] += text_len

    total_text_length = _calculate_text_length(element)
    if total_text_length <= max_length:
        return element
    _collect_text_nodes(element)
    _process_text_nodes()
    return element


# ── paragraph -> simplified html + item-id mapping ───────────────────────────


def process_paragraphs(paragraphs, uid_map, cutoff_length: int = 500) -> str:
    """Clean each paragraph, assign ``_item_id``, and mark the original DOM."""
    result = []
    item_id = 1

    for para in paragraphs:
        try:
            root = html.fragment_fromstring(para["html"], create_parent=False)
            root_for_xpath = copy.deepcopy(root)
            content_type = para.get("content_type", "block_element")

            clean_attributes(root)
            simplify_list(root)

            if not is_meaningful_content(root):
                continue

            truncate_html_element_selective(root, max_length=cutoff_length, exclude_tags=no_calc_text_tags)

            current_id = str(item_id)
            root.set("_item_id", current_id)

            original_parent = para["_original_element"]
            if content_type != "block_element":
                if original_parent is not None:
                    original_element = uid_map.get(root_for_xpath.get("data-uid"))
                    if len(root_for_xpath) > 0:
                        if (
                            root_for_xpath.tag in inline_tags
                            and original_element.tag != "body"
                            and original_element.get("cc-block-type") != "true"
                        ):
                            original_element.set("_item_id", current_id)
                        else:
                            children_to_wrap = []
                            for child in root_for_xpath.iterchildren():
                                child_uid = child.get("data-uid")
                                if child_uid and child_uid in uid_map:
                                    children_to_wrap.append(uid_map[child_uid])

                            if children_to_wrap:
                                first_child = children_to_wrap[0]
                                last_child = children_to_wrap[-1]
                                start_idx = original_parent.index(first_child)
                                end_idx = original_parent.index(last_child)

                                nodes_to_wrap = [original_parent[i] for i in range(start_idx, end_idx + 1)]

                                leading_text = (
                                    original_parent.text
                                    if start_idx == 0
                                    else original_parent[start_idx - 1].tail
                                )
                                trailing_text = last_child.tail

                                wrapper = etree.Element(tail_block_tag)
                                wrapper.set("_item_id", current_id)
                                if original_parent.get("cc-select") is not None:
                                    wrapper.set("cc-select", original_parent.get("cc-select"))

                                if leading_text:
                                    wrapper.text = leading_text
                                    if start_idx == 0:
                                        original_parent.text = None
                                    else:
                                        original_parent[start_idx - 1].tail = None

                                for node in nodes_to_wrap:
                                    original_parent.remove(node)
                                    wrapper.append(node)

                                original_parent.insert(start_idx, wrapper)
                                if last_child.tag == "br" and trailing_text:
                                    wrapper.tail = trailing_text
                                    last_child.tail = None
                    else:
                        if content_type == "inline_elements":
                            original_element.set("_item_id", current_id)
                        else:
                            if root_for_xpath.text and root_for_xpath.text.strip():
                                found = False
                                if (
                                    original_parent.text
                                    and original_parent.text.strip() == root_for_xpath.text.strip()
                                ):
                                    wrapper = etree.Element(tail_block_tag)
                                    wrapper.set("_item_id", current_id)
                                    wrapper.text = original_parent.text
                                    if original_parent.get("cc-select") is not None:
                                        wrapper.set("cc-select", original_parent.get("cc-select"))
                                    original_parent.text = None
                                    if len(original_parent) > 0:
                                        original_parent.insert(0, wrapper)
                                    else:
                                        original_parent.append(wrapper)
                                    found = True

                                if not found:
                                    for child in original_parent.iterchildren():
                                        if child.tail and child.tail.strip() == root_for_xpath.text.strip():
                                            wrapper = etree.Element(tail_block_tag)
                                            wrapper.set("_item_id", current_id)
                                            wrapper.text = child.tail
                                            if original_parent.get("cc-select") is not None:
                                                wrapper.set(
                                                    "cc-select",
                                                    original_parent.get("cc-select"),
                                                )
                                            child.tail = None
                                            parent = child.getparent()
                                            index = parent.index(child)
                                            parent.insert(index + 1, wrapper)
                                            break
            else:
                original_parent.set("_item_id", current_id)
                for child in original_parent.iterdescendants():
                    if child.get("cc-select") is not None:
                        original_parent.set("cc-select", child.get("cc-select"))
                        break

            item_id += 1

            cleaned_html = etree.tostring(root, method="html", encoding="unicode").strip()
            result.append({"html": cleaned_html, "_item_id": current_id, "content_type": content_type})

        except Exception:
            continue

    simplified_html = (
        '<html><head><meta charset="utf-8"></head><body>'
        + "".join(p["html"] for p in result)
        + "</body></html>"
    )
    return post_process_html(simplified_html)


def simplify_html(raw_html: str, cutoff_length: int = CUTOFF_LENGTH) -> tuple[str, str]:
    """Raw HTML -> (simplified HTML, one `_item_id` per block; the original DOM marked with the same ids).

    The simplified HTML is what Pulpie's and Dripper's models read; the marked DOM (`map_html`) is
    what `extract_main_html` cuts the main content from. Raises ValueError on a page selectolax
    cannot read at all (the packages would fall back to BeautifulSoup and then fail in lxml).

    The packages repair the markup with selectolax's Modest engine, which selectolax 1.0 removed
    (neither package imports with it); Lexbor, its successor, does the repair here.
    """
    fixed_html = LexborHTMLParser(raw_html).html
    if fixed_html is None:
        raise ValueError("selectolax produced no html")

    preprocessed_html = remove_xml_declaration(fixed_html)
    parser = html.HTMLParser(remove_comments=True)
    original_dom = html.fromstring(preprocessed_html, parser=parser)
    add_data_uids(original_dom)
    original_uid_map = build_uid_map(original_dom)

    processing_dom = copy.deepcopy(original_dom)
    remove_tags(processing_dom)
    remove_specific_elements(processing_dom)

    paragraphs = extract_paragraphs(processing_dom, original_uid_map, include_parents=False)
    simplified_html = process_paragraphs(paragraphs, original_uid_map, cutoff_length=cutoff_length)

    remove_all_uids(original_dom)
    map_html = etree.tostring(original_dom, pretty_print=False, method="html", encoding="unicode")

    return simplified_html, map_html
