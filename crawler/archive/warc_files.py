"""Finished WARC files: published under their final name, recovered after a crash, indexed as CDXJ.

The CDXJ index beside each WARC (`NAME.cdxj`, written by cdxj-indexer, sorted by SURT URL key) is what
pywb and cdx_toolkit read; each line gives a response's filename, offset and length, so one seek and
warcio read the record back without scanning the file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import Any, BinaryIO

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed
from warcio.recordloader import ArcWarcRecord

OPEN_SUFFIX = ".open"
WARC_SUFFIX = ".warc.gz"
CDXJ_SUFFIX = ".cdxj"
_SCAN_CHUNK = 1 << 20


def open_path(final: Path) -> Path:
    return final.with_name(final.name + OPEN_SUFFIX)


def publish(partial: Path, final: Path) -> None:
    if final.exists():
        raise FileExistsError(f"{final} already exists; refusing to overwrite a finished WARC")
    partial.rename(final)


# The record types a CDXJ line is written for (cdxj-indexer --records): what a replay tool may serve.
INDEXED_RECORDS = "response,revisit"


def cdxj_path(warc: Path) -> Path:
    """`hostcrawl-...-00000-host.warc.gz` -> `hostcrawl-...-00000-host.cdxj`, in the same folder."""
    name = warc.name.removesuffix(WARC_SUFFIX).removesuffix(".warc")
    return warc.with_name(name + CDXJ_SUFFIX)


@dataclass(slots=True, frozen=True)
class WarcLocation:
    """Where a record lies: what pages.parquet and a CDXJ index carry to read it back with one seek."""

    filename: str
    offset: int
    length: int

    def columns(self) -> dict[str, Any]:
        """As pages.parquet and the text records name it (warc_filename, warc_offset, warc_length)."""
        return {"warc_filename": self.filename, "warc_offset": self.offset, "warc_length": self.length}


def write_cdxj(warc: Path) -> Path:
    """Index one finished WARC's responses and revisits into its CDXJ file, atomically.

    Only what a replay should serve: a metadata record (the cleaner's verdict) carries its page's URL and a
    later timestamp, so indexed it would be the capture pywb replays for that URL. Metadata is found from
    pages.parquet (WARC-Concurrent-To the response) instead.
    """
    out = cdxj_path(warc)
    tmp = out.with_name(out.name + ".tmp")
    try:
        from cdxj_indexer.main import write_cdx_index  # (with surt and tldextract: 0.7 s to import)

        write_cdx_index(str(tmp), [str(warc)], {"sort": True, "records": INDEXED_RECORDS})
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def read_cdxj(path: Path) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(SURT key, timestamp, fields) per line of a CDXJ file."""
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            key, timestamp, fields = line.rstrip("\n").split(" ", 2)
            yield key, timestamp, json.loads(fields)


def read_record(folder: Path, filename: str, offset: int, length: int) -> ArcWarcRecord:
    """The record at (filename, offset, length), as a CDXJ line or a pages.parquet row locates it."""
    with (folder / filename).open("rb") as fh:
        fh.seek(offset)
        data = fh.read(length)
    return next(iter(ArchiveIterator(BytesIO(data))))


def _complete_prefix(fh: BinaryIO) -> int:
    """Byte offset just past the last gzip member that ends with its trailer (a whole record)."""
    good_end = 0
    pos = 0  # file offset of the first byte of `pending`
    decomp = zlib.decompressobj(zlib.MAX_WBITS | 16)
    pending = b""
    while True:
        if not pending:
            pending = fh.read(_SCAN_CHUNK)
            if not pending:
                return good_end
        data = pending
        try:
            # Bounded output: a highly compressible member must not be inflated into memory at once.
            while data and not decomp.eof:
                decomp.decompress(data, _SCAN_CHUNK)
                data = decomp.unconsumed_tail
        except zlib.error:
            return good_end
        if decomp.eof:
            good_end = pos + len(pending) - len(decomp.unused_data)
            pos, pending = good_end, decomp.unused_data
            decomp = zlib.decompressobj(zlib.MAX_WBITS | 16)
        else:
            pos += len(pending)
            pending = b""


def _count_records(path: Path) -> int:
    """Read every record through warcio with digests checked, so a kept file is a valid archive."""
    count = 0
    with path.open("rb") as fh:
        for record in ArchiveIterator(fh, check_digests=True):
            while record.raw_stream.read(_SCAN_CHUNK):  # raw: a cut gzip body must not fail here
                pass
            if record.digest_checker.passed is False:
                raise ValueError(f"{path}: digest mismatch in record {count}")
            count += 1
    return count


def recover_open_files(directory: Path) -> dict[Path, int]:
    """Finish files a crash left as *.open: cut to the last whole record, rename, count kept."""
    recovered: dict[Path, int] = {}
    for partial in sorted(Path(directory).glob(f"*.warc.gz{OPEN_SUFFIX}")):
        final = partial.with_name(partial.name[: -len(OPEN_SUFFIX)])
        with partial.open("r+b") as fh:
            end = _complete_prefix(fh)
            fh.truncate(end)
            fh.flush()
            os.fsync(fh.fileno())
        if end == 0:
            # Not even the warcinfo survived: nothing worth keeping.
            partial.unlink()
            recovered[final] = 0
            continue
        publish(partial, final)
        recovered[final] = _count_records(final)
        write_cdxj(final)
    return recovered


def index_unindexed(directory: Path) -> None:
    """A CDXJ for every finished WARC without one (its index was refused by a full disk). Only where
    no writer runs: a resume before its crawl starts."""
    for warc in sorted(Path(directory).glob(f"*{WARC_SUFFIX}")):
        if not cdxj_path(warc).exists():
            write_cdxj(warc)


def responses_in(path: Path) -> dict[str, dict[str, Any]]:
    """The last whole, untruncated response record of each URL in one WARC file: its id, HTTP status and
    where it is (warc_filename, warc_offset, warc_length, as pages.parquet locates a record)."""
    found: dict[str, dict[str, Any]] = {}
    with path.open("rb") as fh:
        records = ArchiveIterator(fh)
        for record in records:
            headers = record.rec_headers
            keep = record.rec_type == "response" and not headers.get_header("WARC-Truncated")
            url, record_id = headers.get_header("WARC-Target-URI"), headers.get_header("WARC-Record-ID")
            records.read_to_end(record)
            if keep and url and record.http_headers is not None:
                where = WarcLocation(path.name, records.get_record_offset(), records.get_record_length())
                status = int(record.http_headers.get_statuscode() or 0)
                found[url] = {"warc_record_id": record_id, "status": status, **where.columns()}
    return found


def add_index_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "index",
        help="write the CDXJ index beside every WARC file of a run (for runs made before indexes)",
        description="Index each finished RUN/warc/*.warc.gz into a CDXJ file beside it (what pywb and "
        "cdx_toolkit read). New crawls write their indexes themselves; existing indexes are rewritten.",
    )
    p.add_argument("run", type=Path, metavar="RUN", help="a run directory (or a folder of WARC files)")
    p.set_defaults(func=cmd_index)


