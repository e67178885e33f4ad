"""What a run observed of each dataset partition (`Contents`): from its files in the partition's
window, read (`file_contents`), or from a table's description; `Observed` is all of it for a batch."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Mapping, Sequence

from lumos_dagster.floor.datatypes import Schema, beyond_limits
from lumos_dagster.floor.limits import MAX_COUNT
from lumos_dagster.floor.model import FileError, OperationalStats, SchemaConflict, TableVersion
from lumos_dagster.floor.time_partitions import granularity
from lumos_dagster.formats import FileResult
from lumos_dagster.formats.merge import merge_schemas
from lumos_dagster.sources.discovery import DatasetFile, DiscoveredDataset

#: (dataset, partition key): one snapshot of a run
Cell = tuple[str, "str | None"]


def files_in_window(
    ds: DiscoveredDataset, start: datetime | None, end: datetime | None, now: datetime | None = None
) -> list[DatasetFile]:
    """The files of a time window [start, end): those whose partition date falls in it.

    A dataset without a time partition has no history in storage but its files' times: a window
    holds the files that existed by its end (modified before it), as a table's window holds the
    version committed before its end. A file created today is in no earlier window, and a file
    replaced since a window ended is not in that window any more (what it held then is gone). A
    window not ended by `now` holds every file listed: a file exists now whatever its time says (a
    writer's clock ahead, a copy that kept its times).
    """
    if start is None or end is None:
        return list(ds.files)
    if ds.time_partition_key is None:
        if now is not None and now < end:
            return list(ds.files)
        cutoff = end.timestamp()
        return [f for f in ds.files if f.entry.mtime < cutoff]
    if granularity(ds.time_format) == "hourly":  # partition values are wall-clock time in the window's zone
        lo, hi = start.replace(tzinfo=None), end.replace(tzinfo=None)
        return [f for f in ds.files if (t := ds.file_time(f)) is not None and lo <= t < hi]
    first, last = start.date(), (end - timedelta(microseconds=1)).date()
    return [f for f in ds.files if (d := ds.file_date(f)) is not None and first <= d <= last]


def still_written(listed: int, read: int) -> str:
    """Why a file whose size changed between its listing and its reading is not a schema yet."""
    return f"still being written: {listed:,} bytes when listed, {read:,} when read (taken once it stops changing)"


@dataclass(frozen=True)
class Contents:
    """What was observed of a dataset partition: by reading its files, or by asking its database."""

    schema: Schema = field(default_factory=Schema)
    stats: OperationalStats = field(default_factory=OperationalStats)
    errors: tuple[FileError, ...] = ()
    conflicts: tuple[SchemaConflict, ...] = ()
    description: str | None = None  # the source's own documentation (a table comment)
    table: TableVersion | None = None  # the table-format commit observed (Iceberg, Delta)


def file_contents(
    files: Sequence[tuple[str, DatasetFile]], results: Mapping[str, FileResult], extra_errors: Sequence[FileError] = ()
) -> Contents:
    """`files` are (path, file) pairs in a stable order; `results` is keyed by path."""
    errors = list(extra_errors)
    readable = []
    for path, f in files:
        r = results[path]
        if r.error is not None or r.schema is None:
            errors.append(FileError(path, r.error or "no schema"))
        elif r.size is not None and r.size != f.entry.size:  # listed, then read: two looks that disagree
            errors.append(FileError(path, still_written(f.entry.size, r.size)))
        else:
            readable.append((r.path, r.schema, r.row_count))
            if r.warning:  # its schema counts; the snapshot says the file is damaged
                errors.append(FileError(path, r.warning))
    schema, conflicts = merge_schemas([(p, s) for p, s, _ in readable])
    counts = [n for _, _, n in readable if n is not None]
    partition_values: dict[str, set[str]] = {}
    for _, f in files:
        for key, value in f.partition:
            partition_values.setdefault(key, set()).add(value)
    mtimes = [f.entry.mtime for _, f in files]
    return Contents(
        schema=schema,
        stats=OperationalStats(
            file_count=len(files),
            total_bytes=sum(f.entry.size for _, f in files),
            # a partial count would mislead: known only when every file gave one
            row_count=sum(counts) if counts and not errors and len(counts) == len(readable) else None,
            last_modified=datetime.fromtimestamp(max(mtimes), timezone.utc) if mtimes else None,
            partition_values={k: sorted(v) for k, v in partition_values.items()},
        ),
        errors=tuple(errors),
        conflicts=conflicts,
    )


def _kept(count: int | None) -> bool:
    return count is None or 0 <= count <= MAX_COUNT


def within_limits(c: Contents, where: str) -> Contents:
    """`c` as Lumos keeps it (`lumos_dagster.floor.limits`), `where` naming the dataset: a schema beyond the
    limits is the partition's error, and a count past 64 bits (two Parquet footers' 2^62 rows summed, a
    table log's word) is not kept, said so: a row count becomes unknown, a size the largest kept."""
    beyond = beyond_limits(c.schema)
    if beyond is not None:
        return Contents(stats=replace(c.stats, row_count=None), errors=(*c.errors, FileError(where, beyond)))
    rows, size = c.stats.row_count, c.stats.total_bytes
    if _kept(rows) and _kept(size):
        return c
    past = f"a row count of {rows:,}" if not _kept(rows) else f"a size of {size:,} bytes"
    stats = replace(c.stats, row_count=rows if _kept(rows) else None, total_bytes=min(max(size, 0), MAX_COUNT))
    error = FileError(where, f"{past}, which no 64-bit count holds: not kept")
    return replace(c, stats=stats, errors=(*c.errors, error))


@dataclass(frozen=True)
class Observed:
    """What each partition holds: its contents, and (file datasets) the files that could be read."""

    contents: Mapping[Cell, Contents]
    readable: Mapping[Cell, Sequence[tuple[str, int]]]  # (path, bytes as listed)
    sizes: Mapping[str, int]  # bytes of each whole dataset, all partitions
    counts: Mapping[str, int] = field(default_factory=dict)  # files of each whole file dataset, as listed now
