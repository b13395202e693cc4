"""The WARC writer's files must read back byte for byte, pass warcio check and survive a crash."""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import io
import itertools
import zlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from warcio.archiveiterator import ArchiveIterator
from warcio.checker import Checker
from warcio.recordloader import ArcWarcRecord

from crawler.archive.warc import FetchRecord, WarcWriter, recover_open_files

CAPTURE = datetime(2026, 11, 29, 19, 30, 1, 5, tzinfo=UTC)
HTML = b"<html><body><p>Hello, archive.</p></body></html>"


def fixed_ids() -> Callable[[], str]:
    counter = itertools.count()
    return lambda: f"<urn:uuid:00000000-0000-4000-8000-{next(counter):012d}>"


def ticking_clock(start: datetime = datetime(2026, 11, 29, 19, 30, 0, 123456, tzinfo=UTC)):
    ticks = itertools.count()
    return lambda: start + timedelta(seconds=next(ticks))


def make_writer(directory: Path, **kwargs) -> WarcWriter:
    kwargs.setdefault("warcinfo", {"software": "hostcrawl/test", "operator": "ops@example.org"})
    return WarcWriter(
        directory,
        crawl_host="myhost",
        record_id_factory=fixed_ids(),
        clock=ticking_clock(),
        **kwargs,
    )


def fetch(url: str = "http://news-17.example/a/b?c=1#frag", **overrides) -> FetchRecord:
    fields = {
        "url": url,
        "method": "GET",
        "request_headers": [("User-Agent", "hostcrawl-bot/0.1"), ("Accept-Encoding", "gzip")],
        "http_version": "HTTP/1.1",
        "status": 200,
        "reason": "OK",
        "response_headers": [
            ("Content-Type", "text/html"),
            ("Content-Length", str(len(HTML))),
        ],
        "payload": HTML,
        "fetched_at": CAPTURE,
        "ip_address": "127.0.0.1",
    }
    fields.update(overrides)
    return FetchRecord(**fields)


def read_records(path: Path) -> list[tuple[ArcWarcRecord, bytes]]:
    """Records with their raw (still content-encoded) payloads."""
    out = []
    with path.open("rb") as fh:
        for record in ArchiveIterator(fh):
            out.append((record, record.raw_stream.read()))
    return out


def gzip_members(data: bytes) -> list[bytes]:
    members = []
    while data:
        d = zlib.decompressobj(zlib.MAX_WBITS | 16)
        members.append(d.decompress(data))
        assert d.eof
        data = d.unused_data
    return members


def warcio_check(paths: list[Path]) -> int:
    with contextlib.redirect_stdout(io.StringIO()):
        return Checker(SimpleNamespace(inputs=[str(p) for p in paths], verbose=True)).process_all()


