"""Archives every response as received (before decompression or redirects) into the run's WARC files."""

from __future__ import annotations

import logging
import socket
import threading
from datetime import UTC, datetime
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from scrapy import signals
from scrapy.utils.httpobj import urlparse_cached

from crawler import __version__
from crawler.archive.revisit import PREVIOUS_META, REVISIT_META, revisit_of, write_revisit
from crawler.archive.warc import FetchRecord, WarcWriter
from crawler.archive.warc_files import write_cdxj
from crawler.fetch.shutdown import StopCancelled
from scheduler.scrapy_scheduler import storage_failed

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Headers, Response

WARC_ID_META = "hostcrawl_warc_id"
WARC_LOCATION_META = "hostcrawl_warc_location"  # the response record's warc_filename/offset/length
WARC_STATUS_META = "hostcrawl_warc_status"  # the archived response's HTTP status
FETCHED_AT_META = "hostcrawl_fetched_at"
# A request in flight at a kill whose response is already archived: its record (archived_fetch.py)
ARCHIVED_META = "hostcrawl_archived"

logger = logging.getLogger(__name__)


def header_pairs(headers: Headers) -> list[tuple[str, str]]:
    """Scrapy headers as (name, value) pairs, one per value, so repeated headers survive."""
    pairs = []
    for name, values in headers.items():
        for value in values:
            pairs.append((name.decode("latin-1"), value.decode("latin-1")))
    return pairs


def reason_phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def truncation(request: Request, response: Response) -> str | None:
    if "hostcrawl_truncated" in request.meta:
        return str(request.meta["hostcrawl_truncated"])
    if "dataloss" in response.flags:
        return "disconnect"
    return None


class WarcCaptureMiddleware:
    """Downloader middleware next to the downloader: sees raw bodies, robots.txt and redirects."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        run_dir = Path(settings["HOSTCRAWL_RUN_DIR"])
        self.stats = crawler.stats
        self.signals = crawler.signals
        self.indexing: list[threading.Thread] = []
        self.writer = WarcWriter(
            run_dir / "warc",
            prefix=settings.get("HOSTCRAWL_WARC_PREFIX") or "hostcrawl",  # workers of one run: their id
            crawl_host=socket.gethostname(),
            max_file_bytes=settings.getint("HOSTCRAWL_WARC_MAX_BYTES"),
            warcinfo={
                "software": f"hostcrawl/{__version__}",
                "format": "WARC File Format 1.1",
                "conformsTo": "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
                "http-header-user-agent": settings.get("USER_AGENT"),
                "robots": "obey" if settings.getbool("ROBOTSTXT_OBEY") else "ignore",
                "isPartOf": run_dir.name,
            },
            on_finished=self._index,
        )
        crawler.signals.connect(self.close, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def process_request(self, request: Request, spider: Any = None) -> None:
        request.meta[FETCHED_AT_META] = datetime.now(UTC)

    def process_response(self, request: Request, response: Response, spider: Any = None) -> Response:
        if ARCHIVED_META in request.meta:  # read back from its record: archived once already
            return response
        host = urlparse_cached(request).netloc
        request_headers = [("Host", host), *header_pairs(request.headers)]
        record = FetchRecord(
            url=request.url,
            method=request.method,
            request_headers=request_headers,
            http_version=response.protocol or "HTTP/1.1",
            status=response.status,
            reason=reason_phrase(response.status),
            response_headers=header_pairs(response.headers),
            payload=response.body,
            fetched_at=request.meta.get(FETCHED_AT_META) or datetime.now(UTC),
            ip_address=str(response.ip_address) if response.ip_address else None,
            truncated=truncation(request, response),
        )
        if record.truncated == "disconnect":
            self.stats.inc_value("fetch/truncated/disconnect")
        try:
            self._archive(request, response, record)
        except OSError as exc:  # nothing of this fetch is in the WARC: its lease stays open for a resume
            self.refused(exc, str(self.writer.directory))
            raise StopCancelled(f"not archived: the disk refused a write ({request.url})") from None
        if (where := self.writer.last_response) is not None:
            request.meta[WARC_LOCATION_META] = where.columns()
        request.meta[WARC_STATUS_META] = response.status
        return response

    def _archive(self, request: Request, response: Response, record: FetchRecord) -> None:
        profile = revisit_of(request.meta, response.status, response.body)
        if profile is not None:  # a revisit of an earlier capture: not a new response record
            request.meta[REVISIT_META] = profile
            request.meta[WARC_ID_META] = write_revisit(
                self.writer, record, request.meta[PREVIOUS_META], profile
            )
            self.stats.inc_value("warc/records/revisit")
        else:
            request.meta[WARC_ID_META] = self.writer.write_fetch(record)
            self.stats.inc_value("warc/records/response")

    def refused(self, exc: OSError, where: str) -> None:
        """The disk refused a write: the crawl stops (crawler/run/storage_stop.py)."""
        where = self.writer.failed or f"{exc.filename or where}: {exc.strerror or exc}"
        path, _, error = where.partition(": ")
        self.signals.send_catch_log(signal=storage_failed, where=path, error=error)

    def write_metadata(self, url: str, response_id: str, data: dict[str, Any], text: str | None) -> None:
        if text:
            self.writer.write_conversion(url, response_id, text)
            self.stats.inc_value("warc/records/conversion")
        self.writer.write_metadata(url, response_id, data)
        self.stats.inc_value("warc/records/metadata")

    def _index(self, warc: Path) -> None:
        """CDXJ beside each finished WARC, off the reactor: a rotated file is indexed while crawling on."""
        thread = threading.Thread(target=self._write_cdxj, args=(warc,), name=f"cdxj {warc.name}")
        thread.start()
        self.indexing.append(thread)
        self.stats.inc_value("warc/cdxj_files")

    def _write_cdxj(self, warc: Path) -> None:
        try:
            write_cdxj(warc)
        except OSError as exc:  # atomic: no half index; the resume writes what is missing
            logger.warning("%s: no CDXJ index written (%s)", warc, exc.strerror or exc)
            self.stats.inc_value("warc/cdxj_failed")

    def close(self) -> None:
        self.writer.close()
        for thread in self.indexing:
            thread.join()
        self.stats.set_value("warc/files", len(self.writer.files))
