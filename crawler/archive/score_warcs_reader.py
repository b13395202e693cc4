"""Reading WARC files for `hostcrawl score`: HTML responses out, skips counted, broken records survived.

A record that cannot be parsed (corrupt gzip member, bad headers, a Content-Length running past the
end of the file) is reported with its byte offset; the reader then scans forward for the next
intact record (the next gzip member, or the next `WARC/1.` line of an uncompressed file).
"""

from __future__ import annotations

import gzip
import logging
import zlib
from collections import Counter
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from warcio.archiveiterator import WARCIterator

from crawler.archive.content_encoding import ContentEncodingError, read_payload
from graph.hostnames import HostNameError, host_from_url, registered_domain

LOGGER = logging.getLogger(__name__)
# The cleaner keeps only the first 5 MB of a page anyway (trafilatura_cleaner.MAX_HTML_BYTES).
MAX_PAYLOAD_BYTES = 5_000_000
RESYNC_BLOCK = 1 << 20
PROBE_BYTES = 1 << 16
GZIP_MAGIC = b"\x1f\x8b\x08"
WARC_MAGIC = b"WARC/1."
NON_CHUNKED_GZIP = "non-chunked gzip"


@dataclass(slots=True)
class HtmlPage:
    """One HTML response taken out of a WARC, ready for a worker."""

    url: str
    host: str
    registered_domain: str
    body: bytes
    charset: str | None
    warc_file: str
    offset: int
    length: int | None = None  # None for a WARC gzipped as one stream: no record can be seeked to


@dataclass(slots=True)
class BrokenRecord:
    warc_file: str
    offset: int
    reason: str
    resumed_at: int | None


@dataclass(slots=True)
class ScoreStats:
    """Counters with namespaced reasons (`response/not_html`), broken records, timings."""

    counts: Counter[str] = field(default_factory=Counter)
    broken: list[BrokenRecord] = field(default_factory=list)
    pages: int = 0
    seconds: float = 0.0


def _charset(content_type: str) -> str | None:
    for part in content_type.split(";")[1:]:
        key, _, value = part.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            return value.strip().strip("\"'")
    return None


def _looks_like_html(head: bytes) -> bool:
    head = head[:1024].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html")) or b"<html" in head


def _probe(path: Path, offset: int, gz: bool) -> bool:
    """Does an intact WARC record start at `offset`?"""
    with path.open("rb") as fh:
        if not gz and offset > 0:
            fh.seek(offset - 1)
            if fh.read(1) != b"\n":
                return False
        fh.seek(offset)
        data = fh.read(PROBE_BYTES)
    if not gz:
        return data.startswith(WARC_MAGIC)
    try:
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data, 64).startswith(WARC_MAGIC)
    except zlib.error:
        return False


def next_record_start(path: Path, start: int, gz: bool) -> int | None:
    """First offset at or after `start` where an intact record begins, scanning in blocks."""
    pattern = GZIP_MAGIC if gz else WARC_MAGIC
    with path.open("rb") as fh:
        fh.seek(start)
        base, carry = start, b""
        while block := fh.read(RESYNC_BLOCK):
            data = carry + block
            i = data.find(pattern)
            while i >= 0:
                if _probe(path, base - len(carry) + i, gz):
                    return base - len(carry) + i
                i = data.find(pattern, i + 1)
            carry = data[-(len(pattern) - 1) :]
            base += len(block)
    return None


def is_wet(path: Path, probe_records: int = 4) -> bool:
    """A WET file (Common Crawl's extracted text): conversion records and no HTTP responses."""
    types: list[str] = []
    try:
        with path.open("rb") as fh:
            for record in WARCIterator(fh):
                types.append(record.rec_type)
                if len(types) >= probe_records:
                    break
    except Exception:  # a broken file is the reader's to report, record by record
        return False
    return "conversion" in types and "response" not in types


