"""What every format reader shares: the result types, and opening local or remote (S3) files."""

from __future__ import annotations

import functools
import os
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

from lumos_dagster.floor.datatypes import Schema
from lumos_dagster.floor.errors import SchemaReadError
from lumos_dagster.floor.extras import needs
from lumos_dagster.floor.limits import MAX_NESTING
from lumos_dagster.formats.compression import SUFFIXES, codec_of

if TYPE_CHECKING:  # pyarrow is imported where a file is opened: listing and discovery never load it
    import pyarrow as pa
    import pyarrow.fs as pafs

# a file nested deeper than a snapshot may be is refused up front: far deeper input crashes native
# parsers (Arrow's JSON reader segfaults near 16,000 levels)
TOO_DEEP = f"nested more than {MAX_NESTING} levels deep (Lumos reads at most {MAX_NESTING})"


def too_deep(path: str) -> SchemaReadError:
    return SchemaReadError(path, TOO_DEEP)


@dataclass(frozen=True)
class FileSchema:
    """What one file says about itself. `damaged`: what is wrong with a file whose schema could still be
    read (its data is corrupt or cut short); its schema stands, its row count is unknown."""

    schema: Schema
    row_count: int | None = None
    damaged: str | None = None
    size: int | None = None  # bytes, when it was read


@dataclass(frozen=True)
class FileResult:
    """The outcome of reading one file's schema: a schema, or an error saying why not; a schema
    read from a damaged file says what is wrong with it (`FileSchema.damaged`)."""

    path: str
    schema: Schema | None = None
    row_count: int | None = None
    error: str | None = None
    damaged: str | None = None
    size: int | None = None  # bytes when it was read: a file listed with another size was still being written

    @property
    def warning(self) -> str | None:
        """The line that reports a damaged file whose schema was kept."""
        return f"damaged: {self.damaged}" if self.damaged else None


#: how to reach a remote file system, small and picklable (it travels to Spark executors):
#: ("s3", endpoint_override or "", region or "", scheme), ("abfs", account name, "", ""),
#: ("gcs", endpoint or "", project or "", "") or ("webhdfs", NameNode host:port, user or "", "http"
#: or "https"). Credentials are never in it: each process finds its own through the SDK's standard
#: chain (AWS, Azure, Google); WebHDFS takes a user name (simple authentication), no secret.
FsSpec = tuple[str, str, str, str]

#: fsspec's read-ahead per request on Azure and GCS (adlfs defaults to 50 MiB, which would fetch
#: most objects whole to read a footer); the readers ask for at most a 1 MiB block at a time
FSSPEC_BLOCK = 256 << 10


@functools.lru_cache(maxsize=8)
def fsspec_filesystem(spec: FsSpec):
    """The fsspec file system of an Azure, GCS or WebHDFS spec (adlfs, gcsfs: imported only when used)."""
    kind, first, second, scheme = spec
    if kind == "abfs":
        with needs("azure", "reading Azure files"):
            from adlfs import AzureBlobFileSystem

        return AzureBlobFileSystem(account_name=first, blocksize=FSSPEC_BLOCK)
    if kind == "gcs":
        # the plain JSON-API file system: gcsfs' default wrapper first asks a gRPC control plane
        # for the bucket's layout (zonal, hierarchical), which emulators and read-only roles lack
        with needs("gcs", "reading GCS files"):
            from gcsfs.core import GCSFileSystem

        project = {"project": second} if second else {}  # else gcsfs' default (the credentials')
        return GCSFileSystem(**project, endpoint_url=first or None, block_size=FSSPEC_BLOCK)
    if kind == "webhdfs":
        with needs("hdfs", "reading HDFS files"):
            from fsspec.implementations.webhdfs import WebHDFS

        host, port = first.rsplit(":", 1)
        fs = WebHDFS(host, port=int(port), user=second or None, use_https=scheme == "https", skip_instance_cache=True)
        fs.blocksize = FSSPEC_BLOCK  # its constructor takes none: files would read ahead 4 MiB
        return fs
    raise ValueError(f"unknown file system {kind!r}")


@functools.lru_cache(maxsize=8)
def filesystem(spec: FsSpec) -> pafs.FileSystem:
    import pyarrow.fs as pafs

    kind, endpoint, region, scheme = spec
    if kind in ("abfs", "gcs", "webhdfs"):
        return pafs.PyFileSystem(pafs.FSSpecHandler(fsspec_filesystem(spec)))
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
    """Sequential, decompressing `.gz/.bz2/.zst/.lz4` by extension, and gzip or zstd by their
    header when the name has no such suffix (an extensionless export)."""
    codec: str | None = "detect"
    if not path.lower().endswith(SUFFIXES):
        with open_random(path, fs) as fh:
            codec = codec_of(fh.read(4))
    import pyarrow as pa

    return pa.input_stream(path, compression=codec) if fs is None else fs.open_input_stream(path, compression=codec)


def file_size(path: str, fs: pafs.FileSystem | None) -> int:
    if fs is None:
        found = os.stat(path)
        if not stat.S_ISREG(found.st_mode):  # its size says nothing (0), and a reader could wait on it forever
            raise SchemaReadError(path, "not a regular file (a device, pipe, socket or folder)")
        return found.st_size
    import pyarrow.fs as pafs

    info = fs.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        raise FileNotFoundError(path)
    return info.size
