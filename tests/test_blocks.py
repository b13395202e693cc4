"""blocks_v1: labels by alignment, a reproducible trained model, and a cleaner that keeps the article."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from cleaner import CleanedPage, get_cleaner
from cleaner.blocks_model import DEFAULT_MODEL, BlocksCleaner, BlocksModel, block_labels, drop_repeats
from cleaner.blocks_train import Example, train_model
from cleaner.simplify import simplify

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


@pytest.mark.parametrize(
    "html",
    ["", "<html><head><script>x()</script></head></html>", "<div>" * 50_000, "\x00\xff binary"],
    ids=["empty", "script-only", "deep", "binary"],
)
def test_bad_pages_clean_to_none_or_a_page_without_raising(html: str) -> None:
    page = get_cleaner("blocks_v1").clean(html)
    assert page is None or isinstance(page, CleanedPage)
