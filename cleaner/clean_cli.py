"""`hostcrawl clean train|eval|gate`: build the blocks model, score cleaners, hold the quality gate."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

if TYPE_CHECKING:
    from cleaner.evaluate import EvalReport
    from cleaner.gate import Gate

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
DATA_HELP = "WCXB-format folder: html/NNNN.html.gz, ground-truth/NNNN.json, metadata.json"


def add_clean_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add `clean train`, `clean eval` and `clean gate` to the hostcrawl command."""
    from cleaner.blocks_files import DEFAULT_MODEL, MODEL_ENV
    from cleaner.gate import GATE_FILE
    from cleaner.registry import cleaner_names

    parser = subparsers.add_parser(
        "clean",
        help="train the blocks cleaner model, evaluate cleaners on WCXB-format data, check the quality gate",
        description="Main-content extraction: train `blocks_v1`, score any cleaner, hold the recorded gate.",
    )
    commands = parser.add_subparsers(dest="clean_command", metavar="COMMAND")
    train = commands.add_parser(
        "train", help="rebuild the blocks_v1 model from WCXB-format pages (all but the held-out gate pages)"
    )
    train.add_argument(
        "--data", type=Path, required=True, help="folder with html/, ground-truth/, metadata.json"
    )
    train.add_argument(
        "--out",
        type=Path,
        required=True,
        help=f"model file to write, e.g. my_blocks.json.gz; use it with {MODEL_ENV}=FILE (the "
        f"packaged model is {DEFAULT_MODEL}: name it, with --force, to replace it)",
    )
    train.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    train.add_argument("--passes", type=int, choices=(1, 2), default=2, help="boosted-tree passes (2)")
    train.set_defaults(func=cmd_train)

    ev = commands.add_parser("eval", help="macro word-F1 of a cleaner, per page type, snippets, pages/s")
    ev.add_argument(
        "--data", type=Path, required=True, help="folder with html/, ground-truth/, metadata.json"
    )
    ev.add_argument("--cleaner", required=True, help=f"one of {', '.join(cleaner_names())}")
    ev.add_argument("--predictions", type=Path, help='write {"id": ..., "text": ...} per page (JSON lines)')
    ev.add_argument("--limit", type=int, help="only the first N pages (default: all)")
    ev.add_argument("--gate-subset", action="store_true", help="only the quality gate's held-out pages")
    ev.add_argument("--json", action="store_true", help="print the report as JSON")
    ev.set_defaults(func=cmd_eval)

    gate = commands.add_parser("gate", help="check (or record) each cleaner's minimum F1 on held-out pages")
    gate.add_argument("--data", type=Path, required=True, help="the WCXB dev folder")
    gate.add_argument("--cleaner", action="append", help="cleaner to check (all recorded ones)")
    gate.add_argument("--gate-file", type=Path, default=GATE_FILE, help=f"recorded minima ({GATE_FILE.name})")
    gate.add_argument("--record", action="store_true", help="write measured minus margin as the new minimum")
    gate.add_argument("--allow-lower", action="store_true", help="let --record lower a minimum")
    gate.add_argument("--reason", help="why a minimum is lowered (required with --allow-lower)")
    gate.set_defaults(func=cmd_gate)
    parser.set_defaults(func=lambda args: _usage(parser))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return EXIT_USAGE


def _err(message: str) -> None:
    """One plain line (no markup, no wrapping)."""
    print(f"error: {' '.join(message.split())}", file=sys.stderr, flush=True)


def cmd_train(args: argparse.Namespace) -> int:
    from cleaner.blocks_train import load_examples, train_model
    from cleaner.wcxb import DatasetError, heldout_ids, page_ids

    if args.out.exists() and not args.force:
        _err(f"--out {args.out} exists; pass --force to overwrite it")
        return EXIT_USAGE
    if problem := _unwritable(args.out):
        _err(f"--out {args.out}: {problem}")
        return EXIT_USAGE
    console = Console(stderr=True)
    start = time.perf_counter()
    try:
        heldout = heldout_ids()
        ids = [i for i in page_ids(args.data) if i not in heldout]
        with console.status("simplifying and labelling pages") as status:
            examples = load_examples(
                args.data, ids, lambda n: status.update(f"simplifying and labelling pages {n:,}/{len(ids):,}")
            )
    except DatasetError as exc:
        _err(str(exc))
        return EXIT_USAGE
    if not examples:
        _err(f"{args.data}: no pages with a main_content truth")
        return EXIT_USAGE
    with console.status("training") as status:
        model = train_model(examples, passes=args.passes, progress=lambda msg: status.update(msg))
    model.save(args.out)
    size = args.out.stat().st_size
    Console().print(
        f"trained blocks_v1 on {len(examples)} pages ({model.meta['blocks']:,} blocks, {len(model.boosters)} "
        f"passes; the {len(heldout)} held-out gate pages left out) in {time.perf_counter() - start:.0f} s "
        f"-> {args.out} ({size / 1e6:.2f} MB)"
    )
    return EXIT_OK


def _load(data: Path, limit: int | None, gate: Gate | None) -> tuple[list[str], int] | None:
    from cleaner.wcxb import DatasetError, page_ids

    try:
        ids = page_ids(data)
    except DatasetError as exc:
        _err(str(exc))
        return None
    if gate is not None:
        ids = gate.subset(ids)
    if limit is not None:
        ids = ids[:limit]
    return ids, len(ids)


