"""FineWeb-Edu's classifier (HuggingFaceFW/fineweb-edu-classifier) through transformers.

The published model is a BERT-style encoder (Snowflake arctic-embed-m) with a one-output regression
head: `AutoModelForSequenceClassification`, text truncated to the model's length, and the logit is
the educational score on a 0-5 scale; FineWeb-Edu keeps a page when int(round(clip(score, 0, 5))) >= 3.
The scorer reports clip(score, 0, 5) / 5, so "above 0.5" (hostcrawl's high-quality rule) is exactly
FineWeb-Edu's keep rule: a score above 2.5 rounds to 3 or more, and 2.5 itself rounds to 2.
torch and transformers are imported only here (the `gpu` extra).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cleaner.model_source import ModelSource
from cleaner.quality.scorer_base import QualityScorer

FINEWEB_EDU_MODEL = "HuggingFaceFW/fineweb-edu-classifier"
MAX_SCORE = 5.0
KEEP_INT_SCORE = 3
BATCH_SIZE = 32
GPU_EXTRA_HINT = "the fineweb_edu scorer needs torch and transformers: pip install 'hostcrawl[gpu]'"


def int_score(score: float) -> int:
    """FineWeb-Edu's integer score: the raw score clipped to 0-5, rounded."""
    return round(max(0.0, min(score, MAX_SCORE)))


class FineWebEduScorer(QualityScorer):
    """The FineWeb-Edu classifier from a local folder or hub id; scores clip(raw, 0, 5) / 5."""

    def __init__(
        self, name: str, source: ModelSource | str, device: str | None = None, batch_size: int = BATCH_SIZE
    ) -> None:
        try:
            import torch
            from transformers import AutoModelForSequenceClassification, AutoTokenizer
        except ImportError as exc:  # pragma: no cover - depends on the gpu extra
            raise ImportError(GPU_EXTRA_HINT) from exc
        self.name = name
        self.source = ModelSource(source) if isinstance(source, str) else source
        self.torch = torch
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        kwargs = self.source.load_kwargs()
        self.tokenizer = AutoTokenizer.from_pretrained(self.source.model, **kwargs)
        self.model: Any = AutoModelForSequenceClassification.from_pretrained(self.source.model, **kwargs)
        if self.model.config.num_labels != 1:
            raise ValueError(
                f"{self.source.model}: FineWeb-Edu's classifier has one regression output, "
                f"this model has {self.model.config.num_labels} labels"
            )
        self.model.to(self.device).eval()
        self.batch_size = batch_size

    def raw_scores(self, texts: Sequence[str]) -> list[float]:
        """The model's educational scores (about 0-5), as the model card computes them."""
        out: list[float] = []
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            inputs = self.tokenizer(batch, return_tensors="pt", padding="longest", truncation=True)
            with self.torch.inference_mode():
                logits = self.model(**{k: v.to(self.device) for k, v in inputs.items()}).logits
            out += logits.squeeze(-1).float().cpu().tolist()
        return out

    def int_scores(self, texts: Sequence[str]) -> list[int]:
        """FineWeb-Edu's 0-5 integers; a page is kept when its integer is at least 3."""
        return [int_score(s) for s in self.raw_scores(texts)]

    def score_batch(self, texts: Sequence[str]) -> list[float]:
        scores = [0.0] * len(texts)
        where = [i for i, text in enumerate(texts) if text.strip()]
        raw = self.raw_scores([texts[i] for i in where]) if where else []
        for i, value in zip(where, raw, strict=True):
            scores[i] = max(0.0, min(value, MAX_SCORE)) / MAX_SCORE
        return scores

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "class": type(self).__name__,
            "model": self.source.model,
            "revision": self.source.revision,
            "scheme": "clip(logit, 0, 5) / 5; FineWeb-Edu keeps int(round(logit)) >= 3, i.e. score > 0.5",
        }
