"""Gopher, C4 and FineWeb document-quality rules folded into one smooth score in [0, 1]."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from cleaner.quality.base import QualityScorer
from cleaner.quality.stopwords import STOP_WORDS

# Each rule becomes a soft pass rate: a logistic of (value - threshold) / scale that is 0.5 at
# the published hard threshold and ~0.98 four scales inside it; the score is their product, so
# one clearly failing rule sinks a page (as the hard filters would) but the ranking stays smooth.

# Gopher: fewer than 50 words is not a document; over 100k is usually a dump. Log-scale margins.
MIN_WORDS = 50
MAX_WORDS = 100_000
WORDS_LOG_SCALE = 0.35  # x2 words past the threshold gives a pass rate of ~0.88
# Gopher: mean word length outside 3..10 characters means tokens, codes or garbage.
MIN_MEAN_WORD_LEN, MAX_MEAN_WORD_LEN, MEAN_WORD_LEN_SCALE = 3.0, 10.0, 0.3
# Gopher: more than 0.1 hash/ellipsis symbols per word marks tag clouds and teasers.
MAX_SYMBOL_RATIO, SYMBOL_SCALE = 0.1, 0.02
# Gopher: over 90% of lines as bullets is a list page, not prose.
MAX_BULLET_LINES, BULLET_SCALE = 0.9, 0.03
# Gopher: over 30% of lines ending in an ellipsis is a page of truncated teasers.
MAX_ELLIPSIS_LINES, ELLIPSIS_SCALE = 0.3, 0.05
# Gopher: at least 80% of whitespace tokens should contain a letter (not numbers or symbols).
MIN_ALPHA_WORDS, ALPHA_SCALE = 0.8, 0.03
# Gopher asks for two stop words; we ask for a stop-word share, which also separates word salad
# and keyword lists (prose in en/de/fr/es sits at 0.3-0.5 with these short lists).
MIN_STOP_WORD_SHARE, STOP_WORD_SCALE = 0.12, 0.025
# Gopher: duplicate lines above 30% of lines or 20% of characters mean templated pages.
MAX_DUP_LINES, DUP_LINES_SCALE = 0.3, 0.05
MAX_DUP_LINE_CHARS, DUP_LINE_CHARS_SCALE = 0.2, 0.04
# Gopher: the most frequent 2/3/4-gram may cover at most 20/18/16% of word characters.
TOP_NGRAM_MAX = {2: 0.20, 3: 0.18, 4: 0.16}
# Gopher: repeated 5..10-grams may cover at most 15..10% of word characters.
DUP_NGRAM_MAX = {5: 0.15, 6: 0.14, 7: 0.13, 8: 0.12, 9: 0.11, 10: 0.10}
NGRAM_SCALE = 0.02  # so that text without repetition passes at 0.99
# Repetition statistics are computed on the first words only; they are stable long before.
MAX_WORDS_FOR_REPETITION = 10_000
# C4/FineWeb: text whose lines do not end in terminal punctuation is menus and lists; weighted
# by characters so an article's short headings do not count against it (set on the WCXB pages).
MIN_PUNCT_LINE_CHARS, PUNCT_SCALE = 0.25, 0.06
# FineWeb: more than 67% of lines under 30 characters is navigation or a list of links.
SHORT_LINE_CHARS = 30
MAX_SHORT_LINES, SHORT_LINES_SCALE = 0.67, 0.06
# C4 drops lines naming javascript or cookies; we match the notices themselves, not the words,
# so cookie recipes and JavaScript tutorials are not counted, and score their character share.
MAX_BOILERPLATE_CHARS, BOILERPLATE_SCALE = 0.2, 0.05
# C4 drops any page containing "lorem ipsum": placeholder text is never data.
LOREM_IPSUM_FACTOR = 0.02

TERMINAL_PUNCT = (".", "!", "?", '"', "”", "»", "…", "。", "！", "？")
BULLETS = ("-", "*", "•", "·", "‣", "▪", "◦", "–", "—", "→", "➤", "►")
WORD_RE = re.compile(r"\w+")
LETTER_RE = re.compile(r"[^\W\d_]")
# `\w+` words that contain a letter, and whitespace tokens that contain one, in one C-level pass each
LETTER_WORD_RE = re.compile(r"\w*[^\W\d_]\w*")
LETTER_TOKEN_RE = re.compile(r"\S*[^\W\d_]\S*")
# odd 64-bit constant (2^64 / golden ratio) for the polynomial n-gram hash
NGRAM_HASH_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)
LOREM_RE = re.compile(r"lorem ipsum", re.IGNORECASE)
# v2: the text of a line up to its last sentence end (terminal punctuation, closing quotes, then
# whitespace or the end); what follows it is a trailing link, button or menu, not prose.
TERMINATED_RE = re.compile(r".*[.!?…。！？][\"”»’)\]]*(?=\s|$)")
# v2: extractors render layout tables as "| cell | cell |" rows; each cell is a line of its own.
TABLE_CELL_SEP = "|"
TABLE_RULE_RE = re.compile(r"^:?-{3,}:?$")  # the "|---|---|" row under a markdown table header
BOILERPLATE_RE = re.compile(
    r"(?:enable|requires?|activate) javascript|javascript (?:is )?(?:disabled|required)"
    r"|(?:use|uses|accept|allow|store) (?:all |of )?cookies|cookie (?:policy|settings|consent)"
    r"|privacy policy|terms of (?:use|service)|all rights reserved"
    r"|(?:sign up|subscribe) (?:for|to) our"
    r"|datenschutz|impressum|alle rechte vorbehalten|cookies akzeptieren"
    r"|tous droits réservés|mentions légales|politique de confidentialité|accepter les cookies"
    r"|todos los derechos reservados|política de privacidad|aviso legal|aceptar cookies",
    # matched against lowercased lines: an IGNORECASE alternation is five times slower
)


def _above(value: float, threshold: float, scale: float) -> float:
    """Soft pass rate of `value >= threshold`."""
    z = (value - threshold) / scale
    if z < -50:
        return 0.0
    return 1.0 / (1.0 + math.exp(-z))


def _below(value: float, threshold: float, scale: float) -> float:
    """Soft pass rate of `value <= threshold`."""
    return _above(-value, -threshold, scale)


def _word_arrays(words: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Words as integer ids (equal words, equal ids) and their lengths, for vectorised n-grams."""
    index = {w: i for i, w in enumerate(dict.fromkeys(words))}
    ids = np.fromiter(map(index.__getitem__, words), dtype=np.uint64, count=len(words))
    return ids, np.fromiter(map(len, words), dtype=np.int64, count=len(words))