class WarcReader:
    """Streams the HTML responses of one WARC file; counts skips; survives broken records."""

    def __init__(self, path: Path, stats: ScoreStats) -> None:
        self.path = path
        self.stats = stats
        self.position = 0  # bytes of the file behind us, for the progress bar
        self.size = path.stat().st_size

    def __iter__(self) -> Iterator[HtmlPage]:
        with self.path.open("rb") as fh:
            gz = fh.read(2) == GZIP_MAGIC[:2]
        start: int | None = 0
        while start is not None and start < self.size:
            start = yield from self._read_from(start, gz)
        self.position = self.size

    def _read_from(self, start: int, gz: bool) -> Generator[HtmlPage, None, int | None]:
        """Read records from `start`; return where to resume after a break (None: done)."""
        seen = 0
        with self.path.open("rb") as fh:
            fh.seek(start)
            records = WARCIterator(fh)
            try:
                for record in records:
                    offset = records.offset
                    page = self._take(record, offset)
                    if page is not None:
                        page.length = records.get_record_length()
                    seen += 1
                    self.position = fh.tell()
                    if page is not None:
                        yield page
                end = records.offset
            except Exception as exc:  # any parse failure is one broken record, never the run
                if NON_CHUNKED_GZIP in str(exc) and start == 0:
                    yield from self._read_single_gzip(skip=seen)
                    return None
                return self._broken(records.offset, f"{type(exc).__name__}: {str(exc).strip()[:200]}", gz)
        if end < self.size:  # the reader stopped early: a truncated gzip member or trailing junk
            return self._broken(end, "unreadable data (truncated file?)", gz)
        return None

    def _broken(self, offset: int, reason: str, gz: bool) -> int | None:
        resume = next_record_start(self.path, offset + 1, gz)
        self.stats.broken.append(BrokenRecord(str(self.path), offset, reason, resume))
        self.stats.counts["warc/broken_record"] += 1
        LOGGER.warning("%s: broken record at byte %d (%s); resuming at %s", self.path, offset, reason, resume)
        return resume

    def _read_single_gzip(self, skip: int) -> Iterator[HtmlPage]:
        """A WARC gzipped as one stream (not per record): read it through, offsets uncompressed."""
        with gzip.open(self.path, "rb") as fh:
            records = WARCIterator(fh)
            try:
                for i, record in enumerate(records):
                    page = self._take(record, records.offset) if i >= skip else None
                    if page is not None:
                        yield page
            except Exception as exc:
                self._broken_at_end(records.offset, f"{type(exc).__name__}: {exc}")

    def _broken_at_end(self, offset: int, reason: str) -> None:
        self.stats.broken.append(BrokenRecord(str(self.path), offset, reason, None))
        self.stats.counts["warc/broken_record"] += 1

    def _take(self, record: Any, offset: int) -> HtmlPage | None:
        """The page in an HTML response, or None with the reason counted; EOFError for a record, of any
        type, that ends before its Content-Length (warcio's iterator would end the file there silently)."""
        page = self._page(record, offset)
        while record.raw_stream.read(RESYNC_BLOCK):  # drain what we do not keep
            pass
        missing = getattr(record.raw_stream, "limit", 0)
        if missing > 0:
            raise EOFError(f"record ends {missing} bytes before its Content-Length")
        return page

    def _page(self, record: Any, offset: int) -> HtmlPage | None:
        counts = self.stats.counts
        counts["warc/records"] += 1
        if record.rec_type != "response":
            counts[f"record/{record.rec_type}"] += 1
            return None
        http = record.http_headers
        url = record.rec_headers.get_header("WARC-Target-URI") or ""
        if http is None:
            counts["response/not_http"] += 1
            return None
        status = http.get_statuscode() or ""
        if not status.startswith("2"):
            counts[f"response/status_{status[:1] or 'none'}xx"] += 1
            return None
        content_type = http.get_header("Content-Type") or ""
        is_html = not content_type or "html" in content_type.lower()
        try:
            body = read_payload(record, MAX_PAYLOAD_BYTES) if is_html else b""
        except ContentEncodingError:
            counts["response/bad_content_encoding"] += 1
            return None
        if not is_html:
            counts["response/not_html"] += 1
            return None
        if not body.strip():
            counts["response/empty"] += 1
            return None
        if not content_type and not _looks_like_html(body):
            counts["response/not_html"] += 1
            return None
        try:
            host = host_from_url(url)
            domain = registered_domain(host)
        except HostNameError:
            counts["response/bad_url"] += 1
            return None
        if record.rec_headers.get_header("WARC-Truncated"):
            counts["response/truncated_by_crawler"] += 1  # kept: the head of a page is most of it
        return HtmlPage(url, host, domain, body, _charset(content_type), self.path.name, offset)
