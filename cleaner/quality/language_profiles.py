"""Per-language stop words and rule thresholds for heuristic_v3, derived from word-frequency statistics.

The Gopher/FineWeb rules were set on English. A rule that counts words or characters means something
else in a language whose words are shorter (Chinese: 1.5 characters a word) or whose most common
words cover less running text (Arabic glues articles and prepositions to words). FineWeb-2 therefore
sets each filter's threshold per language from that language's own statistics. We do the same with
the statistics we can ship: wordfreq's frequency lists (Wikipedia, subtitles, news, books, web text and
more, 40+ languages; Thai from PyThaiNLP's Thai National Corpus counts). For a language L:

- stop words: L's STOP_WORDS_PER_LANGUAGE most frequent words (FineWeb-2 likewise takes a language's
  most frequent words as its stop words); their summed frequency is the share of running text they
  cover, `coverage(L)` (en 0.47, ja 0.53, zh 0.34, ru 0.35, ar 0.28);
- minimum stop-word share: STOP_SHARE_OF_COVERAGE x coverage(L) (for en 0.14, about the 0.12 that
  heuristic_v2 used with its hand list): a page must reach about 30% of the stop-word density of
  typical text in its language;
- mean word length range: English's Gopher range [3, 10] times mean_len(L) / mean_len(en), where
  mean_len is the frequency-weighted length of L's MEAN_LEN_WORDS most frequent words (en 4.05, zh 1.53,
  ru 4.10, ar 3.83): the same quantile of the word-length distribution as in English;
- short line: FineWeb's 30 characters scaled by the characters a word takes (its mean length, plus
  one for the space in languages that write spaces): about 9 characters in Chinese or Japanese;
- lines ending in sentence punctuation: not asked of scripts with no sentence-final mark (Thai, Lao,
  Khmer end sentences with a space).

Segmented languages (zh, ja, th; see segment.py) are counted in the segmenter's words, which for
zh is the very segmenter wordfreq counted with (jieba); ja uses unidic-lite where wordfreq used ipadic,
so its statistics are close, not identical. Languages without a frequency list, and Korean (wordfreq
counts morphemes, Korean text is written in space-separated word units), keep English's length rules
and skip the stop-word rule (a neutral 1.0) rather than fail every page.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from cleaner.quality.heuristic_stats import text_stats
from cleaner.quality.segment import SEGMENTED_LANGUAGES

STOP_WORDS_PER_LANGUAGE = 100
STOP_SHARE_OF_COVERAGE = 0.3
STOP_SHARE_SCALE_FRACTION = 0.2  # the logistic's scale, as a fraction of the threshold (v2: 0.025/0.12)
MEAN_LEN_WORDS = 5_000
EN_MEAN_WORD_LEN = (3.0, 10.0)
EN_MEAN_WORD_LEN_SCALE = 0.3
EN_SHORT_LINE_CHARS = 30
NO_SENTENCE_MARK = frozenset({"th", "lo", "km"})
# wordfreq's tokenisation does not match how the text is written (morphemes vs space-separated units)
NOT_COMPARABLE = frozenset({"ko"})
# these aliases are one written language for the rules
ALIASES = {"zh-hant": "zh", "yue": "zh", "wuu": "zh", "nb": "no"}


@dataclass(frozen=True, slots=True)
class LanguageProfile:
    """A language's stop words (as text_stats word ids) and its thresholds for the rules."""

    language: str
    stop_ids: np.ndarray | None  # sorted uint64; None: no stop-word rule for this language
    min_stop_share: float
    mean_word_len: tuple[float, float]
    mean_word_len_scale: float
    short_line_chars: int
    punct_rule: bool

    def stop_share(self, word_ids: np.ndarray) -> float | None:
        """Share of words that are stop words; None when the language has no list."""
        if self.stop_ids is None or not len(word_ids):
            return None
        at = np.searchsorted(self.stop_ids, word_ids).clip(0, len(self.stop_ids) - 1)
        return float(np.count_nonzero(self.stop_ids.take(at) == word_ids)) / len(word_ids)