EXPECTED = (
    b"WARC/1.1\r\n"
    b"WARC-Type: warcinfo\r\n"
    b"WARC-Date: 2026-11-29T19:30:00.123456Z\r\n"
    b"WARC-Record-ID: <urn:uuid:00000000-0000-4000-8000-000000000000>\r\n"
    b"Content-Length: 194\r\n"
    b"Content-Type: application/warc-fields\r\n"
    b"WARC-Filename: hostcrawl-20261129193000123-00000-myhost.warc.gz\r\n"
    b"WARC-Block-Digest: sha1:BJWQQ6IICLORNC65AJPI42ALERGUTTDD\r\n"
    b"\r\n"
    b"software: hostcrawl/test\r\n"
    b"hostname: myhost\r\n"
    b"operator: ops@example.org\r\n"
    b"format: WARC File Format 1.1\r\n"
    b"conformsTo: https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/\r\n"
    b"\r\n\r\n",
    b"WARC/1.1\r\n"
    b"WARC-Type: response\r\n"
    b"WARC-Date: 2026-11-29T19:30:01.000005Z\r\n"
    b"WARC-Record-ID: <urn:uuid:00000000-0000-4000-8000-000000000001>\r\n"
    b"Content-Length: 112\r\n"
    b"Content-Type: application/http; msgtype=response\r\n"
    b"WARC-Warcinfo-ID: <urn:uuid:00000000-0000-4000-8000-000000000000>\r\n"
    b"WARC-IP-Address: 127.0.0.1\r\n"
    b"WARC-Target-URI: http://news-17.example/a/b?c=1\r\n"
    b"WARC-Payload-Digest: sha1:LLB4A6LDKK6R65PQI3FGCVZVDA4QQC4N\r\n"
    b"WARC-Block-Digest: sha1:ZHD2QPMHX2IXVYRQC2WGXMDGS2J4WGDH\r\n"
    b"\r\n"
    b"HTTP/1.1 200 OK\r\n"
    b"Content-Type: text/html\r\n"
    b"Content-Length: 48\r\n"
    b"\r\n" + HTML + b"\r\n\r\n",
    b"WARC/1.1\r\n"
    b"WARC-Type: request\r\n"
    b"WARC-Date: 2026-11-29T19:30:01.000005Z\r\n"
    b"WARC-Record-ID: <urn:uuid:00000000-0000-4000-8000-000000000002>\r\n"
    b"Content-Length: 102\r\n"
    b"Content-Type: application/http; msgtype=request\r\n"
    b"WARC-Warcinfo-ID: <urn:uuid:00000000-0000-4000-8000-000000000000>\r\n"
    b"WARC-Concurrent-To: <urn:uuid:00000000-0000-4000-8000-000000000001>\r\n"
    b"WARC-IP-Address: 127.0.0.1\r\n"
    b"WARC-Target-URI: http://news-17.example/a/b?c=1\r\n"
    b"WARC-Payload-Digest: sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ\r\n"
    b"WARC-Block-Digest: sha1:KW2F6WMJ7ORZLLA6B6TJERXQVNPKH6W4\r\n"
    b"\r\n"
    b"GET /a/b?c=1 HTTP/1.1\r\n"
    b"Host: news-17.example\r\n"
    b"User-Agent: hostcrawl-bot/0.1\r\n"
    b"Accept-Encoding: gzip\r\n"
    b"\r\n\r\n\r\n",
    b"WARC/1.1\r\n"
    b"WARC-Type: metadata\r\n"
    b"WARC-Date: 2026-11-29T19:30:01.123456Z\r\n"
    b"WARC-Record-ID: <urn:uuid:00000000-0000-4000-8000-000000000003>\r\n"
    b"Content-Length: 39\r\n"
    b"Content-Type: application/json\r\n"
    b"WARC-Warcinfo-ID: <urn:uuid:00000000-0000-4000-8000-000000000000>\r\n"
    b"WARC-Refers-To: <urn:uuid:00000000-0000-4000-8000-000000000001>\r\n"
    b"WARC-Target-URI: http://news-17.example/a/b?c=1\r\n"
    b"WARC-Payload-Digest: sha1:YSKP75AOJVFI2ZAIVKHJCINPWKP7I3LV\r\n"
    b"WARC-Block-Digest: sha1:YSKP75AOJVFI2ZAIVKHJCINPWKP7I3LV\r\n"
    b"\r\n"
    b'{"cleaner": "cpu_v1", "quality": 0.875}'
    b"\r\n\r\n",
)


def write_sample(directory: Path) -> WarcWriter:
    with make_writer(directory) as writer:
        response_id = writer.write_fetch(fetch())
        writer.write_metadata(fetch().url, response_id, {"quality": 0.875, "cleaner": "cpu_v1"})
    return writer


def test_records_match_expected_bytes_one_gzip_member_each(tmp_path: Path) -> None:
    writer = write_sample(tmp_path)
    (path,) = writer.files
    assert path.name == "hostcrawl-20261129193000123-00000-myhost.warc.gz"
    members = gzip_members(path.read_bytes())
    assert len(members) == 4
    for got, want in zip(members, EXPECTED, strict=True):
        assert got == want


def test_same_inputs_give_identical_files(tmp_path: Path) -> None:
    first = write_sample(tmp_path / "a").files[0].read_bytes()
    second = write_sample(tmp_path / "b").files[0].read_bytes()
    assert first == second


def test_every_record_passes_warcio_check(tmp_path: Path) -> None:
    writer = write_sample(tmp_path)
    assert warcio_check(writer.files) == 0


def test_digests_are_sha1_base32_of_block_and_stored_payload(tmp_path: Path) -> None:
    (path,) = write_sample(tmp_path).files
    record, _ = read_records(path)[1]
    sha1 = base64.b32encode(hashlib.sha1(HTML).digest()).decode()
    assert record.rec_headers.get_header("WARC-Payload-Digest") == f"sha1:{sha1}"
    block = gzip_members(path.read_bytes())[1].split(b"\r\n\r\n", 1)[1].removesuffix(b"\r\n\r\n")
    block_sha1 = base64.b32encode(hashlib.sha1(block).digest()).decode()
    assert record.rec_headers.get_header("WARC-Block-Digest") == f"sha1:{block_sha1}"


