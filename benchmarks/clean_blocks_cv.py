"""blocks_v1 vs trafilatura on WCXB dev: 5-fold CV grouped by domain (F1 per type) and pages/s on one core.

Usage: python benchmarks/clean_blocks_cv.py [--data ../shared/data/wcxb-dev] [--passes 2] [--limit N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from cleaner.blocks_model import BlocksCleaner
from cleaner.blocks_train import domain_folds, load_examples, train_model
from cleaner.labeller import keep_mask
from cleaner.registry import get_cleaner
from cleaner.render import render_text
from cleaner.wcxb import TruthPage, iter_pages, page_ids, word_f1

FOLDS = 5
SPEED_PAGES = 300


def _table(rows: dict[str, dict[str, tuple[str, float]]]) -> None:
    names = list(rows)
    types = sorted({t for r in rows.values() for t, _ in r.values()})
    print(f"{'type':<15}{'pages':>6}" + "".join(f"{n:>16}" for n in names))
    for t in [*types, "ALL"]:
        line, count = f"{t:<15}", 0
        for n in names:
            scores = [f for tt, f in rows[n].values() if t in ("ALL", tt)]
            count = len(scores)
            line += f"{statistics.mean(scores):>16.3f}"
        print(line[:15] + f"{count:>6}" + line[15:])


def _speed(pages: list[TruthPage], model_cleaner: BlocksCleaner) -> None:
    baseline = get_cleaner("trafilatura_v1")
    timings = {}
    for name, cleaner in (("trafilatura_v1", baseline), ("blocks_v1", model_cleaner)):
        start = time.perf_counter()
        for tp in pages:
            cleaner.clean(tp.html, tp.url)
        timings[name] = len(pages) / (time.perf_counter() - start)
    print(
        f"pages/s on one core over {len(pages)} pages: "
        + ", ".join(f"{k} {v:.1f}" for k, v in timings.items())
    )
    print(f"ratio blocks_v1 / trafilatura_v1: {timings['blocks_v1'] / timings['trafilatura_v1']:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/wcxb-dev"
    )
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0)
    args = parser.parse_args()
    ids = page_ids(args.data)
    if args.limit:
        ids = ids[: args.limit]
    truth = {tp.id: tp for tp in iter_pages(args.data, ids)}
    examples = load_examples(args.data, ids)
    folds = domain_folds([e.domain for e in examples], FOLDS)
    trafilatura = get_cleaner("trafilatura_v1")
    rows: dict[str, dict[str, tuple[str, float]]] = {"trafilatura_v1": {}, "blocks_v1": {}}
    for ex in examples:
        page = trafilatura.clean(truth[ex.id].html, truth[ex.id].url)
        rows["trafilatura_v1"][ex.id] = (ex.page_type, word_f1(page.text if page else "", ex.truth)[2])
    per_fold = []
    for f in range(FOLDS):
        start = time.perf_counter()
        model = train_model([e for e, g in zip(examples, folds, strict=True) if g != f], passes=args.passes)
        test = [e for e, g in zip(examples, folds, strict=True) if g == f]
        for ex in test:
            probs = model.predict(ex.page)
            text = render_text(ex.page, keep_mask(probs, model.threshold))
            rows["blocks_v1"][ex.id] = (ex.page_type, word_f1(text, ex.truth)[2])
        ours = statistics.mean(rows["blocks_v1"][e.id][1] for e in test)
        base = statistics.mean(rows["trafilatura_v1"][e.id][1] for e in test)
        per_fold.append(ours - base)
        print(f"fold {f}: {len(test)} pages, blocks_v1 {ours:.3f} vs trafilatura {base:.3f} "
              f"({time.perf_counter() - start:.0f} s)", flush=True)  # fmt: skip
    _table(rows)
    print("gain per fold: " + ", ".join(f"{d:+.3f}" for d in per_fold))
    full = train_model(examples[: len(examples)], passes=args.passes)
    _speed(list(truth.values())[:SPEED_PAGES], BlocksCleaner(model=full))


if __name__ == "__main__":
    main()
