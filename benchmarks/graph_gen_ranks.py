"""Generate Common Crawl ranks files in the real format, at any size, for ingest benchmarks.

Same layout as `cc-main-*-host-ranks.txt.gz` / `-domain-ranks.txt.gz`: gzip TSV, '#'-prefixed header, rows
in harmonic-centrality order, HC values as Java Float.toString (`3.8556852E7`, `2052436.2`), PR values as
Java Double.toString (`0.005074142758046625`, `1.168318493354625E-6`), reversed host names with both www
conventions.

    python -m benchmarks.graph_gen_ranks --rows 20000000 --out /tmp/ranks-20m.txt.gz
"""

from __future__ import annotations

import argparse
import gzip
import io
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

CHUNK_ROWS = 1_000_000
TOP_HC = 3.8556852e7  # HC of the top host in cc-main-2024-feb-apr-may
HC_DECAY = 0.09  # HC falls slowly over the top ranks (row 1000 of real files has about half the top value)
HC_TAIL = 5e6  # ...and drops off in the long tail, so the last rows are written positionally (`2052436.2`)
TOP_PR = 7.2e-3
PR_EXPONENT = 0.95  # PageRank follows a power law in its rank
PR_HC_NOISE = 1.5  # log-normal spread between HC order and PR order
TLDS = (
    "com",
    "org",
    "net",
    "de",
    "uk.co",
    "ru",
    "jp.co",
    "br.com",
    "fr",
    "it",
    "nl",
    "io",
    "info",
    "pl",
    "au.com",
)
TLD_WEIGHTS = (45, 6, 5, 5, 4, 4, 3, 3, 3, 3, 3, 2, 2, 2, 2)
LABELS = (
    "blog",
    "shop",
    "news",
    "mail",
    "m",
    "app",
    "api",
    "cdn",
    "docs",
    "forum",
    "wiki",
    "static",
    "en",
    "de",
)
HOST_HEADER = "#harmonicc_pos\t#harmonicc_val\t#pr_pos\t#pr_val\t#host_rev"


def java_decimal(mantissa: pl.Expr, exponent: pl.Expr, digits: int) -> pl.Expr:
    """Java Float/Double.toString of mantissa * 10^(exponent - digits + 1); mantissa has `digits` digits."""
    text = mantissa.cast(pl.String)
    lead, rest = text.str.slice(0, 1), text.str.slice(1).str.strip_chars_end("0")
    rest = pl.when(rest == "").then(pl.lit("0")).otherwise(rest)
    scientific = pl.concat_str([lead, pl.lit("."), rest, pl.lit("E"), exponent.cast(pl.String)])
    # 1e-3 <= x < 1e7 is written positionally.
    int_part = text.str.slice(0, exponent + 1)
    frac_pos = text.str.slice(exponent + 1).str.strip_chars_end("0")
    frac_pos = pl.when(frac_pos == "").then(pl.lit("0")).otherwise(frac_pos)
    positive = pl.concat_str([int_part, pl.lit("."), frac_pos])
    zeros = pl.lit("0.") + pl.lit("0").repeat_by(-exponent - 1).list.join("")
    negative = pl.concat_str([zeros, text.str.strip_chars_end("0")])
    return (
        pl.when((exponent >= 7) | (exponent < -3))
        .then(scientific)
        .when(exponent >= 0)
        .then(positive)
        .otherwise(negative)
    )


def _as_decimal(values: np.ndarray, digits: int) -> tuple[np.ndarray, np.ndarray]:
    """(mantissa with `digits` digits, decimal exponent) of positive floats."""
    exponent = np.floor(np.log10(values)).astype(np.int64)
    mantissa = np.round(values / 10.0 ** (exponent - digits + 1)).astype(np.int64)
    carry = mantissa >= 10**digits
    mantissa[carry] //= 10
    exponent[carry] += 1
    return mantissa, exponent


