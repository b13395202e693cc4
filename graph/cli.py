"""`hostcrawl graph ...`: ingest Common Crawl's web graph, cut subgraphs, rank our own link graph."""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

if TYPE_CHECKING:
    from graph.tsv import BadLines

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2  # bad input: a damaged file, a wrong header, missing columns

EPILOG = """\
examples:
  hostcrawl graph ingest cc-main-2024-feb-apr-may-host-ranks.txt.gz --out ranks.parquet
  hostcrawl graph vertices host/vertices.paths.gz --base /data/cc --out graph/vertices
  hostcrawl graph edges host/edges.paths.gz --base /data/cc --out graph/edges
  hostcrawl graph subgraph --vertices graph/vertices --edges graph/edges --seed commoncrawl.org \\
      --hops 2 --out sub
  hostcrawl graph rank --graph sub --out sub-ranks.parquet
  hostcrawl graph rank --links my-links.parquet --out my-ranks.parquet

`graph rank --links` reads a link table you bring (a crawl writes none): one row per link, as
src_host+dst_host, src_url+dst_url, or url+outlinks (a list column) in parquet, CSV or JSON lines.

The scheduler reads any ranks parquet through `--priors` (graph.priors.HostPriors).
"""


def register_cli(subparsers: argparse._SubParsersAction) -> None:
    """Add `graph ingest|vertices|edges|subgraph|rank` to the hostcrawl command."""
    parser = subparsers.add_parser(
        "graph",
        help="host graph: ingest CC ranks/vertices/edges, k-hop subgraphs, PageRank/HC of our links",
        description="Common Crawl web-graph ingest and host centrality (harmonic centrality, PageRank).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="graph_command", metavar="COMMAND")

    ingest = commands.add_parser("ingest", help="stream a CC host/domain ranks file (.txt.gz) into parquet")
    ingest.add_argument(
        "file", type=Path, help="<release>-host-ranks.txt.gz or <release>-domain-ranks.txt.gz"
    )
    ingest.add_argument("--out", type=Path, required=True, help="parquet file to write")
    ingest.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    ingest.add_argument("--release", help="release name (default: from the file name)")
    ingest.add_argument(
        "--total-rows", type=int, help="hosts in the release, when FILE is a sample (default: FILE's rows)"
    )
    _add_skip(ingest)
    ingest.set_defaults(func=cmd_ingest)

    for name, what in (("vertices", "id<TAB>rev_host"), ("edges", "from<TAB>to")):
        sub = commands.add_parser(name, help=f"ingest web-graph {name} parts ({what}) into a parquet folder")
        sub.add_argument("inputs", nargs="+", type=Path, help=f"{name}.paths.gz listing, or part files")
        sub.add_argument("--base", type=Path, help="folder holding the listed parts (default: the listing's)")
        sub.add_argument("--out", type=Path, required=True, help="output folder (one parquet per part)")
        _add_skip(sub)
        sub.set_defaults(func=cmd_parts, kind=name)

    subgraph = commands.add_parser(
        "subgraph", help="hosts within k links of seed hosts, and links among them"
    )
    subgraph.add_argument("--vertices", type=Path, required=True, help="vertices parquet (folder or file)")
    subgraph.add_argument("--edges", type=Path, required=True, help="edges parquet (folder or file)")
    subgraph.add_argument("--seed", action="append", default=[], help="seed host (repeatable)")
    subgraph.add_argument("--seeds", type=Path, help="file with one seed host per line ('#' comments)")
    subgraph.add_argument("--hops", type=int, default=1, help="link distance from the seeds (1)")
    subgraph.add_argument(
        "--direction", choices=("out", "in", "both"), default="both", help="links to follow (%(default)s)"
    )
    subgraph.add_argument(
        "--out", type=Path, required=True, help="folder for vertices.parquet + edges.parquet"
    )
    subgraph.set_defaults(func=cmd_subgraph)

    rank = commands.add_parser("rank", help="PageRank and harmonic centrality of our own host link graph")
    source = rank.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--links",
        type=Path,
        help="a link table you bring (parquet/CSV/JSONL; a crawl writes none): src_host+dst_host, "
        "src_url+dst_url, or url+outlinks",
    )
    source.add_argument("--graph", type=Path, help="a `graph subgraph` output folder")
    rank.add_argument(
        "--out", type=Path, required=True, help="ranks parquet to write (same columns as ingest)"
    )
    rank.add_argument("--release", default="crawl", help="name written in the release column (crawl)")
    rank.add_argument(
        "--hc",
        choices=("auto", "exact", "hyperball"),
        default="auto",
        help="harmonic centrality method (%(default)s)",
    )
    rank.set_defaults(func=cmd_rank)
    parser.set_defaults(func=lambda args: _usage(parser))


