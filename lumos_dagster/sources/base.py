"""What sources have in common.

File sources (local folders, S3 prefixes) list files, which the discovery rules group
into datasets; their schemas are read from the files, on Spark. Table sources
(PostgreSQL, MongoDB) describe their tables themselves.
"""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable, Generic, Iterator, Protocol, Sequence, TypeVar

from lumos_dagster.code_lineage import StoredSql
from lumos_dagster.floor.datatypes import Schema
from lumos_dagster.floor.errors import NotProfiled
from lumos_dagster.floor.model import OperationalStats, Profile, TableVersion
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.formats import FsSpec
from lumos_dagster.sources.discovery import DiscoveredDataset, FileEntry, group_files

Progress = Callable[[int], None]
PROGRESS_EVERY = 1000


class TableSourceSettings(Protocol):
    """What a source reads of its lumos.yaml entry itself (a plug-in's entry may be any model that has these)."""

    @property
    def name(self) -> str: ...
    @property
    def platform(self) -> str: ...


class FileSourceSettings(TableSourceSettings, Protocol):
    """A file source's entry: also how its files group into datasets (`builtins.FileSourceConfig`)."""

    @property
    def template(self) -> str | None: ...
    @property
    def formats(self) -> Sequence[str] | None: ...
    @property
    def exclude(self) -> Sequence[str]: ...


# a source's own entry type; a source that names none (`class S3Source(FileSource)`) takes it as Any
FileSettings = TypeVar("FileSettings", bound=FileSourceSettings)
TableSettings = TypeVar("TableSettings", bound=TableSourceSettings)


class FileSource(ABC, Generic[FileSettings]):
    kind = "files"

    def __init__(self, config: FileSettings):
        self.config = config
        self.name = config.name
        self.platform = config.platform

    #: where `list` paths are relative to, for people (a folder, s3://bucket/prefix)
    root: str
    #: how Spark executors reach the files (None: the local file system)
    fs_spec: FsSpec | None = None
    #: whether a listed file is whole: an object store's objects appear once written (S3, Azure, GCS); a
    #: file system's files grow where they are listed (local, HDFS), so a change is looked at twice
    whole_when_listed = False

    @abstractmethod
    def list(self, subpath: str, report: ScanReport) -> Iterator[FileEntry]:
        """Every file under `subpath`, paths relative to the source's root."""

    @abstractmethod
    def reachable(self, report: ScanReport) -> bool:
        """Whether the root can be listed at all (a failure goes to the report)."""

    @abstractmethod
    def uri(self, relpath: str) -> str:
        """The path readers open (local path, or `bucket/key` on the remote file system)."""

    def head(self, relpath: str) -> bytes | None:
        """The file's first HEAD_BYTES bytes, for formats known by content; None: judge by name."""
        return None

    def fingerprints_of(self, paths: Sequence[str], report: ScanReport, relist_at: int) -> dict[str, str]:
        """path → fingerprint now, of those of `paths` still there: one look at each, or (above `relist_at`
        paths) one listing of the whole source."""
        if len(paths) > relist_at:
            wanted = set(paths)
            return {e.path: e.fingerprint for e in self.list("", report) if e.path in wanted}
        return {e.path: e.fingerprint for path in paths for e in self.list(path, report) if e.path == path}

    def _group(self, entries: builtins.list[FileEntry]):  # `list` here is the method above
        formats = frozenset(self.config.formats) if self.config.formats else None
        return group_files(entries, self.config.template, formats, tuple(self.config.exclude), self.head)

    def discover(self, report: ScanReport, progress: Progress | None = None) -> dict[str, DiscoveredDataset] | None:
        """The datasets under the root; None when the root cannot be listed (not "no datasets")."""
        if not self.reachable(report):
            return None
        entries = []
        for entry in self.list("", report):
            entries.append(entry)
            if progress and len(entries) % PROGRESS_EVERY == 0:
                progress(len(entries))
        report.files_listed += len(entries)
        grouping = self._group(entries)
        for path, reason in grouping.skipped:
            report.skip(path, reason)
        for path, note in grouping.notes:
            report.note(path, note)
        report.datasets_found += len(grouping.datasets)
        return grouping.datasets

    def dataset(self, location: str, fmt: str | None, report: ScanReport) -> DiscoveredDataset | None:
        """The dataset's current files: its location re-listed and re-grouped by the same rules.

        Found by location and format, not name: an auto-detected name can depend on
        sibling files (`raw/mixed.csv` exists because a JSON file sits next to it).
        """
        entries = list(self.list(location, report))
        report.files_listed += len(entries)
        found = self._group(entries).datasets.values()
        return next((d for d in found if d.location == location and d.format == fmt), None)


@dataclass
class TableDescription:
    """What a table source says about one of its tables (or views, collections)."""

    schema: Schema
    stats: OperationalStats = field(default_factory=OperationalStats)
    description: str | None = None
    upstream: tuple[str, ...] = ()  # dataset names this one is computed from (views)
    table: TableVersion | None = None  # the table-format commit described (Iceberg, Delta)
    unread: str | None = None  # a file of it that cannot be read, naming it (`tables.TableState.unread`)


class TableSource(ABC, Generic[TableSettings]):
    kind = "tables"

    #: where the tables are, for people (a DSN or URI without its password, a broker)
    root: str

    def __init__(self, config: TableSettings):
        self.config = config
        self.name = config.name
        self.platform = config.platform

    @abstractmethod
    def discover(self, report: ScanReport, progress: Progress | None = None) -> list | None:
        """Registry records of every table; None when the source cannot be reached."""

    @abstractmethod
    def describe(self, location: str) -> TableDescription | None:
        """The table's description now; None when it is gone."""

    def history(self, location: str) -> Sequence[TableDescription] | None:
        """The table's states, oldest first, each with its commit time in `table.committed_at`, for a
        source that keeps them (Iceberg snapshots); None: only `describe` (now) is known. [] when gone."""
        return None

    def stored_sql(self, report: ScanReport) -> StoredSql | None:
        """The SQL the source keeps for its views (column lineage); None where it keeps none."""
        return None

    def profile(self, location: str, sample: float, max_bytes: int | None) -> Profile:
        """The table's profile, measured by the platform itself: a `sample` fraction of its rows, sampled
        further down to about `max_bytes` (None: no cap). Raises `NotProfiled` where it cannot."""
        raise NotProfiled(f"{self.platform} tables are not profiled (profiled: PostgreSQL tables)")

    def fingerprints(self, report: ScanReport) -> dict[str, tuple[str, str]] | None:
        """Location → (dataset name, digest of what a snapshot would read), from one cheap listing: what
        the table change sensor compares between ticks (lumos_dagster.inventory.table_watch). None when the
        source cannot be read (the reason is in the report)."""
        raise NotImplementedError

    @property
    def watchable(self) -> bool:
        """Whether `fingerprints` is implemented: such a source gets a change sensor."""
        return type(self).fingerprints is not TableSource.fingerprints