def pr_order(rows: int, rng: np.random.Generator) -> np.ndarray:
    """pr_pos of each row (rows in HC order): a permutation correlated with HC order."""
    noisy = np.log(np.arange(1, rows + 1)) + rng.normal(0.0, PR_HC_NOISE, rows)
    order = np.argsort(noisy, kind="stable")
    pos = np.empty(rows, dtype=np.int64)
    pos[order] = np.arange(1, rows + 1)
    return pos


def chunk_frame(start: int, pr_pos: np.ndarray, rng: np.random.Generator, domain: bool) -> pl.DataFrame:
    """Rows start+1 .. start+len(pr_pos) of the file."""
    n = len(pr_pos)
    hc_pos = np.arange(start + 1, start + n + 1, dtype=np.int64)
    hc = TOP_HC * hc_pos.astype(np.float64) ** -HC_DECAY * np.exp(-hc_pos / HC_TAIL)
    pr = TOP_PR * pr_pos.astype(np.float64) ** -PR_EXPONENT * (1 + 0.01 * rng.random(n))
    hc_m, hc_e = _as_decimal(hc, 8)
    pr_m, pr_e = _as_decimal(pr, 16)
    tld = rng.choice(len(TLDS), n, p=np.array(TLD_WEIGHTS) / sum(TLD_WEIGHTS))
    kind = rng.random(n)
    label = rng.integers(0, len(LABELS), n)
    frame = pl.DataFrame(
        {
            "hc_pos": hc_pos,
            "hc_m": hc_m,
            "hc_e": hc_e,
            "pr_pos": pr_pos,
            "pr_m": pr_m,
            "pr_e": pr_e,
            "tld": pl.Series(TLDS)[tld],
            "label": pl.Series(LABELS)[label],
            "kind": kind,
        }
    )
    name = pl.concat_str([pl.lit("site"), pl.col("hc_pos").cast(pl.String)])
    base = pl.concat_str([pl.col("tld"), name], separator=".")
    host_rev = (
        pl.when(pl.col("kind") < 0.25)
        .then(pl.concat_str([base, pl.lit("www")], separator="."))
        .when(pl.col("kind") < 0.45)
        .then(pl.concat_str([base, pl.col("label")], separator="."))
        .otherwise(base)
    )
    columns = [
        pl.col("hc_pos"),
        java_decimal(pl.col("hc_m"), pl.col("hc_e"), 8).alias("hc_val"),
        pl.col("pr_pos"),
        java_decimal(pl.col("pr_m"), pl.col("pr_e"), 16).alias("pr_val"),
        host_rev.alias("host_rev"),
    ]
    if domain:
        columns.append((1 + rng.pareto(1.2, n).astype(np.int64)).clip(1, 10**6).astype(np.int64))
    out = frame.select(columns[:5])
    if domain:
        out = out.with_columns(pl.Series("n_hosts", columns[5]))
    return out


def generate(path: Path, rows: int, seed: int = 0, domain: bool = False, level: int = 6) -> int:
    """Write the file; returns its size in bytes."""
    rng = np.random.default_rng(seed)
    pr_pos = pr_order(rows, rng)
    header = HOST_HEADER + ("\t#n_hosts" if domain else "")
    with gzip.open(path, "wb", compresslevel=level) as out:
        out.write(header.encode() + b"\n")
        for start in range(0, rows, CHUNK_ROWS):
            frame = chunk_frame(start, pr_pos[start : start + CHUNK_ROWS], rng, domain)
            buffer = io.BytesIO()
            frame.write_csv(buffer, separator="\t", include_header=False, quote_style="never")
            out.write(buffer.getvalue())
    return path.stat().st_size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--domain", action="store_true", help="domain-ranks layout (adds #n_hosts)")
    parser.add_argument("--level", type=int, default=6, help="gzip level (CC's files use the default, 6)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    size = generate(args.out, args.rows, args.seed, args.domain, args.level)
    took = time.perf_counter() - started
    print(
        f"wrote {args.rows:,} rows, {size / 2**20:.1f} MiB gzip to {args.out} in {took:.1f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
