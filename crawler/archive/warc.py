"""WARC/1.1 output: one gzip member per record, warcinfo first, request/response/metadata per fetch.

Pure module (no Scrapy) so the archive format can be tested byte for byte without running a crawl.
"""

from __future__ import annotations

import contextlib
import http
import json
import os
import re
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata as importlib_metadata
from io import BytesIO
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urldefrag, urlsplit

from warcio.recordbuilder import RecordBuilder
from warcio.statusandheaders import StatusAndHeaders
from warcio.timeutils import datetime_to_iso_date
from warcio.warcwriter import WARCWriter

from crawler.archive.warc_files import OPEN_SUFFIX, WarcLocation, open_path, publish, recover_open_files

__all__ = ["FetchRecord", "StorageError", "WarcLocation", "WarcWriter", "recover_open_files"]

WARC_VERSION = "WARC/1.1"
FORMAT = "WARC File Format 1.1"
CONFORMS_TO = "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"
# Values the WARC 1.1 spec allows for WARC-Truncated.
TRUNCATED_REASONS = frozenset({"length", "time", "disconnect", "unspecified"})
# Statuses (besides 1xx, and any HEAD) whose responses carry no body to check a length against.
_BODILESS_STATUSES = frozenset({204, 304})
_HOST_UNSAFE = re.compile(r"[^A-Za-z0-9._]+")


class StorageError(OSError):
    """The disk refused a write (full, read-only, over quota): the message names the file and why."""


def _software() -> str:
    """Name the exact crawler build in every warcinfo, so archives trace back to the code."""
    try:
        return f"hostcrawl/{importlib_metadata.version('hostcrawl')}"
    except importlib_metadata.PackageNotFoundError:
        return "hostcrawl/0+unknown"


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _new_record_id() -> str:
    return f"<urn:uuid:{uuid.uuid4()}>"


def _naive_utc(dt: datetime) -> datetime:
    """Normalise to naive UTC because warcio's date formatting ignores tzinfo (naive means UTC)."""
    if dt.tzinfo is not None:
        dt = dt.astimezone(UTC).replace(tzinfo=None)
    return dt


def _warc_date(dt: datetime) -> str:
    return datetime_to_iso_date(_naive_utc(dt), use_micros=True)


@dataclass(slots=True)
class FetchRecord:
    """One HTTP exchange as the downloader saw it; payload is the body still content-encoded."""

    url: str
    method: str
    request_headers: list[tuple[str, str]]
    http_version: str
    status: int
    reason: str
    response_headers: list[tuple[str, str]]
    payload: bytes
    fetched_at: datetime
    ip_address: str | None = None
    truncated: str | None = None


def _response_headers(rec: FetchRecord) -> list[tuple[str, str]]:
    """Make the header block describe the stored payload; originals survive as X-Crawler-*."""
    actual = str(len(rec.payload))
    check_length = rec.method.upper() != "HEAD" and not (
        100 <= rec.status < 200 or rec.status in _BODILESS_STATUSES
    )
    headers: list[tuple[str, str]] = []
    has_length = rewritten = False
    for name, value in rec.response_headers:
        lname = name.lower()
        if lname == "transfer-encoding" and "chunked" in value.lower():
            headers.append(("X-Crawler-Transfer-Encoding", value))
            rewritten = True
        elif lname == "content-length" and check_length and (has_length or value.strip() != actual):
            headers.append(("X-Crawler-Content-Length", value))
            rewritten = True
        else:
            headers.append((name, value))
            has_length = has_length or lname == "content-length"
    if rewritten and not has_length:
        headers.append(("Content-Length", actual))
    return headers


