"""fastText quality classifiers (DCLM, GneissWeb, user models) from local model files.

FineWeb-Edu's published classifier is a BERT regression model, not fastText: see
cleaner/quality/transformers_scorer.py.

Each published model comes with its own label scheme and its own way of flattening a document
onto one line; both are reproduced here so scores match the published pipelines.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cleaner.quality.scorer_base import QualityScorer

FASTTEXT_INSTALL = "pip install 'fasttext-numpy2-wheel>=0.9.2'"
LABEL_PREFIX = "__label__"
# Label names that mean "the good class" in binary models people train; tried when the user
# gives no positive label. `hq` first: DCLM, GneissWeb and our own trainer use it.
POSITIVE_LABEL_GUESSES = ("hq", "high", "positive", "pos", "good", "yes", "true", "1")


def join_lines(text: str) -> str:
    """DCLM's flattening: strip, then join the lines with single spaces."""
    return " ".join(text.strip().splitlines())


def replace_newlines(text: str) -> str:
    """GneissWeb (data-prep-kit) flattening: each newline becomes a space."""
    return text.replace("\n", " ")


def with_prefix(label: str) -> str:
    """`hq` and `__label__hq` name the same label."""
    return label if label.startswith(LABEL_PREFIX) else LABEL_PREFIX + label


@dataclass(frozen=True, slots=True)
class Preset:
    """A published model: how its score is read from the labels, and how text is flattened."""

    description: str
    positive: tuple[str, ...] = ()  # candidates for P(positive label), first one present wins
    negative: str | None = None  # binary models whose other label is named: score = 1 - P(negative)
    flatten: Callable[[str], str] = join_lines


# GneissWeb's five fastText models are binary, and their negative label is `__label__cc` (the quality
# annotator's card names `__label__hq` vs `__label__cc`; the technology card names `__label__hq` for
# its positive class, while the science model is seen emitting `__label__science`): the score is
# 1 - P(__label__cc), which is P(positive) whatever the positive label is called.
GNEISSWEB_NEGATIVE = "__label__cc"
GNEISSWEB_MODELS = {
    "gneissweb_quality": ("GneissWeb.Quality_annotator", "fasttext_gneissweb_quality_annotator.bin"),
    "gneissweb_technology": ("GneissWeb.Tech_classifier", "fasttext_technology_computing.bin"),
    "gneissweb_science": ("GneissWeb.Sci_classifier", "fasttext_science.bin"),
    "gneissweb_education": ("GneissWeb.Edu_classifier", "fasttext_education.bin"),
    "gneissweb_medical": ("GneissWeb.Med_classifier", "fasttext_medical.bin"),
}
PRESETS: dict[str, Preset] = {
    "dclm": Preset(
        "DCLM (mlfoundations/fasttext-oh-eli5, openhermes_reddit_eli5_vs_rw_v2_bigram_200k_train.bin): "
        "P(__label__hq)",
        positive=("__label__hq",),
    ),
    **{
        name: Preset(
            f"ibm-granite/{repo} ({file}): 1 - P({GNEISSWEB_NEGATIVE})",
            negative=GNEISSWEB_NEGATIVE,
            flatten=replace_newlines,
        )
        for name, (repo, file) in GNEISSWEB_MODELS.items()
    },
}


def load_fasttext_model(path: Path) -> Any:
    """Load a fastText model file; errors name the file and what to do about it."""
    try:
        import fasttext
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(f"fastText classifiers need the fasttext package: {FASTTEXT_INSTALL}") from exc
    if not path.is_file():
        raise FileNotFoundError(f"fastText model {path} does not exist")
    try:
        # the private constructor skips load_model's deprecation banner on stderr
        return fasttext.FastText._FastText(model_path=str(path))
    except ValueError as exc:
        raise ValueError(f"{path} is not a fastText model: {exc}") from exc


def _numeric(labels: Sequence[str]) -> list[int] | None:
    """Label values when every label is an integer (`__label__0`..`__label__5`), else None."""
    values = [label.removeprefix(LABEL_PREFIX) for label in labels]
    return [int(v) for v in values] if all(v.isdigit() for v in values) else None


class FastTextScorer(QualityScorer):
    """One fastText model, read through a preset's label scheme or a user-given positive label."""

    def __init__(self, name: str, path: Path, preset: str | None = None, positive_label: str | None = None):
        self.name = name
        self.path = Path(path)
        self.preset = PRESETS[preset] if preset else None
        self.preset_name = preset
        self.model = load_fasttext_model(self.path)
        self.labels: list[str] = list(self.model.get_labels())
        self.flatten = self.preset.flatten if self.preset else join_lines
        self.positive: str | None = None
        self.weights: dict[str, float] = {}
        self._resolve_scheme(positive_label)

    def _resolve_scheme(self, positive_label: str | None) -> None:
        """Pick P(positive) or the expected ordinal label; refuse models the scheme cannot read."""
        if positive_label:
            wanted = with_prefix(positive_label)
            if wanted not in self.labels:
                raise ValueError(f"{self.path}: no label {wanted!r}; the model has {self.labels}")
            self.positive = wanted
            return
        values = _numeric(self.labels)
        negative = self.preset.negative if self.preset else None
        if negative is not None:
            if negative not in self.labels or len(self.labels) != 2:
                raise ValueError(
                    f"{self.path}: {self.name} expects a binary model with {negative}, got {self.labels}"
                )
            self.positive = next(label for label in self.labels if label != negative)
            return
        if self.preset is None and values is not None and len(values) > 2:  # ordinal labels 0..K
            self.weights = {label: v / max(values) for label, v in zip(self.labels, values, strict=True)}
            return
        candidates = self.preset.positive if self.preset else tuple(map(with_prefix, POSITIVE_LABEL_GUESSES))
        for candidate in candidates:
            if candidate in self.labels:
                self.positive = candidate
                return
        raise ValueError(
            f"{self.path}: cannot tell which label means high quality among {self.labels}; "
            f"name it: --classifier {self.name}={self.path}:LABEL"
        )

    @property
    def scheme(self) -> str:
        """The rule that turns label probabilities into the score, for provenance."""
        if self.positive is not None:
            return f"P({self.positive})"
        return f"sum(label * P(label)) / {max(_numeric(list(self.weights)) or [1])}"

    def score_batch(self, texts: Sequence[str]) -> list[float]:
        """One batched predict over all labels; empty texts score 0 without asking the model."""
        scores = [0.0] * len(texts)
        lines, where = [], []
        for i, text in enumerate(texts):
            line = self.flatten(text).strip()
            if line:
                lines.append(line)
                where.append(i)
        if not lines:
            return scores
        all_labels, all_probs = self.model.predict(lines, k=-1)
        positive, weights = self.positive, self.weights
        for i, labels, probs in zip(where, all_labels, all_probs, strict=True):
            if positive is not None:
                value = next((float(p) for lab, p in zip(labels, probs, strict=True) if lab == positive), 0.0)
            else:
                value = sum(weights.get(lab, 0.0) * float(p) for lab, p in zip(labels, probs, strict=True))
            # fastText's softmax can overshoot 1 by a few ulps
            scores[i] = min(1.0, max(0.0, value))
        return scores

    def describe(self) -> dict[str, Any]:
        size = self.path.stat().st_size if self.path.exists() else None
        return {
            "name": self.name,
            "class": type(self).__name__,
            "preset": self.preset_name,
            "description": self.preset.description if self.preset else "user fastText model",
            "path": str(self.path),
            "bytes": size,
            "labels": self.labels,
            "scheme": self.scheme,
        }
