"""The cleaner interface: HTML in, main content (text + markdown) out."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

from w3lib.encoding import html_to_unicode, read_bom

LOGGER = logging.getLogger(__name__)

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


class Cleaner(ABC):
    """Base of every cleaner: subclasses write `extract`; `clean` owns the never-raise policy."""

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

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


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


def decode_html(body: bytes, declared_encoding: str | None = None) -> str:
    """Decode a response body whatever its charset claims; never raises."""
    if not body:
        return ""
    # Valid UTF-8 with non-ASCII bytes is UTF-8 whatever the label says (legacy text almost never
    # validates); NULs mean UTF-16/32, and pure ASCII may be a 7-bit encoding such as ISO-2022-JP.
    if not body.isascii() and b"\x00" not in body[:UTF8_PROBE_BYTES] and read_bom(body)[0] is None:
        try:
            return body.decode("utf-8")
        except UnicodeDecodeError:
            pass
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
