"""Requests in flight when a crawl was killed whose responses were already archived: read back from
their WARC records by the resumed run, not fetched again.

A response is archived as it arrives (crawler/archive/warc_capture.py), but its page is committed to the
frontier only once the spider has parsed it (and its lease with the next commit). A kill in between
used to leave the record in the WARC with no page row, and the page was fetched again; when that
second fetch failed (a slow host's timeout) or never came (its host dropped since, the budget spent),
the archived page had no row and no text at all. `--resume` now finds such records in the files the
killed process left open, and this middleware serves them to the spider as the response.
"""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from scrapy.http import Headers
from scrapy.responsetypes import responsetypes

from crawler.archive.warc_capture import (
    ARCHIVED_META,
    FETCHED_AT_META,
    WARC_ID_META,
    WARC_LOCATION_META,
    WARC_STATUS_META,
)
from crawler.archive.warc_files import read_record, responses_in
from scheduler.urls import canonical

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from scheduler.sqlite_store import SQLiteFrontier

logger = logging.getLogger(__name__)

LOCATION_KEYS = ("warc_filename", "warc_offset", "warc_length")  # WarcLocation.columns()


def replayable(status: int) -> bool:
    """What a fetch again would not improve: not a 429 or a 5xx, which are retried anyway."""
    return 0 < status < 500 and status != 429


def mark_archived_in_flight(store: SQLiteFrontier, recovered: list[Path]) -> int:
    """Tell each request the frontier does not know as fetched where its response was archived, if it
    was; returns how many were. `recovered`: the WARC files the killed process had open (only they can
    hold a response archived after the frontier's last commit). Its lease may not even be committed:
    the frontier commits with pages, so a URL handed out since then is still queued in the store. Such
    a request is in flight again, taken first: an archived page gets its row even if the budget is
    spent or its host was dropped since."""
    archived: dict[str, dict[str, Any]] = {}
    for path in recovered:
        if path.exists():
            archived |= {canonical(url): found for url, found in responses_in(path).items()}

    def meta_of(url: str) -> dict[str, Any] | None:
        found = archived.get(canonical(url))
        if found is None or not replayable(found["status"]):
            return None
        return {ARCHIVED_META: {k: found[k] for k in ("warc_record_id", *LOCATION_KEYS)}}

    return store.lease_again(meta_of) if archived else 0


class ArchivedFetch:
    """Downloader middleware: a request that names its archived response gets it from the WARC."""

    def __init__(self, crawler: Crawler) -> None:
        self.folder = Path(crawler.settings["HOSTCRAWL_RUN_DIR"]) / "warc"
        self.stats = crawler.stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def process_request(self, request: Request, spider: Any = None) -> Response | None:
        where = request.meta.get(ARCHIVED_META)
        if not where:
            return None
        try:
            offset, length = int(where["warc_offset"]), int(where["warc_length"])
            record = read_record(self.folder, str(where["warc_filename"]), offset, length)
            url = record.rec_headers.get_header("WARC-Target-URI") or ""
            if (
                record.rec_type != "response"
                or record.http_headers is None
                or canonical(url) != canonical(request.url)
            ):
                raise ValueError("not this request's response record")
            status = int(record.http_headers.get_statuscode())
            body = record.raw_stream.read()  # as archived: before content decoding, as it was received
            fetched_at = datetime.fromisoformat(record.rec_headers.get_header("WARC-Date"))
        except (OSError, ValueError, KeyError, TypeError, StopIteration) as exc:
            logger.warning(
                "%s: its archived response is unreadable (%s); fetching it again", request.url, exc
            )
            self.stats.inc_value("resume/archived_unreadable")
            del request.meta[ARCHIVED_META]
            return None
        request.meta[WARC_ID_META] = where["warc_record_id"]
        request.meta[WARC_LOCATION_META] = {k: where[k] for k in LOCATION_KEYS}
        request.meta[FETCHED_AT_META] = fetched_at
        request.meta[WARC_STATUS_META] = status
        headers = Headers(record.http_headers.headers)
        response_class = responsetypes.from_args(headers=headers, url=request.url, body=body)
        self.stats.inc_value("resume/read_back_from_warc")
        return response_class(
            url=request.url,
            status=status,
            headers=headers,
            body=body,
            request=request,
            protocol=record.http_headers.protocol,
        )
