"""What a table format is to Lumos: a folder whose own log or metadata describes it.

A table format (Delta Lake, Iceberg) says which listed paths prove a table folder, and opens
a table to give its versions and, for any one of them, its schema and statistics. Lumos never
reads a table's data files: a file the log has removed is not part of the table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence, runtime_checkable

from lumos_dagster.floor.datatypes import Schema
from lumos_dagster.floor.model import Commit, OperationalStats, TableVersion
from lumos_dagster.formats.base import FsSpec


@dataclass(frozen=True)
class TableState:
    """A table as of one version (`table`: which, and when it was committed)."""

    schema: Schema
    table: TableVersion
    stats: OperationalStats = field(default_factory=OperationalStats)
    description: str | None = None
    #: a file of this version that cannot be read (one line naming it): the schema, from the table's
    #: metadata, stands; what that file would have told (Iceberg: the live files and partition values;
    #: Delta: the rows its deletion vectors delete) is left unknown, and the version's files_readable fails
    unread: str | None = None


@dataclass(frozen=True)
class ListedFile:
    """A file listed under the table folder: its path relative to the folder, and its mtime (epoch s)."""

    path: str
    mtime: float


class UnreadableVersion(ValueError):
    """One version of a table that the format's own reference cannot read; the message is one line
    naming the file at fault. While a later version reads, the run skips it (`run.tables`)."""


class Table(Protocol):
    def versions(self) -> list[TableVersion]:
        """The versions the table's log lists, oldest first, commit times rising."""

    def state(self, version: TableVersion) -> TableState:
        """The table as of `version`, one of `versions()`. Raises (best: `UnreadableVersion`) when
        that one version cannot be read."""

    def commits(self) -> list[Commit]:
        """The commits the table's log still lists, oldest first, with what the format records of each."""


def table_url(uri: str, fs: FsSpec | None) -> str:
    """Where delta-rs and pyiceberg find `uri` (a local path, or a path of the remote file system `fs`):
    the path itself, `s3://bucket/key`, `abfs://container/key`, `gs://bucket/key` or
    `webhdfs://namenode:port/path`."""
    if fs is None:
        return uri
    scheme = _SCHEMES.get(fs[0])
    if scheme is None:
        raise ValueError(f"unknown file system {fs[0]!r}")
    return f"webhdfs://{fs[1]}{uri}" if scheme == "webhdfs" else f"{scheme}://{uri}"


#: the URL scheme of each remote file system (`FsSpec`'s first part) for the table formats' readers
_SCHEMES = {"s3": "s3", "abfs": "abfs", "gcs": "gs", "webhdfs": "webhdfs"}


@runtime_checkable
class TableFormat(Protocol):
    """A table format, registered in `lumos_dagster.table_formats.TABLES` (or named by a `lumos.tables`
    entry point) under its `type`, which becomes its datasets' format."""

    type: str  # the datasets' format, e.g. "delta"
    platform: str  # the catalog platform of its tables, e.g. "delta-lake" (DataHub's name)
    hidden: tuple[str, ...]  # `_x`/`.x` folder names a listing must walk into, e.g. ("_delta_log",)

    def root_of(self, path: str) -> str | None:
        """The table folder that the listed `path` (relative to the source root) proves, or None."""

    def open(self, uri: str, fs: FsSpec | None, listed: Sequence[ListedFile]) -> Table:
        """The table at `uri` (a local path, or `bucket/key` on the remote file system `fs`);
        `listed` is what the listing found under its folder. Raises with a one-line reason."""
