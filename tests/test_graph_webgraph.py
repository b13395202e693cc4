"""Web-graph parts ingest and k-hop subgraphs; ranking our own links into a priors-ready parquet."""

from __future__ import annotations

import gzip
from pathlib import Path

import polars as pl
import pytest

from graph.linkgraph import load_graph_dir, load_links, rank_graph
from graph.priors import HostPriors
from graph.tsv import BadInputError
from graph.webgraph import extract_subgraph, ingest_edges, ingest_vertices, resolve_parts

# A small CC-style host graph: ids sorted by reversed host name, as CC numbers them.
VERTICES = ["com.a", "com.b", "com.c.www", "com.d", "com.e", "org.far"]
EDGES = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0), (3, 0)]


def write_parts(folder: Path, name: str, rows: list[str], per_part: int) -> Path:
    """Part files plus a CC-style `<name>.paths.gz` listing with bucket-relative paths."""
    folder.mkdir(parents=True, exist_ok=True)
    listed = []
    for index in range(0, len(rows), per_part):
        rel = f"projects/hyperlinkgraph/cc-main-x/host/{name}/part-{index // per_part:05d}.txt.gz"
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(path, "wt") as out:
            out.write("".join(rows[index : index + per_part]))
        listed.append(rel)
    listing = folder / f"{name}.paths.gz"
    with gzip.open(listing, "wt") as out:
        out.write("\n".join(listed) + "\n")
    return listing