def _request_target_and_host(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    host = parts.netloc.rpartition("@")[2]
    return target, host


class WarcWriter:
    """Writes rotating, crash-safe WARC files named Prefix-Timestamp-Serial-Crawlhost.warc.gz."""

    def __init__(
        self,
        directory: Path,
        prefix: str = "hostcrawl",
        crawl_host: str | None = None,
        max_file_bytes: int = 2**30,
        warcinfo: dict[str, str] | None = None,
        record_id_factory: Callable[[], str] | None = None,
        clock: Callable[[], datetime] | None = None,
        on_finished: Callable[[Path], None] | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.prefix = prefix
        self.crawl_host = _HOST_UNSAFE.sub("_", crawl_host or socket.gethostname())
        self.max_file_bytes = max_file_bytes
        self.warcinfo = dict(warcinfo or {})
        for key, value in self.warcinfo.items():
            if "\n" in key or "\r" in key or "\n" in value or "\r" in value or ":" in key:
                raise ValueError(f"warcinfo field {key!r} would break the record")
        self._new_id = record_id_factory or _new_record_id
        self._clock = clock or _utc_now
        self.on_finished = on_finished  # called with each file once it has its final name (CDXJ index)
        self._finished: list[Path] = []
        self._current: Path | None = None
        self._fh: BinaryIO | None = None
        self._warcinfo_id = ""
        self._serial = self._next_free_serial()
        self._closed = False
        self.failed: str | None = None  # why the disk refused a write: nothing more is written
        self.last_response: WarcLocation | None = None  # of the latest write_fetch/write_revisit

    @property
    def files(self) -> list[Path]:
        """Finished files plus the current one, by the name it gets when closed."""
        return self._finished + ([self._current] if self._current else [])

    def write_fetch(self, rec: FetchRecord) -> str:
        """Archive one fetch as a response and its request record; returns the response id."""
        if rec.truncated is not None and rec.truncated not in TRUNCATED_REASONS:
            raise ValueError(f"WARC-Truncated must be one of {sorted(TRUNCATED_REASONS)}")
        return self._write_exchange("response", rec, _response_headers(rec), rec.payload, [])

    def write_revisit(self, rec: FetchRecord, refers: list[tuple[str, str]]) -> str:
        """Archive a fetch whose payload an earlier capture holds: a WARC/1.1 revisit record (the HTTP
        headers, no payload; `refers` names its WARC-Profile and the capture, WARC-Refers-To*) and its
        request record; returns the revisit's id. `last_response` locates it, as a response's."""
        skip = ("content-length", "transfer-encoding")
        headers = [(k, v) for k, v in rec.response_headers if k.lower() not in skip]
        return self._write_exchange("revisit", rec, headers, b"", refers)

    def _write_exchange(
        self,
        rec_type: str,
        rec: FetchRecord,
        http_header_pairs: list[tuple[str, str]],
        payload: bytes,
        extra_headers: list[tuple[str, str]],
    ) -> str:
        self._ensure_open()
        url = urldefrag(rec.url).url  # a fragment is never sent, so it is not part of the target
        date = _warc_date(rec.fetched_at)
        record_id = self._new_id()
        reason = rec.reason or _default_reason(rec.status)
        status_line = f"{rec.status} {reason}"
        http_headers = StatusAndHeaders(status_line, http_header_pairs, protocol=rec.http_version)
        warc_headers = self._warc_headers(
            rec_type,
            date,
            record_id,
            url,
            ip_address=rec.ip_address,
            truncated=rec.truncated if rec_type == "response" else None,  # a revisit has no payload
        )
        for name, value in extra_headers:
            warc_headers.add_header(name, value)
        assert self._fh is not None and self._current is not None
        start = self._fh.tell()
        response = self._record(rec_type, warc_headers, http_headers, payload)
        request = self._request_record(rec, url, date, record_id)
        self._append(response + request)  # both or neither: a request stays beside its response
        self.last_response = WarcLocation(self._current.name, start, len(response))
        self._after_write()
        return record_id

    def _request_record(self, rec: FetchRecord, url: str, date: str, response_id: str) -> bytes:
        target, host = _request_target_and_host(url)
        req_headers = list(rec.request_headers)
        if not any(name.lower() == "host" for name, _ in req_headers):
            req_headers.insert(0, ("Host", host))
        request_line = StatusAndHeaders(
            f"{target} {rec.http_version}", req_headers, protocol=rec.method.upper()
        )
        warc_headers = self._warc_headers(
            "request",
            date,
            self._new_id(),
            url,
            concurrent_to=response_id,
            ip_address=rec.ip_address,
        )
        return self._record("request", warc_headers, request_line, b"")

    def write_metadata(self, url: str, refers_to: str, data: dict) -> str:
        """Archive scores known only after cleaning, linked to the response they describe."""
        body = json.dumps(data, ensure_ascii=False, sort_keys=True).encode("utf-8")
        return self._write_derived("metadata", url, refers_to, "application/json", body)

    def write_conversion(self, url: str, refers_to: str, text: str) -> str:
        """The cleaned main text of a response, as Common Crawl's WET files carry it."""
        body = text.encode("utf-8")
        return self._write_derived("conversion", url, refers_to, "text/plain; charset=utf-8", body)

    def _write_derived(self, rec_type: str, url: str, refers_to: str, content_type: str, body: bytes) -> str:
        self._ensure_open()
        record_id = self._new_id()
        headers = self._warc_headers(
            rec_type,
            _warc_date(self._clock()),
            record_id,
            urldefrag(url).url,
            content_type=content_type,
            refers_to=refers_to,
        )
        self._append(self._record(rec_type, headers, None, body))
        self._after_write()
        return record_id

    def close(self) -> None:
        """Finish the current file so readers see it under its final name."""
        self._finish_current()
        self._closed = True

    def __enter__(self) -> WarcWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _warc_headers(
        self,
        rec_type: str,
        date: str,
        record_id: str,
        url: str,
        *,
        content_type: str | None = None,
        concurrent_to: str | None = None,
        refers_to: str | None = None,
        ip_address: str | None = None,
        truncated: str | None = None,
        filename: str | None = None,
    ) -> StatusAndHeaders:
        """Lay out headers in Common Crawl's order; placeholders keep warcio's fills in place."""
        optional = [
            ("WARC-Filename", filename),
            ("WARC-Warcinfo-ID", self._warcinfo_id if rec_type != "warcinfo" else None),
            ("WARC-Concurrent-To", concurrent_to),
            ("WARC-Refers-To", refers_to),
            ("WARC-IP-Address", ip_address),
            ("WARC-Target-URI", url),
            ("WARC-Truncated", truncated),
        ]
        headers = [
            ("WARC-Type", rec_type),
            ("WARC-Date", date),
            ("WARC-Record-ID", record_id),
            ("Content-Length", "0"),
            ("Content-Type", content_type or RecordBuilder.WARC_RECORDS[rec_type]),
            *((k, v) for k, v in optional if v),
        ]
        return StatusAndHeaders("", headers, protocol=WARC_VERSION)

    def _record(
        self,
        rec_type: str,
        warc_headers: StatusAndHeaders,
        http_headers: StatusAndHeaders | None,
        body: bytes,
    ) -> bytes:
        """One record as its whole gzip member, built in memory and not yet written."""
        buffer = BytesIO()
        warc = WARCWriter(buffer, gzip=True, warc_version=WARC_VERSION)
        record = warc.create_warc_record(
            warc_headers.get_header("WARC-Target-URI") or "",
            rec_type,
            payload=BytesIO(body),
            length=len(body),
            warc_headers=warc_headers,
            http_headers=http_headers,
        )
        warc.write_record(record)
        return buffer.getvalue()

    def _append(self, data: bytes) -> None:
        """Write whole records through to the OS, or none of them: a write the disk refuses (full,
        read-only, quota) is cut off again, the file stays valid to its last record and is left
        `.open` for the resume to finish, and every later write fails at once (`StorageError`)."""
        if self.failed is not None:
            raise StorageError(self.failed)
        assert self._fh is not None and self._current is not None
        start = self._fh.tell()
        view = memoryview(data)
        try:
            while view:
                view = view[self._fh.write(view) or 0 :]
        except OSError as exc:
            self.failed = f"{self._current}{OPEN_SUFFIX}: {exc.strerror or exc}"
            with contextlib.suppress(OSError):  # a read-only disk refuses the cut too: the resume cuts
                os.ftruncate(self._fh.fileno(), start)
            raise StorageError(self.failed) from exc

    def _ensure_open(self) -> None:
        if self._closed:
            raise ValueError("WarcWriter is closed")
        if self._fh is not None:
            return
        stamp = _naive_utc(self._clock())
        name = (
            f"{self.prefix}-{stamp:%Y%m%d%H%M%S}{stamp.microsecond // 1000:03d}"
            f"-{self._serial:05d}-{self.crawl_host}.warc.gz"
        )
        self._serial += 1
        self._current = self.directory / name
        # unbuffered: `_append` alone decides what reaches the file
        self._fh = open(open_path(self._current), "xb", buffering=0)  # noqa: SIM115 - lives across calls
        self._warcinfo_id = self._new_id()
        fields = {
            "software": _software(),
            "hostname": self.crawl_host,
            **self.warcinfo,
            "format": FORMAT,
            "conformsTo": CONFORMS_TO,
        }
        body = "".join(f"{k}: {v}\r\n" for k, v in fields.items() if v).encode("utf-8")
        headers = self._warc_headers("warcinfo", _warc_date(stamp), self._warcinfo_id, "", filename=name)
        self._append(self._record("warcinfo", headers, None, body))

    def _after_write(self) -> None:
        """Rotate between fetches, never inside one, so a request stays beside its response."""
        if self._fh is not None and self._fh.tell() > self.max_file_bytes:
            self._finish_current()

    def _finish_current(self) -> None:
        if self._fh is None or self._current is None:
            return
        if self.failed is not None:  # left `.open`: the resume cuts it to its last whole record
            with contextlib.suppress(OSError):
                self._fh.close()
            self._fh = None
            return
        os.fsync(self._fh.fileno())
        self._fh.close()
        self._fh = None
        publish(open_path(self._current), self._current)
        self._finished.append(self._current)
        if self.on_finished is not None:
            self.on_finished(self._current)
        self._current = None

    def _next_free_serial(self) -> int:
        """Continue the serial of earlier files from this host so a resumed crawl keeps counting."""
        pattern = re.compile(
            rf"^{re.escape(self.prefix)}-\d{{14,17}}-(\d+)-{re.escape(self.crawl_host)}\.warc\.gz"
        )
        serials = [int(m.group(1)) for p in self.directory.iterdir() if (m := pattern.match(p.name))]
        return max(serials, default=-1) + 1


def _default_reason(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""
