"""Host -> HC/PR percentile priors for the scheduler, from a ranks parquet, in memory-mapped sorted arrays.

The index is a sorted array of 64-bit host-name hashes with two float32 percentile columns (16 bytes a host),
built once with DuckDB and kept next to the parquet (`ranks.parquet.priors/`), so a crawl can load priors for
hundreds of millions of hosts in milliseconds and look every new host up in a few microseconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from bisect import bisect_left
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from graph.duck import arrow_batches, connect, sql_string
from graph.hostnames import HostNameError, registered_domain, www_variants

INDEX_FORMAT = "hostcrawl.graph.priors_v2"
INDEX_SUFFIX = ".priors"
FETCH_ROWS = 1 << 22  # rows per batch copied from DuckDB into the index files
MAX_BUCKET_BITS = 24  # top-bits bucket table: at most 16M offsets (128 MiB) even for 700M hosts
ROWS_PER_BUCKET = 2  # aim: a lookup bisects a handful of keys that sit on one or two cache lines


@dataclass(frozen=True, slots=True)
class CentralityPrior:
    """Centrality of a host in the loaded release: 0..1, higher is more central."""

    hc_percentile: float
    pr_percentile: float
    matched: str  # the spelling found in the table (the other www variant, or the registered domain)


def host_key(host: str) -> int:
    """64-bit key of a normal-form host; equals DuckDB's md5_number_lower(host), which builds the index."""
    return int.from_bytes(hashlib.md5(host.encode(), usedforsecurity=False).digest()[8:16], "little")


class HostPriors:
    """Read-only lookup table; load with HostPriors.load(path_to_ranks_parquet)."""

    def __init__(
        self,
        keys: np.ndarray,
        hc: np.ndarray,
        pr: np.ndarray,
        kind: str,
        release: str,
        buckets: np.ndarray | None = None,
    ) -> None:
        if buckets is None:
            buckets = bucket_table(keys)
        self._shift = 64 - (len(buckets) - 1).bit_length() + 1
        self._buckets = np.ascontiguousarray(buckets, np.uint64).data.cast("B").cast("Q")
        # memoryviews index to plain Python ints/floats, several times cheaper than numpy scalars.
        self._keys = np.ascontiguousarray(keys, np.uint64).data.cast("B").cast("Q")
        self._hc = np.ascontiguousarray(hc, np.float32).data.cast("B").cast("f")
        self._pr = np.ascontiguousarray(pr, np.float32).data.cast("B").cast("f")
        self._size = len(self._keys)
        self.kind = kind  # "host" or "domain": a domain table is searched by registered domain
        self.release = release

    def __len__(self) -> int:
        return len(self._keys)

    @classmethod
    def load(cls, path: Path | str, index_dir: Path | str | None = None) -> HostPriors:
        """Open the index of a ranks parquet, building it first when missing or older than the parquet."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(
                f"ranks parquet {path} does not exist (make one with `hostcrawl graph ingest`)"
            )
        meta = _parquet_meta(path)
        folder = Path(index_dir) if index_dir is not None else path.with_name(path.name + INDEX_SUFFIX)
        if not _index_is_current(folder, path):
            try:
                _build_index(path, folder)
            except OSError:  # a read-only data folder: build a private copy instead
                folder = Path(tempfile.mkdtemp(prefix="hostcrawl-priors-"))
                _build_index(path, folder)
        keys, hc, pr, buckets = (
            np.load(folder / f"{name}.npy", mmap_mode="r") for name in ("keys", "hc", "pr", "buckets")
        )
        return cls(keys, hc, pr, kind=meta["kind"], release=meta["release"], buckets=buckets)

    def lookup(self, host: str) -> CentralityPrior | None:
        """A host's centrality under either www convention (or its registered domain's, in a domain table)."""
        try:
            candidates = (registered_domain(host),) if self.kind == "domain" else www_variants(host)
        except HostNameError:
            return None
        keys, buckets, shift = self._keys, self._buckets, self._shift
        for candidate in candidates:
            key = host_key(candidate)
            bucket = key >> shift
            hi = buckets[bucket + 1]
            i = bisect_left(keys, key, buckets[bucket], hi)
            if i < hi and keys[i] == key:
                return CentralityPrior(self._hc[i], self._pr[i], candidate)
        return None


def bucket_table(keys: np.ndarray) -> np.ndarray:
    """Offsets of the first key of each top-bits bucket (one extra entry holding len(keys))."""
    bits = int(np.clip(np.log2(max(len(keys), 1) / ROWS_PER_BUCKET), 0, MAX_BUCKET_BITS))
    bounds = np.arange(1 << bits, dtype=np.uint64) << np.uint64(64 - bits) if bits else np.zeros(1, np.uint64)
    starts = np.searchsorted(keys, bounds)
    return np.append(starts, len(keys)).astype(np.uint64)


def _parquet_meta(path: Path) -> dict[str, str]:
    schema = pq.read_schema(path)
    raw = schema.metadata or {}
    meta = {k.decode(): v.decode() for k, v in raw.items()}
    missing = {"host", "hc_percentile", "pr_percentile"} - set(schema.names)
    if missing:
        raise ValueError(f"{path}: not a ranks parquet, columns {sorted(missing)} are missing")
    kind = meta.get("kind") or ("domain" if "n_hosts" in schema.names else "host")
    return {"kind": kind, "release": meta.get("release", "")}


def _source_stamp(path: Path) -> dict[str, object]:
    stat = path.stat()
    return {"format": INDEX_FORMAT, "source_size": stat.st_size, "source_mtime_ns": stat.st_mtime_ns}


def _index_is_current(folder: Path, path: Path) -> bool:
    try:
        stamp = json.loads((folder / "index.json").read_text())
    except (OSError, ValueError):
        return False
    return all(stamp.get(k) == v for k, v in _source_stamp(path).items())


def _build_index(path: Path, folder: Path) -> None:
    """Sort hashes with DuckDB (which spills to disk when needed) and stream them into .npy files."""
    folder.mkdir(parents=True, exist_ok=True)
    con = connect()
    try:
        total = pq.ParquetFile(path).metadata.num_rows
        files = {
            "keys": np.lib.format.open_memmap(folder / "keys.npy.tmp", "w+", np.uint64, (total,)),
            "hc": np.lib.format.open_memmap(folder / "hc.npy.tmp", "w+", np.float32, (total,)),
            "pr": np.lib.format.open_memmap(folder / "pr.npy.tmp", "w+", np.float32, (total,)),
        }
        relation = con.sql(
            "SELECT md5_number_lower(host) AS keys, hc_percentile::FLOAT AS hc, pr_percentile::FLOAT AS pr "
            f"FROM read_parquet({sql_string(path)}) ORDER BY keys"
        )
        reader = arrow_batches(relation, FETCH_ROWS)
        at = 0
        for batch in reader:
            n = batch.num_rows
            for name, array in files.items():
                array[at : at + n] = batch.column(name).to_numpy(zero_copy_only=False)
            at += n
    finally:
        con.close()
    np.save(folder / "buckets.npy.tmp.npy", bucket_table(files["keys"]))
    os.replace(folder / "buckets.npy.tmp.npy", folder / "buckets.npy")
    for name, array in files.items():
        array.flush()
        del array
        os.replace(folder / f"{name}.npy.tmp", folder / f"{name}.npy")
    (folder / "index.json").write_text(json.dumps({**_source_stamp(path), "rows": total}))