def _next_keys(keys: np.ndarray, ids: np.ndarray, n: int) -> np.ndarray:
    """64-bit keys of the n-grams from those of the (n-1)-grams (a polynomial hash; uint64 wraps)."""
    return keys[:-1] * NGRAM_HASH_MULTIPLIER + ids[n - 1 :]


def _top_ngram_char_share(keys: np.ndarray, lengths: np.ndarray, n: int, total_chars: int) -> float:
    """Characters covered by the most frequent n-gram, as Gopher counts them (ties: first seen)."""
    if not len(keys):
        return 0.0
    _, first, counts = np.unique(keys, return_index=True, return_counts=True)
    best = int(counts.max())
    if best < 2:
        return 0.0
    start = int(first[counts == best].min())
    return min(1.0, best * int(lengths[start : start + n].sum()) / total_chars)


def _dup_ngram_char_share(keys: np.ndarray, lengths: np.ndarray, n: int, total_chars: int) -> float:
    """Characters of words inside any n-gram seen twice or more."""
    _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    starts = np.flatnonzero(counts[inverse] > 1)
    if not len(starts):
        return 0.0
    edges = np.zeros(len(lengths) + 1, dtype=np.int64)
    edges[starts] += 1
    edges[starts + n] -= 1
    return int(lengths[np.cumsum(edges[:-1]) > 0].sum()) / total_chars


