"""Gopher, C4 and FineWeb document-quality rules folded into one smooth score in [0, 1]."""

from __future__ import annotations

import functools
import math
import operator
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import compress, repeat
from typing import ClassVar

import numpy as np

from cleaner.quality.heuristic_stats import ngram_char_shares, stop_word_shares, text_stats
from cleaner.quality.langid import PackagedIdentifier
from cleaner.quality.language_profiles import STOP_SHARE_SCALE_FRACTION, LanguageProfile, profile
from cleaner.quality.scorer_base import QualityScorer
from cleaner.quality.segment import SEGMENTED_LANGUAGES, segment

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
# score_batch computes the word-set rules for this many texts at once (numpy's per-call cost is paid
# once per batch; larger batches gain little and hold more arrays)
BATCH_TEXTS = 16
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
ELLIPSES = ("...", "…")
# v3: the sentence marks of more scripts (Arabic ؟, Devanagari danda, Urdu, Armenian, Burmese, Ethiopic)
MORE_SENTENCE_MARKS = "؟।॥۔։။።｡"
TERMINAL_PUNCT_V3 = (*TERMINAL_PUNCT, *MORE_SENTENCE_MARKS)
LOREM_RE = re.compile(r"lorem ipsum", re.IGNORECASE)
# v2: the text of a line up to its last sentence end (terminal punctuation, closing quotes, then
# whitespace or the end); what follows it is a trailing link, button or menu, not prose.
# Run over many lines joined by newlines at once (hence ^ and $ per line, which `.` never crosses).
TERMINATED_RE = re.compile(r"^.*[.!?…。！？][\"”»’)\]]*(?=\s|$)", re.MULTILINE)
TERMINATED_RE_V3 = re.compile(rf"^.*[.!?…。！？{MORE_SENTENCE_MARKS}][\"”»’)\]」』]*(?=\s|$)", re.MULTILINE)
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
# Every match of BOILERPLATE_RE holds one of these 5-character windows: `text_stats` finds them in
# one vectorised pass (the alternation costs ~50 ns a character in `re`), and only the lines with a
# window are searched.
BOILERPLATE_WINDOWS = (
    "javas",
    "cooki",
    "rivac",  # privacy, privacidad
    "rms o",  # terms of
    "eserv",  # reserved, reservados
    "éserv",
    "gn up",
    "bscri",
    "nschu",
    "essum",
    "rbeha",
    "légal",
    "tiali",  # confidentialité
    "aviso",
)
# every code point that LOREM_RE matches case-insensitively lowercases to these letters (checked over
# all of Unicode), so the regex only runs on the pages whose lowercased text holds them
LOREM_WINDOW = "lorem"
WINDOWS = (*BOILERPLATE_WINDOWS, LOREM_WINDOW)


def _above(value: float, threshold: float, scale: float) -> float:
    """Soft pass rate of `value >= threshold`."""
    z = (value - threshold) / scale
    if z < -50:
        return 0.0
    return 1.0 / (1.0 + math.exp(-z))


def _below(value: float, threshold: float, scale: float) -> float:
    """Soft pass rate of `value <= threshold`."""
    return _above(-value, -threshold, scale)


def _ngram_rates(top_shares: dict[int, float], dup_shares: dict[int, float]) -> tuple[float, float]:
    """Pass rates of Gopher's top-n-gram and duplicate-n-gram families (the weakest n of each).

    One rate per family: the n-gram rules see the same repetition, and multiplying six
    correlated rates would punish it six times.
    """
    top = min(_below(share, TOP_NGRAM_MAX[n], NGRAM_SCALE) for n, share in top_shares.items())
    dup = min(_below(share, DUP_NGRAM_MAX[n], NGRAM_SCALE) for n, share in dup_shares.items())
    return top, dup


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


def _punct_chars(lines: list[str], version: int) -> int:
    """Characters of lines ending in terminal punctuation (v2: up to a line's last sentence end)."""
    ended = list(map(str.endswith, lines, repeat(TERMINAL_PUNCT_V3 if version >= 3 else TERMINAL_PUNCT)))
    chars = sum(map(len, compress(lines, ended)))
    if version >= 2:
        # one match per line at most: `.*` is greedy, so it ends at the line's last sentence end
        open_lines = "\n".join(compress(lines, map(operator.not_, ended)))
        terminated = TERMINATED_RE_V3 if version >= 3 else TERMINATED_RE
        chars += sum(map(len, terminated.findall(open_lines)))
    return chars