@pytest.fixture
def cc_graph(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "cc"
    v_list = write_parts(data, "vertices", [f"{i}\t{h}\n" for i, h in enumerate(VERTICES)], per_part=4)
    e_list = write_parts(data, "edges", [f"{s}\t{d}\n" for s, d in EDGES], per_part=3)
    ingest_vertices(resolve_parts([v_list]), tmp_path / "vertices")
    ingest_edges(resolve_parts([e_list]), tmp_path / "edges")
    return tmp_path / "vertices", tmp_path / "edges"


def test_listed_parts_ingest_to_parquet_with_host_names(cc_graph: tuple[Path, Path]) -> None:
    vertices, edges = cc_graph
    frame = pl.read_parquet(vertices / "*.parquet").sort("id")
    assert frame["host"].to_list() == ["a.com", "b.com", "www.c.com", "d.com", "e.com", "far.org"]
    assert len(list(vertices.glob("*.parquet"))) == 2
    assert pl.read_parquet(edges / "*.parquet").sort("src", "dst").rows() == sorted(EDGES)


def test_rerun_resumes_finished_parts(tmp_path: Path, cc_graph: tuple[Path, Path]) -> None:
    listing = tmp_path / "cc" / "edges.paths.gz"
    result = ingest_edges(resolve_parts([listing]), tmp_path / "edges")
    assert result.resumed == 3 and result.rows == len(EDGES)


def test_listing_with_a_missing_part_names_the_line(tmp_path: Path) -> None:
    listing = tmp_path / "edges.paths.gz"
    with gzip.open(listing, "wt") as out:
        out.write("a/part-00000.txt.gz\n")
    with pytest.raises(
        BadInputError, match=r"edges\.paths\.gz:1: listed part 'a/part-00000.txt.gz' not found"
    ):
        resolve_parts([listing])


def test_bad_edge_line_names_the_part_and_line(tmp_path: Path) -> None:
    part = tmp_path / "part-00000.txt.gz"
    with gzip.open(part, "wt") as out:
        out.write("0\t1\n1\tx\n")
    with pytest.raises(BadInputError, match=r"part-00000\.txt\.gz:2: column 'dst': not an integer"):
        ingest_edges([part], tmp_path / "edges")
    assert not list((tmp_path / "edges").glob("*.parquet"))
    result = ingest_edges([part], tmp_path / "edges", skip_bad_lines=True)
    assert result.rows == 1 and result.bad.count == 1


def test_one_hop_out_of_a_seed_follows_its_links(tmp_path: Path, cc_graph: tuple[Path, Path]) -> None:
    vertices, edges = cc_graph
    result = extract_subgraph(vertices, edges, ["www.b.com"], tmp_path / "sub", hops=1, direction="out")
    sub = pl.read_parquet(tmp_path / "sub" / "vertices.parquet")
    assert result.seeds_found == ["www.b.com"]  # found as b.com: the www conventions meet
    assert dict(zip(sub["host"], sub["hop"], strict=True)) == {"b.com": 0, "www.c.com": 1}
    assert pl.read_parquet(tmp_path / "sub" / "edges.parquet").rows() == [(1, 2)]


def test_two_hops_both_ways_and_missing_seeds_are_reported(
    tmp_path: Path, cc_graph: tuple[Path, Path]
) -> None:
    vertices, edges = cc_graph
    result = extract_subgraph(vertices, edges, ["a.com", "nowhere.net"], tmp_path / "sub", hops=2)
    hosts = set(pl.read_parquet(tmp_path / "sub" / "vertices.parquet")["host"])
    # a -> b -> c (out), far -> a and d -> a (in), e -> far and c -> d (in, second hop)
    assert hosts == {"a.com", "b.com", "www.c.com", "far.org", "d.com", "e.com"}
    assert result.seeds_missing == ["nowhere.net"]
    assert result.edges == len(EDGES)


def test_subgraph_can_be_ranked_and_used_as_priors(tmp_path: Path, cc_graph: tuple[Path, Path]) -> None:
    vertices, edges = cc_graph
    extract_subgraph(vertices, edges, ["a.com"], tmp_path / "sub", hops=1)
    graph = load_graph_dir(tmp_path / "sub")
    rank_graph(graph, tmp_path / "ranks.parquet")
    prior = HostPriors.load(tmp_path / "ranks.parquet").lookup("a.com")
    assert graph.hosts == ["a.com", "b.com", "d.com", "far.org"]
    assert prior is not None and prior.hc_percentile == 1.0  # everyone else links to a.com


def test_links_from_urls_become_a_ranked_host_graph(tmp_path: Path) -> None:
    links = pl.DataFrame(
        {
            "src_url": [
                "http://a.com/x",
                "https://B.com:8443/",
                "http://c.com/",
                "http://a.com/",
                "http://a.com/s",
            ],
            "dst_url": [
                "http://b.com/y",
                "http://a.com/",
                "http://a.com/z",
                "http://b.com/q",
                "http://a.com/t",
            ],
        }
    )
    links.write_parquet(tmp_path / "links.parquet")
    graph = load_links(tmp_path / "links.parquet")
    assert graph.hosts == ["a.com", "b.com", "c.com"]
    assert len(graph.edges.src) == 3  # a->b (twice), b->a, c->a; the self-link a->a is dropped
    result = rank_graph(graph, tmp_path / "ranks.parquet", release="run1")
    ranks = pl.read_parquet(tmp_path / "ranks.parquet")
    assert result.hc_method == "exact"
    assert ranks["host"][0] == "a.com" and ranks["release"][0] == "run1"
    assert ranks["pr_val"].sum() == pytest.approx(1.0)


def test_links_as_host_pairs_in_csv_and_url_lists_in_parquet(tmp_path: Path) -> None:
    (tmp_path / "links.csv").write_text("src_host,dst_host\na.com,b.com\nb.com,c.com\n")
    assert load_links(tmp_path / "links.csv").hosts == ["a.com", "b.com", "c.com"]
    pages = pl.DataFrame({"url": ["http://a.com/", "http://b.com/"], "outlinks": [["http://c.com/"], []]})
    pages.write_parquet(tmp_path / "pages.parquet")
    assert load_links(tmp_path / "pages.parquet").hosts == ["a.com", "c.com"]


def test_links_table_without_link_columns_says_what_it_expects(tmp_path: Path) -> None:
    pl.DataFrame({"url": ["http://a.com/"], "status": [200]}).write_parquet(tmp_path / "pages.parquet")
    with pytest.raises(ValueError, match=r"no link columns found among \['status', 'url'\]"):
        load_links(tmp_path / "pages.parquet")


def test_domain_graph_vertices_keep_their_host_counts(tmp_path: Path) -> None:
    part = tmp_path / "part-00000.txt.gz"
    with gzip.open(part, "wt") as out:
        out.write("0\tcom.facebook\t3906\n1\tuk.co.bbc\t120\n")
    ingest_vertices([part], tmp_path / "domains")
    frame = pl.read_parquet(tmp_path / "domains" / "*.parquet")
    assert frame.select("host", "n_hosts").rows() == [("facebook.com", 3906), ("bbc.co.uk", 120)]
