"""Revisits (`crawl --previous RUN`): pages a previous run fetched are requested with conditional GETs.

The previous run's WARC files say, per URL, where its payload is stored and which validators (ETag,
Last-Modified) its server sent. A request for such a URL carries If-None-Match / If-Modified-Since. A 304,
or a 200 whose payload digest equals the stored one, is archived as a WARC/1.1 revisit record (profile
server-not-modified or identical-payload-digest) pointing to the earlier capture, not as a new response;
its text is not written to the curated corpus a second time. For a 304 the page then continues through the
crawl with the stored payload, so its links are followed and its score still informs the scheduler.
Changed pages are ordinary responses.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from scrapy.exceptions import NotConfigured
from scrapy.http import Headers
from scrapy.responsetypes import responsetypes
from warcio.archiveiterator import ArchiveIterator

from crawler.archive.warc import FetchRecord, WarcWriter
from crawler.run.crawl_config import ConfigError

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

PREVIOUS_META = "hostcrawl_previous"  # the PreviousCapture a conditional GET was made from
REVISIT_META = "hostcrawl_revisit"  # the revisit profile, once the response turned out to be one
NOT_MODIFIED, IDENTICAL = "server-not-modified", "identical-payload-digest"
REVISIT_PROFILES = {
    NOT_MODIFIED: "http://netpreserve.org/warc/1.1/revisit/server-not-modified",
    IDENTICAL: "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest",
}


@dataclass(frozen=True, slots=True)
class PreviousCapture:
    """Where a URL's payload is archived, and the validators its server sent with it."""

    url: str
    record_id: str
    date: str  # WARC-Date of the response record holding the payload
    payload_digest: str | None
    etag: str | None
    last_modified: str | None
    file: Path
    offset: int


def check_previous(run: Path) -> Path:
    """A previous run directory with its pages table and WARC files."""
    if not (run / "pages.parquet").is_file() or not (run / "warc").is_dir():
        raise ConfigError(f"--previous {run}: not a hostcrawl run directory (needs pages.parquet and warc/)")
    return run.resolve()


def previous_urls(run: Path) -> list[str]:
    """The pages the previous run fetched (answered 200 or 304), in its order: the revisit's seeds."""
    import polars as pl

    pages = pl.read_parquet(run / "pages.parquet", columns=["url", "status"])
    fetched = pages.filter(pl.col("status").is_in([200, 304]))["url"].unique(maintain_order=True)
    return [str(u) for u in fetched.to_list()]


def load_previous(run: Path) -> dict[str, PreviousCapture]:
    """URL -> its latest capture in the run's WARC files (a revisit keeps pointing to the stored payload)."""
    found: dict[str, PreviousCapture] = {}
    for path in sorted((run / "warc").glob("*.warc.gz")):
        with path.open("rb") as fh:
            records = ArchiveIterator(fh)
            for record in records:
                if record.rec_type not in ("response", "revisit") or record.http_headers is None:
                    continue
                h, http = record.rec_headers, record.http_headers
                url = h.get_header("WARC-Target-URI")
                if record.rec_type == "response" and http.get_statuscode() == "200":
                    found[url] = PreviousCapture(
                        url,
                        h.get_header("WARC-Record-ID"),
                        h.get_header("WARC-Date"),
                        h.get_header("WARC-Payload-Digest"),
                        http.get_header("ETag"),
                        http.get_header("Last-Modified"),
                        path,
                        records.get_record_offset(),
                    )
                elif record.rec_type == "revisit" and url in found:
                    old = found[url]  # the payload stays where it was; the validators may be newer
                    etag = http.get_header("ETag") or old.etag
                    modified = http.get_header("Last-Modified") or old.last_modified
                    found[url] = PreviousCapture(
                        old.url,
                        old.record_id,
                        old.date,
                        old.payload_digest,
                        etag,
                        modified,
                        old.file,
                        old.offset,
                    )
    return found


def stored_payload(capture: PreviousCapture) -> tuple[list[tuple[str, str]], bytes]:
    """The HTTP headers and payload (as received, still content-encoded) of a previous capture."""
    with capture.file.open("rb") as fh:
        fh.seek(capture.offset)
        record = next(iter(ArchiveIterator(fh)))
        assert record.http_headers is not None
        return list(record.http_headers.headers), record.raw_stream.read()


def payload_digest(body: bytes) -> str:
    """The WARC-Payload-Digest warcio writes: sha1, base32."""
    return "sha1:" + base64.b32encode(hashlib.sha1(body).digest()).decode("ascii")


def revisit_of(meta: dict[str, Any], status: int, body: bytes) -> str | None:
    """The revisit profile of a response to a conditional GET, or None for an ordinary response."""
    capture: PreviousCapture | None = meta.get(PREVIOUS_META)
    if capture is None:
        return None
    if status == 304:
        return NOT_MODIFIED
    if status == 200 and capture.payload_digest and payload_digest(body) == capture.payload_digest:
        return IDENTICAL
    return None


def write_revisit(writer: WarcWriter, rec: FetchRecord, capture: PreviousCapture, profile: str) -> str:
    """A WARC/1.1 revisit record (HTTP headers, no payload) and its request record; returns its id."""
    refers = [
        ("WARC-Profile", REVISIT_PROFILES[profile]),
        ("WARC-Refers-To", capture.record_id),
        ("WARC-Refers-To-Target-URI", capture.url),
        ("WARC-Refers-To-Date", capture.date),
        ("WARC-Payload-Digest", capture.payload_digest),
    ]
    return writer.write_revisit(rec, [(name, value) for name, value in refers if value])


class RevisitMiddleware:
    """Downloader middleware just outside the WARC capture: conditional headers out, stored payload in."""

    def __init__(self, crawler: Crawler, run: Path) -> None:
        self.stats = crawler.stats
        self.previous = load_previous(run)
        self.stats.set_value("revisit/previous_captures", len(self.previous))

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        run = crawler.settings.get("HOSTCRAWL_PREVIOUS")
        if not run:
            raise NotConfigured
        return cls(crawler, Path(run))

    def process_request(self, request: Request, spider: Any = None) -> None:
        capture = self.previous.get(request.url)
        if capture is None or request.method != "GET":
            return
        request.meta[PREVIOUS_META] = capture  # an unchanged 200 is then a digest revisit
        if not (capture.etag or capture.last_modified):  # the server sent no validators: a plain GET
            self.stats.inc_value("revisit/plain_get")
            return
        if capture.etag:
            request.headers[b"If-None-Match"] = capture.etag
        if capture.last_modified:
            request.headers[b"If-Modified-Since"] = capture.last_modified
        self.stats.inc_value("revisit/conditional_get")

    def process_response(self, request: Request, response: Response, spider: Any = None) -> Response:
        profile = request.meta.get(REVISIT_META)
        if profile:
            self.stats.inc_value(f"revisit/{profile}")
        if profile != NOT_MODIFIED:
            return response
        headers, body = stored_payload(request.meta[PREVIOUS_META])
        stored = Headers(headers)
        cls = responsetypes.from_args(headers=stored, url=response.url, body=body)
        return cls(
            url=response.url, status=304, headers=stored, body=body, request=request, flags=response.flags
        )
