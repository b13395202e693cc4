"""The simplifier splits pages into ordered blocks and maps labels back to text, Markdown and HTML."""

from __future__ import annotations

import time

import pytest

from cleaner.render import main_html, render_markdown, render_text
from cleaner.simplify import F_HIDDEN, F_NAV, MAX_BLOCKS, SECTION_BITS, SimplePage, cap_depth, simplify

PAGE = """<!DOCTYPE html><html><head><title>Bridge | Valley News</title><style>p {color: red}</style>
<script>var notContent = "<p>never</p>";</script></head><body>
<nav class="main-menu"><ul><li><a href="/">Home</a></li><li><a href="/sport">Sport</a></li></ul></nav>
<div id="postBody" class="article-content">
<h1>Lindmoor bridge reopens</h1>
<p>The river town rebuilt its <b>stone bridge</b> this spring.<br>Engineers reused the granite.</p>
loose text between paragraphs
<table><tr><th>Year</th><th>Cost</th></tr><tr><td>2025</td><td>4 million</td></tr></table>
<ul><li>arches raised<ul><li>by half a metre</li></ul></li><li>deck widened</li></ul>
<div style="display: none">streamed hidden copy</div>
<pre>  keep   my
    spacing</pre>
</div>
<footer><p>Copyright 2025 Valley News</p></footer>
</body></html>"""


@pytest.fixture
def page() -> SimplePage:
    return simplify(PAGE)


def _texts(page: SimplePage) -> list[str]:
    return [b.text for b in page.blocks]


def test_blocks_come_in_reading_order_with_sequential_ids_and_no_script_or_style(page: SimplePage) -> None:
    texts = _texts(page)
    assert [b.id for b in page.blocks] == list(range(len(page.blocks)))
    assert texts[0] == "Home\nSport"
    assert texts[1] == "Lindmoor bridge reopens"
    assert texts.index("loose text between paragraphs") > texts.index(
        "The river town rebuilt its stone bridge this spring.\nEngineers reused the granite."
    )
    assert texts[-1] == "Copyright 2025 Valley News"
    assert not any("never" in t or "color" in t for t in texts)
    assert page.title == "Bridge | Valley News"


def test_lists_tables_and_pre_stay_whole_and_context_is_recorded(page: SimplePage) -> None:
    by_tag = {b.tag: b for b in page.blocks}
    assert by_tag["table"].atomic and by_tag["table"].text == "Year\nCost\n2025\n4 million"
    assert by_tag["ul"].atomic and "by half a metre" in page.blocks[0].text + by_tag["ul"].text
    assert by_tag["pre"].text == "keep   my\n    spacing"
    nav = page.blocks[0]
    assert nav.flags & F_NAV and nav.n_link_words == 2 and "menu" in nav.tokens
    hidden = next(b for b in page.blocks if b.text == "streamed hidden copy")
    assert hidden.flags & F_HIDDEN
    heading = page.blocks[1]
    assert {"post", "body", "article", "content"} <= set(heading.tokens)


def test_labels_become_text_markdown_and_pruned_html(page: SimplePage) -> None:
    keep = [not b.flags & F_NAV for b in page.blocks]
    keep[-1] = False  # footer
    text = render_text(page, keep)
    assert "Home" not in text and "Copyright" not in text
    assert "stone bridge" in text and "4 million" in text
    markdown = render_markdown(page, keep)
    assert "# Lindmoor bridge reopens" in markdown
    assert "| Year | Cost |\n| --- | --- |\n| 2025 | 4 million |" in markdown
    assert "- arches raised\n  - by half a metre\n- deck widened" in markdown
    assert "```\nkeep   my\n    spacing\n```" in markdown
    html = main_html(page, keep)
    assert '<div id="postBody" class="article-content">' in html
    assert "<b>stone bridge</b>" in html and "<br>" in html and "<th>Cost</th>" in html
    assert "Home" not in html and "Copyright" not in html and "<footer" not in html


@pytest.mark.parametrize(
    ("html", "reason"),
    [
        ("", "empty"),
        ("  \n ", "empty"),
        ("<html><head><script>var a = 1;</script></head><body></body></html>", "no_text"),
        ("<p>" * 5_000, "no_text"),
        ("<div>" * 100_000 + "buried text" + "</div>" * 100_000, "too_deep"),
    ],
    ids=["empty", "blank", "script-only", "empty-paragraphs", "deeply-nested"],
)
def test_pages_without_text_give_no_blocks_and_a_reason(html: str, reason: str) -> None:
    started = time.perf_counter()
    page = simplify(html)
    assert page.blocks == [] and page.reason == reason
    assert time.perf_counter() - started < 5  # a pathological page must not stall a worker


def test_binary_and_non_utf8_garbage_is_simplified_without_raising() -> None:
    garbage = bytes(range(256)).decode("latin-1") * 40 + "\x00\ud7ff<<>></p><!--"
    page = simplify(garbage)
    assert all(b.text for b in page.blocks)


def test_huge_page_work_is_capped_and_marked_truncated() -> None:
    page = simplify("<p>word</p>" * (MAX_BLOCKS + 500))
    assert len(page.blocks) == MAX_BLOCKS and page.truncated


def test_depth_cap_keeps_ordinary_pages_untouched() -> None:
    ordinary = "<p>x" * 10_000 + "<li>y" * 10_000
    assert cap_depth(ordinary) == (ordinary, False)
    cut, was_cut = cap_depth("<section>" * 5_000 + "text")
    assert was_cut and "text" not in cut


def test_a_comment_section_marks_every_block_under_it_however_deep() -> None:
    page = simplify(
        '<article class="story"><p>The bridge reopens in May.</p></article>'
        '<section id="comments">'
        + '<div class="mx-auto my-4 px-3 py-2 rounded shadow">' * 3
        + "<p>Great news for walkers.</p>"
        + "</div>" * 3
        + "</section>"
        + '<div class="newsletter-signup"><p>Sign up for the morning briefing.</p></div>'
    )
    marks = {b.text: b.sections for b in page.blocks}
    assert marks["The bridge reopens in May."] == 0
    # the comment wrapper lies beyond the 16 nearest class tokens a block keeps
    assert "comments" not in page.blocks[1].tokens
    assert marks["Great news for walkers."] == SECTION_BITS["comments"]
    assert marks["Sign up for the morning briefing."] == SECTION_BITS["newsletter"]
