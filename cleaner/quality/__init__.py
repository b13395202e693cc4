"""Page-quality scorers: cleaned text -> scores in [0, 1] under versioned names."""

from cleaner.quality.base import QualityScorer
from cleaner.quality.registry import get_scorer, scorer_names

__all__ = ["QualityScorer", "get_scorer", "scorer_names"]
