"""Per-block feature vectors for `blocks_v1`: the block itself, its ancestors and its neighbours."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

import numpy as np

from cleaner.simplify import HEADINGS, N_FLAGS, SECTION_WORDS, Block, SimplePage


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Class/id keyword groups; each is a feature counting matching tokens near the block.
KEYWORD_GROUPS: dict[str, frozenset[str]] = {
    "nav": _set("nav navbar navigation menu menus breadcrumb breadcrumbs topbar toolbar pagination pager "
                     "skip dropdown submenu mega hamburger"),
    "chrome": _set("footer header masthead copyright bottom top site logo brand legal"),
    "side": _set("sidebar aside widget widgets related recommended popular trending more recent "
                      "similar latest"),
    "social": _set("share social sharing follow facebook twitter linkedin pinterest whatsapp"),
    "promo": _set("ad ads advert advertisement sponsor sponsored promo banner cookie cookies consent "
                       "gdpr newsletter subscribe signup modal popup cta"),
    "comment": _set("comment comments reply replies respond discussion"),
    "meta": _set("meta byline author date tags tag category categories posted published"),
    "content": _set("content article post entry main body text story prose rich single page"),
    "desc": _set("product description detail details specs spec specification specifications summary info "
                      "overview features feature attributes"),
    "review": _set("review reviews rating ratings stars testimonial testimonials ugc"),
    "shop": _set("cart basket checkout buy price pricing bag wishlist purchase shipping delivery stock qty "
                      "quantity variant variants swatch swatches size sizes"),
    "forum": _set("thread message messages topic forum postbody bbcode quote answer question"),
    "hidden": _set("hidden hide sr only visually screen reader collapse collapsed"),
}  # fmt: skip
TAG_CODES = {
    tag: i
    for i, tag in enumerate(
        str.split(
            "p div li td th h1 h2 h3 h4 h5 h6 ul ol dl table pre blockquote section article span dd dt "
            "figcaption button header footer nav aside main form body address caption summary"
        ),
        start=1,
    )
}
STOPWORDS = _set(
    "the a an and or of to in is are was were be for on with that this it as at by from have has not "
    "you we they he she i our your their its but if so can will would"
)
WORD = re.compile(r"\w+")
SENTENCE_END = (".", "!", "?", ":", "…", "”", '"', ")")
WINDOWS = (1, 3, 8)
# Prices and buying phrases mark shop pages, where reviews and product grids are boilerplate. Both match
# lower-cased text: case-insensitive patterns cost several times more per block.
PRICE = re.compile(r"[$€£¥₹]\s?\d|\d\s?[€$£]|\b(?:usd|eur|gbp|chf|aud|cad)\s?\d")
SHOP_PHRASE = re.compile(
    r"add to (?:cart|bag|basket|wishlist)|buy (?:it )?now|in stock|out of stock"
    r"|free (?:shipping|delivery|returns)|checkout|quantity|select (?:a )?size|choose (?:a |your )?size"
)
MAX_PRICES = 5
# Blocks sharing their tag and this many nearest class tokens come from one repeated template (cards, rows).
SIG_TOKENS = 3
# Character-class rates are estimated on a block's first characters; long blocks cost no more.
CHAR_SAMPLE = 2_000
N_TOKEN_STATS = 6

BASE_NAMES = [
    "log_words", "log_chars", "link_density", "log_links", "links_per_word", "period_rate", "comma_rate",
    "digit_rate", "upper_rate", "mean_word_len", "ends_sentence", "n_lines", "stopword_rate",
    "title_overlap", "tag_code", "heading_level", "atomic", "depth", "position", "words_before",
    "log_page_words", "log_page_blocks", "dist_prev_heading", "after_h1", "dup_text",
    "prices", "shop_phrase", "log_template_repeat", "h1_offset", "h1_word_offset", "page_price_share",
    "page_shop_phrases", "page_review_share", "page_h1_count", "log_wrapped_repeat",
    *[f"flag_{i}" for i in range(N_FLAGS)], *[f"section_{kind}" for kind in SECTION_WORDS],
    *[f"kw_own_{g}" for g in KEYWORD_GROUPS], *[f"kw_anc_{g}" for g in KEYWORD_GROUPS],
    *[f"tok_{s}" for s in ("own_mean", "own_max", "own_min", "anc_mean", "anc_max", "anc_min")],
    *[f"cont{k}_{s}" for k in range(3) for s in ("log_words", "link_density", "log_blocks", "share")],
]  # fmt: skip
COL = {name: i for i, name in enumerate(BASE_NAMES)}
NEIGHBOUR_BASE = ("log_words", "link_density", "stopword_rate", "tag_code")


def _token_stats(tokens: tuple[str, ...], scores: Mapping[str, float]) -> tuple[float, float, float]:
    values = [scores[t] for t in tokens if t in scores]
    if not values:
        return (math.nan, math.nan, math.nan)
    return (sum(values) / len(values), max(values), min(values))


def _token_row(block: Block, token_scores: Mapping[str, float]) -> list[float]:
    """Keyword-group counts and learned scores of a block's class/id tokens (shared by its template)."""
    own, anc = set(block.own_tokens), set(block.tokens)
    row = [float(len(own & group)) for group in KEYWORD_GROUPS.values()]
    row += [float(len(anc & group)) for group in KEYWORD_GROUPS.values()]
    row += [*_token_stats(block.own_tokens, token_scores), *_token_stats(block.tokens, token_scores)]
    return row