def not_a_warc(path: Path) -> str | None:
    """Why `path` is not a WARC file (its first record does not parse), or None when it is one."""
    try:
        with path.open("rb") as fh:
            first = next(iter(ArchiveIterator(fh)), None)
    except (ArchiveLoadFailed, OSError, EOFError, ValueError, zlib.error) as exc:
        return str(exc).splitlines()[0][:120] or type(exc).__name__
    return "empty" if first is None else None


def cmd_index(args: argparse.Namespace) -> int:
    from crawler.run.crawl_config import ConfigError

    run: Path = args.run
    if not run.is_dir():
        raise ConfigError(f"{run}: not a run directory")
    folder = run / "warc" if (run / "warc").is_dir() else run
    warcs = sorted(folder.glob(f"*{WARC_SUFFIX}"))
    if not warcs:
        raise ConfigError(f"{folder}: no *{WARC_SUFFIX} files to index")
    for warc in warcs:  # every file is a WARC, or nothing is indexed
        if (problem := not_a_warc(warc)) is not None:
            raise ConfigError(f"{warc}: not a WARC file ({problem}); move it out of {folder} and run again")
    records = 0
    for warc in warcs:
        try:
            index = write_cdxj(warc)
        except (ArchiveLoadFailed, OSError, EOFError, ValueError, zlib.error) as exc:
            raise ConfigError(f"{warc}: damaged after its first record ({exc}); not indexed") from exc
        with index.open(encoding="utf-8") as fh:
            records += sum(1 for _ in fh)
    unfinished = len(list(folder.glob(f"*{OPEN_SUFFIX}")))
    note = f"; {unfinished} unfinished *.open file(s) left for `crawl --resume`" if unfinished else ""
    print(
        f"indexed {len(warcs)} WARC file(s), {records} records -> {folder}/*{CDXJ_SUFFIX}{note}",
        file=sys.stderr,
    )
    return 0
