"""How long `hostcrawl --help` and each command's `--help` take, against the Python interpreter starting and
the same interpreter importing the crawl's engine (Scrapy, polars), measured in the same run.

    python -m benchmarks.cli_startup [--repeat 5]

Target (issue 30): every `--help` within 2x of a bare `python -c pass` plus argparse and rich, and far
below the engine's import.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS = (
    ["--help"],
    ["crawl", "--help"],
    ["score", "--help"],
    ["study", "--help"],
    ["bench", "yield", "--help"],
    ["recrawl", "plan", "--help"],
    ["graph", "--help"],
    ["clean", "train", "--help"],
)
BASELINE = "import argparse, rich.console"
ENGINE = "import scrapy.crawler, polars, duckdb"


def _seconds(argv: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5, help="runs per command; the median is printed (5)")
    args = parser.parse_args()
    base = _seconds([sys.executable, "-c", BASELINE], args.repeat)
    engine = _seconds([sys.executable, "-c", ENGINE], args.repeat)
    print(f"baseline `python -c '{BASELINE}'`: {base:.2f} s; the engine `{ENGINE}`: {engine:.2f} s")
    print(f"{'command':<28} {'seconds':>8} {'x baseline':>11} {'x engine':>9}")
    for command in COMMANDS:
        took = _seconds([sys.executable, "-m", "crawler.cli", *command], args.repeat)
        print(f"{' '.join(command):<28} {took:8.2f} {took / base:11.2f} {took / engine:9.2f}")


if __name__ == "__main__":
    main()
