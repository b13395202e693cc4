"""The host-index studies at the real index's size (issue 27): seconds and peak RSS per 10M host-index rows.

    python -m benchmarks.studies_at_scale                          # 10M and 100M rows: ~20 min, 20 GB disk
    python -m benchmarks.studies_at_scale --rows 2000000,20000000  # a quick look: ~4 min

For each size, `study synth` writes a host index of that many rows in the real schema (half of them crawled
and annotated, half link-only hosts, as in Common Crawl's index) with its ranks file, under `--workdir`
(reused on the next run). Then `hostcrawl study coverage` and `hostcrawl recrawl plan` run on it, each as its
own process, with DuckDB's memory limit (`--memory`: hostcrawl's default, HOSTCRAWL_DUCKDB_MEMORY) and a temp
directory on the work disk, and the benchmark prints each one's seconds, seconds per 10M rows and peak RSS
(the command's own VmHWM, printed as it exits: `MEASURED`). The baseline is the smallest size in the same
run: the cost grows no faster than linearly when the seconds per 10M rows at every size stay within
`LINEAR_SLACK` of it. Targets: linear, RSS < 8 GB.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from analytics.db import DEFAULT_MEMORY_LIMIT

TEN_M = 10_000_000
LINEAR_SLACK = 1.2  # seconds per 10M rows may grow this much over the smallest size's (timing noise)
RSS_TARGET_GB = 8.0
PLAN_BUDGET = 1_000_000


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = sorted({int(float(part)) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--rows {text!r}: give row counts, e.g. 10000000,100000000"
        ) from None
    if not sizes or sizes[0] < 2:
        raise argparse.ArgumentTypeError(f"--rows {text!r}: at least one size of 2 rows or more")
    return sizes


# Runs the hostcrawl CLI and, however it ends, prints its own peak RSS last on stderr. VmHWM starts again
# at exec; wait4's ru_maxrss does not: it would count this parent's RSS at the fork (see scheduler_cost).
MEASURED = """
import sys
from benchmarks.scheduler_cost import peak_rss_mb
from crawler.cli import main
try:
    code = main(sys.argv[1:])
finally:
    print(f"peak_rss_mb {peak_rss_mb()}", file=sys.stderr)
sys.exit(code)
"""


def timed(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Seconds and peak RSS (GB) of one hostcrawl command run as a child process; exits with its stderr if
    it fails."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", MEASURED, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, check=False,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(
            f"hostcrawl {' '.join(args[:4])} ... failed ({done.returncode}):\n{done.stderr[-2000:]}"
        )
    peak = [line for line in done.stderr.splitlines() if line.startswith("peak_rss_mb ")]
    return seconds, float(peak[-1].split()[1]) * 2**20 / 1e9


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=parse_sizes, default=[TEN_M, 10 * TEN_M], help="host-index rows")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/hostcrawl-studies-at-scale"))
    parser.add_argument(
        "--memory",
        default=DEFAULT_MEMORY_LIMIT,
        help=f"DuckDB's memory limit ({DEFAULT_MEMORY_LIMIT}, hostcrawl's)",
    )
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HOSTCRAWL_DUCKDB_MEMORY": args.memory}
    results: list[tuple[int, str, float, float]] = []
    for rows in args.rows:
        data = args.workdir / f"index-{rows}"
        if not (data / "truth.json").is_file():
            synth = ["study", "synth", "--out", str(data), "--hosts", str(rows // 2)]
            seconds, rss = timed([*synth, "--link-only-ratio", "1.0"], env)
            print(f"generated {rows:,} rows in {seconds:.0f} s, peak RSS {rss:.2f} GB", flush=True)
        studies = args.workdir / f"studies-{rows}"
        shutil.rmtree(studies, ignore_errors=True)
        coverage = ["study", "coverage", "--data", str(data), "--out", str(studies)]
        plan = ["recrawl", "plan", "--data", str(data), "--budget", str(PLAN_BUDGET)]
        plan += ["--out", str(studies / "plan.parquet"), "--force"]
        for name, cmd in (("coverage", coverage), ("recrawl plan", plan)):
            seconds, rss = timed(cmd, env)
            results.append((rows, name, seconds, rss))
            print(f"{name} on {rows:,} rows: {seconds:.1f} s, peak RSS {rss:.2f} GB", flush=True)
    print(f"\nDuckDB memory limit {args.memory}; baseline: the smallest size ({args.rows[0]:,} rows)")
    head = ("rows", 12), ("seconds", 8), ("s/10M rows", 10), ("x baseline", 10), ("RSS GB", 7)
    print(f"{'study':13} " + " ".join(f"{name:>{width}}" for name, width in head) + "  verdict")
    for name in ("coverage", "recrawl plan"):
        mine = [r for r in results if r[1] == name]
        base = mine[0][2] / mine[0][0] * TEN_M
        for rows, _, seconds, rss in mine:
            per = seconds / rows * TEN_M
            ok = per <= base * LINEAR_SLACK and rss < RSS_TARGET_GB
            print(f"{name:13} {rows:>12,} {seconds:>8.1f} {per:>10.1f} {per / base:>10.2f} {rss:>7.2f}  "
                  f"{'ok' if ok else 'NOT MET'}")  # fmt: skip


if __name__ == "__main__":
    main()