def _block_row(
    block: Block,
    title_words: set[str],
    token_scores: Mapping[str, float],
    text_counts: dict[str, int],
    token_rows: dict[tuple[tuple[str, ...], tuple[str, ...]], list[float]],
) -> list[float]:
    text = block.text
    n_chars = len(text)
    lower = text.lower()
    words = WORD.findall(lower)
    n = max(len(words), 1)
    sample = text[:CHAR_SAMPLE]
    lower_sample = lower[:CHAR_SAMPLE]
    letters = sum(map(str.isalpha, sample)) or 1
    digits = sum(map(str.isdigit, sample))
    row = [
        math.log1p(block.n_words),
        math.log1p(n_chars),
        block.n_link_words / max(block.n_words, 1),
        math.log1p(block.n_links),
        block.n_links / n,
        text.count(".") / n,
        text.count(",") / n,
        digits / max(len(sample), 1),
        sum(map(str.isupper, sample)) / letters,
        sum(map(len, words)) / n,
        float(text.rstrip().endswith(SENTENCE_END)),
        float(text.count("\n") + 1),
        sum(map(STOPWORDS.__contains__, words)) / n,
        sum(map(title_words.__contains__, words)) / n if title_words else 0.0,
        float(TAG_CODES.get(block.tag, 0)),
        float(HEADINGS.get(block.tag, 0)),
        float(block.atomic),
        float(block.depth),
    ]
    row += [0.0] * 7  # position, words_before, page sizes, headings, dup: filled per page
    row[24] = float(text_counts.get(text, 0) > 1)
    prices = min(len(PRICE.findall(lower_sample)), MAX_PRICES) if digits else 0
    row += [float(prices), float(SHOP_PHRASE.search(lower_sample) is not None)]
    row += [0.0] * 8  # template repeats, h1 offsets, page shop/review signals: filled per page
    flags = block.flags
    row += [float((flags >> i) & 1) for i in range(N_FLAGS)]
    row += [float((block.sections >> i) & 1) for i in range(len(SECTION_WORDS))]
    key = (block.own_tokens, block.tokens)
    tokens = token_rows.get(key)
    if tokens is None:
        tokens = token_rows[key] = _token_row(block, token_scores)
    return row + tokens


def page_features(page: SimplePage, token_scores: Mapping[str, float]) -> np.ndarray:
    """Feature matrix (blocks x features) of one simplified page."""
    blocks = page.blocks
    if not blocks:
        return np.zeros((0, n_features()), dtype=np.float32)
    title_words = set(WORD.findall(page.title.lower()))
    text_counts: dict[str, int] = {}
    for b in blocks:
        text_counts[b.text] = text_counts.get(b.text, 0) + 1
    token_rows: dict[tuple[tuple[str, ...], tuple[str, ...]], list[float]] = {}
    base = np.array(
        [_block_row(b, title_words, token_scores, text_counts, token_rows) for b in blocks], dtype=np.float32
    )
    n = len(blocks)
    words = np.array([b.n_words for b in blocks], dtype=np.float64)
    total = max(words.sum(), 1.0)
    base[:, 18] = np.arange(n) / max(n - 1, 1)
    base[:, 19] = (np.cumsum(words) - words) / total
    base[:, 20] = math.log1p(total)
    base[:, 21] = math.log1p(n)
    heading = base[:, 15]
    last, seen_h1 = -1_000, False
    for i in range(n):
        base[i, 22] = min(i - last, 50)
        base[i, 23] = float(seen_h1)
        if heading[i] > 0:
            last = i
            seen_h1 = seen_h1 or heading[i] == 1
    _page_context(blocks, base, words, total)
    cont = np.zeros((n, 12), dtype=np.float32)
    cw, clw, cb = page.container_words, page.container_link_words, page.container_blocks
    for i, b in enumerate(blocks):
        for k, cid in enumerate(b.containers[:3]):
            cont[i, 4 * k : 4 * k + 4] = (
                math.log1p(cw[cid]),
                clw[cid] / max(cw[cid], 1),
                math.log1p(cb[cid]),
                cw[cid] / total,
            )
    return np.hstack([base, cont, _neighbours(base)])


