"""Ranks ingest: real files load with the right columns, damaged files fail with file and line named."""

from __future__ import annotations

import gzip
from pathlib import Path

import polars as pl
import pytest

from graph.ranks import ingest_ranks, release_from_name
from graph.tsv import BadInputError
from tests.shared_data import require_shared_data

HEADER = "#harmonicc_pos\t#harmonicc_val\t#pr_pos\t#pr_val\t#host_rev\n"
ROWS = [
    "1\t3.8556852E7\t3\t0.005074142758046625\tcom.facebook\n",
    "2\t3.6197052E7\t2\t0.00598389777057907\tcom.googleapis.fonts\n",
    "3\t3.4180464E7\t1\t0.007189159938155572\tcom.google.www\n",
    "4\t2052436.2\t4\t1.168318493354625E-6\tcom.cablematters\n",
]


def write_gz(path: Path, text: str) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as out:
        out.write(text)
    return path


def test_ranks_file_becomes_parquet_with_hosts_and_percentiles(tmp_path: Path) -> None:
    src = write_gz(tmp_path / "cc-main-2024-feb-apr-may-host-ranks.txt.gz", HEADER + "".join(ROWS))
    result = ingest_ranks(src, tmp_path / "ranks.parquet")
    frame = pl.read_parquet(tmp_path / "ranks.parquet")
    assert result.rows == 4 and result.kind == "host" and result.release == "cc-main-2024-feb-apr-may"
    assert frame.columns == [
        "host",
        "host_rev",
        "hc_pos",
        "hc_val",
        "pr_pos",
        "pr_val",
        "release",
        "hc_percentile",
        "pr_percentile",
    ]
    first = frame.row(0, named=True)
    assert first["host"] == "facebook.com" and first["hc_val"] == 38556852.0
    assert frame["host"][2] == "www.google.com"
    assert frame["pr_val"][3] == pytest.approx(1.168318493354625e-6, rel=1e-15)
    assert frame["hc_percentile"].to_list() == [1.0, 0.75, 0.5, 0.25]
    assert frame["pr_percentile"][2] == 1.0


def test_domain_file_keeps_host_counts(tmp_path: Path) -> None:
    header = HEADER.rstrip("\n") + "\t#n_hosts\n"
    src = write_gz(
        tmp_path / "cc-main-2026-apr-may-jun-domain-ranks.txt.gz",
        header + "1\t2.9E7\t1\t0.01\tcom.google\t37909\n",
    )
    result = ingest_ranks(src, tmp_path / "d.parquet")
    frame = pl.read_parquet(tmp_path / "d.parquet")
    assert result.kind == "domain"
    assert frame.select("host", "n_hosts").row(0) == ("google.com", 37909)


def test_real_cc_samples_ingest_completely(tmp_path: Path) -> None:
    ranks = require_shared_data("cc/ranks")
    for src in sorted(ranks.glob("*-ranks.txt.gz")):
        out = tmp_path / (src.name + ".parquet")
        result = ingest_ranks(src, out, total_rows=1_000_000)
        frame = pl.read_parquet(out)
        assert result.rows == frame.height == 1000, src.name
        assert result.bad.count == 0
        assert frame["hc_pos"].to_list() == list(range(1, 1001))
        assert frame["hc_percentile"].min() > 0.99  # the top 1000 of a million hosts
    hosts_2026 = pl.read_parquet(tmp_path / "cc-main-2026-apr-may-jun-host-ranks.txt.gz.parquet")["host"]
    assert "www.facebook.com" in hosts_2026.to_list()


def test_sample_without_total_rows_reports_positions_beyond_the_file(tmp_path: Path) -> None:
    src = write_gz(tmp_path / "x-host-ranks.txt.gz", HEADER + "1\t3.0E7\t10981\t1.0E-6\tcom.example\n")
    result = ingest_ranks(src, tmp_path / "x.parquet")
    assert result.beyond_total == 1
    assert pl.read_parquet(tmp_path / "x.parquet")["pr_percentile"][0] == 0.0


