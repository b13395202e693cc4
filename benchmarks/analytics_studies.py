"""Speed and memory of the studies at the sizes issue 7 names, on data from `study synth`.

Targets (2-core machine): coverage over 5,000,000 hosts including the join with the annotations < 60 s and
< 4 GB RSS; depth over 1,000,000 hosts and 20,000,000 pages < 60 s; icc over 3,000,000 pages < 30 s. Each
study runs in a fresh process (its peak RSS is that process's); the baseline is one DuckDB pass over the
same input columns (in its own process), so the ratio says what the study costs beyond reading its data.

    python -m benchmarks.analytics_studies                  # the issue's sizes (generation takes minutes)
    python -m benchmarks.analytics_studies --scale 0.1      # a quick look; times extrapolate about linearly
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.scheduler_cost import peak_rss_mb

COVERAGE_HOSTS = 5_000_000
DEPTH_HOSTS, DEPTH_PAGES_PER_HOST = 1_000_000, 20
ICC_PAGES, ICC_PAGES_PER_HOST = 3_000_000, 5
TARGETS = {"coverage": 60.0, "depth": 60.0, "icc": 30.0}  # seconds
RSS_TARGET_GB = {"coverage": 4.0}


def generate(workdir: Path, scale: float) -> dict[str, Path]:
    """The three data sets (skipped when already there from an earlier run with the same scale)."""
    from analytics.synth import generate as synth
    from analytics.synth_config import SynthConfig

    # ICC pages: the generator's log-normal mean lands slightly under the requested pages per host.
    icc_hosts = round(ICC_PAGES * scale / (ICC_PAGES_PER_HOST - 0.45))
    plans = {
        "coverage": SynthConfig(hosts=round(COVERAGE_HOSTS * scale), page_hosts=0),
        "depth": SynthConfig(
            hosts=round(DEPTH_HOSTS * scale), page_hosts=round(DEPTH_HOSTS * scale),
            pages_per_host=DEPTH_PAGES_PER_HOST + 0.5, link_only_ratio=0.0,
        ),
        "icc": SynthConfig(
            hosts=icc_hosts, page_hosts=icc_hosts, pages_per_host=ICC_PAGES_PER_HOST, link_only_ratio=0.0
        ),
    }  # fmt: skip
    dirs = {}
    for name, cfg in plans.items():
        out = workdir / f"{name}-{scale:g}"
        if not (out / "truth.json").is_file():
            started = time.perf_counter()
            result = synth(cfg, out)
            print(f"generated {name}: {result.host_index_rows:,} index rows, {result.pages:,} pages "
                  f"in {time.perf_counter() - started:.0f} s", flush=True)  # fmt: skip
        dirs[name] = out
    return dirs


def peak_rss_gb() -> float:
    """Peak resident set of this process (VmHWM; wait4's ru_maxrss would include the parent before exec)."""
    return peak_rss_mb() * 2**20 / 1e9


def baseline_sql(study: str, data: Path) -> str:
    """One DuckDB pass over the columns the study reads."""
    from analytics import db, schema

    if study == "coverage":
        index = db.parquet_source(schema.parquet_files(data / "host_index"))
        notes = db.parquet_source(schema.parquet_files(data / "annotations"))
        return (
            "SELECT count(*), sum(nutch_fetched_pct), sum(nutch_unfetched), count(DISTINCT surt_host_name) "
            f"FROM {index} UNION ALL "
            f"SELECT count(*), sum(gneissweb_education), 0, count(DISTINCT surt_host_name) FROM {notes} "
            "ORDER BY 1 DESC"
        )
    pages = db.parquet_source(schema.parquet_files(data / "pages.parquet"))
    return f"SELECT count(*), sum(score_edu), count(DISTINCT host) FROM {pages}"


def child(study: str, data: Path, out: Path) -> None:
    """Run one study (or, for `baseline:NAME`, its baseline) in this process; print timings as JSON."""
    from analytics import db
    from analytics.studies import coverage, depth, icc
    from analytics.study import Output
    from analytics.study_inputs import Inputs

    con = db.connect(out / ".tmp")
    started = time.perf_counter()
    rows = 0
    if study.startswith("baseline:"):
        rows = int(con.execute(baseline_sql(study.split(":")[1], data)).fetchall()[0][0])
    elif study == "coverage":
        coverage.run(con, Inputs.from_dir(data), Output(out, study))
    elif study == "depth":
        depth.run(con, Inputs.from_dir(data), Output(out, study), scores=["edu"])
    else:
        icc.run(con, Inputs.from_dir(data), Output(out, study), scores=["edu"], min_pages=(3,))
    seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds, "rows": rows, "rss_gb": peak_rss_gb()}))


def measure(study: str, data: Path, out: Path) -> dict[str, float]:
    cmd = [sys.executable, "-m", "benchmarks.analytics_studies", "--child", study, "--data", str(data)]
    done = subprocess.run([*cmd, "--out", str(out)], capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{study} failed with exit code {done.returncode}:\n{done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the issue's sizes (1.0)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/hostcrawl-analytics-bench"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.data, args.out)
        return
    args.workdir.mkdir(parents=True, exist_ok=True)
    dirs = generate(args.workdir, args.scale)
    columns = ("rows", 12), ("seconds", 8), ("target", 7), ("baseline", 9), ("ratio", 6), ("RSS GB", 7)
    print("\n" + f"{'study':9} " + " ".join(f"{name:>{width}}" for name, width in columns) + "  verdict")
    for study in ("coverage", "depth", "icc"):
        out = args.workdir / f"studies-{args.scale:g}"
        base = measure(f"baseline:{study}", dirs[study], out)
        r = measure(study, dirs[study], out)
        r["rows"], r["baseline"] = base["rows"], base["seconds"]
        target = TARGETS[study] * args.scale
        ok = r["seconds"] < target and r["rss_gb"] < RSS_TARGET_GB.get(study, float("inf"))
        ratio = r["seconds"] / r["baseline"]
        print(
            f"{study:9} {r['rows']:>12,} {r['seconds']:>8.1f} {target:>7.1f} {r['baseline']:>9.2f} "
            f"{ratio:>6.1f} {r['rss_gb']:>7.2f}  {'ok' if ok else 'SLOW'}",
            flush=True,
        )


if __name__ == "__main__":
    main()