def _frequencies(language: str) -> list[tuple[str, float]]:
    """(word, frequency) most frequent first; only words text_stats reads as one word; [] if unknown."""
    if language == "th":
        from pythainlp.corpus import tnc

        counts = tnc.word_freqs()
        total = float(sum(n for _, n in counts))
        pairs = [(w, n / total) for w, n in counts]
    else:
        import wordfreq

        if language not in wordfreq.available_languages():
            return []
        pairs = list(wordfreq.get_frequency_dict(language).items())
    pairs.sort(key=lambda p: -p[1])
    out: list[tuple[str, float]] = []
    for word, freq in pairs:
        lower = word.lower()
        if len(text_stats(lower, marks=True).word_ids) == 1 and not any(c.isdigit() for c in lower):
            out.append((lower, freq))
            if len(out) == MEAN_LEN_WORDS:
                break
    return out


def _stats(language: str) -> tuple[np.ndarray, float, float] | None:
    """Stop-word ids, their coverage of running text, and the frequency-weighted mean word length."""
    freqs = _frequencies(language)
    if len(freqs) < STOP_WORDS_PER_LANGUAGE:
        return None
    top = freqs[:STOP_WORDS_PER_LANGUAGE]
    ids = text_stats(" ".join(w for w, _ in top), marks=True).word_ids
    coverage = sum(f for _, f in top)
    weight = sum(f for _, f in freqs)
    mean_len = sum(f * len(w) for w, f in freqs) / weight
    return np.unique(ids), coverage, mean_len


@functools.cache
def profile(language: str | None) -> LanguageProfile:
    """The thresholds for `language` (an ISO 639-1 code; None: English's)."""
    code = ALIASES.get(language or "en", language or "en")
    english = _stats("en")
    assert english is not None  # wordfreq always has English
    en_len = english[2]
    stats = None if code in NOT_COMPARABLE else _stats(code)
    if stats is None:
        return LanguageProfile(
            code, None, 0.0, EN_MEAN_WORD_LEN, EN_MEAN_WORD_LEN_SCALE, EN_SHORT_LINE_CHARS, True
        )
    ids, coverage, mean_len = stats
    ratio = mean_len / en_len
    spaced = code not in SEGMENTED_LANGUAGES
    line_ratio = (mean_len + spaced) / (en_len + 1)
    return LanguageProfile(
        language=code,
        stop_ids=ids,
        min_stop_share=STOP_SHARE_OF_COVERAGE * coverage,
        mean_word_len=(EN_MEAN_WORD_LEN[0] * ratio, EN_MEAN_WORD_LEN[1] * ratio),
        mean_word_len_scale=EN_MEAN_WORD_LEN_SCALE * ratio,
        short_line_chars=max(1, round(EN_SHORT_LINE_CHARS * line_ratio)),
        punct_rule=code not in NO_SENTENCE_MARK,
    )


@dataclass(frozen=True, slots=True)
class LanguageThresholds:
    """A page's high-quality threshold, settable per language (`[cleaning] language_thresholds`).

    A language whose scores run lower or higher than English's can be held to its own bar, so its
    hosts compete on their standing among hosts of that language rather than on a scale set by
    English. `on_default_scale` maps a score onto the default threshold's scale (piecewise linear,
    the language's threshold onto the default one), so that anything comparing scores with the
    default threshold, such as the scheduler, sees a page as high quality exactly when it clears
    its own language's bar.
    """

    default: float
    by_language: dict[str, float]

    def of(self, language: str | None) -> float:
        return self.by_language.get(language, self.default) if language else self.default

    def on_default_scale(self, score: float | None, language: str | None) -> float | None:
        own = self.of(language)
        if score is None or own == self.default:
            return score
        if score <= own:
            return self.default * score / own
        return self.default + (1.0 - self.default) * (score - own) / (1.0 - own)
