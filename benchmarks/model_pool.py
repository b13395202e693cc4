"""A model cleaner's crawl pool: one process doing everything against CPU workers + one model process.

    python -m benchmarks.model_pool                       # tiny random encoder, 400 WCXB dev pages
    python -m benchmarks.model_pool --model DIR --pages 1000

Both arms push the same WCXB dev pages through the crawl's BatchCleaner (batches of 64, encoder_v2, the
heuristic_v2 scorer and language id), the way CleanScoreStorePipeline does:
- `one process`: the pool the crawl used before, one worker that parses, labels and scores each batch;
- `staged`: crawler/pages/staged_pool.py, a CPU worker per core that parses and scores, and one model
  process that only labels.
It prints pages/s for each and their ratio (the baseline is the one-process arm of the same run), and
checks that both arms give every page the same text. A random model (`--random tiny`, built here with a
tokenizer trained on the pages, and 128-token chunks) costs a CPU about as much per batch as parsing and
rendering it (measured: 7 s, against 4 s to prepare and 2.5 s to finish 64 pages), so on two cores the
split can at best halve the time. On a GPU what it saves is the accelerator's idle time while one process
parses. With 8,192-token chunks the tiny model's attention alone takes a CPU 17 s per batch, and both arms
wait on it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Executor
from pathlib import Path

from cleaner.encoder import MODEL_ENV, save_random_encoder
from cleaner.item_labeller import item_page
from cleaner.pipeline import PageResult, process_pages, warm_up
from cleaner.wcxb import iter_pages, page_ids
from crawler.pages.batch_cleaner import BatchCleaner
from crawler.pages.staged_pool import cleaning_pool, spawn_pool

CLEANER = "encoder_v2"
SCORERS = ("heuristic_v2",)
BATCH = 64
CHUNK_TOKENS = 128
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/data/wcxb-dev"


def load(data: Path, n_pages: int) -> list[tuple[str, str]]:
    ids = page_ids(data)
    chosen = ids[:: max(1, len(ids) // n_pages)][:n_pages]
    return [(page.html, page.url or page.id) for page in iter_pages(data, chosen)]


async def run_arm(
    make_pool: Callable[[], Executor], pages: list[tuple[str, str]]
) -> tuple[float, list[PageResult]]:
    batcher = BatchCleaner(
        make_pool,
        process_pages,
        (CLEANER, SCORERS),
        name=CLEANER,
        workers=1,
        batch_pages=BATCH,
    )
    try:
        await batcher.warm_up(warm_up)
        started = time.perf_counter()
        results = await asyncio.gather(*(batcher.clean(html, url) for html, url in pages))
        return time.perf_counter() - started, results
    finally:
        batcher.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a WCXB-format folder")
    parser.add_argument("--pages", type=int, default=400, help="evenly spread pages to use")
    parser.add_argument(
        "--model", type=Path, help="an encoder folder (default: a tiny random one built here)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="arms alternate this many times")
    args = parser.parse_args()
    pages = load(args.data, args.pages)
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model is None:
            texts = [item_page(html).simplified for html, _ in pages[:200]]
            # short chunks: a forward pass that costs a CPU about what parsing does (seed 1 labels some
            # blocks main, so pages are rendered too)
            model = save_random_encoder(
                Path(tmp) / "tiny", texts, seed=1, max_position_embeddings=CHUNK_TOKENS
            )
        os.environ[MODEL_ENV] = str(model)  # for the workers the arms spawn
        arms: dict[str, Callable[[], Executor]] = {
            "one process": lambda: spawn_pool(1, 0),
            "staged": lambda: cleaning_pool(CLEANER, 1, 0),
        }
        seconds: dict[str, list[float]] = {name: [] for name in arms}
        texts_by_arm: dict[str, list[str]] = {}
        for _ in range(args.rounds):
            for name, make in arms.items():
                took, results = asyncio.run(run_arm(make, pages))
                seconds[name].append(took)
                texts_by_arm[name] = [r.text for r in results]
                print(f"{name:12} {len(pages) / took:7.1f} pages/s ({took:.1f} s)", flush=True)
    same = texts_by_arm["one process"] == texts_by_arm["staged"]
    base = len(pages) / min(seconds["one process"])
    best = len(pages) / min(seconds["staged"])
    print(f"\n{len(pages)} pages, {os.cpu_count()} cores, best of {args.rounds} rounds each")
    print(f"one process {base:.1f} pages/s; staged {best:.1f} pages/s: {best / base:.2f}x")
    print(f"same text for every page: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
