"""py3langid's verdicts on many page heads at once: its byte DFA stepped for every head together.

py3langid walks its tokeniser's DFA in a Python loop, one byte at a time (`visit_counts`): 60-66% of
heuristic_v3's time on the test web when it identifies the pages itself. Stepping all heads of a batch
together costs one numpy call per byte position, so a batch of a few hundred pages costs about what a
few pages did. The verdicts are the model's own: the same feature counts in the same order, scored
by py3langid's `_sparse_score` and normalised as its `_decide` does. This reads the model's tables
(`tk_nextmove`, `_rowbase`, `tk_output`, `_alias_pairs`, `_norm_probs`); tests/test_langid.py pins
the contract by comparing every verdict with `classify`, text by text.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from py3langid.langid import RAW_FLOOR

# Heads walked together: the walk holds a byte and a feature per head and step (2,000 characters of
# CJK are 6,000 bytes: 512 heads hold about 28 MB), and more heads per step gain little.
HEADS_PER_WALK = 512


class BatchClassifier:
    """`classify` of many texts at once, for py3langid's LanguageIdentifier `model`."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.next_move = np.frombuffer(model.tk_nextmove, dtype=np.dtype(model.tk_nextmove.typecode))
        self.row_base = np.asarray(model._rowbase, dtype=np.int64)
        self.output = np.asarray(model.tk_output, dtype=np.int64)

    def features(self, heads: Sequence[bytes]) -> list[np.ndarray]:
        """Per head, the DFA's output features in the order they are emitted (py3langid's walk)."""
        lengths = np.fromiter(map(len, heads), dtype=np.int64, count=len(heads))
        if not len(heads) or not lengths.max():
            return [np.empty(0, np.int64) for _ in heads]
        order = np.argsort(-lengths, kind="stable")
        by_length = lengths[order]
        steps = int(by_length[0])
        columns = np.zeros((steps, len(heads)), np.uint8)  # byte t of every head, longest first
        for row, i in enumerate(order.tolist()):
            columns[: lengths[i], row] = np.frombuffer(heads[i], np.uint8)
        active = np.searchsorted(-by_length, -np.arange(steps), side="left")  # heads longer than t
        emitted = np.full((steps, len(heads)), -1, np.int64)
        state = np.zeros(len(heads), np.int64)
        for t in range(steps):
            k = active[t]
            moved = self.next_move[self.row_base[state[:k]] + columns[t, :k]]
            state[:k] = moved
            emitted[t, :k] = self.output[moved]
        out: list[np.ndarray] = [np.empty(0, np.int64)] * len(heads)
        for row, i in enumerate(order.tolist()):
            column = emitted[: lengths[i], row]
            out[i] = column[column >= 0]
        return out

    def classify(self, texts: Sequence[str]) -> list[tuple[str, float]]:
        """(language, confidence) per text, as `model.classify(text)` returns them."""
        model = self.model
        encoded = [model._encode(text) for text in texts]
        emitted_all = []
        for start in range(0, len(encoded), HEADS_PER_WALK):
            emitted_all += self.features(encoded[start : start + HEADS_PER_WALK])
        verdicts = []
        for head, emitted in zip(encoded, emitted_all, strict=True):
            if emitted.size:  # counted as py3langid counts them, so the scores sum in its order
                scores = model._sparse_score(Counter(emitted.tolist()), model.nb_ptc)
            else:
                scores = np.full(len(model.nb_classes), 0.0 if model._norm_probs else RAW_FLOOR, np.float32)
            verdicts.append(self._decide(scores, len(head)))
        return verdicts

    def _decide(self, scores: np.ndarray, n_bytes: int) -> tuple[str, float]:
        """py3langid's `_decide` after the raw scores, then `classify`'s choice."""
        model = self.model
        if model._norm_probs:
            scores *= 1.0 / math.sqrt(n_bytes or 1)
            np.exp(scores - scores.max(), out=scores)
            scores /= scores.sum()
        for i, j in model._alias_pairs:
            if model._norm_probs:
                scores[i] += scores[j]
                scores[j] = 0.0
            else:
                scores[i] = max(scores[i], scores[j])
                scores[j] = RAW_FLOOR
        best = int(scores.argmax())
        confidence = float(scores[best])
        if model.min_confidence is not None and confidence < model.min_confidence:
            return "und", confidence
        return str(model.nb_classes[best]), confidence
