"""WCXB-format evaluation data (html/NNNN.html.gz, ground-truth/NNNN.json, metadata.json) and its metric."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from cleaner.base import decode_html

WORD = re.compile(r"\w+")
HELDOUT_FILE = Path(__file__).resolve().parent / "wcxb_heldout.json"


class DatasetError(ValueError):
    """The folder is not in the WCXB layout; the message names the file."""


@dataclass(slots=True)
class TruthPage:
    """One page with its human ground truth."""

    id: str
    html: str
    url: str
    page_type: str
    domain: str
    main_content: str | None
    with_snippets: list[str] = field(default_factory=list)
    without_snippets: list[str] = field(default_factory=list)


def words(text: str) -> list[str]:
    """The benchmark's tokens: lower-cased `\\w+` runs."""
    return WORD.findall(text.lower())


def word_f1(extracted: str, truth: str) -> tuple[float, float, float]:
    """Precision, recall and F1 of the bag of words (multiset overlap); empty extraction scores 0."""
    got, want = Counter(words(extracted)), Counter(words(truth))
    overlap = sum((got & want).values())
    if not overlap:
        return 0.0, 0.0, 0.0
    precision, recall = overlap / sum(got.values()), overlap / sum(want.values())
    return precision, recall, 2 * precision * recall / (precision + recall)


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def snippet_hits(extracted: str, snippets: list[str]) -> int:
    """How many snippets occur in the extraction (case and whitespace insensitive)."""
    haystack = _norm(extracted)
    return sum(_norm(s) in haystack for s in snippets if s.strip())


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise DatasetError(f"{path}: missing") from exc
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read ({exc.strerror})") from exc
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from exc
    if not isinstance(data, dict):
        raise DatasetError(f"{path}: expected a JSON object")
    return data


def page_ids(root: Path) -> list[str]:
    """Ids listed in metadata.json, sorted; a listed page without its html file is an error."""
    if not root.is_dir():
        raise DatasetError(
            f"{root}: not a folder ({'no such file or folder' if not root.exists() else 'a file'})"
        )
    files = _read_json(root / "metadata.json").get("files")
    if not isinstance(files, dict):
        raise DatasetError(f"{root / 'metadata.json'}: no 'files' object")
    for file_id in sorted(files):
        if not (root / "html" / f"{file_id}.html.gz").is_file():
            raise DatasetError(f"{root / 'html' / f'{file_id}.html.gz'}: missing (listed in metadata.json)")
    return sorted(files)


def iter_pages(root: Path, ids: list[str] | None = None) -> Iterator[TruthPage]:
    """Pages of a WCXB-format folder in id order."""
    files = _read_json(root / "metadata.json").get("files") or {}
    for file_id in ids if ids is not None else page_ids(root):
        meta = files.get(file_id, {})
        truth_path = root / "ground-truth" / f"{file_id}.json"
        doc = _read_json(truth_path)
        truth = doc.get("ground_truth") or {}
        html_path = root / "html" / f"{file_id}.html.gz"
        try:
            body = gzip.decompress(html_path.read_bytes())
        except (OSError, EOFError) as exc:
            raise DatasetError(f"{html_path}: {exc}") from exc
        yield TruthPage(
            id=file_id,
            html=decode_html(body),
            url=str(doc.get("url") or ""),
            page_type=str(meta.get("page_type") or "unknown"),
            domain=str(meta.get("domain") or file_id),
            main_content=truth.get("main_content") or None,
            with_snippets=[s for s in truth.get("with") or [] if isinstance(s, str)],
            without_snippets=[s for s in truth.get("without") or [] if isinstance(s, str)],
        )


def heldout_ids(path: Path = HELDOUT_FILE) -> frozenset[str]:
    """WCXB dev pages (whole domains) kept out of the shipped model's training: the gate scores them."""
    try:
        ids = json.loads(path.read_text(encoding="utf-8"))["ids"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DatasetError(f"{path}: unreadable held-out page list ({exc})") from exc
    return frozenset(str(i) for i in ids)