def test_release_name_comes_from_the_file_name() -> None:
    assert (
        release_from_name(Path("cc-main-2025-oct-nov-dec-domain-ranks.txt.gz")) == "cc-main-2025-oct-nov-dec"
    )
    assert release_from_name(Path("mine.txt.gz")) == "mine"


@pytest.mark.parametrize(
    ("bad_row", "line", "says"),
    [
        ("5\t1.0E6\t5\t1.0E-7\n", 6, "expected 5 tab-separated columns, found 4"),
        ("5\t1.0E6\t5\t1.0E-7\tcom.x\textra\n", 6, "found 6"),
        ("5\tabc\t5\t1.0E-7\tcom.x\n", 6, "column 'hc_val': not a number: 'abc'"),
        ("5\t1.0E6\tfive\t1.0E-7\tcom.x\n", 6, "column 'pr_pos': not an integer"),
        ("5\t1.0E6\t5\t1.0E-7\t\n", 6, "column 'host_rev': empty value"),
    ],
)
def test_malformed_line_is_named_by_file_and_line(tmp_path: Path, bad_row: str, line: int, says: str) -> None:
    src = write_gz(tmp_path / "r-host-ranks.txt.gz", HEADER + "".join(ROWS) + bad_row + ROWS[0])
    out = tmp_path / "r.parquet"
    with pytest.raises(BadInputError) as caught:
        ingest_ranks(src, out)
    assert str(caught.value).startswith(f"{src}:{line}: ")
    assert says in str(caught.value)
    assert not out.exists() and not list(tmp_path.glob("*.partial"))


def test_skip_bad_lines_counts_them_and_keeps_the_rest(tmp_path: Path) -> None:
    text = HEADER + ROWS[0] + "2\tx\t2\t0.1\tcom.a\n" + ROWS[1] + "3\t1.0\n" + ROWS[2]
    src = write_gz(tmp_path / "r-host-ranks.txt.gz", text)
    result = ingest_ranks(src, tmp_path / "r.parquet", skip_bad_lines=True)
    assert result.rows == 3
    assert result.bad.count == 2
    assert [e.split(": ")[0] for e in result.bad.examples] == [f"{src}:3", f"{src}:5"]


def test_wrong_header_is_refused_before_reading_rows(tmp_path: Path) -> None:
    src = write_gz(tmp_path / "r-host-ranks.txt.gz", "#pos\t#val\t#host\n" + ROWS[0])
    with pytest.raises(BadInputError, match=r"r-host-ranks.txt.gz:1: wrong header '#pos\\t#val\\t#host'"):
        ingest_ranks(src, tmp_path / "r.parquet")


def test_missing_header_is_refused(tmp_path: Path) -> None:
    src = write_gz(tmp_path / "r-host-ranks.txt.gz", "".join(ROWS))
    with pytest.raises(BadInputError, match="no '#' header"):
        ingest_ranks(src, tmp_path / "r.parquet")


