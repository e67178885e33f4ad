"""File formats: recognising a file's format and reading its schema.

Formats register by name in `REGISTRY`; a package adds one through a `lumos.formats` entry
point naming a `Format`.

`read_file_schema` never lets a reader's exception escape: every failure becomes a
`SchemaReadError` whose message names the file and a readable cause.
"""

from __future__ import annotations

import functools
import importlib
import os
from dataclasses import dataclass, replace
from typing import Any, Callable

from lumos_dagster.floor.datatypes import Array, DataType, Map, Schema, SchemaTooLarge, Struct, UnionType, beyond_limits
from lumos_dagster.floor.errors import SchemaReadError
from lumos_dagster.floor.limits import MAX_COUNT
from lumos_dagster.floor.plugins import PluginRegistry
from lumos_dagster.formats import compression
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

__all__ = [
    "FORMATS",
    "READERS",
    "FileResult",
    "FileSchema",
    "Format",
    "FsSpec",
    "HEAD_BYTES",
    "format_from",
    "format_of",
    "needs_head",
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


@dataclass(frozen=True)
class BuiltinReader:
    """A built-in schema reader, imported when first called: its libraries (pyarrow, fastavro: ~0.15 s)
    load only in processes that read files, not in every command that lists or discovers them."""

    module: str  # in lumos_dagster.formats
    function: str

    def load(self) -> Callable[[str, Any], FileSchema]:
        return getattr(importlib.import_module(f"lumos_dagster.formats.{self.module}"), self.function)

    def __call__(self, path: str, fs: Any) -> FileSchema:
        return self.load()(path, fs)


REGISTRY: PluginRegistry[Format] = PluginRegistry(
    "lumos.formats",
    Format,
    (
        Format("parquet", BuiltinReader("parquet", "read_parquet"), (".parquet", ".parq", ".pq"), (b"PAR1", b"PARE")),
        Format("orc", BuiltinReader("orc", "read_orc"), (".orc",), (b"ORC",)),
        Format("avro", BuiltinReader("avro", "read_avro"), (".avro",), (b"Obj\x01",)),
        Format("csv", BuiltinReader("text", "read_csv"), (".csv",)),
        Format("tsv", BuiltinReader("text", "read_tsv"), (".tsv",)),
        Format("json", BuiltinReader("text", "read_json"), (".json", ".jsonl", ".ndjson")),
    ),
)


def load_readers() -> None:
    """Import every built-in reader now: before forking workers, so that they share the imports."""
    for f in REGISTRY:
        if isinstance(f.read, BuiltinReader):
            f.read.load()


#: how much of a file's start `format_from` looks at: a gzip header's name and a first decompressed block
HEAD_BYTES = 8192


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
    for suffix in compression.SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return _signatures()[0].get(os.path.splitext(name)[1])


def needs_head(path: str) -> bool:
    """Whether the first bytes could change what the name says: every name but a binary format's."""
    return format_of(path) not in {fmt for _, fmt in _signatures()[1]}


def format_from(path: str, head: bytes) -> tuple[str | None, str | None]:
    """(format, note) from the name and the first HEAD_BYTES bytes, the one rule discovery and
    `lumos schema` share. A binary format's magic bytes beat the name (a Parquet file named .csv
    is Parquet, and the note says so); a gzip or zstd file without a known name is what its
    header's name or its first decompressed bytes say."""
    by_name = format_of(path)
    by_magic = next((fmt for magic, fmt in _signatures()[1] if head.startswith(magic)), None)
    if by_magic and by_name and by_magic != by_name:
        return by_magic, f"named as {by_name}, read as {by_magic} (its first bytes)"
    if by_name or by_magic:
        return by_name or by_magic, None
    codec = compression.codec_of(head)
    if codec is None:
        return None, None
    # only text formats are read through a decompressing stream: a gzipped Parquet file is not one
    named = format_of(compression.gzip_name(head) or "")
    text = {f.type for f in REGISTRY if not f.magic}
    return named if named in text else compression.text_format(compression.inflate(head, codec)), None


def sniff_format(path: str) -> str | None:
    """`format_from` for a local file."""
    if not needs_head(path):
        return format_of(path)
    try:
        with open(path, "rb") as fh:
            head = fh.read(HEAD_BYTES)
    except OSError:
        return format_of(path)
    return format_from(path, head)[0]


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
        size = file_size(path, remote)
        if size == 0:
            raise SchemaReadError(path, "empty file (0 bytes)")
        found = reader.read(path, remote)
        if _too_deep(found.schema):  # Lumos' own code (diff, pickling between processes) recurses
            raise too_deep(path)
        beyond = beyond_limits(found.schema)
        if beyond is not None:
            raise SchemaReadError(path, beyond)
        if found.row_count is not None and not 0 <= found.row_count <= MAX_COUNT:
            # a footer's word, summed with others' (2^62 + 2^62) or negative: no count kept is a lie
            claim = f"its metadata claims {found.row_count:,} rows, which no 64-bit count holds: row count unknown"
            return replace(found, row_count=None, damaged=found.damaged or claim, size=size)
        return replace(found, size=size)
    except SchemaReadError:
        raise
    except SchemaTooLarge as exc:
        raise SchemaReadError(path, f"its schema {exc}") from None
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
    return FileResult(path, found.schema, found.row_count, damaged=found.damaged, size=found.size)
