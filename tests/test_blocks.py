"""blocks_v1: labels by alignment, a reproducible trained model, and a cleaner that keeps the article."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from cleaner import CleanedPage, get_cleaner
from cleaner.blocks_files import DEFAULT_MODEL
from cleaner.blocks_model import BlocksCleaner, BlocksModel, block_labels, drop_repeats
from cleaner.blocks_train import Example, train_model
from cleaner.simplify import simplify

ARTICLE = [
    "The town council voted on Tuesday to repair the old stone bridge over the river, ending a "
    "debate that has divided residents for more than three years.",
    "Engineers told the meeting that the granite arches are sound, but that the deck has been "
    "weakened by repeated floods and must be rebuilt before next winter.",
    "The work will cost about four million pounds, most of which will come from a loan that the "
    "council expects to repay over the next twenty years from its road budget.",
    "Residents who had campaigned for a new bridge said they were disappointed, and argued that a "
    "modern crossing would have been cheaper to maintain in the long run.",
    "The council leader said the old bridge was part of the history of the valley and that the "
    "town would be poorer without it, whatever the accountants might say.",
    "Masons from the cathedral workshop will advise on the repairs, and the museum plans an "
    "exhibition on the bridge's medieval builders while the work is under way.",
]
RELATED = [
    (
        "Flood defences to be raised along the harbour wall",
        "The harbour board has approved plans for a higher wall.",
    ),
    (
        "Railway station reopens after a year of works",
        "Trains are running again on the valley line from Monday.",
    ),
    ("Market traders face higher rents from spring", "Stall holders say the increase will drive some away."),
    (
        "Divers find medieval pottery near the old quay",
        "The finds will go on show at the town museum in summer.",
    ),
]
COMMENTS = [
    (
        "riverwatcher",
        "I have lived here for forty years and I think this is the right decision. The bridge has "
        "survived worse floods than the ones we have had recently, and a new one would never look "
        "as good.",
    ),
    (
        "Sam T.",
        "Four million pounds is a lot of money for a town this size. I would like to know what "
        "else the council is going to cut to pay for it, because nobody has explained that yet.",
    ),
    (
        "harbour_girl",
        "Does anyone know whether the bridge will be closed to walkers during the works? My "
        "children cross it every morning on their way to school and the detour is very long.",
    ),
]


def news_page() -> tuple[str, list[str], list[str]]:
    """A news article followed by related stories (teaser cards), a newsletter box and a comment thread,
    under the class names such sections usually carry: (html, paragraphs to keep, texts to drop)."""
    rel_cls, com_cls, nl_cls = "related-stories", "comments", "newsletter-signup"
    related = "".join(
        f'<li class="card"><a href="/news/{i}">{h}</a><p>{t}</p></li>' for i, (h, t) in enumerate(RELATED)
    )
    comments = "".join(
        f'<div class="c-item"><div class="c-meta"><a href="/u/{a}">{a}</a> 2 hours ago</div>'
        f'<div class="c-body"><p>{t}</p></div><a href="#reply">Reply</a></div>'
        for a, t in COMMENTS
    )
    html = f"""<html><head><title>Council votes to repair the old stone bridge | Valley News</title></head>
<body><header class="site-header"><nav class="menu"><ul><li><a href="/">Home</a></li>
<li><a href="/news">News</a></li>
<li><a href="/sport">Sport</a></li><li><a href="/weather">Weather</a></li></ul></nav></header>
<main><article class="story"><h1>Council votes to repair the old stone bridge</h1>
<p class="byline">By Jane Rivers, 4 March 2025</p>
{"".join(f"<p>{p}</p>" for p in ARTICLE)}</article>
<section class="{rel_cls}"><h2>Related stories</h2><ul>{related}</ul></section>
<div class="{nl_cls}"><h3>Get the Valley morning briefing</h3><p>Sign up to receive our top stories in your
inbox every morning. You can unsubscribe at any time.</p><form><input type="email"><button>Sign up</button>
</form></div>
<section id="{com_cls}"><h2>3 comments</h2>{comments}</section></main>
<footer><p>Copyright 2025 Valley News Ltd. All rights reserved.</p></footer></body></html>"""
    drop = [h for h, _ in RELATED] + [t for _, t in RELATED] + [t for _, t in COMMENTS]
    drop += ["Sign up to receive our top stories", "Get the Valley morning briefing"]
    return html, ARTICLE, drop


WORDS = str.split(
    "river bridge stone town council engineers granite arches flood deck masons history loan years spring "
    "summer divers museum exhibition medieval mortar residents valley water harbour market railway"
)
NAV = ["Home", "Sport", "Weather", "Log in", "Contact", "About us"]


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(12, 30))).capitalize() + "."


def synthetic_page(rng: random.Random) -> tuple[str, str]:
    """A templated page: menu, ads and footer around an article; returns (html, truth text)."""
    paragraphs = [_sentence(rng) + " " + _sentence(rng) for _ in range(rng.randint(3, 7))]
    heading = " ".join(rng.choice(WORDS) for _ in range(5)).title()
    menu = "".join(f'<li><a href="/{i}">{n}</a></li>' for i, n in enumerate(rng.sample(NAV, 4)))
    related = "".join(f'<li><a href="/r{i}">{_sentence(rng)[:40]}</a></li>' for i in range(3))
    ad_class = rng.choice(["ad-slot", "promo banner", "sponsor"])
    html = f"""<html><head><title>{heading} | News</title></head><body>
