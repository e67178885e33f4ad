"""File formats: recognising a file's format and reading its schema.

`read_file_schema` never lets a reader's exception escape: every failure becomes a
`SchemaReadError` whose message names the file and a readable cause.
"""

from __future__ import annotations

import os
from typing import Callable

from lumos_dagster.errors import SchemaReadError
from lumos_dagster.formats.avro import read_avro
from lumos_dagster.formats.base import FileResult, FileSchema, FsSpec, file_size, filesystem
from lumos_dagster.formats.orc import read_orc
from lumos_dagster.formats.parquet import read_parquet
from lumos_dagster.formats.text import read_csv, read_json, read_tsv

__all__ = [
    "FORMATS",
    "FileResult",
    "FileSchema",
    "FsSpec",
    "format_of",
    "sniff_format",
    "read_file_schema",
    "read_file_result",
]

READERS: dict[str, Callable[..., FileSchema]] = {
    "parquet": read_parquet,
    "orc": read_orc,
    "avro": read_avro,
    "csv": read_csv,
    "tsv": read_tsv,
    "json": read_json,
}
FORMATS = tuple(READERS)

_EXTENSIONS = {
    ".parquet": "parquet",
    ".parq": "parquet",
    ".pq": "parquet",
    ".orc": "orc",
    ".avro": "avro",
    ".csv": "csv",
    ".tsv": "tsv",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
}
# compression suffixes Arrow's readers undo by themselves (csv.gz, json.bz2 …)
_COMPRESSION = (".gz", ".bz2", ".zst", ".lz4")
_MAGIC = ((b"PAR1", "parquet"), (b"PARE", "parquet"), (b"ORC", "orc"), (b"Obj\x01", "avro"))


def format_of(path: str) -> str | None:
    """Format from the file name alone (`x.snappy.parquet`, `x.csv.gz`), or None."""
    name = os.path.basename(path).lower()
    for suffix in _COMPRESSION:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return _EXTENSIONS.get(os.path.splitext(name)[1])


def sniff_format(path: str) -> str | None:
    """Format from the name, else from the first bytes (binary formats only)."""
    fmt = format_of(path)
    if fmt:
        return fmt
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError:
        return None
    return next((fmt for magic, fmt in _MAGIC if head.startswith(magic)), None)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    lowered = text.lower()
    if "magic bytes not found" in lowered:
        return "not a valid Parquet file: no PAR1 footer (truncated or another format)"
    if "encrypted" in lowered and "decryption" in lowered:
        return "encrypted Parquet footer: Lumos has no decryption key for it"
    if isinstance(exc, UnicodeDecodeError):
        return "not valid UTF-8 text"
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(exc).__name__}: {text}"


def read_file_schema(path: str, fmt: str | None = None, fs: FsSpec | None = None) -> FileSchema:
    """Schema (and row count where the format records it) of one file, local or on the
    remote file system `fs` describes (then `path` is `bucket/key`).

    Raises SchemaReadError(path, reason) for unknown formats, empty, corrupt or
    unreadable files.
    """
    fmt = fmt or (format_of(path) if fs else sniff_format(path))
    if fmt not in READERS:
        raise SchemaReadError(path, f"unrecognised format (supported: {', '.join(FORMATS)})")
    try:
        remote = filesystem(fs) if fs else None
        if file_size(path, remote) == 0:
            raise SchemaReadError(path, "empty file (0 bytes)")
        return READERS[fmt](path, remote)
    except SchemaReadError:
        raise
    except FileNotFoundError:
        raise SchemaReadError(path, "file not found (deleted since it was listed?)") from None
    except PermissionError:
        raise SchemaReadError(path, "permission denied") from None
    except (Exception, RecursionError) as exc:  # any reader failure is this file's failure
        raise SchemaReadError(path, f"cannot read {fmt}: {_reason(exc)}") from exc


def read_file_result(item: tuple) -> FileResult:
    """`read_file_schema` for (path, format[, fs spec]) tuples, failures as values (runs on executors)."""
    path, fmt, *rest = item
    try:
        found = read_file_schema(path, fmt, rest[0] if rest else None)
    except SchemaReadError as exc:
        return FileResult(path, error=exc.reason)
    return FileResult(path, found.schema, found.row_count)
