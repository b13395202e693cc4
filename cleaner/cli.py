"""`hostcrawl classifier ...`: train a fastText quality model and inspect model files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from cleaner.clean_cli import add_clean_commands

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

TRAIN_EPILOG = """\
input: JSON lines, one document per line, e.g.
  {"text": "The harbour master said ...", "label": "hq"}
  {"text": "cheap flights best price buy now", "label": "cc"}
then score with it:  hostcrawl score --warc 'cc/*.warc.gz' --classifier mine=model.bin:hq
"""


def register_cli(subparsers: argparse._SubParsersAction) -> None:
    """Add `classifier train|info` and `clean train|eval|gate` to the hostcrawl command."""
    parser = subparsers.add_parser(
        "classifier",
        help="train or inspect fastText quality classifiers",
        description="Train a fastText quality classifier on labelled text, or show what a model file holds.",
    )
    commands = parser.add_subparsers(dest="classifier_command", metavar="COMMAND")
    train = commands.add_parser(
        "train",
        help="train a fastText model from labelled JSON lines, printing a held-out evaluation",
        epilog=TRAIN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    train.add_argument("--data", type=Path, required=True, help="labelled JSON lines")
    train.add_argument("--out", type=Path, required=True, help="model file to write (model.bin)")
    train.add_argument("--text-field", default="text", help="JSON field holding the text (text)")
    train.add_argument("--label-field", default="label", help="JSON field holding the label (label)")
    train.add_argument("--positive-label", help="label meaning high quality; adds AUC to the evaluation")
    train.add_argument("--holdout", type=float, default=0.1, help="share held out for evaluation (0.1)")
    train.add_argument("--epoch", type=int, default=5, help="training epochs (5)")
    train.add_argument("--lr", type=float, default=0.1, help="learning rate (0.1)")
    train.add_argument("--dim", type=int, default=100, help="embedding size (100)")
    train.add_argument("--word-ngrams", type=int, default=2, help="word n-grams, 2 = bigrams as DCLM (2)")
    train.add_argument(
        "--bucket",
        type=int,
        help="n-gram hash rows, the model's size (bucket x dim x 4 bytes); default: 4 per distinct n-gram "
        "of the data, 10,000 to DCLM's 2,000,000",
    )
    train.add_argument("--seed", type=int, default=0, help="seed for the split and training (0)")
    train.add_argument("--quantize", action="store_true", help="write a quantized (much smaller) model")
    train.set_defaults(func=cmd_train)
    info = commands.add_parser("info", help="labels, size and the score rule a model would get")
    info.add_argument("model", type=Path, help="fastText model file")
    info.add_argument(
        "--name",
        default="model",
        help="classifier name, to see a preset's rule (dclm, ...; default %(default)s)",
    )
    info.set_defaults(func=cmd_info)
    parser.set_defaults(func=lambda args: _usage(parser))
    add_clean_commands(subparsers)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return EXIT_USAGE


def cmd_train(args: argparse.Namespace) -> int:
    from cleaner.quality.train import (
        LabelledDataError,
        TrainConfig,
        TrainingDiverged,
        read_labelled,
        train_classifier,
    )

    console = Console(stderr=True)
    if not 0.0 <= args.holdout < 1.0:
        console.print(f"[red]error:[/] --holdout must lie in [0, 1), got {args.holdout}")
        return EXIT_USAGE
    config = TrainConfig(
        epoch=args.epoch,
        lr=args.lr,
        dim=args.dim,
        word_ngrams=args.word_ngrams,
        bucket=args.bucket,
        holdout=args.holdout,
        seed=args.seed,
        quantize=args.quantize,
    )
    try:
        examples = read_labelled(args.data, args.text_field, args.label_field)
        with console.status(f"training on {len(examples)} documents"):
            report = train_classifier(examples, args.out, config, args.positive_label)
    except (LabelledDataError, TrainingDiverged) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    out = Console()
    out.print(
        f"trained on {report.n_train} documents, evaluated on {report.n_heldout} held out -> {args.out} "
        f"({args.out.stat().st_size / 1e6:,.1f} MB, {report.bucket:,} n-gram hash rows)"
    )
    if report.accuracy is not None:
        table = Table(title="held-out evaluation")
        for column in ("label", "precision", "recall", "F1", "support"):
            table.add_column(column, justify="left" if column == "label" else "right")
        for label, m in report.per_label.items():
            table.add_row(label, f"{m.precision:.3f}", f"{m.recall:.3f}", f"{m.f1:.3f}", str(m.support))
        out.print(table)
        out.print(f"accuracy {report.accuracy:.3f}")
    if report.auc is not None:
        out.print(f"AUC of P({report.positive_label}) {report.auc:.3f}")
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/] {warning}")
    return EXIT_OK


def cmd_info(args: argparse.Namespace) -> int:
    from cleaner.quality.fasttext_scorer import PRESETS, FastTextScorer, load_fasttext_model

    console = Console()
    try:
        model = load_fasttext_model(args.model)
    except (FileNotFoundError, ValueError) as exc:
        Console(stderr=True).print(f"[red]error:[/] {exc}", highlight=False)
        return EXIT_USAGE
    labels = list(model.get_labels())
    console.print(f"{args.model}: {args.model.stat().st_size:,} bytes, dim {model.get_dimension()}")
    console.print(f"labels ({len(labels)}): {', '.join(labels[:20])}{' ...' if len(labels) > 20 else ''}")
    preset = args.name if args.name in PRESETS else None
    try:
        scorer = FastTextScorer(args.name, args.model, preset=preset)
    except ValueError as exc:
        console.print(f"score rule: none ({exc})", highlight=False)
        return EXIT_FAILED
    console.print(f"score rule for --classifier {args.name}=...: {scorer.scheme}")
    return EXIT_OK
