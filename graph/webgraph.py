"""Common Crawl web-graph vertices and edges: ingest the part files to parquet, cut k-hop subgraphs.

Vertices are `id<TAB>rev_host` and edges `from<TAB>to` gzip parts listed in `*.paths.gz`. Each part becomes
one parquet file in the output folder, written atomically, so an interrupted ingest resumes where it stopped.
"""

from __future__ import annotations

import gzip
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from graph.duck import connect, sql_string
from graph.hostnames import reverse_host, www_variants
from graph.ranks import host_from_rev_expr
from graph.tsv import BadInputError, BadLines, TsvSpec, iter_tables

VERTEX_SPEC = TsvSpec(("id", "host_rev"), (pa.int64(), pa.string()))
# The domain graph's vertices carry the number of hosts folded into each domain.
DOMAIN_VERTEX_SPEC = TsvSpec(("id", "host_rev", "n_hosts"), (pa.int64(), pa.string(), pa.int64()))
EDGE_SPEC = TsvSpec(("src", "dst"), (pa.int64(), pa.int64()))
DIRECTIONS = ("out", "in", "both")
MAX_LINE_BYTES = 4096


@dataclass(slots=True)
class PartsResult:
    """Rows written per ingest, and which parts were skipped because an earlier run finished them."""

    out: Path
    parts: int
    rows: int
    resumed: int
    seconds: float
    bad: BadLines = field(default_factory=BadLines)


@dataclass(frozen=True, slots=True)
class SubgraphResult:
    out: Path
    vertices: int
    edges: int
    seeds_found: list[str]
    seeds_missing: list[str]


def resolve_parts(inputs: Sequence[Path | str], base: Path | str | None = None) -> list[Path]:
    """Part files given directly or listed in `*.paths.gz` (found under base by listed path or file name)."""
    parts: list[Path] = []
    for item in map(Path, inputs):
        if not item.name.endswith((".paths.gz", ".paths")):
            parts.append(item)
            continue
        opener = gzip.open if item.name.endswith(".gz") else open
        root = Path(base) if base is not None else item.parent
        with opener(item, "rt") as listing:
            for number, line in enumerate(listing, start=1):
                rel = line.strip()
                if not rel:
                    continue
                candidates = (root / rel, root / Path(rel).name)
                found = next((c for c in candidates if c.is_file()), None)
                if found is None:
                    raise BadInputError(item, number, f"listed part {rel!r} not found under {root}")
                parts.append(found)
    if not parts:
        raise ValueError("no part files given")
    return parts


def _part_name(index: int) -> str:
    return f"part-{index:05d}.parquet"


def _ingest_parts(
    parts: Sequence[Path],
    out_dir: Path,
    spec: TsvSpec,
    finish: Callable[[pl.DataFrame], pl.DataFrame],
    skip_bad_lines: bool,
    progress: Callable[[int], None] | None,
) -> PartsResult:
    started = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    bad = BadLines()
    rows = resumed = 0
    for index, part in enumerate(parts):
        target = out_dir / _part_name(index)
        if target.exists():
            resumed += 1
            rows += pq.ParquetFile(target).metadata.num_rows
            continue
        tmp = target.with_name(target.name + ".partial")
        writer: pq.ParquetWriter | None = None
        try:
            with ThreadPoolExecutor(1, thread_name_prefix="parquet-writer") as pool:
                pending: Future[None] | None = None
                for frame in iter_tables(part, spec, bad, skip_bad_lines):
                    table = finish(frame).to_arrow()
                    if writer is None:
                        schema = table.schema.with_metadata({"source": part.name})
                        writer = pq.ParquetWriter(tmp, schema, compression="zstd")
                    if pending is not None:
                        pending.result()
                    pending = pool.submit(writer.write_table, table.cast(schema))
                    rows += table.num_rows
                    if progress is not None:
                        progress(rows)
                if pending is not None:
                    pending.result()
            if writer is None:  # an empty part still gets its (empty) file, so resume skips it
                empty = finish(pl.DataFrame(schema=spec.polars_schema())).to_arrow()
                writer = pq.ParquetWriter(tmp, empty.schema, compression="zstd")
            writer.close()
            tmp.replace(target)
        finally:
            if writer is not None and writer.is_open:
                writer.close()
            tmp.unlink(missing_ok=True)
    return PartsResult(out_dir, len(parts), rows, resumed, time.perf_counter() - started, bad)


def ingest_vertices(
    parts: Sequence[Path],
    out_dir: Path | str,
    skip_bad_lines: bool = False,
    progress: Callable[[int], None] | None = None,
) -> PartsResult:
    """Vertex parts -> parquet with id, host_rev and host (normal form), plus n_hosts for a domain graph."""
    return _ingest_parts(
        parts,
        Path(out_dir),
        _vertex_spec(parts[0]) if parts else VERTEX_SPEC,
        lambda f: f.with_columns(host=host_from_rev_expr()),
        skip_bad_lines,
        progress,
    )


