"""Scorer specs -> scorers: versioned rule scorers by name, model scorers as `NAME=PATH[:LABEL]`.

A spec is a plain string so it can cross a process boundary and be rebuilt in each worker:
  heuristic_v2                       a registered scorer
  dclm=/models/dclm.bin              a published fastText model (name picks its preset)
  fineweb_edu=/models/fineweb-edu    FineWeb-Edu's BERT classifier (a folder or hub id, transformers)
  mine=/models/mine.bin:__label__ok  any fastText model, with its positive label
  nemotron=/runs/r1/ensemble.json    a calibrated Nemotron-CC-style ensemble
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path

from cleaner.quality.scorer_base import QualityScorer

# name -> "module:Class"; the name is written next to every score, so bump it whenever the
# numbers a scorer returns change.
SCORERS: dict[str, str] = {
    "heuristic_v1": "cleaner.quality.heuristic:HeuristicScorer",
    "heuristic_v2": "cleaner.quality.heuristic:HeuristicScorerV2",
    "heuristic_v3": "cleaner.quality.heuristic:HeuristicScorerV3",
}
DEFAULT_SCORER = "heuristic_v3"
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
ENSEMBLE_SUFFIX = ".json"
# Model names read through transformers instead of fastText.
TRANSFORMERS_PRESETS = frozenset({"fineweb_edu"})


class ScorerSpecError(ValueError):
    """A `--classifier` value that cannot be parsed; the message quotes it and shows the syntax."""


@dataclass(frozen=True, slots=True)
class ScorerSpec:
    """A parsed scorer spec; `name` is the column the scores go to."""

    name: str
    path: str | None = None
    label: str | None = None

    @classmethod
    def parse(cls, text: str) -> ScorerSpec:
        """`NAME` or `NAME=PATH[:POSITIVE_LABEL]`; a colon inside a path (`C:\\m.bin`) stays in it."""
        text = text.strip()
        if "=" not in text:
            return cls(_check_name(text, text))
        name, rest = text.split("=", 1)
        name = _check_name(name.strip(), text)
        if name in SCORERS:
            raise ScorerSpecError(f"{text!r}: {name!r} is a built-in scorer; give the model another name")
        path, label = rest, None
        head, sep, tail = rest.rpartition(":")
        if sep and head and tail and not re.search(r"[/\\.]", tail) and not Path(rest).exists():
            path, label = head, tail
        if not path:
            raise ScorerSpecError(f"{text!r}: missing model path (NAME=PATH[:POSITIVE_LABEL])")
        return cls(name, path, label)

    def __str__(self) -> str:
        if self.path is None:
            return self.name
        return f"{self.name}={self.path}" + (f":{self.label}" if self.label else "")


def _check_name(name: str, text: str) -> str:
    if not NAME_RE.match(name):
        raise ScorerSpecError(
            f"{text!r}: scorer names are a letter then letters, digits, '_', '.', '-' "
            "(syntax: NAME or NAME=PATH[:POSITIVE_LABEL])"
        )
    return name


def scorer_names() -> tuple[str, ...]:
    """Known scorer names, for CLI help and config validation."""
    return tuple(sorted(SCORERS))


def scorer_column(spec: str) -> str:
    """The name a spec's scores are stored under (`dclm=/m/x.bin` -> `dclm`)."""
    return ScorerSpec.parse(spec).name


def score_column(spec: str) -> str:
    """The column of a spec's scores in every table (`dclm=/m/x.bin` -> `score_dclm`)."""
    return f"score_{scorer_column(spec)}"


def get_scorer(spec: str) -> QualityScorer:
    """Build the scorer a spec names; unknown names list the known ones."""
    parsed = ScorerSpec.parse(spec)
    if parsed.path is None:
        target = SCORERS.get(parsed.name)
        if target is None:
            raise ValueError(
                f"unknown scorer {parsed.name!r}; known scorers: {', '.join(scorer_names())}, "
                "or a model as NAME=PATH[:POSITIVE_LABEL]"
            )
        module_name, class_name = target.split(":")
        cls = getattr(importlib.import_module(module_name), class_name)
        scorer: QualityScorer = cls()
        return scorer
    if parsed.name in TRANSFORMERS_PRESETS:
        from cleaner.model_source import ModelSource
        from cleaner.quality.transformers_scorer import FineWebEduScorer

        revision = parsed.label  # fineweb_edu=HUB_ID:REVISION pins a hub commit
        return FineWebEduScorer(parsed.name, ModelSource(parsed.path, revision))
    if parsed.path.endswith(ENSEMBLE_SUFFIX):
        from cleaner.quality.ensemble import EnsembleScorer

        return EnsembleScorer.from_file(Path(parsed.path), get_scorer, name=parsed.name)
    from cleaner.quality.fasttext_scorer import PRESETS, FastTextScorer

    preset = parsed.name if parsed.name in PRESETS else None
    return FastTextScorer(parsed.name, Path(parsed.path), preset=preset, positive_label=parsed.label)
