"""A Nemotron-CC-style ensemble: per-classifier percentile buckets 0-19, combined by max.

Nemotron-CC scores every document with several classifiers whose raw scores live on different
scales. For each classifier it takes the 5th, 10th, ..., 95th percentiles of its scores over the
corpus as cut points, so a document's integer score in that classifier is how many cut points it
exceeds (0-19, about 5% of documents per bucket); the ensemble score is the maximum over the
classifiers, so a document good by any one measure is kept. Here the cut points are computed once
on a sample (`calibrate`) and saved as JSON; `EnsembleScorer` reads them and reports bucket / 19
as its [0, 1] score, and `buckets` gives the integers.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cleaner.quality.scorer_base import QualityScorer

N_BUCKETS = 20  # Nemotron-CC's integer scores 0-19
CALIBRATION_FORMAT = "hostcrawl-nemotron-ensemble/1"
MIN_CALIBRATION_SAMPLE = N_BUCKETS  # fewer scores than buckets cannot place 19 cut points
CALIBRATION_SAMPLE_ROWS = 1_000_000  # enough for 19 stable percentiles; bounded memory on any input


@dataclass(slots=True)
class EnsembleCalibration:
    """Cut points per member scorer (19 ascending scores each), plus the members' specs."""

    members: dict[str, str]  # column name -> scorer spec, so workers can rebuild each member
    thresholds: dict[str, list[float]]
    sample_size: int
    format: str = CALIBRATION_FORMAT

    def bucket(self, name: str, score: float) -> int:
        """How many cut points `score` exceeds; ties stay low so a mass of zeros is bucket 0."""
        return bisect.bisect_left(self.thresholds[name], score)

    def combine(self, scores: Mapping[str, float]) -> int:
        """Max of the members' buckets: the ensemble's integer score 0-19."""
        return max(self.bucket(name, scores[name]) for name in self.members)

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> EnsembleCalibration:
        """Read a calibration file; errors name the file and what is wrong with it."""
        try:
            data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise FileNotFoundError(f"ensemble calibration {path} does not exist") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None
        if data.get("format") != CALIBRATION_FORMAT:
            raise ValueError(f"{path}: not a {CALIBRATION_FORMAT} calibration file")
        calibration = cls(
            members=dict(data["members"]),
            thresholds={k: [float(x) for x in v] for k, v in data["thresholds"].items()},
            sample_size=int(data["sample_size"]),
        )
        for name in calibration.members:
            cuts = calibration.thresholds.get(name, [])
            if len(cuts) != N_BUCKETS - 1 or cuts != sorted(cuts):
                raise ValueError(f"{path}: member {name!r} needs {N_BUCKETS - 1} ascending cut points")
        return calibration


def percentile_cuts(values: Sequence[float]) -> list[float]:
    """The 5th, 10th, ..., 95th percentiles (linear interpolation, as numpy's default)."""
    ordered = sorted(v for v in values if math.isfinite(v))
    if len(ordered) < MIN_CALIBRATION_SAMPLE:
        raise ValueError(f"need at least {MIN_CALIBRATION_SAMPLE} scores to calibrate, got {len(ordered)}")
    cuts = []
    for k in range(1, N_BUCKETS):
        position = (len(ordered) - 1) * k / N_BUCKETS
        low = math.floor(position)
        high = min(low + 1, len(ordered) - 1)
        cuts.append(ordered[low] + (ordered[high] - ordered[low]) * (position - low))
    return cuts


def calibrate(members: Mapping[str, str], scores: Mapping[str, Sequence[float]]) -> EnsembleCalibration:
    """Cut points for every member from its scores on a sample of documents."""
    missing = set(members) - set(scores)
    if missing:
        raise ValueError(f"no sample scores for ensemble members {sorted(missing)}")
    sizes = {len(scores[name]) for name in members}
    return EnsembleCalibration(
        members=dict(members),
        thresholds={name: percentile_cuts(scores[name]) for name in members},
        sample_size=min(sizes),
    )


class EnsembleScorer(QualityScorer):
    """Scores with every member, buckets each by its cut points, keeps the max; reports bucket/19."""

    def __init__(
        self,
        calibration: EnsembleCalibration,
        build: Callable[[str], QualityScorer],
        name: str = "nemotron_ensemble",
    ) -> None:
        """`build` makes a member from its spec (cleaner/quality/scorer_specs.py: get_scorer)."""
        self.name = name
        self.calibration = calibration
        self.members = {column: build(spec) for column, spec in calibration.members.items()}

    @classmethod
    def from_file(
        cls, path: Path, build: Callable[[str], QualityScorer], name: str = "nemotron_ensemble"
    ) -> EnsembleScorer:
        return cls(EnsembleCalibration.load(path), build, name=name)

    def buckets(self, texts: Sequence[str]) -> list[int]:
        """The ensemble's integer score 0-19 per text."""
        per_member = {column: scorer.score_batch(texts) for column, scorer in self.members.items()}
        return [
            self.calibration.combine({column: per_member[column][i] for column in self.members})
            for i in range(len(texts))
        ]

    def score_batch(self, texts: Sequence[str]) -> list[float]:
        """bucket / 19, so the ensemble fits the [0, 1] contract; empty text stays 0."""
        return [
            0.0 if not text.strip() else bucket / (N_BUCKETS - 1)
            for text, bucket in zip(texts, self.buckets(texts), strict=True)
        ]

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "class": type(self).__name__,
            "members": {column: scorer.describe() for column, scorer in self.members.items()},
            "thresholds": self.calibration.thresholds,
            "sample_size": self.calibration.sample_size,
        }


def add_ensemble_to_parquet(
    path: Path, members: Mapping[str, str], sample_rows: int = CALIBRATION_SAMPLE_ROWS, name: str = "ensemble"
) -> EnsembleCalibration:
    """Calibrate on the first `sample_rows` pages with text of a scored table, then add the columns
    `score_<name>` (bucket / 19) and `<name>_bucket` (0-19) to every row; rewrites `path`.

    `members` maps score columns (`score_dclm`) to the specs that produced them.
    """
    import polars as pl

    with_text = pl.scan_parquet(path).filter(pl.col("text_length") > 0)
    sample = with_text.select(list(members)).head(sample_rows).collect()
    calibration = calibrate(members, {column: sample[column].to_list() for column in members})
    buckets = [
        pl.sum_horizontal(*[(pl.col(column) > cut).cast(pl.Int8) for cut in calibration.thresholds[column]])
        for column in members
    ]
    bucket = pl.when(pl.col("text_length") > 0).then(pl.max_horizontal(*buckets)).otherwise(0).cast(pl.Int8)
    tmp = path.with_name(path.name + ".tmp")
    metadata = pl.read_parquet_metadata(path)  # provenance written by whoever made the table
    metadata.pop("ARROW:schema", None)
    metadata["hostcrawl_ensemble"] = json.dumps(asdict(calibration))
    pl.scan_parquet(path).with_columns(bucket.alias(f"{name}_bucket")).with_columns(
        (pl.col(f"{name}_bucket") / (N_BUCKETS - 1)).alias(f"score_{name}")
    ).sink_parquet(tmp, metadata=metadata)
    tmp.replace(path)
    return calibration
