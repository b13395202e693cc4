"""Append-only outputs of a crawl: curated text shards and the page spool behind pages.parquet.

Crash safety (kill -9 at any moment loses no curated document and no page row) rests on one ordering:
a page's curated document and then its page row are written through to the OS (a zstd block flush,
a flushed line) before the frontier commit that marks the page done, and that commit records where
both files end (`SinkCheckpoint`). A resume cuts both files back to the last committed checkpoint:
what lies beyond belongs to pages the frontier still holds as fetched-not-scored (cleaned again from
the stored HTML) or in flight (fetched again), so after the cut every page is in the files exactly once
or in the frontier, never both, never neither. Data handed to the OS survives the death of the process;
surviving power loss would need an fsync per page, which this does not pay for (SQLite runs with
synchronous=NORMAL for the same reason).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

import zstandard

PAGES_SPOOL = "pages.jsonl"
CHECKPOINT_META = "sinks"  # the frontier meta key of the checkpoint


@dataclass(slots=True, frozen=True)
class SinkCheckpoint:
    """Where the page spool and the curated text end after the pages committed as done."""

    spool_bytes: int = 0
    text_shard: int = 0
    text_bytes: int = 0

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | None) -> SinkCheckpoint:
        """No checkpoint yet: no page was committed, so nothing in the files is kept."""
        if not text:
            return cls()
        data = json.loads(text)
        return cls(int(data["spool_bytes"]), int(data["text_shard"]), int(data["text_bytes"]))


def _shard_path(directory: Path, shard: int) -> Path:
    return directory / f"part-{shard:05d}.jsonl.zst"


class TextSink:
    """Curated pages as JSON lines in zstd shards, `text/part-NNNNN.jsonl.zst`.

    Every document ends a zstd block (not a frame: the compression context carries over), so it is
    with the OS as soon as `write` returns; a shard's frame is closed when the shard is.
    """

    def __init__(self, directory: Path, docs_per_file: int = 10_000) -> None:
        self.directory = directory
        self.docs_per_file = docs_per_file
        directory.mkdir(parents=True, exist_ok=True)
        self.shard = len(list(directory.glob("part-*.jsonl.zst")))
        self.in_shard = 0
        self.total = 0
        self._file: IO[bytes] | None = None
        self._writer: Any = None

    def _open(self) -> None:
        self._file = _shard_path(self.directory, self.shard).open("wb")
        self._writer = zstandard.ZstdCompressor(level=6).stream_writer(self._file, closefd=False)
        self.in_shard = 0

    def write(self, doc: dict[str, Any]) -> None:
        if self._writer is None:
            self._open()
        assert self._file is not None
        line = json.dumps(doc, ensure_ascii=False, sort_keys=True) + "\n"
        self._writer.write(line.encode("utf-8"))
        self._writer.flush(zstandard.FLUSH_BLOCK)
        self._file.flush()
        self.in_shard += 1
        self.total += 1
        if self.in_shard >= self.docs_per_file:
            self._close_shard()

    def position(self) -> tuple[int, int]:
        """(shard, bytes written to it): everything before is with the OS."""
        return self.shard, self._file.tell() if self._file is not None else 0

    def _close_shard(self) -> None:
        if self._writer is not None and self._file is not None:
            self._writer.flush(zstandard.FLUSH_FRAME)
            self._writer.close()
            self._file.close()
        self._writer = self._file = None
        self.shard += 1

    def close(self) -> None:
        self._close_shard()


class PageSpool:
    """Every fetched page as one JSON line, written through per line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = path.open("ab")
        self.count = 0

    def write(self, row: dict[str, Any]) -> None:
        self._file.write((json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8"))
        self._file.flush()
        self.count += 1

    def position(self) -> int:
        return self._file.tell()

    def close(self) -> None:
        self._file.close()


def read_text_shards(directory: Path) -> list[dict[str, Any]]:
    """All curated docs of a run (for tests, reports and small runs)."""
    docs: list[dict[str, Any]] = []
    for path in sorted(directory.glob("part-*.jsonl.zst")):
        with path.open("rb") as fh:
            reader = zstandard.ZstdDecompressor().stream_reader(fh, read_across_frames=True)
            data = reader.read()
        docs.extend(json.loads(line) for line in data.decode("utf-8").splitlines() if line)
    return docs


def cut_to_checkpoint(run_dir: Path, checkpoint: SinkCheckpoint) -> tuple[dict[str, int], SinkCheckpoint]:
    """Before a resume: drop what the sinks hold beyond the last commit, and close the cut shard's
    frame (a zstd reader other than ours refuses a frame without its end). Returns what was cut, and
    the checkpoint that describes the files as they are now (the cut shard is recompressed, so the
    old byte offset no longer points into it: the caller commits the new one before crawling on)."""
    spool = run_dir / PAGES_SPOOL
    cut = {"rows": 0, "docs": 0}
    if spool.exists() and spool.stat().st_size > checkpoint.spool_bytes:
        with spool.open("r+b") as fh:
            fh.seek(checkpoint.spool_bytes)
            cut["rows"] = fh.read().count(b"\n")
            fh.truncate(checkpoint.spool_bytes)
    directory = run_dir / "text"
    for path in sorted(directory.glob("part-*.jsonl.zst")):
        shard = int(path.name.removeprefix("part-").split(".")[0])
        if shard > checkpoint.text_shard:
            cut["docs"] += len(_complete_lines(path.read_bytes()))
            path.unlink()
        elif shard == checkpoint.text_shard:
            data = path.read_bytes()
            kept = _complete_lines(data[: checkpoint.text_bytes])
            cut["docs"] += len(_complete_lines(data)) - len(kept)
            if kept:
                path.write_bytes(zstandard.ZstdCompressor(level=6).compress(b"".join(kept)))
            else:
                path.unlink()
    text_shard = _shard_path(directory, checkpoint.text_shard)
    text_bytes = text_shard.stat().st_size if text_shard.exists() else 0
    return cut, SinkCheckpoint(checkpoint.spool_bytes, checkpoint.text_shard, text_bytes)


def _complete_lines(data: bytes) -> list[bytes]:
    """The whole lines a (possibly cut or unterminated) zstd stream decodes to.

    A decompression object, not a stream reader: the reader raises on a cut frame in the same read
    that would return the last complete block, which lost the last committed document of a shard.
    """
    out = bytearray()
    decompressor = zstandard.ZstdDecompressor().decompressobj()
    rest = data
    while rest:
        try:
            out += decompressor.decompress(rest)
        except zstandard.ZstdError:
            break
        rest = decompressor.unused_data  # the next frame of a shard that was cut and rewritten before
        if rest:
            decompressor = zstandard.ZstdDecompressor().decompressobj()
    return [line + b"\n" for line in bytes(out).split(b"\n")[:-1]]
