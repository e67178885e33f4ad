"""The list step for datasets that are table folders (Delta Lake: `lumos_dagster.table_formats`).

A table's versions are its history. Each partition sees the table as of the end of its window:
the last version committed before the window ends, read from the table's log (its schema,
partition columns, live files and rows), never from its data files. A window before the first
version the log still holds sees nothing, like a day without files; a backfill over a range of
windows thus rebuilds the schema history in one run.

Where the schema is known, a table degrades rather than fails. A version the format's reference cannot
open (an old commit whose predecessor was cleaned up, one delta-rs' kernel refuses) is skipped with a
warning while the newest version reads: the windows that would see it see the version before it, as if
the log did not list it (none: no table yet). When the newest cannot be read either, the windows that
see an unreadable version fail. A version that opens but one of whose files cannot be read (an Iceberg
manifest, a Delta deletion vector: `TableState.unread`) keeps the schema its metadata gives, and its
files_readable fails naming the file.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Callable, Sequence

from lumos_dagster.floor.model import Commit, FileError, TableVersion
from lumos_dagster.floor.windows import Window
from lumos_dagster.run.contents import Contents
from lumos_dagster.sources.base import FileSource
from lumos_dagster.sources.discovery import DiscoveredDataset
from lumos_dagster.table_formats import ListedFile, Table, TableFormat, UnreadableVersion


def version_at(versions: Sequence[TableVersion], end: datetime | None) -> TableVersion | None:
    """The version a window ending at `end` sees (None: no version yet); the newest without a window."""
    if end is None:
        return versions[-1] if versions else None
    return next((v for v in reversed(versions) if v.committed_at is not None and v.committed_at < end), None)


def table_contents(
    fmt: TableFormat,
    source: FileSource,
    found: DiscoveredDataset,
    windows: Sequence[Window],
    warn: Callable[[str], None] = lambda _: None,
) -> tuple[int, list[Contents]]:
    """The table's bytes now, and its contents for each of `windows`, with the commits made in it; each
    version skipped is said once through `warn`."""
    ends = [w.end for w in windows]
    uri = source.uri(found.location)
    prefix = len(found.location) + 1
    listed = [ListedFile(f.entry.path[prefix:], f.entry.mtime) for f in found.files]
    try:
        table = fmt.open(uri, source.fs_spec, listed)
        versions = table.versions()
    except Exception as exc:  # a table that cannot be read fails this dataset only
        failed = Contents(errors=(FileError(uri, f"cannot read the {fmt.type} table: {_reason(exc)}"),))
        return 0, [failed] * len(ends)
    read: dict[TableVersion, Contents] = {}  # each version read once, however many windows see it

    def contents(version: TableVersion) -> Contents:
        if version not in read:
            read[version] = _contents(fmt, table, uri, version)
        return read[version]

    seen = [version_at(versions, end) for end in ends]
    if versions and not _unopened(contents(versions[-1])):
        seen = [_readable_at(versions, v, contents) if v else None for v in seen]
        for v in sorted({v for v in read if _unopened(read[v])}, key=versions.index):
            warn(f"{uri}: skipped version {v.version} of the {fmt.type} table, which cannot be read "
                 f"({read[v].errors[0].reason}); the newest version, {versions[-1].version}, reads")  # fmt: skip
    commits = _commits(table)
    out = [with_commits(contents(v), w, commits) if v else Contents() for v, w in zip(seen, windows, strict=True)]
    return (read[versions[-1]].stats.total_bytes if versions else 0), out


def _unopened(contents: Contents) -> bool:
    """A version the reader could not open at all (no schema), not one that opened with a file unread."""
    return bool(contents.errors) and not contents.schema.fields


def _readable_at(
    versions: Sequence[TableVersion], version: TableVersion, contents: Callable[[TableVersion], Contents]
) -> TableVersion | None:
    """`version`, or the newest one before it that opens (None: none does)."""
    for v in reversed(versions[: versions.index(version) + 1]):
        if not _unopened(contents(v)):
            return v
    return None


#: commits a window's snapshot carries at most (the newest): an operation each in the catalog
MAX_COMMITS = 100


def _commits(table: Table) -> list[Commit]:
    try:
        return table.commits()
    except Exception:  # noqa: BLE001  a history the reference cannot read costs the operations, not the schema
        return []


def with_commits(contents: Contents, window: Window, commits: Sequence[Commit]) -> Contents:
    """The window's commits with the version it sees (without a window: that version's own commit)."""
    seen = contents.table
    if seen is None or seen.committed_at is None:
        return contents
    if window.start is None:
        made = [c for c in commits if c.version == seen.version]
    else:
        made = [c for c in commits if window.start <= c.committed_at <= seen.committed_at]
    return replace(contents, table=replace(seen, commits=tuple(made[-MAX_COMMITS:])))


def _contents(fmt: TableFormat, table: Table, uri: str, version: TableVersion) -> Contents:
    try:
        s = table.state(version)
    except Exception as exc:
        reason = f"cannot read version {version.version} of the {fmt.type} table: {_reason(exc)}"
        return Contents(errors=(FileError(uri, reason),), table=version)  # which version it failed at
    errors = () if s.unread is None else (FileError(uri, f"version {s.table.version}: {s.unread}"),)
    return Contents(schema=s.schema, stats=s.stats, description=s.description, table=s.table, errors=errors)


def _reason(exc: Exception) -> str:
    """One line: a format's own `UnreadableVersion` says it all, any other error is named by its type."""
    text = str(exc).strip().splitlines()
    line = text[0] if text else ""
    return line if isinstance(exc, UnreadableVersion) else f"{type(exc).__name__}: {line}".rstrip(": ")
