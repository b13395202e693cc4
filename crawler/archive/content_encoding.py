"""An archived response's payload, decoded as its Content-Encoding says, never more than a limit.

warcio decodes gzip and deflate itself. Its brotli hook sets an attribute that brotli 1.2's Decompressor
does not allow (warcio 1.8.1: AttributeError on every `br` record), and it knows no zstd, so both are
decoded here, from warcio's de-chunked raw stream, with the output bounded as it is produced: a small
compressed body cannot inflate past `limit` in memory.
"""

from __future__ import annotations

from typing import Any

import brotli
import zstandard
from warcio.bufferedreaders import ChunkedDataReader

READ_BLOCK = 64 * 1024
DECODED_HERE = ("br", "zstd")


class ContentEncodingError(ValueError):
    """The payload is not valid for its Content-Encoding."""


def read_payload(record: Any, limit: int) -> bytes:
    """At most `limit` bytes of the record's payload, with transfer and content encodings undone."""
    http = record.http_headers
    encoding = (http.get_header("Content-Encoding") or "").strip().lower() if http else ""
    if encoding not in DECODED_HERE:
        return bytes(record.content_stream().read(limit))
    raw = record.raw_stream
    if (http.get_header("Transfer-Encoding") or "").lower() == "chunked":
        raw = ChunkedDataReader(raw, decomp_type=None)
    try:
        return _brotli(raw, limit) if encoding == "br" else _zstd(raw, limit)
    except (brotli.error, zstandard.ZstdError) as exc:
        raise ContentEncodingError(f"{encoding}: {exc}") from exc


def _brotli(raw: Any, limit: int) -> bytes:
    decoder = brotli.Decompressor()
    out = bytearray()
    while len(out) < limit and not decoder.is_finished():
        if decoder.can_accept_more_data():
            data = raw.read(READ_BLOCK)
            if not data:
                break
        else:
            data = b""  # output was held back at the limit: drain it before feeding more
        out += decoder.process(data, output_buffer_limit=limit - len(out))
    return bytes(out[:limit])


def _zstd(raw: Any, limit: int) -> bytes:
    reader = zstandard.ZstdDecompressor().stream_reader(raw, read_size=READ_BLOCK, closefd=False)
    out = bytearray()
    while len(out) < limit:
        piece = reader.read(min(READ_BLOCK, limit - len(out)))
        if not piece:
            break
        out += piece
    return bytes(out)
