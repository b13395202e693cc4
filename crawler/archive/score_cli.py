"""`hostcrawl score`'s options, apart from the scoring (cleaners, classifiers, pyarrow): the command line
builds them without loading any of it; the work is imported when the command runs."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from cleaner.quality.scorer_specs import DEFAULT_SCORER
from cleaner.registry import cleaner_names


def register_cli(subparsers: argparse._SubParsersAction) -> None:
    """Add `hostcrawl score`."""
    p = subparsers.add_parser(
        "score",
        help="clean and score the HTML pages in WARC files into a parquet table",
        description="Read WARC files (Common Crawl's or ours), keep HTML responses, extract the main "
        "text, identify its language and score it with every classifier; one row per page. "
        "Broken records are reported and skipped.",
    )
    p.add_argument("--warc", nargs="+", required=True, metavar="FILE_OR_GLOB", help="WARC files (.warc[.gz])")
    p.add_argument("--out", type=Path, required=True, help="parquet file to write (pages.parquet)")
    p.add_argument(
        "--classifier",
        action="append",
        default=[],
        metavar="NAME=PATH[:LABEL]",
        help="a fastText model (presets: dclm, gneissweb_quality, gneissweb_technology, "
        "gneissweb_science, gneissweb_education, gneissweb_medical; any other NAME with the "
        "positive LABEL), fineweb_edu=FOLDER_OR_HUB_ID (FineWeb-Edu's BERT classifier, the gpu extra), "
        "a registered scorer name, or NAME=calibration.json; repeatable",
    )
    p.add_argument("--no-heuristic", action="store_true", help=f"do not add {DEFAULT_SCORER}")
    p.add_argument("--cleaner", default="blocks_v1", help=f"one of {', '.join(cleaner_names())} (blocks_v1)")
    p.add_argument("--force", action="store_true", help="overwrite --out and --hosts-out if they exist")
    p.add_argument("--lid", metavar="PATH", help="fastText lid.176.bin/.ftz (default: packaged py3langid)")
    p.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="processes (one per core: %(default)s)",
    )
    p.add_argument("--limit", type=int, help="stop after this many HTML pages")
    p.add_argument("--ensemble", action="store_true", help="add a Nemotron-CC-style ensemble column")
    p.add_argument("--hosts-out", type=Path, help="also write per-host aggregates (hosts.parquet)")
    p.add_argument("--no-progress", action="store_true", help="no live progress display")
    p.set_defaults(func=_cmd_score)


def _cmd_score(args: argparse.Namespace) -> int:
    from crawler.archive.score_warcs import cmd_score

    return cmd_score(args)