def _add_skip(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--skip-bad-lines",
        action="store_true",
        help="count and report malformed lines (and a truncated end) instead of stopping at the first",
    )


def _error(message: str) -> None:
    """One plain line (no markup, no wrapping): what went wrong and with which file."""
    print(f"error: {' '.join(message.split())}", file=sys.stderr, flush=True)


def _out_file_problem(path: Path, force: bool) -> str | None:
    if path.is_dir():
        return f"--out {path}: is a directory; give a parquet file name"
    if path.exists() and not force:
        return f"--out {path}: exists; pass --force to overwrite it"
    parent = next((p for p in path.parents if p.exists()), Path("."))
    if not parent.is_dir():
        return f"--out {path}: {parent} is a file, not a folder"
    return None


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return EXIT_USAGE


@contextmanager
def _rows_progress(console: Console, label: str) -> Iterator[Callable[[int], None]]:
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task(label, total=None)

        def update(rows: int) -> None:
            progress.update(task, description=f"{label}: {rows:,} rows")

        yield update


def _report_bad(console: Console, bad: BadLines) -> None:
    if bad.count or bad.truncated_after_line is not None:
        console.print(f"[yellow]warning:[/] {bad.summary()}", highlight=False, soft_wrap=True)
        for example in bad.examples:
            console.print(f"  {escape(example)}", highlight=False, soft_wrap=True)


def cmd_ingest(args: argparse.Namespace) -> int:
    from graph.ranks import ingest_ranks
    from graph.tsv import BadInputError

    console = Console(stderr=True)
    if problem := _out_file_problem(args.out, args.force):
        _error(problem)
        return EXIT_USAGE
    try:
        with _rows_progress(console, f"ingesting {args.file.name}") as progress:
            result = ingest_ranks(
                args.file, args.out, args.release, args.skip_bad_lines, progress, args.total_rows
            )
    except BadInputError as exc:
        _error(str(exc))
        return EXIT_USAGE
    except OSError as exc:
        _error(f"--out {args.out}: cannot write ({exc.strerror or exc})")
        return EXIT_USAGE
    rate = result.rows / result.seconds if result.seconds else 0.0
    console.print(
        f"{result.kind} ranks of {result.release}: {result.rows:,} rows -> {result.out} "
        f"in {result.seconds:.1f} s ({rate:,.0f} rows/s)",
        highlight=False,
        soft_wrap=True,
    )
    if result.beyond_total:
        console.print(
            f"[yellow]warning:[/] {result.beyond_total:,} rows rank beyond the {result.total_rows:,} rows "
            "of the file (a sample?): their percentiles are 0; pass --total-rows",
            highlight=False,
            soft_wrap=True,
        )
    _report_bad(console, result.bad)
    return EXIT_OK


