"""`blocks_v1`: gradient-boosted trees over block features, trained on WCXB dev, shipped in the package."""

from __future__ import annotations

import gzip
import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

import numpy as np

from cleaner.blocks_features import feature_names, page_features
from cleaner.blocks_files import DEFAULT_MODEL, MODEL_ENV
from cleaner.labeller import BlockLabellerCleaner, Labeller, keep_mask
from cleaner.simplify import Block, SimplePage
from cleaner.wcxb import words

FORMAT = "hostcrawl-blocks/1"
# A block is labelled main when this share of its words aligns with the truth text.
LABEL_MIN_SHARE = 0.5
# A kept block whose exact text an earlier kept block elsewhere on the page already has (a mobile copy,
# a repeated tab) is dropped when it has at least this many words; short repeats ("Add to cart") are
# left to the model, and repeats among siblings (a refrain, a repeated table row) are kept.
REPEAT_MIN_WORDS = 3
# A first-pass block this sure anchors the main text for the second pass's position features.
STRONG_MAIN = 0.8


def block_labels(page: SimplePage, truth: str) -> np.ndarray:
    """Align page and truth words in order, so a menu word cannot claim the article's copy of it."""
    block_words = [words(block.text) for block in page.blocks]
    flat = [w for ws in block_words for w in ws]
    owner = np.repeat(np.arange(len(block_words)), [len(ws) for ws in block_words])
    aligned = np.zeros(len(block_words))
    matcher = SequenceMatcher(None, flat, words(truth), autojunk=False)
    for start, _, size in matcher.get_matching_blocks():
        np.add.at(aligned, owner[start : start + size], 1)
    sizes = np.array([len(ws) for ws in block_words])
    return ((sizes > 0) & (aligned >= LABEL_MIN_SHARE * sizes)).astype(np.int8)


def _parent(block: Block) -> int:
    return block.containers[1] if len(block.containers) > 1 else -1


def drop_repeats(page: SimplePage, probs: np.ndarray, threshold: float) -> np.ndarray:
    """Zero the probability of kept blocks that copy, word for word, a kept block under another parent."""
    first: dict[str, Block] = {}
    for i, (block, keep) in enumerate(zip(page.blocks, keep_mask(probs, threshold), strict=True)):
        if not keep:
            continue
        earlier = first.setdefault(block.text, block)
        if earlier is not block and block.n_words >= REPEAT_MIN_WORDS and _parent(earlier) != _parent(block):
            probs[i] = 0.0
    return probs


