"""Pages/s on one core over WCXB dev pages: simplifier alone and each cleaner end to end, vs trafilatura.

Usage: python benchmarks/clean_speed.py [--data ../shared/data/wcxb-dev] [--pages 300]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

from cleaner.registry import get_cleaner
from cleaner.simplify import simplify
from cleaner.wcxb import iter_pages, page_ids

CLEANERS = ("trafilatura_v1", "resiliparse_v1", "blocks_v1")


def _rate(htmls: list[str], work: Callable[[str], object]) -> float:
    work(htmls[0])  # warm-up: model loading and imports are not per-page costs
    start = time.perf_counter()
    for html in htmls:
        work(html)
    return len(htmls) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/wcxb-dev"
    )
    parser.add_argument("--pages", type=int, default=300)
    args = parser.parse_args()
    ids = page_ids(args.data)
    step = max(len(ids) // args.pages, 1)
    htmls = [tp.html for tp in iter_pages(args.data, ids[::step][: args.pages])]
    rates = {"simplify": _rate(htmls, simplify)}
    for name in CLEANERS:
        cleaner = get_cleaner(name)
        rates[name] = _rate(htmls, cleaner.clean)
    base = rates["trafilatura_v1"]
    print(f"{len(htmls)} WCXB dev pages, one core")
    for name, rate in rates.items():
        print(f"{name:<16}{rate:>8.1f} pages/s  {rate / base:>5.2f}x trafilatura_v1")


if __name__ == "__main__":
    main()