def _ngram_rates(words: list[str]) -> tuple[float, float]:
    """Pass rates of Gopher's top-n-gram and duplicate-n-gram families (the weakest n of each).

    One rate per family: the n-gram rules see the same repetition, and multiplying six
    correlated rates would punish it six times.
    """
    ids, lengths = _word_arrays(words)
    total = int(lengths.sum())
    top_shares = dict.fromkeys(TOP_NGRAM_MAX, 0.0)
    dup_shares = dict.fromkeys(DUP_NGRAM_MAX, 0.0)
    keys = ids
    for n in range(2, max(DUP_NGRAM_MAX) + 1):
        if len(words) < n:
            break
        keys = _next_keys(keys, ids, n)
        if n in top_shares:
            top_shares[n] = _top_ngram_char_share(keys, lengths, n, total)
        if n in dup_shares:
            dup_shares[n] = _dup_ngram_char_share(keys, lengths, n, total)
            if not dup_shares[n]:
                break  # a repeated (n+1)-gram contains a repeated n-gram: longer n are all zero
    top = min(_below(share, TOP_NGRAM_MAX[n], NGRAM_SCALE) for n, share in top_shares.items())
    dup = min(_below(share, DUP_NGRAM_MAX[n], NGRAM_SCALE) for n, share in dup_shares.items())
    return top, dup


def _stop_word_share(words: list[str]) -> float:
    """Best stop-word share over the languages we know (en, de, fr, es)."""
    if not words:
        return 0.0
    counts = Counter(words)
    best = max(sum(c for w, c in counts.items() if w in stops) for stops in STOP_WORDS.values())
    return best / len(words)


def _table_cells_as_lines(lines: list[str]) -> list[str]:
    """Split "| a | b |" rows into their cells, so a layout table reads like the page it lays out."""
    out: list[str] = []
    for line in lines:
        if line.startswith(TABLE_CELL_SEP):
            cells = (cell.strip() for cell in line.split(TABLE_CELL_SEP))
            out.extend(cell for cell in cells if cell and not TABLE_RULE_RE.match(cell))
        else:
            out.append(line)
    return out


def _terminated_chars(line: str) -> int:
    """Characters of `line` up to and including its last sentence end (0 when it has none)."""
    if line.endswith(TERMINAL_PUNCT):
        return len(line)
    match = TERMINATED_RE.match(line)
    return match.end() if match else 0


