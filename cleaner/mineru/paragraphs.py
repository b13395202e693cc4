"""MinerU-HTML simplification, part 2: the cleaned DOM -> a flat, ordered list of paragraphs.

Ported from Pulpie 0.0.2 (`pulpie/simplify.py`, Apache-2.0), itself a port of MinerU-HTML's
`mineru_html/process/simplify_html.py` (Apache-2.0, MinerU-HTML / Dripper team, Ma et al., 2025).
The code is kept statement for statement so that the output stays byte-identical to both packages
(tests/test_mineru_parity.py checks it on the WCXB pages); do not "improve" it.
"""

from __future__ import annotations

import copy

from lxml import etree, html

from cleaner.mineru.dom import has_non_listitem_children, inline_tags, is_data_table, no_block_tags


def extract_paragraphs(processing_dom, uid_map, include_parents: bool = True) -> list:
    """Walk the cleaned DOM and emit a flat, ordered list of content paragraphs."""
    table_types = {}
    for table in processing_dom.xpath(".//table"):
        table_types[table.get("data-uid")] = is_data_table(table)

    list_types: dict = {}

    def is_block_element(node) -> bool:
        def judge_special_case(node, expected_tags, types_map):
            ancestor = node
            while ancestor is not None and ancestor.tag not in expected_tags:
                ancestor = ancestor.getparent()
            if ancestor is not None:
                ancestor_uid = ancestor.get("data-uid")
                return not types_map.get(ancestor_uid, False)
            return None

        if node.tag in ("td", "th"):
            return judge_special_case(node, ["table"], table_types)
        if node.tag == "li":
            return judge_special_case(node, ["ul", "ol"], list_types)
        if node.tag in ("dt", "dd"):
            return judge_special_case(node, ["dl"], list_types)
        if node.tag in no_block_tags or node.tag in inline_tags:
            return False
        return isinstance(node, html.HtmlElement)

    def has_block_descendants(node) -> bool:
        if node.tag in no_block_tags:
            return False
        for child in node.iterdescendants():
            parent = child.getparent()
            if parent is not None and (parent.tag in no_block_tags or parent.get("cc-no-block") == "true"):
                child.set("cc-no-block", "true")
            if child.get("cc-no-block") != "true" and is_block_element(child):
                if node.tag in inline_tags:
                    original_element = uid_map.get(node.get("data-uid"))
                    original_element.set("cc-block-type", "true")
                return True
        return False

    def is_content_list(list_element) -> bool:
        items = list_element.xpath("li | dt | dd")
        if len(items) == 0:
            return False
        if has_non_listitem_children(list_element):
            return False
        return all(not has_block_descendants(item) for item in items)

    for list_element in processing_dom.xpath(".//ul | .//ol | .//dl"):
        list_types[list_element.get("data-uid")] = is_content_list(list_element)

    def clone_structure(path):
        if not path:
            raise ValueError("Path cannot be empty")
        if not include_parents:
            last_node = html.Element(path[-1].tag)
            last_node.attrib.update(path[-1].attrib)
            return last_node, last_node

        root = html.Element(path[0].tag)
        root.attrib.update(path[0].attrib)
        current = root
        for node in path[1:-1]:
            new_node = html.Element(node.tag)
            new_node.attrib.update(node.attrib)
            current.append(new_node)
            current = new_node

        last_node = html.Element(path[-1].tag)
        last_node.attrib.update(path[-1].attrib)
        current.append(last_node)
        return root, last_node

    paragraphs = []

    def merge_inline_content(parent, content_list):
        last_inserted = None
        for idx, (item_type, item) in enumerate(content_list):
            if item_type in ("direct_text", "tail_text"):
                if last_inserted is None:
                    if not parent.text:
                        parent.text = item
                    else:
                        parent.text += " " + item
                else:
                    if last_inserted.tail is None:
                        last_inserted.tail = item
                    else:
                        last_inserted.tail += " " + item
            else:
                item_copy = copy.deepcopy(item)
                if idx == len(content_list) - 1 and item_copy.tag == "br":
                    item_copy.tail = None
                parent.append(item_copy)
                last_inserted = item

    def process_node(node, path):
        current_path = [*path, node]
        inline_content = []
        content_sources = []

        if node.text and node.text.strip():
            inline_content.append(("direct_text", node.text.strip()))
            content_sources.append("direct_text")

        for child in node:
            if is_block_element(child) or has_block_descendants(child):
                if child.tag == "br":
                    inline_content.append(("element", child))
                    content_sources.append("element")
                if inline_content:
                    try:
                        root, last_node = clone_structure(current_path)
                        merge_inline_content(last_node, inline_content)

                        content_type = "mixed"
                        if all(t == "direct_text" for t in content_sources):
                            content_type = "unwrapped_text"
                        elif all(t == "element" for t in content_sources):
                            content_type = "inline_elements"

                        original_element = uid_map.get(node.get("data-uid"))
                        paragraphs.append(
                            {
                                "html": etree.tostring(root, encoding="unicode").strip(),
                                "content_type": content_type,
                                "_original_element": original_element,
                            }
                        )
                    except ValueError:
                        pass
                    inline_content = []
                    content_sources = []
                if child.tag != "br":
                    if table_types.get(child.get("data-uid")) or (not has_block_descendants(child)):
                        try:
                            root, last_node = clone_structure([*current_path, child])
                            last_node.text = child.text if child.text else None
                            for grandchild in child:
                                last_node.append(copy.deepcopy(grandchild))

                            original_element = uid_map.get(child.get("data-uid"))
                            paragraphs.append(
                                {
                                    "html": etree.tostring(root, encoding="unicode").strip(),
                                    "content_type": "block_element",
                                    "_original_element": original_element,
                                }
                            )
                        except ValueError:
                            pass
                    else:
                        process_node(child, current_path)

                if child.tail and child.tail.strip():
                    inline_content.append(("tail_text", child.tail.strip()))
                    content_sources.append("tail_text")
            else:
                inline_content.append(("element", child))
                content_sources.append("element")
                if child.tail and child.tail.strip():
                    inline_content.append(("tail_text", child.tail.strip()))
                    content_sources.append("tail_text")

        if inline_content:
            try:
                root, last_node = clone_structure(current_path)
                merge_inline_content(last_node, inline_content)

                content_type = "mixed"
                if all(t == "direct_text" for t in content_sources):
                    content_type = "unwrapped_text"
                elif all(t == "element" for t in content_sources):
                    content_type = "inline_elements"
                elif all(t in ("direct_text", "tail_text") for t in content_sources):
                    content_type = "unwrapped_text"

                original_element = uid_map.get(node.get("data-uid"))
                paragraphs.append(
                    {
                        "html": etree.tostring(root, encoding="unicode").strip(),
                        "content_type": content_type,
                        "_original_element": original_element,
                    }
                )
            except ValueError:
                pass

    process_node(processing_dom, [])

    seen = set()
    unique_paragraphs = []
    for p in paragraphs:
        if p["html"] not in seen:
            seen.add(p["html"])
            unique_paragraphs.append(p)
    return unique_paragraphs
