"""Pages, HTML -> cleaned text -> scores, as picklable calls for a process pool (one page or a batch)."""

from __future__ import annotations

import functools
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from cleaner.base import CleanedPage, Cleaner
from cleaner.labeller import LabellerCleaner
from cleaner.quality.base import QualityScorer
from cleaner.quality.langid import DEFAULT_LANGID, LanguageIdentifier, get_language_identifier
from cleaner.quality.registry import get_scorer
from cleaner.registry import NO_CLEANER, get_cleaner
from cleaner.simplify import SimplePage, simplify

LOGGER = logging.getLogger(__name__)

# Instances per worker process: a handful of names at most, built once, reused for every page.
_CACHE_SIZE = 16
# Work per page is capped at this many characters of HTML, the crawl's own raw-byte cap (4 MiB); the
# cleaners cut further (the simplifier at 3M characters, trafilatura at 5 MB), so no page costs a
# worker more than a few seconds.
MAX_CLEAN_CHARS = 4 * 2**20
# Binary bodies served as HTML show NULs or C0 control characters in their head; HTML has almost none.
BINARY_SNIFF_CHARS = 4096
BINARY_CONTROL_SHARE = 0.10
CONTROL_CHARS = re.compile("[\x00-\x08\x0e-\x1f]")
# Main text with more U+FFFD than this was decoded with the wrong charset: not worth keeping.
MAX_REPLACEMENT_SHARE = 0.01
EMPTY = "cleaner/empty"  # errors are `cleaner/empty/<reason>`: empty, binary, no_body, no_text, ...


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
    seconds: float = 0.0  # worker time spent on this page (a batch's time is shared evenly)


@dataclass(slots=True)
class Extracted:
    """One page's cleaner output, or the reason it has none."""

    page: CleanedPage | None = None
    error: str | None = None
    truncated: bool = False


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


def empty(reason: str) -> str:
    """`cleaner/empty/<reason>`: the page has no main text, and why."""
    return f"{EMPTY}/{reason}"


def looks_binary(html: str) -> bool:
    """A body that is not text (an image, an archive, random bytes) decoded as if it were HTML."""
    head = html[:BINARY_SNIFF_CHARS]
    if not head:
        return False
    return "\x00" in head or len(CONTROL_CHARS.findall(head)) > BINARY_CONTROL_SHARE * len(head)


def prepare(html: str) -> tuple[str, Extracted]:
    """Cap, sanitise and sniff one page before any parser sees it."""
    out = Extracted()
    if not html or html.isspace():
        out.error = empty("empty")
        return "", out
    if len(html) > MAX_CLEAN_CHARS:
        html, out.truncated = html[:MAX_CLEAN_CHARS], True
    if looks_binary(html):
        out.error = empty("binary")
        return "", out
    if not html.isascii():
        try:
            html.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates from a lenient decoder: parsers refuse them
            html = html.encode("utf-8", errors="replace").decode("utf-8")
    return html, out


def _check_text(out: Extracted) -> None:
    """Drop text decoded with the wrong charset (mostly U+FFFD)."""
    page = out.page
    if page is not None and page.text.count("\ufffd") > MAX_REPLACEMENT_SHARE * len(page.text):
        out.page, out.error = None, empty("bad_encoding")


def _label(cleaner: LabellerCleaner, pages: list[SimplePage]) -> list[np.ndarray | Exception]:
    """One labeller call for the batch; if it fails, page by page so only the culprit is lost."""
    if not pages:
        return []
    try:
        labeller = cleaner.labeller()
    except Exception as exc:  # a missing model file fails every page the same way
        return [exc] * len(pages)
    try:
        probs = labeller.label(pages)
        if len(probs) == len(pages):
            return list(probs)
    except Exception as exc:
        LOGGER.debug("labeller %s failed on a batch of %d: %r", cleaner.name, len(pages), exc)
    out: list[np.ndarray | Exception] = []
    for page in pages:
        try:
            out.append(labeller.label([page])[0])
        except Exception as exc:
            out.append(exc)
    return out


def _extract_labelled(cleaner: LabellerCleaner, todo: list[tuple[int, str]], out: list[Extracted]) -> None:
    """simplify -> one labeller call -> render, keeping the simplifier's reason for empty pages."""
    simple: list[tuple[int, SimplePage]] = []
    for i, html in todo:
        try:
            page = simplify(html)
        except Exception as exc:
            out[i].error = _reason("cleaner", exc)
            continue
        out[i].truncated |= page.truncated
        if page.blocks:
            simple.append((i, page))
        else:
            out[i].error = empty(page.reason or "no_text")
    probs = _label(cleaner, [page for _, page in simple])
    for (i, page), p in zip(simple, probs, strict=True):
        if isinstance(p, Exception):
            out[i].error = _reason("cleaner", p)
            continue
        try:
            out[i].page = cleaner.render(page, p)
        except Exception as exc:
            out[i].error = _reason("cleaner", exc)
            continue
        if out[i].page is None:
            out[i].error = empty("no_main")


def _why_empty(html: str) -> str:
    """A heuristic cleaner found nothing: the simplifier tells whether the page had any text."""
    try:
        reason = simplify(html).reason
    except Exception:
        reason = None
    return empty(reason or "no_main")


def extract_batch(cleaner: Cleaner, htmls: Sequence[str], urls: Sequence[str]) -> list[Extracted]:
    """Clean a batch; every page gets its text or a reason, whatever the others do."""
    out: list[Extracted] = []
    todo: list[tuple[int, str]] = []
    for i, raw in enumerate(htmls):
        html, extracted = prepare(raw)
        out.append(extracted)
        if extracted.error is None:
            todo.append((i, html))
    if cleaner.name == NO_CLEANER:
        for i, _ in todo:
            out[i].error = empty("disabled")
    elif isinstance(cleaner, LabellerCleaner):
        _extract_labelled(cleaner, todo, out)
    else:
        for i, html in todo:
            try:
                out[i].page = cleaner.extract(html, urls[i])
            except Exception as exc:  # broken markup must not stop the crawl: count it instead
                LOGGER.debug("cleaner %s failed on %s: %r", cleaner.name, urls[i], exc)
                out[i].error = _reason("cleaner", exc)
                continue
            if out[i].page is None:
                out[i].error = _why_empty(html)
    for extracted in out:
        _check_text(extracted)
    return out


def _finish(
    result: PageResult, extracted: Extracted, url: str, scorer_names: tuple[str, ...], langid: str | None
) -> None:
    """Language and scores for one cleaned page; failures go to `error`, never raise."""
    page = extracted.page
    result.error, result.truncated = extracted.error, extracted.truncated
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
    results = [PageResult(cleaner=cleaner_name) for _ in pages]
    try:
        cleaner = cached_cleaner(cleaner_name)
    except Exception as exc:
        for result in results:
            result.error = f"cleaner/init/{type(exc).__name__}"
        return results
    try:
        extracted = extract_batch(cleaner, [html for html, _ in pages], [url for _, url in pages])
    except Exception as exc:  # a bug above must cost this batch its text, not the crawl its batch
        LOGGER.exception("cleaning a batch of %d pages failed", len(pages))
        extracted = [Extracted(error=_reason("cleaner", exc)) for _ in pages]
    for result, (_, url), one in zip(results, pages, extracted, strict=True):
        _finish(result, one, url, scorer_names, langid)
    share = (time.perf_counter() - started) / max(len(pages), 1)
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