def test_request_response_and_metadata_are_linked_by_record_ids(tmp_path: Path) -> None:
    (path,) = write_sample(tmp_path).files
    (info, _), (response, _), (request, _), (meta, body) = read_records(path)
    info_id = info.rec_headers.get_header("WARC-Record-ID")
    response_id = response.rec_headers.get_header("WARC-Record-ID")
    assert [r.rec_type for r in (info, response, request, meta)] == [
        "warcinfo",
        "response",
        "request",
        "metadata",
    ]
    for record in (response, request, meta):
        assert record.rec_headers.get_header("WARC-Warcinfo-ID") == info_id
        assert record.rec_headers.get_header("WARC-Target-URI") == "http://news-17.example/a/b?c=1"
    assert request.rec_headers.get_header("WARC-Concurrent-To") == response_id
    assert meta.rec_headers.get_header("WARC-Refers-To") == response_id
    assert meta.rec_headers.get_header("Content-Type") == "application/json"
    assert body == b'{"cleaner": "cpu_v1", "quality": 0.875}'


def test_repeated_response_headers_are_kept_in_order(tmp_path: Path) -> None:
    headers = [("Set-Cookie", "a=1"), ("Vary", "Accept"), ("Set-Cookie", "b=2")]
    with make_writer(tmp_path) as writer:
        writer.write_fetch(fetch(response_headers=headers))
    record, _ = read_records(writer.files[0])[1]
    assert record.http_headers.headers == headers


def test_chunked_transfer_encoding_is_renamed_and_length_given(tmp_path: Path) -> None:
    headers = [("Content-Type", "text/html"), ("Transfer-Encoding", "chunked")]
    with make_writer(tmp_path) as writer:
        writer.write_fetch(fetch(response_headers=headers))
    record, payload = read_records(writer.files[0])[1]
    assert record.http_headers.headers == [
        ("Content-Type", "text/html"),
        ("X-Crawler-Transfer-Encoding", "chunked"),
        ("Content-Length", str(len(HTML))),
    ]
    assert payload == HTML
    assert warcio_check(writer.files) == 0


def test_truncated_body_carries_warc_truncated_and_original_length(tmp_path: Path) -> None:
    cut = HTML[:10]
    rec = fetch(payload=cut, truncated="length")
    with make_writer(tmp_path) as writer:
        writer.write_fetch(rec)
    record, payload = read_records(writer.files[0])[1]
    assert record.rec_headers.get_header("WARC-Truncated") == "length"
    assert payload == cut
    assert record.http_headers.get_header("X-Crawler-Content-Length") == str(len(HTML))
    assert record.http_headers.get_header("Content-Length") == "10"
    assert warcio_check(writer.files) == 0


def test_unknown_truncation_reason_is_refused(tmp_path: Path) -> None:
    with make_writer(tmp_path) as writer, pytest.raises(ValueError, match="WARC-Truncated"):
        writer.write_fetch(fetch(truncated="too-big"))


def test_head_response_keeps_its_content_length(tmp_path: Path) -> None:
    with make_writer(tmp_path) as writer:
        writer.write_fetch(fetch(method="HEAD", payload=b""))
    record, _ = read_records(writer.files[0])[1]
    assert record.http_headers.get_header("Content-Length") == str(len(HTML))
    assert record.http_headers.get_header("X-Crawler-Content-Length") is None


def test_gzip_encoded_payload_is_stored_compressed_and_decodes(tmp_path: Path) -> None:
    encoded = gzip.compress(HTML, mtime=0)
    headers = [("Content-Type", "text/html"), ("Content-Encoding", "gzip")]
    with make_writer(tmp_path) as writer:
        writer.write_fetch(fetch(response_headers=headers, payload=encoded))
    (path,) = writer.files
    _, raw = read_records(path)[1]
    assert raw == encoded
    with path.open("rb") as fh:
        for response in ArchiveIterator(fh):
            if response.rec_type == "response":
                assert response.content_stream().read() == HTML
                break
    sha1 = base64.b32encode(hashlib.sha1(encoded).digest()).decode()
    assert response.rec_headers.get_header("WARC-Payload-Digest") == f"sha1:{sha1}"
    assert warcio_check([path]) == 0