<header class="site-header"><nav class="menu"><ul>{menu}</ul></nav></header>
<div class="{ad_class}"><a href="/ad">Buy cheap widgets now</a></div>
<div class="{rng.choice(["post-content", "article-body", "entry"])}"><h1>{heading}</h1>
{"".join(f"<p>{p}</p>" for p in paragraphs)}</div>
<aside class="sidebar related"><h3>Most read</h3><ul>{related}</ul></aside>
<footer><p>Copyright 2025 Valley News Ltd. All rights reserved.</p></footer></body></html>"""
    return html, "\n".join([heading, *paragraphs])


@pytest.fixture(scope="module")
def small_model() -> BlocksModel:
    rng = random.Random(7)
    examples = []
    for i in range(60):
        html, truth = synthetic_page(rng)
        page = simplify(html)
        examples.append(Example(f"{i:04d}", "article", f"site{i % 12}.example", page,
                                block_labels(page, truth), truth))  # fmt: skip
    return train_model(examples, passes=2)


def test_alignment_labels_a_repeated_block_main_only_once() -> None:
    page = simplify("<p>alpha beta gamma delta</p><p>menu</p><p>alpha beta gamma delta</p>")
    assert block_labels(page, "Alpha beta gamma delta.").tolist() == [1, 0, 0]


def test_alignment_needs_most_of_a_block_in_the_truth() -> None:
    page = simplify("<p>one two three four five</p><p>one two six seven eight</p>")
    assert block_labels(page, "one two three four five six").tolist() == [1, 0]


def test_alignment_follows_reading_order_so_a_menu_cannot_claim_the_headline() -> None:
    page = simplify(
        "<nav><p>Winter jackets sale</p></nav><h1>Winter jackets sale</h1>"
        "<p>Every winter jacket is half price until Sunday in all our stores.</p>"
    )
    truth = "Winter jackets sale\nEvery winter jacket is half price until Sunday in all our stores."
    assert block_labels(page, truth).tolist() == [0, 1, 1]


def test_a_kept_paragraph_copied_elsewhere_on_the_page_is_kept_once() -> None:
    copy = "Handmade stoneware mug, wheel thrown and glazed in our studio."
    page = simplify(
        f"<div><p>{copy}</p><p>{copy}</p><p>Buy now</p></div><p>Buy now</p>"
        f"<div class='mobile'><p>{copy}</p></div>"
    )
    probs = drop_repeats(page, np.full(5, 0.9, dtype=np.float32), threshold=0.45)
    # sibling repeats and short repeats stay; the mobile copy under another parent goes
    assert probs.tolist() == pytest.approx([0.9, 0.9, 0.9, 0.9, 0.0])


def test_trained_model_keeps_article_and_drops_chrome_on_unseen_page(small_model: BlocksModel) -> None:
    html, truth = synthetic_page(random.Random(99))
    page = BlocksCleaner(model=small_model).clean(html, "https://valley.example/a")
    assert isinstance(page, CleanedPage) and page.cleaner == "blocks_v1"
    for paragraph in truth.split("\n")[1:]:
        assert paragraph in page.text
    for boilerplate in ("Buy cheap widgets", "All rights reserved", "Most read", "Log in"):
        assert boilerplate not in page.text
    assert page.markdown.startswith("# ")


def test_model_file_round_trips_byte_for_byte(small_model: BlocksModel, tmp_path: Path) -> None:
    first, second = tmp_path / "a.json.gz", tmp_path / "b.json.gz"
    small_model.save(first)
    loaded = BlocksModel.load(first)
    loaded.save(second)
    assert first.read_bytes() == second.read_bytes()
    page = simplify(synthetic_page(random.Random(5))[0])
    assert np.allclose(loaded.predict(page), small_model.predict(page))


def test_training_is_reproducible(small_model: BlocksModel) -> None:
    rng = random.Random(7)
    examples = []
    for i in range(60):
        html, truth = synthetic_page(rng)
        page = simplify(html)
        examples.append(Example(f"{i:04d}", "article", f"site{i % 12}.example", page,
                                block_labels(page, truth), truth))  # fmt: skip
    again = train_model(examples, passes=2)
    assert [b.model_to_string() for b in again.boosters] == [
        b.model_to_string() for b in small_model.boosters
    ]


def test_unreadable_model_file_is_named_in_the_error(tmp_path: Path) -> None:
    bad = tmp_path / "broken.json.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(ValueError, match=r"broken\.json\.gz"):
        BlocksModel.load(bad)
    with pytest.raises(FileNotFoundError, match="clean train"):
        BlocksCleaner(model_path=tmp_path / "missing.json.gz").extract("<p>text</p>")


def test_shipped_model_is_small_and_cleans_through_the_registry() -> None:
    assert DEFAULT_MODEL.stat().st_size < 8_000_000
    html, truth = synthetic_page(random.Random(3))
    page = get_cleaner("blocks_v1").clean(html)
    assert page is not None and truth.split("\n")[1] in page.text
    assert "All rights reserved" not in page.text


def test_bad_pages_get_the_reason_a_user_sees_in_stats() -> None:
    bad = ["", "<html><head><script>x()</script></head></html>", "<div>" * 50_000, "\x00\xff binary"]
    out = get_cleaner("blocks_v1").clean_batch(bad, ["http://bad.example/"] * len(bad))
    assert [(one.page, one.error) for one in out] == [
        (None, "cleaner/empty/empty"),
        (None, "cleaner/empty/no_text"),
        (None, "cleaner/empty/too_deep"),
        (None, "cleaner/empty/binary"),
    ]


def test_shipped_model_drops_related_stories_newsletter_box_and_comments_under_a_news_article() -> None:
    html, keep, drop = news_page()
    page = get_cleaner("blocks_v1").clean(html, "https://valley.example/news/bridge")
    assert page is not None
    assert [p for p in keep if p not in page.text] == []
    # the model before section marks kept the first comment here
    assert [d for d in drop if d in page.text] == []
