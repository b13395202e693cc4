"""Ingest Common Crawl host/domain ranks files (hundreds of millions of rows) into parquet, streaming."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.ipc
import pyarrow.parquet as pq

from graph.tsv import BadInputError, BadLines, TsvSpec, count_lines, iter_tables, read_header

RANKS_FORMAT = "hostcrawl.graph.ranks_v1"  # written into the parquet metadata so readers can check it
HOST_HEADER = ("harmonicc_pos", "harmonicc_val", "pr_pos", "pr_val", "host_rev")
DOMAIN_HEADER = (*HOST_HEADER, "n_hosts")
BASE_NAMES = ("hc_pos", "hc_val", "pr_pos", "pr_val", "host_rev")
BASE_TYPES = (pa.int64(), pa.float64(), pa.int64(), pa.float64(), pa.string())
RELEASE_RE = re.compile(r"(?P<release>cc-main-[0-9a-z-]+?)-(?P<kind>host|domain)-ranks")
ROW_GROUP_ROWS = 1 << 20
OUTPUT_COLUMNS = ("host", "host_rev", "hc_pos", "hc_val", "pr_pos", "pr_val", "n_hosts", "release")
PERCENTILE_COLUMNS = ("hc_percentile", "pr_percentile")
BUFFER_BYTES = 1 << 30  # rows held in memory while the line count runs; the rest waits in a spill file
# Min/max statistics let DuckDB skip row groups on position filters; on unique strings they are wasted work.
STATISTICS_COLUMNS = ["hc_pos", "pr_pos", "hc_val", "pr_val", "n_hosts"]


@dataclass(slots=True)
class IngestResult:
    """What an ingest wrote, for the CLI's summary and the benchmark."""

    source: Path
    out: Path
    kind: str  # "host" or "domain"
    release: str
    rows: int
    seconds: float
    total_rows: int  # the percentile denominator
    beyond_total: int = 0  # rows whose position exceeds total_rows (a sample file), percentile clipped to 0
    bad: BadLines = field(default_factory=BadLines)


def ranks_spec(kind: str) -> TsvSpec:
    if kind == "domain":
        return TsvSpec((*BASE_NAMES, "n_hosts"), (*BASE_TYPES, pa.int64()), DOMAIN_HEADER)
    return TsvSpec(BASE_NAMES, BASE_TYPES, HOST_HEADER)


def detect_kind(path: Path) -> str:
    """'host' or 'domain' from the header; BadInputError names the file when it is neither."""
    fields = tuple(read_header(path))
    if fields == HOST_HEADER:
        return "host"
    if fields == DOMAIN_HEADER:
        return "domain"
    expected = "\t".join("#" + f for f in HOST_HEADER)
    found = "\t".join("#" + f for f in fields) if fields else "no '#' header"
    raise BadInputError(
        path, 1, f"wrong header {found!r}, expected {expected!r} (domain files add '#n_hosts')"
    )


def release_from_name(path: Path) -> str:
    """'cc-main-2024-feb-apr-may' from 'cc-main-2024-feb-apr-may-host-ranks.txt.gz', else the file stem."""
    match = RELEASE_RE.search(path.name)
    return match["release"] if match else path.name.split(".")[0]


def output_schema(kind: str) -> pa.Schema:
    fields = [
        pa.field("host", pa.string()),
        pa.field("host_rev", pa.string()),
        pa.field("hc_pos", pa.int64()),
        pa.field("hc_val", pa.float64()),
        pa.field("pr_pos", pa.int64()),
        pa.field("pr_val", pa.float64()),
    ]
    if kind == "domain":
        fields.append(pa.field("n_hosts", pa.int64()))
    fields += [
        pa.field("release", pa.string()),
        pa.field("hc_percentile", pa.float64()),
        pa.field("pr_percentile", pa.float64()),
    ]
    return pa.schema(fields)


def host_from_rev_expr(column: str = "host_rev") -> pl.Expr:
    """Vectorised unreverse_host (CC's reversed names are already lower-case ASCII)."""
    return pl.col(column).str.split(".").list.reverse().list.join(".")


def percentile_expr(pos_column: str, total: int) -> pl.Expr:
    """Share of rows ranked at or below this one: 1.0 for position 1, 1/total for the last, 0 beyond."""
    share = (pl.lit(total + 1, pl.Int64) - pl.col(pos_column)).cast(pl.Float64) / float(max(total, 1))
    return share.clip(0.0, 1.0)


