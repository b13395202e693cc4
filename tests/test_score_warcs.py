"""`hostcrawl score`: WARC files in, one scored row per HTML page out; broken archives never stop it."""

from __future__ import annotations

import argparse
import gzip
import io
import json
import random
from pathlib import Path

import polars as pl
import pytest
from shared_data import require_shared_data
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from crawler.archive.score_cli import register_cli
from crawler.testweb import SiteModel, TestWebConfig

PAGE_COLUMNS = ["url", "host", "registered_domain", "language", "language_score", "text_length"]


def local_web_pages(n: int) -> list[tuple[str, bytes, bool]]:
    """(url, html, high_quality) of served content pages of a small test web."""
    model = SiteModel(TestWebConfig(n_hosts=30, seed=3, hostile_share=0.0))
    out = []
    for row in model.pages_frame().sample(n=n, seed=1).iter_rows(named=True):
        rendered = model.render(row["host"], row["path"])
        body = rendered.body if isinstance(rendered.body, bytes) else rendered.body.encode()
        out.append((row["url"], body, bool(row["high_quality"])))
    return out


def response(
    writer: WARCWriter, url: str, body: bytes, status: str = "200 OK", ctype: str = "text/html"
) -> None:
    headers = StatusAndHeaders(status, [("Content-Type", ctype)], protocol="HTTP/1.1")
    writer.write_record(
        writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=headers)
    )


