"""Heuristic extractors (trafilatura, resiliparse) as block labellers: their text, aligned onto blocks."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cleaner.base import Cleaner
from cleaner.blocks_model import block_labels
from cleaner.labeller import BlockLabeller
from cleaner.registry import get_cleaner
from cleaner.simplify import SimplePage


class HeuristicLabeller(BlockLabeller):
    """Runs a heuristic cleaner on the page's HTML and marks the blocks its text covers.

    It is the fallback of the model labellers (a decoder that overflows, an encoder that fails), so
    every path ends in the same blocks and the same rendering.
    """

    name = "heuristic"

    def __init__(self, cleaner: Cleaner | str = "trafilatura_v1") -> None:
        self.cleaner = get_cleaner(cleaner) if isinstance(cleaner, str) else cleaner

    def label(self, pages: Sequence[SimplePage]) -> list[np.ndarray]:
        out = []
        for page in pages:
            cleaned = self.cleaner.clean(page.source) if page.source else None
            text = cleaned.text if cleaned is not None else ""
            out.append(block_labels(page, text).astype(np.float32))
        return out
