"""The end-of-run deduplication: RUN/text_dedup/, the curated corpus with its copies removed.

text/ is the crawl's append-only record of every curated page (a resume cuts it back to the
frontier's last commit by byte offset, so it is never rewritten); text_dedup/ is derived from it at
each finish of the run, a resumed run's too: one document per group of copies, which lists the ids
of the copies it stands for in `metadata.duplicates`. The new folder is written beside the old one and
swapped in by renames, so a reader finds the old corpus or the new one, never a half-written one;
a crash mid-swap is repaired by the next finish, which rebuilds it from text/.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import zstandard

from cleaner.dedup import Doc, deduplicate
from crawler.pages.sinks import read_text_shards

DEDUP_DIR = "text_dedup"
DOCS_PER_SHARD = 10_000
ZSTD_LEVEL = 6


def _write_shard(path: Path, docs: list[dict[str, object]]) -> None:
    data = "".join(json.dumps(doc, ensure_ascii=False, sort_keys=True) + "\n" for doc in docs)
    with path.open("wb") as fh:
        fh.write(zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(data.encode("utf-8")))
        fh.flush()
        os.fsync(fh.fileno())


def dedup_text(text_dir: Path) -> dict[str, int]:
    """Write text_dir's deduplicated copy beside it; returns the `dedup/...` counters for stats.json."""
    out_dir = text_dir.parent / DEDUP_DIR
    tmp, old = out_dir.with_name(DEDUP_DIR + ".tmp"), out_dir.with_name(DEDUP_DIR + ".old")
    docs = read_text_shards(text_dir) if text_dir.is_dir() else []
    result = deduplicate(Doc(d["id"], d.get("text") or "") for d in docs)
    kept, seen = [], set()
    for doc in docs:
        if doc["id"] in result.removed or doc["id"] in seen:
            continue  # a copy, or the same page recorded twice
        seen.add(doc["id"])
        if doc["id"] in result.duplicates:
            doc.setdefault("metadata", {})["duplicates"] = result.duplicates[doc["id"]]
        kept.append(doc)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    for n, start in enumerate(range(0, len(kept), DOCS_PER_SHARD)):
        _write_shard(tmp / f"part-{n:05d}.jsonl.zst", kept[start : start + DOCS_PER_SHARD])
    shutil.rmtree(old, ignore_errors=True)
    if out_dir.exists():
        out_dir.rename(old)
    tmp.rename(out_dir)
    shutil.rmtree(old, ignore_errors=True)
    return result.stats()