def cmd_parts(args: argparse.Namespace) -> int:
    import polars as pl

    from graph.tsv import BadInputError
    from graph.webgraph import ingest_edges, ingest_vertices, resolve_parts

    console = Console(stderr=True)
    ingest = ingest_vertices if args.kind == "vertices" else ingest_edges
    if args.out.exists() and not args.out.is_dir():
        _error(f"--out {args.out}: exists and is not a folder")
        return EXIT_USAGE
    created = not args.out.exists()
    try:
        parts = resolve_parts(args.inputs, args.base)
        with _rows_progress(console, f"ingesting {len(parts)} {args.kind} part(s)") as progress:
            result = ingest(parts, args.out, args.skip_bad_lines, progress)
    except (BadInputError, ValueError, OSError, pl.exceptions.PolarsError) as exc:
        if created:  # a folder this run made holds nothing worth keeping
            shutil.rmtree(args.out, ignore_errors=True)
        if isinstance(exc, pl.exceptions.PolarsError):
            what = "id<TAB>rev_host" if args.kind == "vertices" else "from_id<TAB>to_id"
            _error(f"{' '.join(map(str, args.inputs))}: not a web-graph {args.kind} file ({what} per line)")
        else:
            _error(str(exc))
        return EXIT_USAGE
    resumed = f" ({result.resumed} already done)" if result.resumed else ""
    console.print(
        f"{args.kind}: {result.parts} part(s){resumed}, {result.rows:,} rows -> {result.out} "
        f"in {result.seconds:.1f} s",
        highlight=False,
        soft_wrap=True,
    )
    _report_bad(console, result.bad)
    return EXIT_OK


def _read_seeds(args: argparse.Namespace) -> list[str]:
    seeds = list(args.seed)
    if args.seeds:
        for line in args.seeds.read_text(encoding="utf-8").splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                seeds.append(line)
    return seeds


def cmd_subgraph(args: argparse.Namespace) -> int:
    from graph.hostnames import HostNameError, host_from_url, normalize_host
    from graph.webgraph import extract_subgraph

    console = Console(stderr=True)
    try:
        seeds = [host_from_url(s) if "://" in s else normalize_host(s) for s in _read_seeds(args)]
    except (HostNameError, OSError) as exc:
        _error(str(exc))
        return EXIT_USAGE
    if not seeds:
        _error("give seed hosts with --seed or --seeds")
        return EXIT_USAGE
    try:
        result = extract_subgraph(args.vertices, args.edges, seeds, args.out, args.hops, args.direction)
    except (ValueError, OSError) as exc:
        _error(str(exc))
        return EXIT_USAGE
    except Exception as exc:  # DuckDB errors on unreadable parquet carry no common base we can name
        _error(f"{type(exc).__name__}: {exc}")
        return EXIT_FAILED
    console.print(
        f"subgraph: {result.vertices:,} hosts, {result.edges:,} links within {args.hops} hop(s) "
        f"of {len(result.seeds_found)} seed(s) -> {result.out}",
        highlight=False,
        soft_wrap=True,
    )
    if result.seeds_missing:
        console.print(f"[yellow]warning:[/] seeds not in the graph: {', '.join(result.seeds_missing)}")
    return EXIT_OK if result.seeds_found else EXIT_FAILED


def cmd_rank(args: argparse.Namespace) -> int:
    from graph.linkgraph import load_graph_dir, load_links, rank_graph

    console = Console(stderr=True)
    try:
        graph = load_links(args.links) if args.links else load_graph_dir(args.graph)
    except (ValueError, OSError) as exc:
        _error(str(exc))
        return EXIT_USAGE
    if not graph.hosts:
        _error("no host-to-host links found")
        return EXIT_FAILED
    with console.status(f"ranking {len(graph.hosts):,} hosts, {len(graph.edges.src):,} links"):
        result = rank_graph(graph, args.out, args.release, args.hc)
    console.print(
        f"ranked {result.hosts:,} hosts / {result.edges:,} links (HC {result.hc_method}) -> {result.out} "
        f"in {result.seconds:.1f} s",
        highlight=False,
        soft_wrap=True,
    )
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """`python -m graph.cli ...`, the same commands without the hostcrawl entry point."""
    parser = argparse.ArgumentParser(prog="hostcrawl")
    register_cli(parser.add_subparsers(dest="command", metavar="COMMAND"))
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
