"""Versioned scorer names -> classes, imported late so model scorers cost nothing until used."""

from __future__ import annotations

import importlib

from cleaner.quality.base import QualityScorer

# name -> "module:Class"; the name is written next to every score, so bump it whenever the
# numbers a scorer returns change.
SCORERS: dict[str, str] = {
    "heuristic_v1": "cleaner.quality.heuristic:HeuristicScorer",
}


def scorer_names() -> tuple[str, ...]:
    """Known scorer names, for CLI help and config validation."""
    return tuple(sorted(SCORERS))


def get_scorer(name: str) -> QualityScorer:
    """Build the scorer registered under `name`; unknown names list the known ones."""
    target = SCORERS.get(name)
    if target is None:
        raise ValueError(f"unknown scorer {name!r}; known scorers: {', '.join(scorer_names())}")
    module_name, class_name = target.split(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls()