def _boilerplate_chars(lines: list[str], lower: str, hits: list[int]) -> int:
    """Characters of the lines with a cookie, JavaScript or legal notice.

    `lower`: the lines joined by newlines, lowercased; `hits`: where a BOILERPLATE_WINDOWS window starts.
    """
    chars, searched = 0, set()
    for at in hits:
        start = lower.rfind("\n", 0, at) + 1
        if start in searched:
            continue
        searched.add(start)
        end = lower.find("\n", at)
        if BOILERPLATE_RE.search(lower, start, end if end >= 0 else len(lower)):
            chars += len(lines[lower.count("\n", 0, start)])
    return chars


@dataclass(slots=True)
class _Page:
    """A text's rates so far (word-set rules filled in per batch) and its words."""

    rates: dict[str, float]
    word_ids: np.ndarray
    word_lengths: np.ndarray


# heuristic_v1/v2: English's thresholds for every language (stop words: the best of en/de/fr/es)
ENGLISH_RULES = LanguageProfile(
    "en", None, MIN_STOP_WORD_SHARE, (MIN_MEAN_WORD_LEN, MAX_MEAN_WORD_LEN), MEAN_WORD_LEN_SCALE,
    SHORT_LINE_CHARS, True,
)  # fmt: skip


def _page_rates(text: str, version: int, rules: LanguageProfile = ENGLISH_RULES) -> _Page | None:
    """Every rate but the stop-word and n-gram ones (placeholders, for the rule order); None: no words.

    v3: `rules` are the page language's thresholds, and words are segmented where it writes no spaces.
    """
    lines = list(filter(None, map(str.strip, text.splitlines())))
    if version >= 2 and TABLE_CELL_SEP in text:
        lines = _table_cells_as_lines(lines)
    # The lines joined hold the same words and whitespace-separated tokens as the text (v2: as its
    # table cells, without the extractor's "|" separators); line breaks and strip() drop only spaces.
    lower = "\n".join(lines).lower()
    stats = words = text_stats(lower, WINDOWS, marks=version >= 3)
    if version >= 3 and rules.language in SEGMENTED_LANGUAGES:
        words = text_stats(segment(lower, rules.language), marks=True)
    word_ids, word_lengths = words.word_ids, words.word_lengths
    if not lines or not len(word_ids):
        return None
    n_lines, n_words = len(lines), len(word_ids)
    line_lengths = list(map(len, lines))
    line_chars = sum(line_lengths)
    rates: dict[str, float] = {}

    log_n = math.log(n_words)
    rates["n_words"] = _above(log_n, math.log(MIN_WORDS), WORDS_LOG_SCALE) * _below(
        log_n, math.log(MAX_WORDS), WORDS_LOG_SCALE
    )
    mean_len = int(word_lengths.sum()) / n_words
    (min_len, max_len), len_scale = rules.mean_word_len, rules.mean_word_len_scale
    rates["mean_word_len"] = _above(mean_len, min_len, len_scale) * _below(mean_len, max_len, len_scale)
    symbols = text.count("#") + text.count("...") + text.count("…")
    rates["symbol_ratio"] = _below(symbols / n_words, MAX_SYMBOL_RATIO, SYMBOL_SCALE)
    bullets = sum(map(str.startswith, lines, repeat(BULLETS)))
    rates["bullet_lines"] = _below(bullets / n_lines, MAX_BULLET_LINES, BULLET_SCALE)
    ellipsis = sum(map(str.endswith, lines, repeat(ELLIPSES)))
    rates["ellipsis_lines"] = _below(ellipsis / n_lines, MAX_ELLIPSIS_LINES, ELLIPSIS_SCALE)
    rates["alpha_words"] = _above(words.letter_tokens / max(1, words.tokens), MIN_ALPHA_WORDS, ALPHA_SCALE)
    rates["stop_words"] = math.nan  # filled in per batch

    line_counts = Counter(lines)
    repeated_lines = list(compress(lines, map((1).__lt__, map(line_counts.__getitem__, lines))))
    rates["dup_lines"] = min(
        _below(len(repeated_lines) / n_lines, MAX_DUP_LINES, DUP_LINES_SCALE),
        _below(sum(map(len, repeated_lines)) / line_chars, MAX_DUP_LINE_CHARS, DUP_LINE_CHARS_SCALE),
    )
    rates["top_ngram"] = rates["dup_ngram"] = math.nan  # filled in per batch

    rates["punct_lines"] = (
        _above(_punct_chars(lines, version) / line_chars, MIN_PUNCT_LINE_CHARS, PUNCT_SCALE)
        if rules.punct_rule
        else 1.0
    )
    short = sum(map(rules.short_line_chars.__gt__, line_lengths))
    rates["short_lines"] = _below(short / n_lines, MAX_SHORT_LINES, SHORT_LINES_SCALE)
    lorem = stats.window_ids == len(BOILERPLATE_WINDOWS)
    boiler = _boilerplate_chars(lines, lower, stats.window_starts[~lorem].tolist())
    rates["boilerplate"] = _below(boiler / line_chars, MAX_BOILERPLATE_CHARS, BOILERPLATE_SCALE)
    rates["lorem_ipsum"] = LOREM_IPSUM_FACTOR if lorem.any() and LOREM_RE.search(text) else 1.0
    return _Page(rates, word_ids, word_lengths)