def truncated_copy(tmp_path: Path, rows: int) -> Path:
    lines = [f"{i}\t{1.0e7 - i}\t{i}\t{1.0 / i}\tcom.host{i}\n" for i in range(1, rows + 1)]
    data = gzip.compress((HEADER + "".join(lines)).encode(), compresslevel=1)
    src = tmp_path / "t-host-ranks.txt.gz"
    src.write_bytes(data[: len(data) * 2 // 3])
    return src


def test_truncated_gzip_names_file_and_last_good_line(tmp_path: Path) -> None:
    src = truncated_copy(tmp_path, 50_000)
    with pytest.raises(BadInputError) as caught:
        ingest_ranks(src, tmp_path / "t.parquet")
    message = str(caught.value)
    assert message.startswith(str(src) + ":") and "truncated" in message
    assert not (tmp_path / "t.parquet").exists()


def test_truncated_gzip_with_skip_keeps_complete_lines(tmp_path: Path) -> None:
    src = truncated_copy(tmp_path, 50_000)
    result = ingest_ranks(src, tmp_path / "t.parquet", skip_bad_lines=True)
    frame = pl.read_parquet(tmp_path / "t.parquet")
    assert result.bad.truncated_after_line == frame.height + 1  # header is line 1
    assert 10_000 < frame.height < 50_000
    assert frame["hc_pos"].to_list() == list(range(1, frame.height + 1))


def test_plain_text_ranks_file_is_read_too(tmp_path: Path) -> None:
    src = tmp_path / "p-host-ranks.txt"
    src.write_text(HEADER + "".join(ROWS))
    assert ingest_ranks(src, tmp_path / "p.parquet").rows == 4


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="no such file"):
        ingest_ranks(tmp_path / "nope.txt.gz", tmp_path / "x.parquet")


def test_generated_ranks_files_use_java_float_notation_and_ingest(tmp_path: Path) -> None:
    from benchmarks.graph_gen_ranks import generate, java_decimal

    cases = pl.DataFrame(
        {
            "m": [38556852, 20524360, 5074142758046625, 1168318493354625, 10000000],
            "e": [7, 6, -3, -6, 7],
        }
    )
    texts = cases.select(java_decimal(pl.col("m"), pl.col("e"), 8).alias("t"))["t"].to_list()
    assert texts[0] == "3.8556852E7" and texts[1] == "2052436.0" and texts[4] == "1.0E7"
    assert cases.select(java_decimal(pl.col("m"), pl.col("e"), 16).alias("t"))["t"].to_list()[2:4] == [
        "0.005074142758046625",
        "1.168318493354625E-6",
    ]
    src = tmp_path / "gen-host-ranks.txt.gz"
    generate(src, 5000, seed=3)
    result = ingest_ranks(src, tmp_path / "gen.parquet")
    frame = pl.read_parquet(tmp_path / "gen.parquet")
    assert result.rows == 5000 and result.beyond_total == 0
    assert frame["hc_val"].is_sorted(descending=True)
    assert sorted(frame["pr_pos"].to_list()) == list(range(1, 5001))
    assert frame["host"].str.starts_with("www.").any()


def test_corrupt_gzip_data_names_the_file(tmp_path: Path) -> None:
    lines = [f"{i}\t{1.0e7 - i}\t{i}\t{1.0 / i}\tcom.host{i}\n" for i in range(1, 20_001)]
    data = bytearray(gzip.compress((HEADER + "".join(lines)).encode(), compresslevel=1))
    middle = len(data) // 2
    data[middle : middle + 64] = b"\xff" * 64
    src = tmp_path / "c-host-ranks.txt.gz"
    src.write_bytes(bytes(data))
    with pytest.raises(BadInputError) as caught:
        ingest_ranks(src, tmp_path / "c.parquet")
    assert str(caught.value).startswith(f"{src}:")
    assert not (tmp_path / "c.parquet").exists()


def test_rows_parsed_before_the_line_count_finishes_are_kept_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    import graph.ranks
    import graph.tsv

    lines = [f"{i}\t{1.0e7 - i}\t{i}\t{1.0 / i}\tcom.host{i}\n" for i in range(1, 30_001)]
    src = write_gz(tmp_path / "s-host-ranks.txt.gz", HEADER + "".join(lines))
    real_count = graph.tsv.count_lines

    def slow_count(path: Path, stop: object = None) -> int:
        time.sleep(0.5)  # the parser gets well ahead: held rows, then a spill file
        return real_count(path)

    monkeypatch.setattr(graph.tsv, "BLOCK_BYTES", 64 << 10)
    monkeypatch.setattr(graph.ranks, "BUFFER_BYTES", 200 << 10)
    monkeypatch.setattr(graph.ranks, "count_lines", slow_count)
    result = ingest_ranks(src, tmp_path / "s.parquet")
    frame = pl.read_parquet(tmp_path / "s.parquet")
    assert result.rows == 30_000 and result.total_rows == 30_000
    assert frame["hc_pos"].to_list() == list(range(1, 30_001))
    assert frame["hc_percentile"][0] == 1.0 and frame["hc_percentile"][-1] == pytest.approx(1 / 30_000)
    assert not list(tmp_path.glob("*.spill")) and not list(tmp_path.glob("*.partial"))
