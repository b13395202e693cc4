"""Train `blocks_v1` from WCXB-format pages: labels by alignment, out-of-fold token scores, two passes."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cleaner.blocks_features import page_features
from cleaner.blocks_model import BlocksModel, block_labels, stack_features, token_table
from cleaner.simplify import SimplePage, simplify
from cleaner.wcxb import iter_pages

SEED = 20_250_905
# Inner folds for out-of-fold token scores and first-pass predictions (no block sees its own label).
INNER_FOLDS = 3
PASSES = 2
# Small, regularised trees: on the grouped CV as good overall as 63 leaves, a little better on product
# pages, and half the model file.
LGB_PARAMS: dict[str, Any] = {
    "objective": "binary",
    "learning_rate": 0.08,
    "num_leaves": 31,
    "min_data_in_leaf": 100,
    "feature_fraction": 0.6,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "lambda_l2": 1.0,
    "verbose": -1,
    "deterministic": True,
    "force_row_wise": True,
    "num_threads": 1,
}
NUM_TREES = 150
# Chosen on the 5-fold grouped CV: 0.40 to 0.50 are within 0.002 macro F1; product pages do better above 0.40.
THRESHOLD = 0.45


@dataclass(slots=True)
class Example:
    """A simplified training page with its block labels."""

    id: str
    page_type: str
    domain: str
    page: SimplePage
    labels: np.ndarray
    truth: str
    features: np.ndarray | None = field(default=None)


def load_examples(
    root: Path, ids: Sequence[str] | None = None, progress: Callable[[int], None] | None = None
) -> list[Example]:
    """Simplify and label every page that has a main-content truth (`progress` gets the pages read)."""
    out: list[Example] = []
    for n, tp in enumerate(iter_pages(root, list(ids) if ids is not None else None), 1):
        if progress is not None:
            progress(n)
        if not tp.main_content:
            continue
        page = simplify(tp.html)
        page.tree, page.source = None, ""  # training never renders HTML; free the parser and its nodes
        for block in page.blocks:
            block.nodes = []
        out.append(Example(tp.id, tp.page_type, tp.domain, page, block_labels(page, tp.main_content),
                           tp.main_content))  # fmt: skip
    return out


def domain_folds(domains: Sequence[str], k: int) -> list[int]:
    """Stable fold per domain (crc32), so a site never sits on both sides of a split."""
    return [zlib.crc32(d.encode()) % k for d in domains]


def _weights(examples: Sequence[Example]) -> np.ndarray:
    """Each page weighs the same; within a page, blocks weigh by words as the metric does."""
    parts = []
    for ex in examples:
        w = np.array([b.n_words for b in ex.page.blocks], dtype=np.float64) + 1.0
        parts.append(w / w.sum())
    return np.concatenate(parts) if parts else np.zeros(0)


def _fit(x: np.ndarray, y: np.ndarray, w: np.ndarray, seed: int) -> Any:
    import lightgbm as lgb

    params = {**LGB_PARAMS, "seed": seed}
    return lgb.train(params, lgb.Dataset(x, label=y, weight=w), num_boost_round=NUM_TREES)


def _features_oof(examples: Sequence[Example]) -> list[np.ndarray]:
    """Features whose token scores come from the other inner folds' domains."""
    folds = domain_folds([ex.domain for ex in examples], INNER_FOLDS)
    out: list[np.ndarray | None] = [None] * len(examples)
    for f in range(INNER_FOLDS):
        table = token_table(
            [(e.page, e.labels, e.domain) for e, g in zip(examples, folds, strict=True) if g != f]
        )
        for i, (e, g) in enumerate(zip(examples, folds, strict=True)):
            if g == f:
                out[i] = page_features(e.page, table)
    return [x for x in out if x is not None]


def train_model(
    examples: Sequence[Example], passes: int = PASSES, progress: Callable[[str], None] | None = None
) -> BlocksModel:
    """Fit the passes on `examples`; deterministic for a given input."""
    say = progress or (lambda _msg: None)
    y = np.concatenate([ex.labels for ex in examples]).astype(np.float64)
    w = _weights(examples)
    say("features (out-of-fold token scores)")
    feats = _features_oof(examples)
    x = np.vstack(feats)
    say(f"pass 1 on {len(y):,} blocks")
    boosters = [_fit(x, y, w, SEED)]
    if passes > 1:
        say("pass 1 out-of-fold predictions")
        folds = domain_folds([ex.domain for ex in examples], INNER_FOLDS)
        sizes = [len(ex.labels) for ex in examples]
        starts = np.concatenate([[0], np.cumsum(sizes)])
        row_fold = np.repeat(folds, sizes)
        oof = np.zeros(len(y))
        for f in range(INNER_FOLDS):
            say(f"pass 1 out-of-fold predictions: fold {f + 1}/{INNER_FOLDS}")
            inner = _fit(x[row_fold != f], y[row_fold != f], w[row_fold != f], SEED + f)
            oof[row_fold == f] = inner.predict(x[row_fold == f], num_threads=1)
        stacked = np.vstack(
            [
                stack_features(ex.page, feats[i], oof[starts[i] : starts[i + 1]])
                for i, ex in enumerate(examples)
            ]
        )
        say("pass 2")
        boosters.append(_fit(stacked, y, w, SEED + 100))
    table = token_table([(e.page, e.labels, e.domain) for e in examples])
    meta = {"pages": len(examples), "blocks": len(y), "trees": NUM_TREES, "passes": len(boosters),
            "page_ids": sorted(e.id for e in examples)}  # fmt: skip
    return BlocksModel(boosters, table, THRESHOLD, meta)