def rule_pass_rates_batch(texts: Sequence[str], version: int = 1) -> list[dict[str, float]]:
    """`rule_pass_rates` of many texts; the word-set rules run over the whole batch at once.

    v3 holds each text to the rules of its language (English's when it is too short to tell).
    """
    out: list[dict[str, float]] = []
    pages: list[_Page] = []
    # v3: every text's language in one call, which steps py3langid's DFA for all of them at once
    languages = _identifier().identify_batch(texts) if version >= 3 else []
    for start in range(0, len(texts), BATCH_TEXTS):
        batch = texts[start : start + BATCH_TEXTS]
        rules = [ENGLISH_RULES] * len(batch)
        if version >= 3:
            chunk_languages = languages[start : start + BATCH_TEXTS]
            rules = [profile(language.code if language else None) for language in chunk_languages]
        chunk = [_page_rates(text, version, r) for text, r in zip(batch, rules, strict=True)]
        kept = [(page, r) for page, r in zip(chunk, rules, strict=True) if page is not None]
        pages = [page for page, _ in kept]
        if version >= 3:
            stop_rates = [_stop_rate(r.stop_share(page.word_ids), r) for page, r in kept]
        else:
            best = stop_word_shares([page.word_ids for page in pages])
            stop_rates = [_above(share, MIN_STOP_WORD_SHARE, STOP_WORD_SCALE) for share in best]
        ngram_shares = ngram_char_shares(
            [page.word_ids[:MAX_WORDS_FOR_REPETITION] for page in pages],
            [page.word_lengths[:MAX_WORDS_FOR_REPETITION] for page in pages],
            tuple(TOP_NGRAM_MAX),
            tuple(DUP_NGRAM_MAX),
        )
        for page, stop_rate, shares in zip(pages, stop_rates, ngram_shares, strict=True):
            page.rates["stop_words"] = stop_rate
            page.rates["top_ngram"], page.rates["dup_ngram"] = _ngram_rates(*shares)
        out += [{"words": 0.0} if page is None else page.rates for page in chunk]
    return out


def _stop_rate(share: float | None, rules: LanguageProfile) -> float:
    """v3's stop-word rate: neutral (1.0) in a language without a stop-word list."""
    if share is None:
        return 1.0
    return _above(share, rules.min_stop_share, STOP_SHARE_SCALE_FRACTION * rules.min_stop_share)


@functools.cache
def _identifier() -> PackagedIdentifier:
    return PackagedIdentifier()


def rule_pass_rates(text: str, version: int = 1) -> dict[str, float]:
    """Soft pass rate in [0, 1] of every rule, for explaining a score.

    Version 2 reads table cells as lines and counts prose up to a line's last sentence end, so
    a paragraph followed by an "Edit this page" link on the same line still counts as prose.
    """
    return rule_pass_rates_batch([text], version)[0]


def _product(rates: dict[str, float]) -> float:
    """Product of the soft pass rates: near 1 for clean prose, near 0 once a rule clearly fails."""
    score = 1.0
    for rate in rates.values():
        score *= rate
    return min(1.0, max(0.0, score))


def heuristic_score(text: str, version: int = 1) -> float:
    """One text's score; for many texts, `score_batch` is 1.5x faster (the word-set rules batch)."""
    return _product(rule_pass_rates(text, version))


class HeuristicScorer(QualityScorer):
    """CPU-only scorer with no model: the baseline every learned classifier must beat.

    Expects cleaner output (one paragraph per line): the line rules, like C4's and FineWeb's,
    read hard-wrapped text as lines that do not end in punctuation.
    """

    name = "heuristic_v1"
    version: ClassVar[int] = 1

    def score_batch(self, texts: Sequence[str]) -> list[float]:
        """The word-set rules run over the whole batch at once: batches are much faster than loops."""
        return list(map(_product, rule_pass_rates_batch(texts, self.version)))

    def explain(self, text: str) -> dict[str, float]:
        """Per-rule pass rates behind `score_one(text)`."""
        return rule_pass_rates(text, self.version)


class HeuristicScorerV2(HeuristicScorer):
    """heuristic_v1's rules, robust to layout tables and to links trailing a paragraph on its line."""

    name = "heuristic_v2"
    version = 2


class HeuristicScorerV3(HeuristicScorer):
    """heuristic_v2's rules in every language: each page is held to its own language's stop words and
    thresholds (language_profiles.py), with words segmented in zh, ja and th (segment.py)."""

    name = "heuristic_v3"
    version = 3