@dataclass(slots=True)
class BlocksModel:
    """Two boosted-tree passes (the second sees the first's predictions around each block)."""

    boosters: list[Any]  # lightgbm.Booster per pass
    token_scores: dict[str, float]
    threshold: float
    meta: dict[str, Any]

    def predict(self, page: SimplePage) -> np.ndarray:
        """P(main) for each block of one page."""
        if not page.blocks:
            return np.zeros(0, dtype=np.float32)
        features = page_features(page, self.token_scores)
        probs = self.boosters[0].predict(features, num_threads=1)
        for booster in self.boosters[1:]:
            probs = booster.predict(stack_features(page, features, probs), num_threads=1)
        return drop_repeats(page, np.asarray(probs, dtype=np.float32), self.threshold)

    def save(self, path: Path) -> None:
        """Deterministic gzip'd JSON: the same training data gives the same bytes."""
        doc = {
            "format": FORMAT,
            "threshold": self.threshold,
            "meta": self.meta,
            "feature_names": feature_names(),
            "token_scores": dict(sorted(self.token_scores.items())),
            "boosters": [b.model_to_string() for b in self.boosters],
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        raw = json.dumps(doc, sort_keys=True).encode()
        path.write_bytes(gzip.compress(raw, mtime=0))

    @classmethod
    def load(cls, path: Path) -> BlocksModel:
        """Read a model file written by `save`; errors name the file."""
        import lightgbm as lgb

        try:
            doc = json.loads(gzip.decompress(path.read_bytes()))
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: not a blocks model file ({exc})") from exc
        if doc.get("format") != FORMAT:
            raise ValueError(f"{path}: format {doc.get('format')!r}, expected {FORMAT!r}")
        if doc.get("feature_names") != feature_names():
            raise ValueError(f"{path}: built for other features; rebuild it with `hostcrawl clean train`")
        boosters = [lgb.Booster(model_str=s) for s in doc["boosters"]]
        return cls(boosters, dict(doc["token_scores"]), float(doc["threshold"]), dict(doc["meta"]))


def stack_features(page: SimplePage, features: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """First-pass features plus the first pass's predictions of the neighbours and containers."""
    n = len(probs)
    p = np.asarray(probs, dtype=np.float64)
    w = np.array([b.n_words for b in page.blocks], dtype=np.float64)
    cols = [p]
    padded = np.concatenate([[np.nan] * 3, p, [np.nan] * 3])
    for off in (-3, -2, -1, 1, 2, 3):
        cols.append(padded[3 + off : 3 + off + n])
    cum = np.concatenate([[0.0], np.cumsum(p * w)])
    cumw = np.concatenate([[0.0], np.cumsum(w)])
    idx = np.arange(n)
    for win in (5, 15):
        lo, hi = np.clip(idx - win, 0, n), np.clip(idx + win + 1, 0, n)
        cols.append((cum[hi] - cum[lo]) / np.maximum(cumw[hi] - cumw[lo], 1.0))
    # word-weighted mean prediction of the blocks sharing each of the nearest containers
    for level in range(3):
        sums: dict[int, float] = {}
        weights: dict[int, float] = {}
        keys = [b.containers[level] if len(b.containers) > level else -1 for b in page.blocks]
        for key, pi, wi in zip(keys, p, w, strict=True):
            sums[key] = sums.get(key, 0.0) + pi * wi
            weights[key] = weights.get(key, 0.0) + wi
        cols.append(np.array([sums[k] / max(weights[k], 1.0) for k in keys]))
    page_mean = float((p * w).sum() / max(w.sum(), 1.0))
    cols.append(np.full(n, page_mean))
    order = np.argsort(np.argsort(-p))
    cols.append(order / max(n - 1, 1))
    cols += _main_text_context(page, p, w)
    return np.hstack([features, np.column_stack(cols).astype(np.float32)])


def _main_text_context(page: SimplePage, p: np.ndarray, w: np.ndarray) -> list[np.ndarray]:
    """Where a block sits against the main text the first pass found: comments, related lists and sign-up
    boxes come after the article ends, and carry section marks the article's own blocks do not have."""
    n = len(p)
    mass = p * w
    total = max(float(mass.sum()), 1.0)
    before = (np.cumsum(mass) - mass) / total
    after = 1.0 - before - mass / total
    strong = p >= STRONG_MAIN
    cumw = np.cumsum(w) - w
    idx = np.flatnonzero(strong)
    since, until = np.full(n, np.nan), np.full(n, np.nan)
    if len(idx):
        last = np.searchsorted(idx, np.arange(n), side="right") - 1
        nxt = np.searchsorted(idx, np.arange(n), side="left")
        has_last, has_next = last >= 0, nxt < len(idx)
        since[has_last] = np.log1p(cumw[has_last] - cumw[idx[last[has_last]]])
        until[has_next] = np.log1p(cumw[idx[nxt[has_next]]] - cumw[has_next])
    sections = np.array([b.sections for b in page.blocks])
    same = np.zeros(n)
    for value in np.unique(sections):
        members = sections == value
        same[members] = mass[members].sum() / total
    return [before, after, since, until, same, (sections != 0).astype(np.float64)]


class BlocksLabeller(Labeller[SimplePage, np.ndarray]):
    """CPU labeller backed by a `BlocksModel` file."""

    name = "blocks_v1"

    def __init__(self, model: BlocksModel) -> None:
        self.model = model

    def label(self, pages: Sequence[SimplePage]) -> list[np.ndarray]:
        return [self.model.predict(page) for page in pages]


class BlocksCleaner(BlockLabellerCleaner):
    """The default CPU cleaner: simplifier + `blocks_v1` trees."""

    name = "blocks_v1"

    def __init__(self, model_path: Path | None = None, model: BlocksModel | None = None) -> None:
        self.model_path = model_path or Path(os.environ.get(MODEL_ENV) or DEFAULT_MODEL)
        self._labeller = BlocksLabeller(model) if model is not None else None

    def labeller(self) -> BlocksLabeller:
        if self._labeller is None:
            if not self.model_path.is_file():
                raise FileNotFoundError(
                    f"{self.model_path}: blocks model missing; build it with `hostcrawl clean train` "
                    f"(or unset {MODEL_ENV} to use the packaged one)"
                )
            self._labeller = BlocksLabeller(BlocksModel.load(self.model_path))
        return self._labeller

    def keep_threshold(self) -> float:
        return self.labeller().model.threshold


def token_table(
    examples: Sequence[tuple[SimplePage, np.ndarray, str]], min_domains: int = 3, prior: float = 20.0
) -> dict[str, float]:
    """Smoothed log-odds that a word under a class/id token is main content, tokens seen on many sites."""
    main: Counter[str] = Counter()
    total: Counter[str] = Counter()
    domains: dict[str, set[str]] = {}
    for page, labels, domain in examples:
        for block, label in zip(page.blocks, labels, strict=True):
            for token in set(block.tokens):
                total[token] += block.n_words
                main[token] += block.n_words * int(label)
                domains.setdefault(token, set()).add(domain)
    all_main = sum(int(lab) * b.n_words for p, ls, _ in examples for b, lab in zip(p.blocks, ls, strict=True))
    all_words = max(sum(b.n_words for p, _, _ in examples for b in p.blocks), 1)
    base = (all_main + 1) / (all_words + 2)
    scores: dict[str, float] = {}
    for token, n in total.items():
        if len(domains[token]) < min_domains:
            continue
        rate = (main[token] + prior * base) / (n + prior)
        scores[token] = round(float(np.log(rate / (1 - rate))), 4)
    return scores
