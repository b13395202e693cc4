"""Ranks ingest throughput and memory on a generated file in the real format (target: >= 1M rows/s, < 8 GB).

Baselines measured in the same run on the same file: the inflate floor (ISA-L decompression and line
counting, no parsing) and a plain DuckDB `read_csv -> parquet` COPY without host names or percentiles.

    python -m benchmarks.graph_ingest --rows 20000000 [--file /tmp/ranks-20m.txt.gz] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FULL_FILE_ROWS = (250_000_000, 700_000_000)  # host rows in a full CC release
TARGET_ROWS_PER_S = 1_000_000
TARGET_RSS_GB = 8.0

CHILD = """
import json, resource, sys, time
from graph.ranks import ingest_ranks
cpu0 = resource.getrusage(resource.RUSAGE_SELF)
r = ingest_ranks(sys.argv[1], sys.argv[2])
cpu1 = resource.getrusage(resource.RUSAGE_SELF)
cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
print(json.dumps({"rows": r.rows, "seconds": r.seconds, "cpu": cpu, "rss_kb": cpu1.ru_maxrss}))
"""

INFLATE_CHILD = """
import sys, time
from pathlib import Path
from graph.tsv import count_lines
t = time.perf_counter(); n = count_lines(Path(sys.argv[1])); print(n, time.perf_counter() - t)
"""

DUCKDB_CHILD = """
import sys, time, duckdb
con = duckdb.connect(); con.execute("SET enable_progress_bar=false")
cols = "{'hc_pos':'BIGINT','hc_val':'DOUBLE','pr_pos':'BIGINT','pr_val':'DOUBLE','host_rev':'VARCHAR'}"
t = time.perf_counter()
con.execute(f"COPY (SELECT * FROM read_csv('{sys.argv[1]}', delim='\\t', header=false, skip=1, quote='', "
            f"escape='', columns={cols})) TO '{sys.argv[2]}' (FORMAT parquet, COMPRESSION zstd)")
print(time.perf_counter() - t)
"""


def run_child(code: str, *args: str) -> str:
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--file", type=Path, help="reuse (or create) this generated ranks file")
    parser.add_argument("--keep", action="store_true", help="keep the generated file and parquet")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="graph-bench-"))
    src = args.file or work / "bench-host-ranks.txt.gz"
    if not src.exists():
        from benchmarks.graph_gen_ranks import generate

        started = time.perf_counter()
        size = generate(src, args.rows, level=6)
        print(
            f"generated {args.rows:,} rows ({size / 2**20:.0f} MiB gzip) "
            f"in {time.perf_counter() - started:.0f} s"
        )
    out = work / "ranks.parquet"

    inflate_rows, inflate_s = run_child(INFLATE_CHILD, str(src)).split()
    duck_s = float(run_child(DUCKDB_CHILD, str(src), str(work / "duck.parquet")))
    result = json.loads(run_child(CHILD, str(src), str(out)))
    rows, seconds = result["rows"], result["seconds"]
    rate = rows / seconds
    rss_gb = result["rss_kb"] / 2**20
    print(f"cores available: {len(os.sched_getaffinity(0))}, load average: {os.getloadavg()[0]:.2f}")
    print(f"inflate floor (ISA-L + line count): {float(inflate_s):.2f} s for {int(inflate_rows) - 1:,} rows")
    print(f"duckdb read_csv -> parquet (no host/percentiles): {duck_s:.2f} s")
    print(
        f"hostcrawl graph ingest: {rows:,} rows in {seconds:.2f} s = {rate:,.0f} rows/s "
        f"(cpu {result['cpu']:.1f} s, peak RSS {rss_gb:.2f} GiB, "
        f"parquet {out.stat().st_size / 2**20:.0f} MiB)"
    )
    print(
        f"ratio ingest / inflate floor: {seconds / float(inflate_s):.2f}x; "
        f"ingest / duckdb copy: {seconds / duck_s:.2f}x"
    )
    for full in FULL_FILE_ROWS:
        print(f"extrapolated full file of {full / 1e6:.0f}M rows: {full / rate / 60:.1f} min")
    verdict = "PASS" if rate >= TARGET_ROWS_PER_S and rss_gb < TARGET_RSS_GB else "BELOW TARGET"
    print(f"target >= {TARGET_ROWS_PER_S:,} rows/s and < {TARGET_RSS_GB} GB RSS: {verdict}")
    if not args.keep:
        for path in work.iterdir():
            path.unlink()
        work.rmdir()
    print(f"max RSS of this driver: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
