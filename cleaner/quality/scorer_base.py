"""The quality-scorer interface: texts in, one score in [0, 1] per text out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

# A page is "high quality" when its score exceeds this (the paper's convention for every scorer).
HIGH_QUALITY_THRESHOLD = 0.5


class QualityScorer(ABC):
    """Base of every quality scorer; batched because model scorers want batches.

    `name` is versioned and written next to every score; rule scorers set it on the class, model
    scorers per instance (the user names the model: `dclm=/models/dclm.bin`).
    """

    name: str

    @abstractmethod
    def score_batch(self, texts: Sequence[str]) -> list[float]:
        """Score each text in [0, 1]; higher is better pretraining data; empty text scores 0."""

    def score_one(self, text: str) -> float:
        """Score a single text through the batch path, so the two can never disagree."""
        return self.score_batch([text])[0]

    def describe(self) -> dict[str, Any]:
        """Provenance written into outputs (model file, label scheme), so a score can be traced."""
        return {"name": self.name, "class": type(self).__name__}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"
