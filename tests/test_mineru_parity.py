"""cleaner.mineru against the packages it reproduces, on the real WCXB dev pages.

Pulpie's Orange models and Dripper read pages simplified by MinerU-HTML's rules; a page simplified
any other way is not what they were trained on. These tests feed the same HTML to
`cleaner.mineru.simplify_html` and to pulpie's and mineru-html's own functions and require
byte-identical output: the simplified HTML (what the models read), the marked DOM (what the main
content is cut from), the block strings and their `_item_id`s, and the main HTML cut for a labelling.
"""

from __future__ import annotations

import random

import pytest

from cleaner.mineru import extract_blocks, extract_item_ids, extract_main_html, simplify_html
from tests.reference_packages import reference_module, wcxb_pages


def some_labels(item_ids: list[str | None], seed: int) -> dict[str, str]:
    rng = random.Random(seed)
    return {i: rng.choice(["main", "other"]) for i in item_ids if i is not None}


def test_simplified_pages_blocks_and_main_html_match_pulpie(monkeypatch: pytest.MonkeyPatch) -> None:
    ref_simplify = reference_module(monkeypatch, "pulpie.simplify").simplify
    chunker = reference_module(monkeypatch, "pulpie.chunker")
    utils = reference_module(monkeypatch, "pulpie.reconstruct")
    differ: list[str] = []
    pages = wcxb_pages()
    for n, (name, html) in enumerate(pages):
        ours = simplify_html(html)
        theirs = ref_simplify(html)
        blocks = extract_blocks(ours[0])
        labels = some_labels(extract_item_ids(blocks), n)
        if (
            ours != theirs
            or blocks != chunker.extract_blocks(theirs[0])
            or extract_main_html(ours[1], labels) != utils.extract_main_html(theirs[1], labels)
        ):
            differ.append(name)
    assert not differ, f"{len(differ)} of {len(pages)} pages differ from pulpie: {differ[:10]}"


def test_simplified_pages_match_mineru_html(monkeypatch: pytest.MonkeyPatch) -> None:
    simplify_module = reference_module(monkeypatch, "mineru_html.process.simplify_html")
    utils = reference_module(monkeypatch, "mineru_html.utils")
    differ: list[str] = []
    pages = wcxb_pages()[::2]
    for name, html in pages:
        ours = simplify_html(html)
        ids = [int(i) for i in extract_item_ids(extract_blocks(ours[0])) if i is not None]
        if ours != simplify_module.simplify_html(html) or ids != utils.get_all_item_ids(ours[0]):
            differ.append(name)
    assert not differ, f"{len(differ)} of {len(pages)} pages differ from mineru-html: {differ[:10]}"


def test_item_ids_count_from_one_and_every_block_carries_one() -> None:
    html = (
        "<html><body><nav>Home</nav><h1>Title</h1><p>First <b>bold</b> words.</p>"
        "<ul><li>one</li><li>two</li><li>three</li></ul>tail text<div>x</div></body></html>"
    )
    simplified, marked = simplify_html(html)
    blocks = extract_blocks(simplified)
    assert extract_item_ids(blocks) == [str(i) for i in range(1, len(blocks) + 1)]
    assert "Home" not in simplified and "<nav" not in simplified  # MinerU drops <nav> before labelling
    main = extract_main_html(marked, {"2": "main", "3": "other"})
    assert "First <b>bold</b> words." in main and "Title" not in main and "three" not in main