class RanksWriter:
    """Adds percentiles and writes row groups in a background thread; rows that arrive before the row count
    is known wait in memory, or in an Arrow IPC spill file beyond BUFFER_BYTES."""

    def __init__(self, tmp: Path, kind: str, metadata: dict[str, str]) -> None:
        self.schema = output_schema(kind)
        self.tmp = tmp
        self.writer = pq.ParquetWriter(
            tmp,
            self.schema.with_metadata(metadata),
            compression="zstd",
            use_dictionary=["release"],  # host names are unique: dictionaries would only cost time
            write_statistics=STATISTICS_COLUMNS,
        )
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="parquet-writer")
        self.pending: Future[None] | None = None
        self.total: int | None = None
        self.beyond = 0
        self.held: list[pl.DataFrame] = []
        self.held_bytes = 0
        self.spill: pa.ipc.RecordBatchStreamWriter | None = None

    def add(self, frame: pl.DataFrame) -> None:
        if self.total is not None:
            self._write(frame)
        elif self.spill is None and self.held_bytes + int(frame.estimated_size()) <= BUFFER_BYTES:
            self.held.append(frame)
            self.held_bytes += int(frame.estimated_size())
        else:
            table = frame.to_arrow()
            if self.spill is None:
                self.spill = pa.ipc.new_stream(self._spill_path(), table.schema)
            self.spill.write_table(table)

    def set_total(self, total: int) -> None:
        """Row count known: write what was held back, in file order."""
        self.total = total
        for frame in self.held:
            self._write(frame)
        self.held.clear()
        if self.spill is not None:
            self.spill.close()
            self.spill = None
            with pa.memory_map(str(self._spill_path())) as source:
                for batch in pa.ipc.open_stream(source):
                    spilled = pl.from_arrow(batch)
                    assert isinstance(spilled, pl.DataFrame)
                    self._write(spilled)
            self._spill_path().unlink()

    def _spill_path(self) -> Path:
        return self.tmp.with_name(self.tmp.name + ".spill")

    def _write(self, frame: pl.DataFrame) -> None:
        assert self.total is not None
        self.beyond += _count_beyond(frame, self.total)
        table = (
            frame.with_columns(
                hc_percentile=percentile_expr("hc_pos", self.total),
                pr_percentile=percentile_expr("pr_pos", self.total),
            )
            .select(self.schema.names)
            .to_arrow()
            .cast(self.schema)
        )
        if self.pending is not None:
            self.pending.result()
        self.pending = self.pool.submit(self.writer.write_table, table, ROW_GROUP_ROWS)

    def close(self) -> None:
        try:
            if self.pending is not None:
                self.pending.result()
        finally:
            self.pool.shutdown()
            self.writer.close()
            if self.spill is not None:
                self.spill.close()
            self._spill_path().unlink(missing_ok=True)


def ingest_ranks(
    source: Path | str,
    out: Path | str,
    release: str | None = None,
    skip_bad_lines: bool = False,
    progress: Callable[[int], None] | None = None,
    total_rows: int | None = None,
) -> IngestResult:
    """Stream one ranks file into parquet; the output appears only when the whole input was read.

    Percentiles are relative to total_rows, by default the file's row count; pass the release's host count
    when ingesting a sample (such as the top-1000 files) so positions beyond the sample do not clip to 0.
    """
    source, out = Path(source), Path(out)
    started = time.perf_counter()
    kind = detect_kind(source)
    release = release or release_from_name(source)
    spec = ranks_spec(kind)
    bad = BadLines()
    metadata = {"format": RANKS_FORMAT, "kind": kind, "release": release, "source": source.name}
    tmp = out.with_name(out.name + ".partial")
    writer = RanksWriter(tmp, kind, metadata)
    # Percentiles need the row count; a second inflate pass counts lines while the first rows are parsed.
    stop = threading.Event()
    counter = ThreadPoolExecutor(1, thread_name_prefix="line-counter")
    counted: Future[int] | None = None
    if total_rows is not None:
        writer.set_total(total_rows)
    else:
        counted = counter.submit(count_lines, source, stop)
    rows = 0
    try:
        for frame in iter_tables(source, spec, bad, skip_bad_lines):
            if counted is not None and writer.total is None and counted.done():
                writer.set_total(max(counted.result() - 1, 0))
            writer.add(frame.with_columns(host=host_from_rev_expr(), release=pl.lit(release)))
            rows += frame.height
            if progress is not None:
                progress(rows)
        if counted is not None and writer.total is None:
            writer.set_total(max(counted.result() - 1, 0))
        writer.close()
        tmp.replace(out)
    finally:
        stop.set()
        counter.shutdown()
        writer.close()
        tmp.unlink(missing_ok=True)
    took = time.perf_counter() - started
    total = writer.total if writer.total is not None else 0
    return IngestResult(source, out, kind, release, rows, took, total, writer.beyond, bad)


def _count_beyond(frame: pl.DataFrame, total: int) -> int:
    return int(frame.select(((pl.col("hc_pos") > total) | (pl.col("pr_pos") > total)).sum()).item())