def rule_pass_rates(text: str, version: int = 1) -> dict[str, float]:
    """Soft pass rate in [0, 1] of every rule, for explaining a score.

    Version 2 reads table cells as lines and counts prose up to a line's last sentence end, so
    a paragraph followed by an "Edit this page" link on the same line still counts as prose.
    """
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line]
    if version >= 2:
        lines = _table_cells_as_lines(lines)
    # v2 counts tokens of the cells, not the extractor's "|" separators between them
    tokens = [t for line in lines for t in line.split()] if version >= 2 else text.split()
    words = LETTER_WORD_RE.findall(text.lower())
    if not lines or not words:
        return {"words": 0.0}
    n_lines, n_words = len(lines), len(words)
    line_chars = sum(len(line) for line in lines)
    rates: dict[str, float] = {}

    log_n = math.log(n_words)
    rates["n_words"] = _above(log_n, math.log(MIN_WORDS), WORDS_LOG_SCALE) * _below(
        log_n, math.log(MAX_WORDS), WORDS_LOG_SCALE
    )
    mean_len = sum(map(len, words)) / n_words
    rates["mean_word_len"] = _above(mean_len, MIN_MEAN_WORD_LEN, MEAN_WORD_LEN_SCALE) * _below(
        mean_len, MAX_MEAN_WORD_LEN, MEAN_WORD_LEN_SCALE
    )
    symbols = text.count("#") + text.count("...") + text.count("…")
    rates["symbol_ratio"] = _below(symbols / n_words, MAX_SYMBOL_RATIO, SYMBOL_SCALE)
    bullets = sum(line.startswith(BULLETS) for line in lines)
    rates["bullet_lines"] = _below(bullets / n_lines, MAX_BULLET_LINES, BULLET_SCALE)
    ellipsis = sum(line.endswith(("...", "…")) for line in lines)
    rates["ellipsis_lines"] = _below(ellipsis / n_lines, MAX_ELLIPSIS_LINES, ELLIPSIS_SCALE)
    alpha = len(LETTER_TOKEN_RE.findall(" ".join(tokens))) / max(1, len(tokens))
    rates["alpha_words"] = _above(alpha, MIN_ALPHA_WORDS, ALPHA_SCALE)
    rates["stop_words"] = _above(_stop_word_share(words), MIN_STOP_WORD_SHARE, STOP_WORD_SCALE)

    line_counts = Counter(lines)
    dup_lines = sum(c for c in line_counts.values() if c > 1)
    dup_chars = sum(len(line) * c for line, c in line_counts.items() if c > 1)
    rates["dup_lines"] = min(
        _below(dup_lines / n_lines, MAX_DUP_LINES, DUP_LINES_SCALE),
        _below(dup_chars / line_chars, MAX_DUP_LINE_CHARS, DUP_LINE_CHARS_SCALE),
    )

    rates["top_ngram"], rates["dup_ngram"] = _ngram_rates(words[:MAX_WORDS_FOR_REPETITION])

    if version >= 2:
        punct_chars = sum(_terminated_chars(line) for line in lines)
    else:
        punct_chars = sum(len(line) for line in lines if line.endswith(TERMINAL_PUNCT))
    rates["punct_lines"] = _above(punct_chars / line_chars, MIN_PUNCT_LINE_CHARS, PUNCT_SCALE)
    short = sum(len(line) < SHORT_LINE_CHARS for line in lines)
    rates["short_lines"] = _below(short / n_lines, MAX_SHORT_LINES, SHORT_LINES_SCALE)
    boiler = sum(len(line) for line in lines if BOILERPLATE_RE.search(line.lower()))
    rates["boilerplate"] = _below(boiler / line_chars, MAX_BOILERPLATE_CHARS, BOILERPLATE_SCALE)
    rates["lorem_ipsum"] = LOREM_IPSUM_FACTOR if LOREM_RE.search(text) else 1.0
    return rates


def heuristic_score(text: str, version: int = 1) -> float:
    """Product of the soft pass rates: near 1 for clean prose, near 0 once a rule clearly fails."""
    score = 1.0
    for rate in rule_pass_rates(text, version).values():
        score *= rate
    return min(1.0, max(0.0, score))


class HeuristicScorer(QualityScorer):
    """CPU-only scorer with no model: the baseline every learned classifier must beat.

    Expects cleaner output (one paragraph per line): the line rules, like C4's and FineWeb's,
    read hard-wrapped text as lines that do not end in punctuation.
    """

    name = "heuristic_v1"
    version: ClassVar[int] = 1

    def score_batch(self, texts: Sequence[str]) -> list[float]:
        """Rules are per document, so the batch is a plain loop."""
        return [heuristic_score(text, self.version) for text in texts]

    def explain(self, text: str) -> dict[str, float]:
        """Per-rule pass rates behind `score_one(text)`."""
        return rule_pass_rates(text, self.version)


class HeuristicScorerV2(HeuristicScorer):
    """heuristic_v1's rules, robust to layout tables and to links trailing a paragraph on its line."""

    name = "heuristic_v2"
    version = 2
