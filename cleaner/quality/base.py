"""The quality-scorer interface: texts in, one score in [0, 1] per text out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar


class QualityScorer(ABC):
    """Base of every quality scorer; batched because model scorers want batches."""

    name: ClassVar[str]

    @abstractmethod
    def score_batch(self, texts: Sequence[str]) -> list[float]:
        """Score each text in [0, 1]; higher is better pretraining data; empty text scores 0."""

    def score_one(self, text: str) -> float:
        """Score a single text through the batch path, so the two can never disagree."""
        return self.score_batch([text])[0]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"
