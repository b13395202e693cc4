"""Append-only outputs of a crawl: curated text shards and the page spool behind pages.parquet."""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

import zstandard

TEXT_FLUSH_EVERY = 50  # docs per zstd frame: a crash loses at most this many curated docs
PAGES_SPOOL = "pages.jsonl"


class TextSink:
    """Curated pages as JSON lines in zstd shards, `text/part-NNNNN.jsonl.zst`."""

    def __init__(self, directory: Path, docs_per_file: int = 10_000) -> None:
        self.directory = directory
        self.docs_per_file = docs_per_file
        directory.mkdir(parents=True, exist_ok=True)
        self.shard = len(list(directory.glob("part-*.jsonl.zst")))
        self.in_shard = 0
        self.unflushed = 0
        self.total = 0
        self._file: IO[bytes] | None = None
        self._writer: Any = None

    def _open(self) -> None:
        path = self.directory / f"part-{self.shard:05d}.jsonl.zst"
        self._file = path.open("wb")
        self._writer = zstandard.ZstdCompressor(level=6).stream_writer(self._file, closefd=False)
        self.in_shard = 0

    def write(self, doc: dict[str, Any]) -> None:
        if self._writer is None:
            self._open()
        line = json.dumps(doc, ensure_ascii=False, sort_keys=True) + "\n"
        self._writer.write(line.encode("utf-8"))
        self.in_shard += 1
        self.unflushed += 1
        self.total += 1
        if self.unflushed >= TEXT_FLUSH_EVERY:
            self.flush()
        if self.in_shard >= self.docs_per_file:
            self._close_shard()

    def flush(self) -> None:
        if self._writer is not None and self._file is not None:
            self._writer.flush(zstandard.FLUSH_FRAME)
            self._file.flush()
        self.unflushed = 0

    def _close_shard(self) -> None:
        if self._writer is not None and self._file is not None:
            self._writer.flush(zstandard.FLUSH_FRAME)
            self._writer.close()
            self._file.close()
        self._writer = self._file = None
        self.shard += 1
        self.unflushed = 0

    def close(self) -> None:
        self._close_shard()


def read_text_shards(directory: Path) -> list[dict[str, Any]]:
    """All curated docs of a run (for tests, reports and small runs)."""
    docs: list[dict[str, Any]] = []
    for path in sorted(directory.glob("part-*.jsonl.zst")):
        with path.open("rb") as fh:
            reader = zstandard.ZstdDecompressor().stream_reader(fh, read_across_frames=True)
            data = reader.read()
        docs.extend(json.loads(line) for line in data.decode("utf-8").splitlines() if line)
    return docs


def truncate_partial_line(path: Path) -> None:
    """A crash can leave half a JSON line at the end of the spool; appending after it would corrupt it."""
    if not path.exists():
        return
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    if end != len(data):
        with path.open("r+b") as fh:
            fh.truncate(end)


def repair_text_shards(directory: Path) -> int:
    """Rewrite a shard whose last zstd frame was cut by a crash; returns docs kept in repaired shards."""
    kept = 0
    for path in sorted(directory.glob("part-*.jsonl.zst")):
        lines: list[bytes] = []
        try:
            with path.open("rb") as fh:
                reader = zstandard.ZstdDecompressor().stream_reader(fh, read_across_frames=True)
                reader.read()
            continue
        except zstandard.ZstdError:
            lines = _complete_lines(path)
        with path.open("wb") as fh:
            fh.write(zstandard.ZstdCompressor(level=6).compress(b"".join(lines)))
        kept += len(lines)
    return kept


def _complete_lines(path: Path) -> list[bytes]:
    out = bytearray()
    with path.open("rb") as fh:
        reader = zstandard.ZstdDecompressor().stream_reader(fh, read_across_frames=True)
        try:
            while chunk := reader.read(65536):
                out += chunk
        except zstandard.ZstdError:
            pass
    return [line + b"\n" for line in bytes(out).split(b"\n")[:-1]]


class PageSpool:
    """Every fetched page as one JSON line, flushed per line so a crash keeps what was fetched."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = path.open("a", encoding="utf-8", buffering=1)
        self.count = 0

    def write(self, row: dict[str, Any]) -> None:
        self._file.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
        self.count += 1

    def close(self) -> None:
        self._file.close()