def _vertex_spec(first_part: Path) -> TsvSpec:
    """Host graph (id, rev_host) or domain graph (id, rev_domain, n_hosts), from the first line."""
    try:
        with gzip.open(first_part, "rb") if _is_gzip(first_part) else first_part.open("rb") as stream:
            line = stream.readline(MAX_LINE_BYTES)
    except (OSError, EOFError) as exc:
        raise BadInputError(first_part, 1, f"cannot read the first line: {exc}") from None
    return DOMAIN_VERTEX_SPEC if line.count(b"\t") == 2 else VERTEX_SPEC


def _is_gzip(path: Path) -> bool:
    with path.open("rb") as raw:
        return raw.read(2) == b"\x1f\x8b"


def ingest_edges(
    parts: Sequence[Path],
    out_dir: Path | str,
    skip_bad_lines: bool = False,
    progress: Callable[[int], None] | None = None,
) -> PartsResult:
    """Edge parts -> parquet with src and dst vertex ids."""
    return _ingest_parts(parts, Path(out_dir), EDGE_SPEC, lambda f: f, skip_bad_lines, progress)


def _parquet_source(path: Path) -> str:
    target = path / "*.parquet" if path.is_dir() else path
    return f"read_parquet({sql_string(target)})"


def extract_subgraph(
    vertices: Path | str,
    edges: Path | str,
    seeds: Iterable[str],
    out_dir: Path | str,
    hops: int = 1,
    direction: str = "both",
) -> SubgraphResult:
    """Hosts within `hops` links of any seed (following links out, in, or both) and the links among them."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, not {direction!r}")
    if hops < 0:
        raise ValueError("hops must be >= 0")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    seed_list = list(dict.fromkeys(seeds))
    seed_rows = [(seed, reverse_host(variant)) for seed in seed_list for variant in www_variants(seed)]
    v_src, e_src = _parquet_source(Path(vertices)), _parquet_source(Path(edges))
    con = connect()
    try:
        con.execute("CREATE TEMP TABLE seeds (seed VARCHAR, host_rev VARCHAR)")
        if seed_rows:
            con.executemany("INSERT INTO seeds VALUES (?, ?)", seed_rows)
        con.execute(
            f"CREATE TEMP TABLE reached AS SELECT DISTINCT v.id, 0 AS hop, s.seed FROM {v_src} v "
            "JOIN seeds s ON v.host_rev = s.host_rev"
        )
        found = {row[0] for row in con.sql("SELECT DISTINCT seed FROM reached").fetchall()}
        for hop in range(1, hops + 1):
            steps = []
            if direction in ("out", "both"):
                steps.append(f"SELECT e.dst AS id FROM {e_src} e JOIN frontier f ON e.src = f.id")
            if direction in ("in", "both"):
                steps.append(f"SELECT e.src AS id FROM {e_src} e JOIN frontier f ON e.dst = f.id")
            con.execute(
                f"CREATE OR REPLACE TEMP TABLE frontier AS SELECT id FROM reached WHERE hop = {hop - 1}"
            )
            con.execute(
                f"INSERT INTO reached SELECT DISTINCT n.id, {hop}, NULL FROM ({' UNION '.join(steps)}) n "
                "ANTI JOIN reached r ON n.id = r.id"
            )
        con.execute(
            "CREATE OR REPLACE TEMP TABLE keep AS SELECT id, min(hop) AS hop FROM reached GROUP BY id"
        )
        con.execute(
            f"COPY (SELECT v.id, v.host_rev, v.host, k.hop FROM {v_src} v JOIN keep k ON v.id = k.id "
            f"ORDER BY k.hop, v.id) TO {sql_string(out / 'vertices.parquet')} (FORMAT parquet)"
        )
        con.execute(
            f"COPY (SELECT e.src, e.dst FROM {e_src} e SEMI JOIN keep a ON e.src = a.id "
            f"SEMI JOIN keep b ON e.dst = b.id ORDER BY e.src, e.dst) "
            f"TO {sql_string(out / 'edges.parquet')} (FORMAT parquet)"
        )
        edges_out = sql_string(out / "edges.parquet")
        counts = con.execute(
            f"SELECT (SELECT count(*) FROM keep), (SELECT count(*) FROM read_parquet({edges_out}))"
        ).fetchone()
    finally:
        con.close()
    n_vertices, n_edges = (int(counts[0]), int(counts[1])) if counts else (0, 0)
    missing = [s for s in seed_list if s not in found]
    return SubgraphResult(out, n_vertices, n_edges, [s for s in seed_list if s in found], missing)
