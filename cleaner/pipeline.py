"""One page, HTML -> cleaned text -> scores, as a picklable call for a process pool."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field

from cleaner.base import Cleaner
from cleaner.quality.base import QualityScorer
from cleaner.quality.langid import DEFAULT_LANGID, LanguageIdentifier, get_language_identifier
from cleaner.quality.registry import get_scorer
from cleaner.registry import get_cleaner

LOGGER = logging.getLogger(__name__)

# Instances per worker process: a handful of names at most, built once, reused for every page.
_CACHE_SIZE = 16


@dataclass(slots=True)
class PageResult:
    """What the crawler records for one page; `error` is a namespaced reason or None."""

    text: str = ""
    markdown: str = ""
    title: str | None = None
    scores: dict[str, float] = field(default_factory=dict)
    cleaner: str = ""
    n_words: int = 0
    error: str | None = None
    language: str | None = None  # ISO 639 code of the main text, None when too short to tell
    language_score: float = 0.0


@functools.lru_cache(maxsize=_CACHE_SIZE)
def cached_cleaner(name: str) -> Cleaner:
    """Build a cleaner once per worker process."""
    return get_cleaner(name)


@functools.lru_cache(maxsize=_CACHE_SIZE)
def cached_scorer(name: str) -> QualityScorer:
    """Build a scorer once per worker process (models load here, not per page)."""
    return get_scorer(name)


@functools.lru_cache(maxsize=_CACHE_SIZE)
def cached_identifier(spec: str) -> LanguageIdentifier:
    """Build a language identifier once per worker process."""
    return get_language_identifier(spec)


def _reason(stage: str, exc: BaseException) -> str:
    """Counter-friendly reason such as `cleaner/exception/ValueError`."""
    return f"{stage}/exception/{type(exc).__name__}"


def process_page(
    html: str,
    url: str,
    cleaner_name: str,
    scorer_names: tuple[str, ...],
    langid: str | None = DEFAULT_LANGID,
) -> PageResult:
    """Clean, identify the language of and score one page; never raises, failures go to `error`.

    `scorer_names` are scorer specs (`heuristic_v2`, `dclm=/models/dclm.bin`); scores are keyed
    by the spec as given. `langid` is `py3langid`, a lid.176 path, or None to skip language id.
    """
    result = PageResult(cleaner=cleaner_name)
    try:
        cleaner = cached_cleaner(cleaner_name)
    except Exception as exc:
        result.error = f"cleaner/init/{type(exc).__name__}"
        return result
    try:
        page = cleaner.extract(html, url)
    except Exception as exc:  # broken markup must not stop the crawl: count it instead
        LOGGER.debug("cleaner %s failed on %s: %r", cleaner_name, url, exc)
        page = None
        result.error = _reason("cleaner", exc)
    else:
        if page is None:
            result.error = "cleaner/empty"
    if page is not None:
        result.text, result.markdown, result.title = page.text, page.markdown, page.title
        result.n_words = len(page.text.split())
        if langid is not None:
            try:
                language = cached_identifier(langid).identify(page.text)
            except Exception as exc:  # language is a label for analysis, never a reason to drop a page
                LOGGER.debug("language id %s failed on %s: %r", langid, url, exc)
            else:
                if language is not None:
                    result.language, result.language_score = language.code, language.score
    for name in scorer_names:
        try:
            # an empty text scores 0 by contract, which is what a page without content is worth
            result.scores[name] = cached_scorer(name).score_one(result.text)
        except Exception as exc:
            LOGGER.debug("scorer %s failed on %s: %r", name, url, exc)
            result.error = result.error or _reason(f"scorer/{name}", exc)
    return result