def _run_eval(data: Path, name: str, ids: list[str], predictions: Path | None) -> EvalReport:
    from cleaner.evaluate import evaluate
    from cleaner.labeller import LabellerCleaner
    from cleaner.registry import get_cleaner
    from cleaner.wcxb import iter_pages

    cleaner = get_cleaner(name)
    if isinstance(cleaner, LabellerCleaner):
        cleaner.labeller()  # load the model now: a missing one is an error, not a run of empty pages
    with Progress(console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task(f"{name}", total=len(ids))
        handle = predictions.open("w", encoding="utf-8") if predictions else None
        try:
            return evaluate(cleaner, iter_pages(data, ids), handle, lambda: progress.advance(task))
        finally:
            if handle is not None:
                handle.close()


def _print_report(report: EvalReport) -> None:
    table = Table(title=f"{report.cleaner}: macro word precision, recall and F1 by page type")
    for column in ("type", "pages", "precision", "recall", "F1"):
        table.add_column(column, justify="left" if column == "type" else "right")
    for page_type, s in report.per_type().items():
        table.add_row(page_type, str(s.pages), f"{s.precision:.3f}", f"{s.recall:.3f}", f"{s.f1:.3f}")
    console = Console()
    console.print(table)
    console.print(
        f"with snippets found {report.with_share:.1%}, without snippets avoided {report.without_share:.1%}, "
        f"empty {report.empty}, {report.pages_per_second:.1f} pages/s (cleaner only, one core)"
    )


def cmd_eval(args: argparse.Namespace) -> int:
    from cleaner.gate import load_gate
    from cleaner.registry import CLEANERS
    from cleaner.wcxb import DatasetError

    if args.cleaner not in CLEANERS:
        _err(f"unknown cleaner {args.cleaner!r}; known: {', '.join(sorted(CLEANERS))}")
        return EXIT_USAGE
    if args.limit is not None and args.limit < 1:
        _err(f"--limit {args.limit}: must be at least 1 (leave it out for all pages)")
        return EXIT_USAGE
    loaded = _load(args.data, args.limit, load_gate() if args.gate_subset else None)
    if loaded is None:
        return EXIT_USAGE
    if args.predictions is not None and (problem := _unwritable(args.predictions)):
        _err(f"--predictions {args.predictions}: {problem}")
        return EXIT_USAGE
    try:
        report = _run_eval(args.data, args.cleaner, loaded[0], args.predictions)
    except DatasetError as exc:
        if args.predictions is not None:
            args.predictions.unlink(missing_ok=True)  # no half-written predictions
        _err(str(exc))
        return EXIT_USAGE
    except (ImportError, FileNotFoundError) as exc:
        _err(str(exc))
        return EXIT_FAILED
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        _print_report(report)
    return EXIT_OK


def _unwritable(path: Path) -> str | None:
    """Why `path` cannot be written, found without creating it."""
    if path.is_dir():
        return "is a directory"
    parent = next((p for p in path.parents if p.exists()), Path("."))
    if not parent.is_dir():
        return f"{parent} is a file, not a folder"
    if parent != path.parent:
        return f"folder {path.parent} does not exist"
    if not os.access(parent, os.W_OK):
        return f"folder {parent} is not writable"
    return None


def cmd_gate(args: argparse.Namespace) -> int:
    from cleaner.gate import load_gate

    try:
        gate = load_gate(args.gate_file)
    except ValueError as exc:
        _err(str(exc))
        return EXIT_USAGE
    names = args.cleaner or sorted(gate.minimum_f1)
    if args.allow_lower and not args.reason:
        _err("--allow-lower needs --reason")
        return EXIT_USAGE
    loaded = _load(args.data, None, gate)
    if loaded is None:
        return EXIT_USAGE
    failed = False
    reports = []
    for name in names:
        try:
            report = _run_eval(args.data, name, loaded[0], None)
        except (ImportError, FileNotFoundError) as exc:
            _err(str(exc))
            return EXIT_FAILED
        reports.append(report)
        if args.record:
            try:
                new = gate.record(report, args.allow_lower, args.reason)
            except ValueError as exc:
                _err(str(exc))
                return EXIT_FAILED
            print(f"{name}: macro F1 {report.macro_f1:.4f}, minimum recorded {new:.4f}")
            continue
        problem = gate.check(report)
        failed = failed or problem is not None
        print(problem or f"{name}: macro F1 {report.macro_f1:.4f} >= {gate.minimum_f1.get(name, 0):.4f} ok")
    if args.record:
        gate.save()
    _print_comparison(reports)
    if not args.cleaner:
        from cleaner.registry import cleaner_names

        ungated = [name for name in cleaner_names() if name not in gate.minimum_f1 and name != "none"]
        if ungated:  # model cleaners whose models this machine may not have: say so, do not pass them quietly
            print(f"not gated (no recorded minimum): {', '.join(ungated)}")
    return EXIT_FAILED if failed else EXIT_OK


def _print_comparison(reports: list[EvalReport]) -> None:
    """Precision / recall / F1 per page type, one column group per cleaner, all from the same pages."""
    table = Table(title="held-out gate pages: macro word precision / recall / F1")
    table.add_column("type")
    table.add_column("pages", justify="right")
    for report in reports:
        table.add_column(report.cleaner, justify="right")
    per_type = [report.per_type() for report in reports]
    for page_type, first in per_type[0].items():
        cells = [f"{s.precision:.3f} / {s.recall:.3f} / {s.f1:.3f}" for s in (t[page_type] for t in per_type)]
        table.add_row(page_type, str(first.pages), *cells)
    Console(width=200).print(table)
