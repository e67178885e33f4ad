"""File formats: recognising a file's format and reading its schema.

Formats register by name in `REGISTRY`; a package adds one through a `lumos.formats` entry
point naming a `Format`.

`read_file_schema` never lets a reader's exception escape: every failure becomes a
`SchemaReadError` whose message names the file and a readable cause.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Any, Callable

from lumos_dagster.errors import SchemaReadError
from lumos_dagster.formats.avro import read_avro
from lumos_dagster.formats.base import (
    MAX_NESTING,
    TOO_DEEP,
    FileResult,
    FileSchema,
    FsSpec,
    file_size,
    filesystem,
    too_deep,
)
from lumos_dagster.formats.orc import read_orc
from lumos_dagster.formats.parquet import read_parquet
from lumos_dagster.formats.text import read_csv, read_json, read_tsv
from lumos_dagster.model import Array, DataType, Map, Schema, Struct, UnionType
from lumos_dagster.plugins import Registry

__all__ = [
    "FORMATS",
    "READERS",
    "FileResult",
    "FileSchema",
    "Format",
    "FsSpec",
    "format_of",
    "sniff_format",
    "read_file_schema",
    "read_file_result",
]


@dataclass(frozen=True)
class Format:
    """A file format: its name, its schema reader `read(path, remote_fs_or_None)`, and the file
    extensions and leading bytes that say a file is one. A `lumos.formats` entry point names one."""

    type: str
    read: Callable[[str, Any], FileSchema]
    extensions: tuple[str, ...] = ()
    magic: tuple[bytes, ...] = ()


REGISTRY: Registry[Format] = Registry(
    "lumos.formats",
    Format,
    (
        Format("parquet", read_parquet, (".parquet", ".parq", ".pq"), (b"PAR1", b"PARE")),
        Format("orc", read_orc, (".orc",), (b"ORC",)),
        Format("avro", read_avro, (".avro",), (b"Obj\x01",)),
        Format("csv", read_csv, (".csv",)),
        Format("tsv", read_tsv, (".tsv",)),
        Format("json", read_json, (".json", ".jsonl", ".ndjson")),
    ),
)

# compression suffixes Arrow's readers undo by themselves (csv.gz, json.bz2 …)
_COMPRESSION = (".gz", ".bz2", ".zst", ".lz4")


def __getattr__(name: str) -> Any:
    # computed on first use, so that installed format plug-ins are loaded only when formats are needed
    if name == "FORMATS":
        return REGISTRY.names()
    if name == "READERS":
        return {f.type: f.read for f in REGISTRY}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _signatures() -> tuple[dict[str, str], tuple[tuple[bytes, str], ...]]:
    """Extension → format, and (leading bytes, format). Cached, as `format_of` runs for every
    listed file: formats are registered at import and on the registry's first use, not later."""
    extensions = {ext: f.type for f in REGISTRY for ext in f.extensions}
    return extensions, tuple((magic, f.type) for f in REGISTRY for magic in f.magic)


def format_of(path: str) -> str | None:
    """Format from the file name alone (`x.snappy.parquet`, `x.csv.gz`), or None."""
    name = os.path.basename(path).lower()
    for suffix in _COMPRESSION:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return _signatures()[0].get(os.path.splitext(name)[1])


def sniff_format(path: str) -> str | None:
    """Format from the name, else from the first bytes (binary formats only)."""
    fmt = format_of(path)
    if fmt:
        return fmt
    signatures = _signatures()[1]
    try:
        with open(path, "rb") as fh:
            head = fh.read(max(len(magic) for magic, _ in signatures))
    except OSError:
        return None
    return next((fmt for magic, fmt in signatures if head.startswith(magic)), None)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    lowered = text.lower()
    if "magic bytes not found" in lowered:
        return "not a valid Parquet file: no PAR1 footer (truncated or another format)"
    if "encrypted" in lowered and "decryption" in lowered:
        return "encrypted Parquet footer: Lumos has no decryption key for it"
    if isinstance(exc, UnicodeDecodeError):
        return "not valid UTF-8 text"
    if isinstance(exc, RecursionError):  # only nesting far deeper than MAX_NESTING gets there
        return TOO_DEEP
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(exc).__name__}: {text}"


def _inner(t: DataType) -> tuple[DataType, ...]:
    if isinstance(t, Struct):
        return tuple(f.type for f in t.fields)
    if isinstance(t, Array):
        return (t.element,)
    if isinstance(t, Map):
        return (t.key, t.value)
    return t.branches if isinstance(t, UnionType) else ()


def _too_deep(schema: Schema) -> bool:
    """Whether `schema` nests deeper than MAX_NESTING, level by level (no recursion to overflow)."""
    level = [f.type for f in schema.fields]
    for _ in range(MAX_NESTING):
        level = [inner for t in level for inner in _inner(t)]
    return bool(level)


def read_file_schema(path: str, fmt: str | None = None, fs: FsSpec | None = None) -> FileSchema:
    """Schema (and row count where the format records it) of one file, local or on the
    remote file system `fs` describes (then `path` is `bucket/key`).

    Raises SchemaReadError(path, reason) for unknown formats, empty, corrupt or
    unreadable files.
    """
    fmt = fmt or (format_of(path) if fs else sniff_format(path))
    reader = REGISTRY.get(fmt) if fmt else None
    if reader is None:
        raise SchemaReadError(path, f"unrecognised format (supported: {', '.join(REGISTRY.names())})")
    try:
        remote = filesystem(fs) if fs else None
        if file_size(path, remote) == 0:
            raise SchemaReadError(path, "empty file (0 bytes)")
        found = reader.read(path, remote)
        if _too_deep(found.schema):  # Lumos' own code (diff, pickling between processes) recurses
            raise too_deep(path)
        return found
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
