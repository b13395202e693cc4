"""Page-quality scorers and language id: cleaned text -> scores in [0, 1] under versioned names."""

from cleaner.quality.langid import DEFAULT_LANGID, Language, get_language_identifier, primary_language
from cleaner.quality.scorer_base import HIGH_QUALITY_THRESHOLD, QualityScorer
from cleaner.quality.scorer_specs import (
    DEFAULT_SCORER,
    ScorerSpec,
    ScorerSpecError,
    get_scorer,
    score_column,
    scorer_column,
    scorer_names,
)

__all__ = [
    "DEFAULT_LANGID",
    "DEFAULT_SCORER",
    "HIGH_QUALITY_THRESHOLD",
    "Language",
    "QualityScorer",
    "ScorerSpec",
    "ScorerSpecError",
    "get_language_identifier",
    "get_scorer",
    "primary_language",
    "score_column",
    "scorer_column",
    "scorer_names",
]