def build_warc(pages: list[tuple[str, bytes, bool]], gz: bool = True, extras: bool = True) -> bytes:
    """A crawl-shaped WARC: warcinfo, request + response per page, and records to skip."""
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=gz)
    writer.write_record(writer.create_warcinfo_record("test.warc", {"software": "tests"}))
    for url, body, _ in pages:
        request = StatusAndHeaders("GET / HTTP/1.1", [("Host", "x")], is_http_request=True)
        writer.write_record(writer.create_warc_record(url, "request", http_headers=request))
        response(writer, url, body)
    if extras:
        response(writer, "http://img.example/a.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, ctype="image/png")
        response(writer, "http://gone.example/", b"<html>not here</html>", status="404 Not Found")
        response(writer, "http://moved.example/", b"", status="301 Moved Permanently")
    return buf.getvalue()


def score(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="hostcrawl")
    register_cli(parser.add_subparsers())
    args = parser.parse_args(["score", "--no-progress", *argv])
    return int(args.func(args))


@pytest.fixture(scope="module")
def pages() -> list[tuple[str, bytes, bool]]:
    return local_web_pages(24)


def test_each_html_response_becomes_one_row_and_every_skip_is_counted_by_reason(
    tmp_path: Path, pages: list[tuple[str, bytes, bool]]
) -> None:
    warc = tmp_path / "crawl.warc.gz"
    warc.write_bytes(build_warc(pages))
    out = tmp_path / "pages.parquet"
    assert score(["--warc", str(warc), "--out", str(out), "--workers", "1"]) == 0
    frame = pl.read_parquet(out)
    assert frame.columns[:6] == PAGE_COLUMNS and "score_heuristic_v3" in frame.columns
    assert frame["url"].to_list() == [url for url, _, _ in pages]
    assert frame["registered_domain"].to_list() == frame["host"].to_list()  # test hosts are domains
    assert (frame["text_length"] > 0).all() and frame["language"].is_in(["en", "de", "fr", "es"]).all()
    high = dict(zip(frame["url"], frame["score_heuristic_v3"], strict=True))
    assert min(high[u] for u, _, h in pages if h) > max(high[u] for u, _, h in pages if not h)
    stats = json.loads(out.with_suffix(".stats.json").read_text())
    assert stats["counts"]["record/request"] == len(pages)
    assert stats["counts"]["record/warcinfo"] == 1
    assert stats["counts"]["response/not_html"] == 1
    assert stats["counts"]["response/status_4xx"] == 1
    assert stats["counts"]["response/status_3xx"] == 1
    assert stats["broken"] == [] and stats["pages"] == len(pages)


def test_two_worker_processes_write_the_same_rows_as_one(
    tmp_path: Path, pages: list[tuple[str, bytes, bool]]
) -> None:
    warc = tmp_path / "crawl.warc.gz"
    warc.write_bytes(build_warc(pages))
    one, two = tmp_path / "one.parquet", tmp_path / "two.parquet"
    assert score(["--warc", str(warc), "--out", str(one), "--workers", "1"]) == 0
    assert score(["--warc", str(warc), "--out", str(two), "--workers", "2"]) == 0
    assert pl.read_parquet(one).equals(pl.read_parquet(two))


def corrupt_middle_record(data: bytes, pages: list[tuple[str, bytes, bool]]) -> tuple[bytes, int]:
    """Zero the inside of the 6th page's gzip member; returns the data and that record's offset."""
    url = pages[5][0].encode()
    start = 0
    for _ in range(1 + 2 * 5 + 1):  # warcinfo, 5 x (request, response), the 6th request
        start = data.index(b"\x1f\x8b\x08", start + 1)
    member_end = data.index(b"\x1f\x8b\x08", start + 1)
    assert url  # the member holds the 6th response
    broken = data[: start + 40] + b"\x00" * (member_end - start - 80) + data[member_end - 40 :]
    return broken, start


def test_corrupt_record_is_reported_by_offset_and_later_records_are_still_scored(
    tmp_path: Path, pages: list[tuple[str, bytes, bool]]
) -> None:
    data, offset = corrupt_middle_record(build_warc(pages, extras=False), pages)
    warc = tmp_path / "corrupt.warc.gz"
    warc.write_bytes(data)
    out = tmp_path / "pages.parquet"
    assert score(["--warc", str(warc), "--out", str(out), "--workers", "1"]) == 0
    urls = pl.read_parquet(out)["url"].to_list()
    assert urls == [u for i, (u, _, _) in enumerate(pages) if i != 5]
    stats = json.loads(out.with_suffix(".stats.json").read_text())
    assert [b["offset"] for b in stats["broken"]] == [offset]
    assert stats["broken"][0]["warc_file"] == str(warc) and stats["broken"][0]["resumed_at"] > offset


@pytest.mark.parametrize("gz", [True, False])
def test_truncated_warc_keeps_the_pages_before_the_cut_and_reports_the_rest(
    tmp_path: Path, pages: list[tuple[str, bytes, bool]], gz: bool
) -> None:
    data = build_warc(pages[:6], gz=gz, extras=False)
    warc = tmp_path / ("cut.warc.gz" if gz else "cut.warc")
    warc.write_bytes(data[: len(data) - 700])  # inside the last response
    out = tmp_path / "pages.parquet"
    assert score(["--warc", str(warc), "--out", str(out), "--workers", "1"]) == 0
    assert pl.read_parquet(out)["url"].to_list() == [u for u, _, _ in pages[:5]]
    stats = json.loads(out.with_suffix(".stats.json").read_text())
    assert len(stats["broken"]) == 1 and stats["broken"][0]["resumed_at"] is None


@pytest.mark.parametrize("gz", [True, False])
def test_a_warc_cut_inside_its_last_metadata_record_is_reported_not_passed(
    tmp_path: Path, pages: list[tuple[str, bytes, bool]], gz: bool
) -> None:
    # Our crawls end a page with its metadata record: a file cut there lost nothing a row needs, but
    # the archive is damaged, and the user must hear it (warcio's iterator just ends at the cut).
    buf = io.BytesIO(build_warc(pages[:3], gz=gz, extras=False))
    buf.seek(0, io.SEEK_END)
    writer = WARCWriter(buf, gzip=gz)
    pad = random.Random(0).randbytes(1500).hex()  # does not compress: the cut lands in this record
    verdict = json.dumps({"cleaner": "blocks_v1", "pad": pad}).encode()
    writer.write_record(
        writer.create_warc_record(pages[2][0], "metadata", payload=io.BytesIO(verdict), length=len(verdict))
    )
    data = buf.getvalue()
    warc = tmp_path / ("cut.warc.gz" if gz else "cut.warc")
    warc.write_bytes(data[: len(data) - 500])
    out = tmp_path / "pages.parquet"
    assert score(["--warc", str(warc), "--out", str(out), "--workers", "1"]) == 0
    assert pl.read_parquet(out)["url"].to_list() == [u for u, _, _ in pages[:3]]
    stats = json.loads(out.with_suffix(".stats.json").read_text())
    [broken] = stats["broken"]
    assert "Content-Length" in broken["reason"] and broken["resumed_at"] is None


def test_garbage_and_good_files_in_one_run_score_the_good_one(
    tmp_path: Path, pages: list[tuple[str, bytes, bool]], capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a-garbage.warc.gz").write_bytes(b"this is not a WARC file\n" * 50)
    (tmp_path / "b-good.warc.gz").write_bytes(build_warc(pages[:3], extras=False))
    out = tmp_path / "pages.parquet"
    assert score(["--warc", str(tmp_path / "*.warc.gz"), "--out", str(out), "--workers", "1"]) == 0
    assert pl.read_parquet(out).height == 3
    assert "broken record" in capsys.readouterr().err
    [broken] = json.loads(out.with_suffix(".stats.json").read_text())["broken"]
    assert broken["warc_file"].endswith("a-garbage.warc.gz") and broken["offset"] == 0


def test_warc_gzipped_as_one_stream_is_read_through(
    tmp_path: Path, pages: list[tuple[str, bytes, bool]]
) -> None:
    warc = tmp_path / "single.warc.gz"
    warc.write_bytes(gzip.compress(build_warc(pages[:4], gz=False, extras=False)))
    out = tmp_path / "pages.parquet"
    assert score(["--warc", str(warc), "--out", str(out), "--workers", "1"]) == 0
    assert pl.read_parquet(out)["url"].to_list() == [u for u, _, _ in pages[:4]]


def test_ensemble_and_host_table_are_written_and_the_calibration_scores_again(
    tmp_path: Path, pages: list[tuple[str, bytes, bool]]
) -> None:
    warc = tmp_path / "crawl.warc.gz"
    warc.write_bytes(build_warc(pages))
    out, hosts = tmp_path / "pages.parquet", tmp_path / "hosts.parquet"
    argv = ["--warc", str(warc), "--out", str(out), "--workers", "1", "--ensemble", "--hosts-out", str(hosts)]
    assert score(argv) == 0
    frame = pl.read_parquet(out)
    assert frame["ensemble_bucket"].min() == 0 and frame["ensemble_bucket"].max() == 19
    assert (frame["score_ensemble"] * 19 - frame["ensemble_bucket"]).abs().max() < 1e-9  # type: ignore[operator]
    table = pl.read_parquet(hosts)
    assert table["pages"].sum() == len(pages) and table["host"].n_unique() == table.height
    assert {"primary_language", "primary_language_share", "density_heuristic_v3"} <= set(table.columns)
    calibration = out.with_suffix(".ensemble.json")
    again = tmp_path / "again.parquet"
    argv = [
        "--warc",
        str(warc),
        "--out",
        str(again),
        "--workers",
        "1",
        "--classifier",
        f"nemotron={calibration}",
    ]
    assert score(argv) == 0
    assert pl.read_parquet(again)["score_nemotron"].to_list() == pytest.approx(
        frame["score_ensemble"].to_list()
    )


def test_bad_inputs_are_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "pages.parquet"
    assert score(["--warc", str(tmp_path / "none-*.warc.gz"), "--out", str(out)]) == 2
    assert "matches no file" in capsys.readouterr().err
    (tmp_path / "x.warc.gz").write_bytes(build_warc([], extras=False))
    assert (
        score(["--warc", str(tmp_path / "x.warc.gz"), "--out", str(out), "--classifier", "dclm=/no/m.bin"])
        == 2
    )
    assert "/no/m.bin" in capsys.readouterr().err
    assert not out.exists()


def test_real_common_crawl_capture_scores_its_one_html_page(tmp_path: Path) -> None:
    warc = require_shared_data("cc/warc") / "cc-main-2024-22-whirlwind.warc.gz"
    out = tmp_path / "pages.parquet"
    assert score(["--warc", str(warc), "--out", str(out), "--workers", "1"]) == 0
    row = pl.read_parquet(out).row(0, named=True)
    assert row["url"] == "https://an.wikipedia.org/wiki/Escopete"
    assert (row["host"], row["registered_domain"], row["language"]) == (
        "an.wikipedia.org",
        "wikipedia.org",
        "an",
    )
    assert row["text_length"] > 1000 and 0.0 < row["score_heuristic_v3"] <= 1.0
    stats = json.loads(out.with_suffix(".stats.json").read_text())
    assert stats["counts"] == {
        "warc/records": 4,
        "record/warcinfo": 1,
        "record/request": 1,
        "record/metadata": 1,
    }


def test_force_replaces_an_existing_output_whole(
    tmp_path: Path, pages: list[tuple[str, bytes, bool]]
) -> None:
    warc = tmp_path / "crawl.warc.gz"
    warc.write_bytes(build_warc(pages[:4], extras=False))
    out = tmp_path / "pages.parquet"
    out.write_bytes(b"an earlier result")
    assert score(["--warc", str(warc), "--out", str(out), "--workers", "1", "--force"]) == 0
    assert pl.read_parquet(out)["url"].to_list() == [url for url, _, _ in pages[:4]]
