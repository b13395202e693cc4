"""The model cleaners on a GPU, when one is lent: pages/s over WCXB dev pages through the crawl's batch path
(64 pages per call), what each page became (text, fallback by reason, empty by reason, ReScraper's
operations), against trafilatura_v1 on the same pages in the same run.

Usage: python benchmarks/gpu_check.py [--data ../shared/data/wcxb-dev] [--pages 512]
           [--cleaners encoder_v2,decoder_v2,rescraper_v1] [--allow-cpu]
Models come from $HOSTCRAWL_ENCODER_MODEL, $HOSTCRAWL_DECODER_MODEL, $HOSTCRAWL_RESCRAPER_MODEL (hub ids by
default, so the machine needs the hub or a local copy). benchmarks/gpu_check.sh runs it with the defaults.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

from cleaner.registry import ACCELERATOR_BATCH_PAGES, get_cleaner
from cleaner.wcxb import iter_pages, page_ids


def run(name: str, htmls: list[str]) -> tuple[float, Counter[str]]:
    cleaner = get_cleaner(name)
    cleaner.clean_batch(htmls[:2], ["warm-up"] * 2)  # loading the model is not a per-page cost
    counts: Counter[str] = Counter()
    start = time.perf_counter()
    for at in range(0, len(htmls), ACCELERATOR_BATCH_PAGES):
        batch = htmls[at : at + ACCELERATOR_BATCH_PAGES]
        for one in cleaner.clean_batch(batch, [f"page-{at + i}" for i in range(len(batch))]):
            counts["text" if one.page is not None else one.error or "none"] += 1
            if one.fallback:
                counts[f"fallback/{one.fallback}"] += 1
            if one.page is not None and one.page.operation:
                counts[f"operation/{one.page.operation}"] += 1
    return len(htmls) / (time.perf_counter() - start), counts


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/wcxb-dev"
    )
    parser.add_argument("--pages", type=int, default=512)
    parser.add_argument("--cleaners", default="encoder_v2,decoder_v2,rescraper_v1")
    parser.add_argument("--allow-cpu", action="store_true", help="run without a GPU (slow; a smoke test)")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available() and not args.allow_cpu:
        print("no CUDA device: lend a GPU, or pass --allow-cpu for a slow smoke run", file=sys.stderr)
        return 2
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    ids = page_ids(args.data)
    step = max(len(ids) // args.pages, 1)
    htmls = [tp.html for tp in iter_pages(args.data, ids[::step][: args.pages])]
    base, _ = run("trafilatura_v1", htmls)
    print(f"{len(htmls)} WCXB dev pages on {device}; trafilatura_v1 {base:.1f} pages/s (one core)")
    for name in args.cleaners.split(","):
        rate, counts = run(name, htmls)
        shown = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        print(f"{name:<14}{rate:>8.1f} pages/s {rate / base:>6.2f}x trafilatura_v1  [{shown}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
