"""Word segmentation for languages written without spaces between words (zh, ja, th).

The heuristic rules count words; `\\w+` runs make a Chinese paragraph one "word". Each segmenter
is a maintained package with its dictionary inside the wheel (nothing to download):
  zh  jieba (the segmenter wordfreq's Chinese frequencies were counted with)
  ja  fugashi, MeCab with unidic-lite
  th  PyThaiNLP's newmm (dictionary maximal matching over Thai character clusters)
Segmented text keeps its lines; words are separated by one space and punctuation stays glued
to the word before it, so a sentence mark does not become a token of its own.

`segment_scripts` picks the segmenter by the script of each run of text instead of by the page's
language: deduplication must cut a copied paragraph the same way on any page that carries it, and a
page's detected language follows whichever text is longest, the copy or the chrome around it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

import regex

SEGMENTED_LANGUAGES = frozenset({"zh", "ja", "th"})
# codes a language identifier gives Chinese text too (py3langid calls some Mandarin "wuu")
CHINESE = frozenset({"zh", "zh-hans", "zh-hant", "yue", "wuu"})
# A run of characters of a script written without spaces (Han, kana and their marks, or Thai); a run
# with kana is Japanese, which writes kanji too, one of Han alone is Chinese.
UNSPACED_RUN = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\u30fc\u3005]+|\p{Thai}+")
KANA = regex.compile(r"[\p{Hiragana}\p{Katakana}]")


@functools.cache
def _segmenter(language: str) -> Callable[[str], list[str]]:
    if language == "zh":
        import jieba

        jieba.setLogLevel(logging.WARNING)
        return jieba.lcut
    if language == "ja":
        import fugashi

        tagger = fugashi.Tagger()  # unidic-lite, found through its package
        return lambda text: [word.surface for word in tagger(text)]
    if language == "th":
        from pythainlp.tokenize import word_tokenize

        return lambda text: word_tokenize(text, engine="newmm", keep_whitespace=False)
    raise ValueError(f"no segmenter for {language!r}; segmented languages: {sorted(SEGMENTED_LANGUAGES)}")


def _join(tokens: list[str]) -> str:
    """Words with one space between them; a token with no word character sticks to the one before."""
    out: list[str] = []
    for token in tokens:
        token = token.strip()
        if not token:
            continue
        if out and not any(c.isalnum() for c in token):
            out[-1] += token
        else:
            out.append(token)
    return " ".join(out)


def segment(text: str, language: str | None) -> str:
    """`text` with spaces between its words where `language` writes none; other languages unchanged."""
    if language in CHINESE:
        language = "zh"
    if language not in SEGMENTED_LANGUAGES:
        return text
    split = _segmenter(language)
    return "\n".join(_join(split(line)) for line in text.split("\n"))


def run_language(run: str) -> str:
    """The segmenter for one UNSPACED_RUN match."""
    if KANA.search(run):
        return "ja"
    return "th" if regex.match(r"\p{Thai}", run) else "zh"


def segment_scripts(text: str) -> str:
    """`text` with spaces between the words of every run of Han, kana or Thai, whatever its language."""
    return UNSPACED_RUN.sub(lambda run: f" {_join(_segmenter(run_language(run[0]))(run[0]))} ", text)
