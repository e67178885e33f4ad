"""What every format reader shares: the result types, and opening local or remote (S3) files."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.fs as pafs

from lumos_dagster.errors import SchemaReadError
from lumos_dagster.model import MAX_NESTING, Schema

# a file nested deeper than a snapshot may be is refused up front: far deeper input crashes native
# parsers (Arrow's JSON reader segfaults near 16,000 levels)
TOO_DEEP = f"nested more than {MAX_NESTING} levels deep (Lumos reads at most {MAX_NESTING})"


def too_deep(path: str) -> SchemaReadError:
    return SchemaReadError(path, TOO_DEEP)


@dataclass(frozen=True)
class FileSchema:
    """What one file says about itself."""

    schema: Schema
    row_count: int | None = None


@dataclass(frozen=True)
class FileResult:
    """The outcome of reading one file's schema: a schema, or an error saying why not."""

    path: str
    schema: Schema | None = None
    row_count: int | None = None
    error: str | None = None


#: how to reach a remote file system, small and picklable (it travels to Spark executors):
#: ("s3", endpoint_override or "", region or "", scheme). Credentials are never in it: each
#: process finds its own through the standard AWS chain (environment, profile, instance role).
FsSpec = tuple[str, str, str, str]


@functools.lru_cache(maxsize=8)
def filesystem(spec: FsSpec) -> pafs.FileSystem:
    kind, endpoint, region, scheme = spec
    if kind != "s3":
        raise ValueError(f"unknown file system {kind!r}")
    options: dict[str, Any] = {"scheme": scheme or "https"}
    if endpoint:
        options["endpoint_override"] = endpoint
    if region:
        options["region"] = region
    return pafs.S3FileSystem(**options)


def open_random(path: str, fs: pafs.FileSystem | None) -> BinaryIO:
    """Seekable: readers that jump to a footer make ranged reads, never a full download."""
    return open(path, "rb") if fs is None else fs.open_input_file(path)


def open_stream(path: str, fs: pafs.FileSystem | None) -> pa.NativeFile:
    """Sequential, decompressing `.gz/.bz2/.zst/.lz4` by extension."""
    return pa.input_stream(path) if fs is None else fs.open_input_stream(path, compression="detect")


def file_size(path: str, fs: pafs.FileSystem | None) -> int:
    if fs is None:
        return os.path.getsize(path)
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        raise FileNotFoundError(path)
    return info.size
