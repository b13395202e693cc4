"""Train a fastText quality classifier from labelled text, with an evaluation on held-out documents.

Input is JSON lines with a text and a label per line (`{"text": "...", "label": "hq"}`). Text is
flattened exactly as the scorer flattens it (DCLM's join of lines), so training and scoring see
the same input; labels become `__label__<label>`.
"""

from __future__ import annotations

import importlib.util
import json
import multiprocessing
import random
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cleaner.quality.fasttext_scorer import FASTTEXT_INSTALL, join_lines, with_prefix

# A model evaluated on fewer held-out documents than this per label says nothing; warn instead.
MIN_HELDOUT_PER_LABEL = 5
NAN_RETRIES = 5
# Below this many hash rows, n-grams pile onto a few rows and fastText diverges or learns nothing (NaN
# at --bucket 10 on a 400-document set in most runs, accuracy 0.55 in the others): refused up front.
MIN_SAFE_BUCKET = 10_000
MAX_BUCKET = 2_000_000  # DCLM's bucket: 800 MB at dim 100
BUCKET_ROWS_PER_NGRAM = 4  # rows per distinct n-gram: few collisions (a quarter of rows taken)


class TrainingDiverged(ValueError):
    """fastText kept hitting NaN, or would; the message names the flag to change."""


@dataclass(frozen=True, slots=True)
class TrainConfig:
    """fastText supervised-training knobs; defaults follow DCLM's bigram classifier."""

    epoch: int = 5
    lr: float = 0.1
    dim: int = 100
    word_ngrams: int = 2
    min_count: int = 1
    # hashed n-gram rows; dominates the model size (bucket x dim x 4 bytes). None: sized to the data
    # (auto_bucket), DCLM's 2,000,000 for a corpus that has that many n-grams
    bucket: int | None = None
    holdout: float = 0.1  # share of each label kept out of training for the evaluation
    seed: int = 0
    threads: int = 1
    quantize: bool = False  # write a small .ftz-style model (slower to train, 10x smaller)


@dataclass(slots=True)
class LabelMetrics:
    precision: float
    recall: float
    f1: float
    support: int


@dataclass(slots=True)
class TrainReport:
    """What `classifier train` prints: sizes, held-out accuracy, per-label metrics, AUC."""

    n_train: int
    n_heldout: int
    labels: list[str]
    accuracy: float | None
    per_label: dict[str, LabelMetrics] = field(default_factory=dict)
    auc: float | None = None  # of P(positive label) on held-out docs, when one is named
    positive_label: str | None = None
    warnings: list[str] = field(default_factory=list)
    bucket: int = 0  # the n-gram hash rows the model was trained with


class LabelledDataError(ValueError):
    """Bad training input; the message names the file and line."""


def read_labelled(path: Path, text_field: str = "text", label_field: str = "label") -> list[tuple[str, str]]:
    """(text, label) pairs from JSON lines; a bad line raises with its file and line number."""
    examples = []
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise LabelledDataError(f"{path}: cannot read: {exc.strerror}") from None
    with handle:
        for lineno, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise LabelledDataError(f"{path}:{lineno}:{exc.colno}: not JSON: {exc.msg}") from None
            if not isinstance(row, dict) or text_field not in row or label_field not in row:
                raise LabelledDataError(f"{path}:{lineno}: needs {text_field!r} and {label_field!r} fields")
            label = str(row[label_field]).strip().removeprefix("__label__")
            if not label or any(c.isspace() for c in label):
                raise LabelledDataError(f"{path}:{lineno}: label {row[label_field]!r} is empty or has spaces")
            examples.append((str(row[text_field]), label))
    if not examples:
        raise LabelledDataError(f"{path}: no labelled examples")
    return examples


