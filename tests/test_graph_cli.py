"""`hostcrawl graph ...` exit codes and messages, run through the same parser the console script uses."""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path

import polars as pl
import pytest

from graph.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, main, register_cli

HEADER = "#harmonicc_pos\t#harmonicc_val\t#pr_pos\t#pr_val\t#host_rev\n"


def ranks_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "cc-main-2025-oct-nov-dec-host-ranks.txt.gz"
    with gzip.open(path, "wt") as out:
        out.write(HEADER + body)
    return path


def flat(text: str) -> str:
    """Rich wraps long lines for the terminal width; join them back."""
    return " ".join(text.split())


def test_graph_command_registers_on_the_hostcrawl_parser() -> None:
    parser = argparse.ArgumentParser(prog="hostcrawl")
    register_cli(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["graph", "rank", "--links", "l.parquet", "--out", "r.parquet"])
    assert args.hc == "auto" and callable(args.func)


def test_ingest_succeeds_and_says_what_it_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = ranks_file(tmp_path, "1\t3.0E7\t1\t0.5\tcom.example\n2\t2.0E7\t2\t0.25\tcom.other\n")
    code = main(["graph", "ingest", str(src), "--out", str(tmp_path / "r.parquet")])
    assert code == EXIT_OK
    assert "host ranks of cc-main-2025-oct-nov-dec: 2 rows" in flat(capsys.readouterr().err)
    assert pl.read_parquet(tmp_path / "r.parquet")["host"].to_list() == ["example.com", "other.com"]


def test_ingest_replaces_an_existing_output_only_with_force(tmp_path: Path) -> None:
    src = ranks_file(tmp_path, "1\t3.0E7\t1\t0.5\tcom.example\n")
    out = tmp_path / "r.parquet"
    out.write_bytes(b"an earlier result")
    assert main(["graph", "ingest", str(src), "--out", str(out)]) == EXIT_USAGE
    assert out.read_bytes() == b"an earlier result"
    assert main(["graph", "ingest", str(src), "--out", str(out), "--force"]) == EXIT_OK
    assert pl.read_parquet(out)["host"].to_list() == ["example.com"]


def test_ingest_of_a_bad_line_exits_2_naming_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = ranks_file(tmp_path, "1\t3.0E7\t1\t0.5\tcom.example\n2\t2.0E7\t2\n")
    code = main(["graph", "ingest", str(src), "--out", str(tmp_path / "r.parquet")])
    assert code == EXIT_USAGE
    assert f"{src}:3: expected 5 tab-separated columns, found 3" in flat(capsys.readouterr().err)
    assert not (tmp_path / "r.parquet").exists()


def test_ingest_with_skip_bad_lines_reports_the_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = ranks_file(tmp_path, "1\t3.0E7\t1\t0.5\tcom.example\n2\t2.0E7\t2\n3\t1.0E7\t3\t0.1\tcom.x\n")
    code = main(["graph", "ingest", str(src), "--out", str(tmp_path / "r.parquet"), "--skip-bad-lines"])
    err = flat(capsys.readouterr().err)
    assert code == EXIT_OK
    assert "1 bad line(s) skipped" in err and f"{src}:3:" in err
    assert pl.read_parquet(tmp_path / "r.parquet").height == 2


def test_rank_writes_priors_from_a_links_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pl.DataFrame({"src_host": ["a.com", "b.com"], "dst_host": ["b.com", "a.com"]}).write_parquet(
        tmp_path / "links.parquet"
    )
    code = main(
        ["graph", "rank", "--links", str(tmp_path / "links.parquet"), "--out", str(tmp_path / "o.parquet")]
    )
    assert code == EXIT_OK
    assert "ranked 2 hosts / 2 links (HC exact)" in flat(capsys.readouterr().err)


def test_rank_of_a_table_without_links_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pl.DataFrame({"url": ["http://a.com/"]}).write_parquet(tmp_path / "pages.parquet")
    code = main(
        ["graph", "rank", "--links", str(tmp_path / "pages.parquet"), "--out", str(tmp_path / "o.parquet")]
    )
    assert code == EXIT_USAGE
    assert "no link columns found" in flat(capsys.readouterr().err)


def test_subgraph_with_only_unknown_seeds_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pl.DataFrame({"id": [0, 1], "host_rev": ["com.a", "com.b"], "host": ["a.com", "b.com"]}).write_parquet(
        tmp_path / "v.parquet"
    )
    pl.DataFrame({"src": [0], "dst": [1]}).write_parquet(tmp_path / "e.parquet")
    argv = [
        "graph",
        "subgraph",
        "--vertices",
        str(tmp_path / "v.parquet"),
        "--edges",
        str(tmp_path / "e.parquet"),
    ]
    assert main([*argv, "--seed", "x.org", "--out", str(tmp_path / "s")]) == EXIT_FAILED
    assert "seeds not in the graph: x.org" in flat(capsys.readouterr().err)
    assert main([*argv, "--seed", "https://A.com/page", "--out", str(tmp_path / "s")]) == EXIT_OK
    assert "2 hosts, 1 links within 1 hop(s) of 1 seed(s)" in flat(capsys.readouterr().err)


def test_graph_without_subcommand_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["graph"]) == EXIT_USAGE
    assert "ingest" in capsys.readouterr().out