def _page_context(blocks: list[Block], base: np.ndarray, words: np.ndarray, total: float) -> None:
    """Page-level shop and review signals, template repetition, and each block's distance from the h1."""
    n = len(blocks)
    sigs = [(b.tag, b.tokens[:SIG_TOKENS]) for b in blocks]
    sig_counts: dict[tuple[str, tuple[str, ...]], int] = {}
    for sig in sigs:
        sig_counts[sig] = sig_counts.get(sig, 0) + 1
    base[:, COL["log_template_repeat"]] = [math.log1p(sig_counts[s]) for s in sigs]
    # cards, teasers and comments: like blocks, each in its own wrapper (one or two levels up), side by side
    wrappers: dict[tuple[int, int, str, int], set[int]] = {}
    keys = []
    for b in blocks:
        c = (*b.containers, -1, -1, -1)
        own = [(level, c[level], b.tag, b.depth) for level in (2, 3)]
        for key in own:
            wrappers.setdefault(key, set()).add(c[key[0] - 1])
        keys.append(own)
    base[:, COL["log_wrapped_repeat"]] = [math.log1p(max(len(wrappers[k]) for k in own)) for own in keys]
    h1 = np.flatnonzero(base[:, COL["heading_level"]] == 1)
    base[:, COL["page_h1_count"]] = len(h1)
    if len(h1):
        first = int(h1[0])
        before = np.cumsum(words) - words
        base[:, COL["h1_offset"]] = (np.arange(n) - first) / n
        base[:, COL["h1_word_offset"]] = (before - before[first]) / total
    else:
        base[:, COL["h1_offset"]] = np.nan
        base[:, COL["h1_word_offset"]] = np.nan
    base[:, COL["page_price_share"]] = float((base[:, COL["prices"]] > 0).mean())
    base[:, COL["page_shop_phrases"]] = math.log1p(float(base[:, COL["shop_phrase"]].sum()))
    review = base[:, COL["kw_anc_review"]] > 0
    base[:, COL["page_review_share"]] = float(words[review].sum() / total)


def _neighbours(base: np.ndarray) -> np.ndarray:
    """Previous/next block values and windowed means of a few base features."""
    cols = [BASE_NAMES.index(name) for name in NEIGHBOUR_BASE]
    values = base[:, cols]
    n = len(base)
    pad = np.full((1, len(cols)), np.nan, dtype=np.float32)
    prev = np.vstack([pad, values[:-1]])
    nxt = np.vstack([values[1:], pad])
    out = [prev, nxt]
    cumsum = np.vstack([np.zeros((1, 2)), np.cumsum(values[:, :2], axis=0)])
    idx = np.arange(n)
    for w in WINDOWS:
        lo, hi = np.clip(idx - w, 0, n), np.clip(idx + w + 1, 0, n)
        out.append(((cumsum[hi] - cumsum[lo]) / (hi - lo)[:, None]).astype(np.float32))
    return np.hstack(out)


def feature_names() -> list[str]:
    """Column names, in the order `page_features` produces them."""
    names = list(BASE_NAMES)
    names += [f"{d}_{c}" for d in ("prev", "next") for c in NEIGHBOUR_BASE]
    names += [f"win{w}_{c}" for w in WINDOWS for c in NEIGHBOUR_BASE[:2]]
    return names


def n_features() -> int:
    """Width of the feature matrix."""
    return len(feature_names())
