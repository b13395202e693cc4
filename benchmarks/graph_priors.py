"""Priors lookups per second (target: >= 100,000/s) and index build/load times on a generated ranks file.

Baseline measured in the same run: a plain Python dict host -> (hc, pr) holding the same rows, probed
with the same hosts (exact spelling first, then the other www spelling, as HostPriors does).

    python -m benchmarks.graph_priors --rows 3000000
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

from graph.hostnames import www_variants
from graph.priors import HostPriors
from graph.ranks import ingest_ranks

LOOKUPS = 300_000
TARGET_PER_S = 100_000


def probe_hosts(hosts: list[str], count: int, seed: int) -> list[str]:
    """A third exact spellings, a third the other www spelling, a third unknown hosts."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        host = rng.choice(hosts)
        if i % 3 == 1:
            host = host[4:] if host.startswith("www.") else "www." + host
        elif i % 3 == 2:
            host = "unknown-" + host
        out.append(host)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--parquet", type=Path, help="use this ranks parquet instead of generating one")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="graph-priors-"))
    path = args.parquet
    if path is None:
        from benchmarks.graph_gen_ranks import generate

        src = work / "bench-host-ranks.txt.gz"
        generate(src, args.rows, level=1)
        path = work / "ranks.parquet"
        ingest_ranks(src, path)
    started = time.perf_counter()
    HostPriors.load(path)
    print(f"index build (first load): {time.perf_counter() - started:.2f} s")
    started = time.perf_counter()
    priors = HostPriors.load(path)
    print(
        f"load (memory-mapped index): {(time.perf_counter() - started) * 1000:.1f} ms "
        f"for {len(priors):,} hosts"
    )

    frame = pl.read_parquet(path, columns=["host", "hc_percentile", "pr_percentile"])
    hosts = frame["host"].to_list()
    probes = probe_hosts(hosts, LOOKUPS, seed=1)
    started = time.perf_counter()
    found = sum(priors.lookup(h) is not None for h in probes)
    ours = LOOKUPS / (time.perf_counter() - started)

    table = dict(zip(hosts, zip(frame["hc_percentile"], frame["pr_percentile"], strict=True), strict=True))
    started = time.perf_counter()
    baseline_found = 0
    for h in probes:
        for variant in www_variants(h):
            if variant in table:
                baseline_found += 1
                break
    baseline = LOOKUPS / (time.perf_counter() - started)
    print(f"HostPriors.lookup: {ours:,.0f}/s ({found:,} of {LOOKUPS:,} found)")
    print(f"dict baseline: {baseline:,.0f}/s ({baseline_found:,} found); ratio {ours / baseline:.2f}x")
    print(
        "peak RSS (includes the dict baseline): "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB"
    )
    print(f"target >= {TARGET_PER_S:,}/s: {'PASS' if ours >= TARGET_PER_S else 'FAIL'}")
    return 0 if found == baseline_found else 1


if __name__ == "__main__":
    sys.exit(main())
