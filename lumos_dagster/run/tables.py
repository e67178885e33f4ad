"""The list step for datasets that are table folders (Delta Lake: `lumos_dagster.tables`).

A table's versions are its history. Each partition sees the table as of the end of its window:
the last version committed before the window ends, read from the table's log (its schema,
partition columns, live files and rows), never from its data files. A window before the first
version the log still holds sees nothing, like a day without files; a backfill over a range of
windows thus rebuilds the schema history in one run.
"""

from __future__ import annotations

from datetime import datetime
from typing import Sequence

from lumos_dagster.model import FileError, TableVersion
from lumos_dagster.run.contents import Contents
from lumos_dagster.sources.base import FileSource
from lumos_dagster.sources.discovery import DiscoveredDataset
from lumos_dagster.tables import ListedFile, TableFormat


def version_at(versions: Sequence[TableVersion], end: datetime | None) -> TableVersion | None:
    """The version a window ending at `end` sees (None: no version yet); the newest without a window."""
    if end is None:
        return versions[-1] if versions else None
    return next((v for v in reversed(versions) if v.committed_at is not None and v.committed_at < end), None)


def table_contents(
    fmt: TableFormat, source: FileSource, found: DiscoveredDataset, ends: Sequence[datetime | None]
) -> tuple[int, list[Contents]]:
    """The table's bytes now, and its contents for windows ending at each of `ends`."""
    uri = source.uri(found.location)
    prefix = len(found.location) + 1
    listed = [ListedFile(f.entry.path[prefix:], f.entry.mtime) for f in found.files]
    try:
        table = fmt.open(uri, source.fs_spec, listed)
        versions = table.versions()
        seen = [version_at(versions, end) for end in ends]
        wanted = dict.fromkeys([v for v in seen if v is not None] + versions[-1:])
        states = {v: table.state(v) for v in wanted}  # each version read once, however many windows see it
    except Exception as exc:  # a table that cannot be read fails this dataset only
        text = str(exc).strip().splitlines()
        reason = f"cannot read the {fmt.type} table: {type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
        return 0, [Contents(errors=(FileError(uri, reason),))] * len(ends)
    out = []
    for v in seen:
        if v is None:
            out.append(Contents())
        else:
            s = states[v]
            out.append(Contents(schema=s.schema, stats=s.stats, description=s.description, table=s.table))
    return (states[versions[-1]].stats.total_bytes if versions else 0), out
