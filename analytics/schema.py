"""The columns each study reads, checked against parquet metadata before any query runs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

# Type families: the real files mix widths (int8 `*_pct`, int64 counts), so a family accepts every width.
INTEGER = "integer"
FLOAT = "float"
NUMBER = "number"
STRING = "string"
BOOLEAN = "boolean"

SCORE_PREFIX = "score_"


class SchemaError(ValueError):
    """A parquet input lacks a column or holds it in the wrong type; the message names both."""


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    family: str
    physical: str  # the type the real data (or our writers) use, shown in errors

    def describe(self) -> str:
        return f"{self.family} ({self.physical})"


def _family_ok(family: str, dtype: pa.DataType) -> bool:
    if pa.types.is_dictionary(dtype):
        dtype = dtype.value_type
    if family == INTEGER:
        return pa.types.is_integer(dtype)
    if family == FLOAT:
        return pa.types.is_floating(dtype)
    if family == NUMBER:
        return pa.types.is_integer(dtype) or pa.types.is_floating(dtype) or pa.types.is_decimal(dtype)
    if family == STRING:
        return pa.types.is_string(dtype) or pa.types.is_large_string(dtype) or pa.types.is_string_view(dtype)
    if family == BOOLEAN:
        return pa.types.is_boolean(dtype)
    raise ValueError(f"unknown type family {family!r}")


# Common Crawl host index v2: only the columns the studies read (the rest may differ between partitions).
HOST_INDEX_COLUMNS = (
    Column("surt_host_name", STRING, "string"),
    Column("url_host_tld", STRING, "string"),
    Column("nutch_numRecords", INTEGER, "int64"),
    Column("nutch_fetched", INTEGER, "int64"),
    Column("nutch_fetched_pct", INTEGER, "int8"),
    Column("nutch_unfetched", INTEGER, "int64"),
    Column("fetch_200", INTEGER, "int64"),
)
ANNOTATION_COLUMNS = (Column("surt_host_name", STRING, "string"),)
ANNOTATION_TOPICS = ("gneissweb_technology", "gneissweb_science", "gneissweb_education", "gneissweb_medical")
RANKS_COLUMNS = (
    Column("host", STRING, "string"),
    Column("hc_val", NUMBER, "double"),
    Column("pr_val", NUMBER, "double"),
)
PAGES_COLUMNS = (Column("url", STRING, "string"), Column("host", STRING, "string"))
LANGUAGE_COLUMN = Column("language", STRING, "string")


def parquet_files(path: Path) -> list[Path]:
    """A parquet file, or every *.parquet below a (Hive-partitioned) folder, in a stable order."""
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(p for p in path.rglob("*.parquet") if p.is_file())
        if files:
            return files
        raise SchemaError(f"{path}: folder holds no *.parquet files")
    raise SchemaError(f"{path}: no such file or folder")


def file_schema(path: Path) -> pa.Schema:
    try:
        return pq.read_schema(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise SchemaError(f"{path}: not a readable parquet file ({exc})") from None


def check_columns(path: Path, required: Iterable[Column]) -> list[Path]:
    """Every file under `path` has each required column in its type family; returns the files.

    Partitions of the real host index differ in their other columns, so only the required ones are checked.
    """
    files = parquet_files(path)
    for file in files:
        schema = file_schema(file)
        names = set(schema.names)
        for column in required:
            if column.name not in names:
                raise SchemaError(
                    f"{file}: missing column '{column.name}' (expected {column.describe()}); "
                    f"found: {', '.join(schema.names[:20])}{' ...' if len(schema.names) > 20 else ''}"
                )
            dtype = schema.field(column.name).type
            if not _family_ok(column.family, dtype):
                raise SchemaError(
                    f"{file}: column '{column.name}' has type {dtype}, expected {column.describe()}"
                )
    return files


def score_columns(path: Path, wanted: Iterable[str] | None = None) -> list[str]:
    """The classifier score columns (`score_*`, numeric) of a pages table, or the named ones checked."""
    schema = file_schema(parquet_files(path)[0])
    if wanted:
        columns = [w if w.startswith(SCORE_PREFIX) or w in schema.names else SCORE_PREFIX + w for w in wanted]
        check_columns(path, [Column(c, NUMBER, "double") for c in columns])
        return columns
    found = [n for n in schema.names if n.startswith(SCORE_PREFIX)]
    if not found:
        raise SchemaError(
            f"{path}: no classifier score column (expected at least one '{SCORE_PREFIX}NAME' of type "
            f"float (double)); found: {', '.join(schema.names)}"
        )
    check_columns(path, [Column(c, NUMBER, "double") for c in found])
    return found


def has_column(path: Path, name: str) -> bool:
    return name in file_schema(parquet_files(path)[0]).names


def columns_of(path: Path) -> Mapping[str, pa.DataType]:
    schema = file_schema(parquet_files(path)[0])
    return {f.name: f.type for f in schema}
