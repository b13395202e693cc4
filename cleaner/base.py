"""The cleaner interface: HTML in, main content (text + markdown) out."""

from __future__ import annotations

import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar, Generic, Protocol, TypeVar

from w3lib.encoding import html_to_unicode, read_bom

from cleaner.simplify import simplify

LOGGER = logging.getLogger(__name__)

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

# Charset sniffing is slow and its verdict settles within the first kilobytes.
SNIFF_BYTES = 65_536
# NUL bytes in the head of a page mean UTF-16/32, which a UTF-8 shortcut would misread.
UTF8_PROBE_BYTES = 4_096


@dataclass(slots=True)
class CleanedPage:
    """Main content of one page, tagged with the versioned cleaner that produced it."""

    text: str
    markdown: str
    title: str | None
    cleaner: str
    operation: str | None = None  # rescraper_v1: keep, edit, rewrite or extract_only
    generated: bool = False  # the text was written by a model (rescraper_v1's rewrite), not copied


@dataclass(slots=True)
class Extracted:
    """One page's cleaner output, or the reason it has none."""

    page: CleanedPage | None = None
    error: str | None = None
    truncated: bool = False
    # "<model cleaner>/<reason>" when the model could not label the page and its fallback cleaned it
    # (the page's `cleaner` then names the fallback): counted as clean/fallback/<this>
    fallback: str | None = None


def failed(stage: str, exc: BaseException) -> str:
    """Counter-friendly reason such as `cleaner/exception/ValueError`."""
    return f"{stage}/exception/{type(exc).__name__}"


def init_failed(exc: BaseException) -> str:
    """`cleaner/init/<type>`: the cleaner (or its model) could not be built, so no page got text."""
    return f"cleaner/init/{type(exc).__name__}"


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


def sanitise_batch(htmls: Sequence[str]) -> tuple[list[Extracted], list[tuple[int, str]]]:
    """Every page's `prepare`: one Extracted per page (its error set when it is not worth a parser) and
    the (index, html) of the pages left to clean."""
    out: list[Extracted] = []
    todo: list[tuple[int, str]] = []
    for i, raw in enumerate(htmls):
        html, extracted = prepare(raw)
        out.append(extracted)
        if extracted.error is None:
            todo.append((i, html))
    return out, todo


def check_texts(out: Sequence[Extracted]) -> None:
    """Drop text decoded with the wrong charset (mostly U+FFFD)."""
    for one in out:
        page = one.page
        if page is not None and page.text.count("\ufffd") > MAX_REPLACEMENT_SHARE * len(page.text):
            one.page, one.error = None, empty("bad_encoding")


def _why_empty(html: str) -> str:
    """A heuristic cleaner found nothing: the simplifier tells whether the page had any text."""
    try:
        reason = simplify(html).reason
    except Exception:
        reason = None
    return empty(reason or "no_main")


class Cleaner(ABC):
    """Base of every cleaner: subclasses write `extract`; `clean` and `clean_batch` never raise."""

    name: ClassVar[str]

    @abstractmethod
    def extract(self, html: str, url: str | None = None) -> CleanedPage | None:
        """Return the main content, None when there is none; may raise on broken input."""

    def clean(self, html: str, url: str | None = None) -> CleanedPage | None:
        """Like `extract` but never raises, so one bad page cannot stop a crawl."""
        try:
            return self.extract(html, url)
        except Exception as exc:  # any parser failure means "no content" to the caller
            LOGGER.debug("cleaner %s failed on %s: %r", self.name, url, exc)
            return None

    def clean_batch(self, htmls: Sequence[str], urls: Sequence[str]) -> list[Extracted]:
        """The crawl's path: every page gets its text or a reason, whatever the others do."""
        out, todo = sanitise_batch(htmls)
        self.extract_prepared(todo, urls, out)
        check_texts(out)
        return out

    def extract_prepared(
        self, todo: list[tuple[int, str]], urls: Sequence[str], out: list[Extracted]
    ) -> None:
        """Fill `out[i]` for each prepared (i, html): page by page; labellers batch instead."""
        for i, html in todo:
            try:
                out[i].page = self.extract(html, urls[i])
            except Exception as exc:  # broken markup must not stop the crawl: count it instead
                LOGGER.debug("cleaner %s failed on %s: %r", self.name, urls[i], exc)
                out[i].error = failed("cleaner", exc)
                continue
            if out[i].page is None:
                out[i].error = _why_empty(html)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


