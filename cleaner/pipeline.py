"""Pages, HTML -> cleaned text -> scores, as picklable calls for a process pool (one page or a batch)."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from cleaner.base import Cleaner, Extracted, failed, init_failed
from cleaner.quality.langid import DEFAULT_LANGID, LanguageIdentifier, get_language_identifier
from cleaner.quality.scorer_base import QualityScorer
from cleaner.quality.scorer_specs import get_scorer
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
    truncated: bool = False  # the HTML was cut to the per-page work cap before cleaning
    fallback: str | None = None  # "<model cleaner>/<reason>": its fallback cleaned the page (see `cleaner`)
    operation: str | None = None  # rescraper_v1: keep, edit, rewrite or extract_only
    generated: bool = False  # the text was written by a model (a rewrite), not copied from the page
    seconds: float = 0.0  # worker time spent on this page (a batch's time is shared evenly)


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


def _finish(
    result: PageResult, extracted: Extracted, url: str, scorer_names: tuple[str, ...], langid: str | None
) -> None:
    """Language and scores for one cleaned page; failures go to `error`, never raise."""
    page = extracted.page
    result.error, result.truncated, result.fallback = extracted.error, extracted.truncated, extracted.fallback
    if page is not None:
        result.text, result.markdown, result.title = page.text, page.markdown, page.title
        result.cleaner = page.cleaner  # the fallback's name where a model cleaner fell back
        result.operation, result.generated = page.operation, page.generated
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
            result.error = result.error or failed(f"scorer/{name}", exc)


def process_pages(
    pages: Sequence[tuple[str, str]],
    cleaner_name: str,
    scorer_names: tuple[str, ...],
    langid: str | None = DEFAULT_LANGID,
) -> list[PageResult]:
    """Clean, identify and score a batch of (html, url) in one call; never raises, one result per page.

    One call per batch amortises the pool's pickling and lets labellers batch their model calls.
    `scorer_names` are scorer specs (`heuristic_v2`, `dclm=/models/dclm.bin`); scores are keyed by the
    spec as given. `langid` is `py3langid`, a lid.176 path, or None to skip language id.
    """
    started = time.perf_counter()
    try:
        cleaner = cached_cleaner(cleaner_name)
    except Exception as exc:
        return [PageResult(cleaner=cleaner_name, error=init_failed(exc)) for _ in pages]
    try:
        extracted = cleaner.clean_batch([html for html, _ in pages], [url for _, url in pages])
    except Exception as exc:  # a bug above must cost this batch its text, not the crawl its batch
        LOGGER.exception("cleaning a batch of %d pages failed", len(pages))
        extracted = [Extracted(error=failed("cleaner", exc)) for _ in pages]
    urls = [url for _, url in pages]
    return finish_extracted(extracted, urls, cleaner_name, scorer_names, langid, started)


def finish_extracted(
    extracted: Sequence[Extracted],
    urls: Sequence[str],
    cleaner_name: str,
    scorer_names: tuple[str, ...],
    langid: str | None,
    started: float,
    seconds: float = 0.0,
) -> list[PageResult]:
    """Language and scores for each cleaned page; the batch's time (`seconds` spent elsewhere, plus
    this process's since `started`) shared evenly among its pages."""
    results = [PageResult(cleaner=cleaner_name) for _ in extracted]
    for result, url, one in zip(results, urls, extracted, strict=True):
        _finish(result, one, url, scorer_names, langid)
    share = (seconds + time.perf_counter() - started) / max(len(results), 1)
    for result in results:
        result.seconds = share
    return results


def process_page(
    html: str,
    url: str,
    cleaner_name: str,
    scorer_names: tuple[str, ...],
    langid: str | None = DEFAULT_LANGID,
) -> PageResult:
    """One page through `process_pages`."""
    return process_pages([(html, url)], cleaner_name, scorer_names, langid)[0]


WARM_UP_PAGE = (
    "<html><body><article><h1>Warm-up</h1><p>"
    + "A short paragraph of plain text. " * 12
    + "</p></article></body></html>"
)


def warm_up(cleaner_name: str, scorer_names: tuple[str, ...], langid: str | None = DEFAULT_LANGID) -> None:
    """Import, load and run the cleaner, scorers and language id once, so a worker's first real batch
    is not held up by start-up."""
    process_pages([(WARM_UP_PAGE, "http://warm-up.invalid/")], cleaner_name, scorer_names, langid)