def split_holdout(
    examples: Sequence[tuple[str, str]], share: float, seed: int
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Seeded split per label, so every label appears in both parts when it can."""
    by_label: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for example in examples:
        by_label[example[1]].append(example)
    rng = random.Random(seed)
    train, heldout = [], []
    for label in sorted(by_label):
        group = by_label[label]
        rng.shuffle(group)
        n_out = round(len(group) * share) if len(group) > 1 else 0
        heldout += group[:n_out]
        train += group[n_out:]
    rng.shuffle(train)
    return train, heldout


def auc(scores: Sequence[float], positive: Sequence[bool]) -> float | None:
    """Probability that a random positive outranks a random negative (ties count half)."""
    pairs = sorted(zip(scores, positive, strict=True))
    n_pos = sum(positive)
    n_neg = len(pairs) - n_pos
    if not n_pos or not n_neg:
        return None
    rank_sum, i = 0.0, 0
    while i < len(pairs):
        j = i
        while j < len(pairs) and pairs[j][0] == pairs[i][0]:
            j += 1
        mid_rank = (i + 1 + j) / 2  # average 1-based rank of the tie group
        rank_sum += mid_rank * sum(1 for _, p in pairs[i:j] if p)
        i = j
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def auto_bucket(texts: Sequence[str], word_ngrams: int) -> int:
    """Hash rows for the training text's n-grams: 4 per distinct word n-gram (2..word_ngrams, split on
    whitespace as fastText splits), at least MIN_SAFE_BUCKET, at most DCLM's MAX_BUCKET. DCLM's fixed
    2,000,000 rows wrote an 800 MB model for 330 documents; rows beyond the n-grams there are hold nothing.
    """
    if word_ngrams < 2:
        return 0  # fastText hashes no n-grams (its own default for wordNgrams 1)
    limit = MAX_BUCKET // BUCKET_ROWS_PER_NGRAM
    seen: set[str] = set()  # the n-grams themselves: str hashes vary per process, the count must not
    for text in texts:
        words = join_lines(text).split()
        for n in range(2, word_ngrams + 1):
            seen.update(" ".join(words[i : i + n]) for i in range(len(words) - n + 1))
        if len(seen) >= limit:
            return MAX_BUCKET
    return max(MIN_SAFE_BUCKET, BUCKET_ROWS_PER_NGRAM * len(seen))


def _fasttext_lines(examples: Sequence[tuple[str, str]]) -> Iterator[str]:
    for text, label in examples:
        yield f"{with_prefix(label)} {join_lines(text)}\n"


def _train_and_save(params: dict[str, Any], out: str, quantize_input: str | None) -> None:
    """Child-process body: one fastText training run, saved to `out`."""
    import fasttext

    model = fasttext.train_supervised(**params)
    if quantize_input is not None:
        model.quantize(input=quantize_input, retrain=True, qnorm=True)
    model.save_model(out)


def fit_supervised(params: dict[str, Any], out: Path, quantize: bool = False) -> Any:
    """Train with `fasttext.train_supervised` in a fresh process, save to `out`, load it here.

    fastText 0.9 (every numpy-2 wheel we tried) corrupts its own state after a few training runs
    in one process: runs then stop on a spurious "Encountered NaN" or return a degenerate model.
    One process per run avoids both, and a crashed run cannot take the caller down with it.
    """
    from cleaner.quality.fasttext_scorer import load_fasttext_model

    context = multiprocessing.get_context("spawn")
    quantize_input = str(params["input"]) if quantize else None
    for attempt in range(1, NAN_RETRIES + 1):
        with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
            try:
                pool.submit(_train_and_save, params, str(out), quantize_input).result()
            except RuntimeError as exc:
                if "NaN" not in str(exc):
                    raise
                if attempt == NAN_RETRIES:
                    raise TrainingDiverged(_divergence_cause(params, attempt)) from exc
                continue
        return load_fasttext_model(out)
    raise AssertionError("unreachable")


def _divergence_cause(params: dict[str, Any], attempts: int) -> str:
    bucket = params.get("bucket", 0)
    if params.get("wordNgrams", 1) > 1 and 0 < bucket < MIN_SAFE_BUCKET:
        return (
            f"fastText training hit NaN {attempts} times: --bucket {bucket} is too small (every word "
            f"n-gram shares one of {bucket} hash rows); use --bucket {MIN_SAFE_BUCKET:,} or more"
        )
    return f"fastText training hit NaN {attempts} times; try an --lr below {params.get('lr')}"


def evaluate(model: object, heldout: Sequence[tuple[str, str]], positive_label: str | None) -> TrainReport:
    """Accuracy, per-label precision/recall/F1 and, for a positive label, AUC on held-out docs."""
    labels = [label.removeprefix("__label__") for label in model.get_labels()]  # type: ignore[attr-defined]
    report = TrainReport(n_train=0, n_heldout=len(heldout), labels=labels, accuracy=None)
    report.positive_label = positive_label
    if not heldout:
        report.warnings.append("no held-out documents: nothing to evaluate")
        return report
    texts = [join_lines(text) for text, _ in heldout]
    predicted, probs = model.predict(texts, k=-1)  # type: ignore[attr-defined]
    truth = [label for _, label in heldout]
    top = [p[0].removeprefix("__label__") for p in predicted]
    report.accuracy = sum(t == p for t, p in zip(truth, top, strict=True)) / len(truth)
    support = Counter(truth)
    for label in sorted(set(labels) | set(truth)):
        tp = sum(t == label and p == label for t, p in zip(truth, top, strict=True))
        n_pred = sum(p == label for p in top)
        precision = tp / n_pred if n_pred else 0.0
        recall = tp / support[label] if support[label] else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        report.per_label[label] = LabelMetrics(precision, recall, f1, support[label])
        if 0 < support[label] < MIN_HELDOUT_PER_LABEL:
            report.warnings.append(f"only {support[label]} held-out documents labelled {label!r}")
    if positive_label is not None:
        wanted = with_prefix(positive_label)
        p_pos = [
            next((float(p) for lab, p in zip(labs, ps, strict=True) if lab == wanted), 0.0)
            for labs, ps in zip(predicted, probs, strict=True)
        ]
        report.auc = auc(p_pos, [t == positive_label.removeprefix("__label__") for t in truth])
    return report


def train_classifier(
    examples: Sequence[tuple[str, str]],
    out: Path,
    config: TrainConfig = TrainConfig(),
    positive_label: str | None = None,
) -> TrainReport:
    """Train on all but the held-out share, save the model to `out`, evaluate on the held-out share."""
    if importlib.util.find_spec("fasttext") is None:  # pragma: no cover - depends on the environment
        raise ImportError(f"training needs the fasttext package: {FASTTEXT_INSTALL}")
    label_set = {label for _, label in examples}
    if len(label_set) < 2:
        raise LabelledDataError(f"need at least two labels to train, got {sorted(label_set)}")
    if positive_label is not None and positive_label.removeprefix("__label__") not in label_set:
        raise LabelledDataError(f"positive label {positive_label!r} is not among {sorted(label_set)}")
    if config.word_ngrams > 1 and config.bucket is not None and 0 < config.bucket < MIN_SAFE_BUCKET:
        raise TrainingDiverged(
            f"--bucket {config.bucket} is too small (every word n-gram shares one of {config.bucket} hash "
            f"rows, and fastText diverges or learns nothing); use --bucket {MIN_SAFE_BUCKET:,} or more"
        )
    train, heldout = split_holdout(examples, config.holdout, config.seed)
    bucket = config.bucket
    if bucket is None:
        bucket = auto_bucket([text for text, _ in train], config.word_ngrams)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="hostcrawl-train-") as tmp:
        train_file = Path(tmp) / "train.txt"
        with train_file.open("w", encoding="utf-8") as handle:
            handle.writelines(_fasttext_lines(train))
        params: dict[str, Any] = {
            "input": str(train_file),
            "epoch": config.epoch,
            "lr": config.lr,
            "dim": config.dim,
            "wordNgrams": config.word_ngrams,
            "minCount": config.min_count,
            "bucket": bucket,
            "thread": config.threads,
            "seed": config.seed,
            "verbose": 0,
        }
        model = fit_supervised(params, out, quantize=config.quantize)
    report = evaluate(model, heldout, positive_label)
    report.n_train = len(train)
    report.bucket = bucket
    return report