def test_robots_txt_is_archived_like_any_fetch(tmp_path: Path) -> None:
    robots = b"User-agent: *\nDisallow: /private\n"
    rec = fetch(
        url="http://news-17.example/robots.txt",
        response_headers=[("Content-Type", "text/plain")],
        payload=robots,
    )
    with make_writer(tmp_path) as writer:
        writer.write_fetch(rec)
    (_, _), (_, payload), (request, _) = read_records(writer.files[0])
    assert payload == robots
    assert request.http_headers.protocol == "GET"
    assert request.http_headers.statusline == "/robots.txt HTTP/1.1"


def test_file_is_named_open_until_closed(tmp_path: Path) -> None:
    writer = make_writer(tmp_path)
    writer.write_fetch(fetch())
    assert [p.name for p in tmp_path.iterdir()] == [writer.files[0].name + ".open"]
    writer.close()
    assert [p.name for p in tmp_path.iterdir()] == [writer.files[0].name]
    with pytest.raises(ValueError, match="closed"):
        writer.write_fetch(fetch())


def test_rotation_gives_several_files_each_starting_with_warcinfo(tmp_path: Path) -> None:
    with make_writer(tmp_path, max_file_bytes=1500) as writer:
        for i in range(8):
            writer.write_fetch(fetch(url=f"http://news-17.example/{i}", payload=HTML * 20))
    assert len(writer.files) >= 3
    assert [p.name.split("-")[2] for p in writer.files] == [f"{i:05d}" for i in range(len(writer.files))]
    responses = 0
    for path in writer.files:
        records = read_records(path)
        info = records[0][0]
        assert info.rec_type == "warcinfo"
        assert info.rec_headers.get_header("WARC-Filename") == path.name
        for record, _ in records[1:]:
            assert record.rec_headers.get_header("WARC-Warcinfo-ID") == info.rec_headers.get_header(
                "WARC-Record-ID"
            )
        responses += sum(r.rec_type == "response" for r, _ in records)
    assert responses == 8
    assert warcio_check(writer.files) == 0


def test_resumed_writer_continues_the_serial(tmp_path: Path) -> None:
    write_sample(tmp_path)
    with make_writer(tmp_path) as writer:
        writer.write_fetch(fetch())
    assert writer.files[0].name.split("-")[2] == "00001"


def crashed_file(directory: Path, records: int = 3) -> Path:
    """An .open file as a killed crawl leaves it: never closed, never renamed."""
    writer = make_writer(directory)
    for i in range(records):
        writer.write_fetch(fetch(url=f"http://news-17.example/{i}"))
    writer._fh.close()
    return next(directory.glob("*.open"))


def member_ends(data: bytes) -> list[int]:
    ends, pos = [], 0
    for _ in gzip_members(data):
        d = zlib.decompressobj(zlib.MAX_WBITS | 16)
        d.decompress(data[pos:])
        pos = len(data) - len(d.unused_data)
        ends.append(pos)
    return ends


@pytest.mark.parametrize(
    ("how", "kept_members"),
    [("mid_record", 5), ("in_gzip_trailer", 6), ("zeroed_tail", 5), ("garbage_tail", 3)],
)
def test_recovery_keeps_all_complete_records_of_a_cut_file(
    tmp_path: Path, how: str, kept_members: int
) -> None:
    open_path = crashed_file(tmp_path)
    data = open_path.read_bytes()
    ends = member_ends(data)  # warcinfo, then response and request per fetch
    cut = {
        "mid_record": data[: (ends[4] + ends[5]) // 2],
        "in_gzip_trailer": data[: ends[6] - 3],
        "zeroed_tail": data[: ends[4]] + b"\0" * 4096,
        "garbage_tail": data[: ends[2]] + b"not gzip at all",
    }[how]
    open_path.write_bytes(cut)
    (final, kept), *_ = recover_open_files(tmp_path).items()
    assert final == open_path.with_name(open_path.name.removesuffix(".open"))
    assert not open_path.exists()
    assert kept == kept_members
    assert final.read_bytes() == data[: ends[kept_members - 1]]
    assert warcio_check([final]) == 0


def test_recovery_keeps_an_intact_file_whole(tmp_path: Path) -> None:
    open_path = crashed_file(tmp_path)
    data = open_path.read_bytes()
    (final, kept), *_ = recover_open_files(tmp_path).items()
    assert kept == 7
    assert final.read_bytes() == data


def test_recovery_drops_a_file_without_one_whole_record(tmp_path: Path) -> None:
    open_path = crashed_file(tmp_path, records=1)
    open_path.write_bytes(open_path.read_bytes()[:20])
    assert list(recover_open_files(tmp_path).values()) == [0]
    assert list(tmp_path.iterdir()) == []
