"""`hostcrawl score` reads brotli and zstd payloads as the page (warcio 1.8.1 raised on every `br`
record with brotli 1.2 and returned zstd bytes undecoded), chunked or not, and never inflates one past
its limit."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import brotli
import polars as pl
import pytest
import zstandard
from test_score_warcs import local_web_pages, score
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from crawler.archive.content_encoding import ContentEncodingError, read_payload

ENCODERS = {
    "br": brotli.compress,
    "zstd": lambda body: zstandard.ZstdCompressor().compress(body),
    "gzip": gzip.compress,
}


def _chunked(body: bytes, size: int = 700) -> bytes:
    parts = [
        b"%x\r\n%s\r\n" % (len(body[i : i + size]), body[i : i + size]) for i in range(0, len(body), size)
    ]
    return b"".join(parts) + b"0\r\n\r\n"


def _record(encoding: str, payload: bytes, chunked: bool = False) -> object:
    headers = [("Content-Type", "text/html"), ("Content-Encoding", encoding)]
    if chunked:
        headers.append(("Transfer-Encoding", "chunked"))
        payload = _chunked(payload)
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=False)
    http = StatusAndHeaders("200 OK", headers, protocol="HTTP/1.1")
    url = f"http://{encoding}.example/"
    writer.write_record(
        writer.create_warc_record(url, "response", payload=io.BytesIO(payload), http_headers=http)
    )
    buf.seek(0)
    return next(iter(ArchiveIterator(buf)))


@pytest.mark.parametrize("chunked", [False, True])
@pytest.mark.parametrize("encoding", sorted(ENCODERS))
def test_each_content_encoding_reads_back_the_page(encoding: str, chunked: bool) -> None:
    html = local_web_pages(1)[0][1]
    record = _record(encoding, ENCODERS[encoding](html), chunked)
    assert read_payload(record, 10_000_000) == html


@pytest.mark.parametrize("encoding", ["br", "zstd"])
def test_a_bomb_stops_at_the_limit(encoding: str) -> None:
    bomb = ENCODERS[encoding](b"\0" * 200_000_000)  # ~200 MB from a few kB
    assert len(bomb) < 1_000_000
    assert len(read_payload(_record(encoding, bomb), 1_000_000)) == 1_000_000


def test_a_payload_broken_for_its_encoding_is_an_error_not_garbage() -> None:
    with pytest.raises(ContentEncodingError, match="br"):
        read_payload(_record("br", b"this is not brotli at all" * 10), 10_000)


def test_score_reads_brotli_and_zstd_pages_like_gzip_ones(tmp_path: Path) -> None:
    pages = local_web_pages(4)
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=True)
    for (url, html, _), encoding in zip(pages, ["br", "zstd", "gzip", "br"], strict=True):
        payload = ENCODERS[encoding](html)
        headers = [("Content-Type", "text/html"), ("Content-Encoding", encoding)]
        http = StatusAndHeaders("200 OK", headers, protocol="HTTP/1.1")
        writer.write_record(
            writer.create_warc_record(url, "response", payload=io.BytesIO(payload), http_headers=http)
        )
    broken = StatusAndHeaders(
        "200 OK", [("Content-Type", "text/html"), ("Content-Encoding", "br")], protocol="HTTP/1.1"
    )
    writer.write_record(
        writer.create_warc_record(
            "http://bad.example/", "response", payload=io.BytesIO(b"not brotli" * 20), http_headers=broken
        )
    )
    warc = tmp_path / "encoded.warc.gz"
    warc.write_bytes(buf.getvalue())
    out = tmp_path / "pages.parquet"
    plain = tmp_path / "plain.parquet"
    assert score(["--warc", str(warc), "--out", str(out), "--workers", "1"]) == 0
    rows = pl.read_parquet(out)
    assert rows["url"].to_list() == [url for url, _, _ in pages]  # the broken one is counted, not a row
    # the same pages stored unencoded give the same extracted text
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=True)
    for url, html, _ in pages:
        http = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
        writer.write_record(
            writer.create_warc_record(url, "response", payload=io.BytesIO(html), http_headers=http)
        )
    (tmp_path / "plain.warc.gz").write_bytes(buf.getvalue())
    assert score(["--warc", str(tmp_path / "plain.warc.gz"), "--out", str(plain), "--workers", "1"]) == 0
    assert rows["text_length"].to_list() == pl.read_parquet(plain)["text_length"].to_list()
    assert min(rows["text_length"]) > 100
    stats = (out.with_suffix(".stats.json")).read_text()
    assert '"response/bad_content_encoding": 1' in stats