PageT = TypeVar("PageT", contravariant=True)
LabelT = TypeVar("LabelT", covariant=True)
P = TypeVar("P")
L = TypeVar("L")


class PageLabeller(Protocol[PageT, LabelT]):
    """A model that labels a batch of prepared pages in one call, one answer per page."""

    def label(self, pages: Sequence[PageT]) -> Sequence[LabelT]: ...


class BatchedCleaner(Cleaner, Generic[P, L]):
    """A cleaner whose model labels a whole batch in one call: a single page takes the batch path too."""

    @abstractmethod
    def labeller(self) -> PageLabeller[P, L]:
        """The labeller, built once per cleaner instance."""

    def extract(self, html: str, url: str | None = None) -> CleanedPage | None:
        return self.extract_batch([html])[0]

    def extract_batch(self, htmls: Sequence[str]) -> list[CleanedPage | None]:
        """Clean a batch with one labeller call; pages without text come back None."""
        self.labeller()  # a missing or broken model is the caller's error to see, not an empty page
        return [one.page for one in self.clean_batch(htmls, [""] * len(htmls))]

    def label_each(self, pages: list[P]) -> list[L | Exception]:
        """One labeller call for the batch; if it fails, page by page so only the culprit is lost."""
        if not pages:
            return []
        try:
            labeller = self.labeller()
        except Exception as exc:  # a missing model file fails every page the same way
            return [exc] * len(pages)
        try:
            labels = labeller.label(pages)
            if len(labels) == len(pages):
                return list(labels)
        except Exception as exc:  # visible: a model failing on every batch must not look like a quiet crawl
            LOGGER.warning(
                "labeller %s failed on a batch of %d pages (%r); retrying one by one",
                self.name, len(pages), exc,
            )  # fmt: skip
        out: list[L | Exception] = []
        for page in pages:
            try:
                out.append(labeller.label([page])[0])
            except Exception as exc:
                out.append(exc)
        return out


def _sniff_encoding(body: bytes) -> str | None:
    """Statistical charset guess, used only when the declared charsets produced garbage."""
    try:
        from charset_normalizer import from_bytes  # trafilatura's own dependency
    except ImportError:  # pragma: no cover - optional
        return None
    best = from_bytes(body[:SNIFF_BYTES]).best()
    return best.encoding if best is not None else None


def _decode_candidates(body: bytes, declared_encoding: str | None) -> Iterator[str]:
    """Decodings from most to least trusted: header, <meta>, cp1252, statistical sniffing."""
    content_type = f"text/html; charset={declared_encoding}" if declared_encoding else None
    yield html_to_unicode(content_type, body)[1]
    yield html_to_unicode(None, body)[1]
    # the commonest mislabel on the web; bytes it leaves undefined send us on to sniffing
    yield body.decode("cp1252", errors="replace")
    yield html_to_unicode(None, body, auto_detect_fun=_sniff_encoding)[1]


def mostly_utf8(text: str) -> bool:
    """A body decoded as UTF-8 (errors replaced) that is UTF-8: its valid non-ASCII characters outnumber
    the bytes that failed. A UTF-8 page with a few stray Latin-1 bytes keeps its accents (a U+FFFD at each
    stray byte) instead of being read whole as Windows-1252 mojibake; legacy text almost never forms
    valid UTF-8 sequences, so it fails this and goes to charset detection."""
    bad = text.count("\ufffd")
    if not bad:
        return True
    non_ascii = len(text) - len(text.encode("ascii", errors="ignore"))
    return non_ascii - bad > bad


def decode_html(body: bytes, declared_encoding: str | None = None) -> str:
    """Decode a response body whatever its charset claims; never raises."""
    if not body:
        return ""
    # Valid UTF-8 with non-ASCII bytes is UTF-8 whatever the label says (legacy text almost never
    # validates); NULs mean UTF-16/32, and pure ASCII may be a 7-bit encoding such as ISO-2022-JP.
    if not body.isascii() and b"\x00" not in body[:UTF8_PROBE_BYTES] and read_bom(body)[0] is None:
        text = body.decode("utf-8", errors="replace")
        if mostly_utf8(text):
            return text
    best: str | None = None
    try:
        for text in _decode_candidates(body, declared_encoding):
            if best is None or text.count("\ufffd") < best.count("\ufffd"):
                best = text
            if "\ufffd" not in best:
                break
    except Exception as exc:  # a codec bug must not cost us the page
        LOGGER.debug("decoding failed: %r", exc)
    return best if best is not None else body.decode("utf-8", errors="replace")
