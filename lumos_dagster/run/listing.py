"""The first two steps of a run: list each dataset's files and plan which ones each partition
needs (`list_datasets`), then turn the files' read results into each partition's contents
(`observe`); between the two, `files_to_read` names every distinct file once, for a reader.

Tables describe themselves instead. A table whose source keeps its history (Iceberg snapshots),
or a table folder in storage (Delta Lake: `run.tables`), is seen by each partition as of the
end of its window; any other as it is now.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Mapping, Sequence

from lumos_dagster.floor.dataset_specs import DatasetSpec
from lumos_dagster.floor.model import Commit, FileError
from lumos_dagster.floor.progress import Progress
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.floor.windows import Window
from lumos_dagster.formats import FileResult
from lumos_dagster.run.contents import Cell, Contents, Observed, file_contents, files_in_window, within_limits
from lumos_dagster.run.table_listing import table_contents, with_commits
from lumos_dagster.sources import FileSource, Source, TableDescription, TableSource
from lumos_dagster.sources.discovery import DatasetFile, DiscoveredDataset
from lumos_dagster.table_formats import table_format


@dataclass
class Listing:
    """What listing found: each partition's files to read, or (tables) its contents already."""

    files: dict[Cell, list[tuple[str, DatasetFile]]] = field(default_factory=dict)  # (uri, file)
    found: dict[str, DiscoveredDataset | None] = field(default_factory=dict)  # file datasets as listed
    described: dict[Cell, Contents] = field(default_factory=dict)  # tables: no file is read
    sizes: dict[str, int] = field(default_factory=dict)  # bytes of the whole dataset, all partitions
    counts: dict[str, int] = field(default_factory=dict)  # files of a file dataset, all partitions
    specs: dict[str, DatasetSpec] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # said once in the run (a table version skipped)


def not_found(spec: DatasetSpec) -> FileError:
    if spec.source is None:
        return FileError(spec.name, "declared in lumos.yaml but not found in any source (run `lumos discover`)")
    return FileError(spec.uri, "no longer found in storage (deleted or moved?)")


def as_of(states: Sequence[TableDescription], end: datetime | None) -> TableDescription | None:
    """The state a window ending at `end` sees: the last committed before `end` (None: the table did
    not exist yet); the newest when the run has no windows."""
    if end is None:
        return states[-1] if states else None
    return next((s for s in reversed(states) if s.table and s.table.committed_at and s.table.committed_at < end), None)


def _contents(desc: TableDescription, uri: str) -> Contents:
    """What a table source described; a file of it that could not be read (an Iceberg manifest gone) fails
    its files_readable, the schema stands."""
    version = desc.table.version if desc.table else ""
    errors = () if desc.unread is None else (FileError(uri, f"version {version}: {desc.unread}"),)
    return Contents(schema=desc.schema, stats=desc.stats, description=desc.description, table=desc.table,
                    errors=errors)  # fmt: skip


def _describe(source: TableSource, spec: DatasetSpec, windows: Sequence[Window]) -> tuple[int, list[Contents]]:
    """The table's bytes now, and its contents for each of `windows` (a table format's, with its commits in it)."""
    ends = [w.end for w in windows]
    try:
        states = source.history(spec.location)
        now = source.describe(spec.location) if states is None else (states[-1] if states else None)
        # a source may read a state only when a window sees it (Iceberg's manifests): that may fail too
        seen = [as_of(states, end) for end in ends] if states else []
    except Exception as exc:  # a database that fails this dataset fails this dataset only
        failed = Contents(errors=(FileError(spec.uri, f"cannot describe it: {type(exc).__name__}: {exc}"),))
        return 0, [failed] * len(ends)
    if now is None:
        return 0, [Contents(errors=(not_found(spec),))] * len(ends)
    if states is None:
        return now.stats.total_bytes, [_contents(now, spec.uri)] * len(ends)
    # a window before the table's first commit has nothing to read, like a day without files
    commits: list[Commit] = getattr(states, "commits", list)()  # a table format's history (Iceberg)
    described = [
        with_commits(_contents(state, spec.uri), w, commits) if state else Contents()
        for state, w in zip(seen, windows, strict=True)
    ]
    return now.stats.total_bytes, described


def list_datasets(datasets: Sequence[DatasetSpec], windows: Sequence[Window], sources: Mapping[str, Source],
                  report: ScanReport, say: Callable[[str], None], now: datetime | None = None) -> Listing:  # fmt: skip
    """Each dataset's files in each window; `now`: when they were listed (a window not ended by then holds
    every file, whatever their times say)."""

    # a local folder of 1,000 datasets lists in a fraction of a second: no line; an object store
    # paging through a large prefix says how far it got
    def line(count: int, total: int) -> str:
        return f"listed {count}/{total} datasets ({report.files_listed} files)"

    out = Listing(specs={d.name: d for d in datasets})
    progress = Progress(say, len(datasets), say=line)
    for spec in datasets:
        source = sources.get(spec.source) if spec.source else None
        if isinstance(source, TableSource):
            out.sizes[spec.name], described = _describe(source, spec, windows)
            out.described.update({(spec.name, w.key): c for w, c in zip(windows, described, strict=True)})
        else:
            found = source.dataset(spec.location, spec.format, report) if source else None
            table = table_format(found.format) if found else None
            if source is not None and found is not None and table is not None:
                # a table folder: its log says what each window sees, no file is read
                out.sizes[spec.name], described = table_contents(table, source, found, windows, out.warnings.append)
                out.described.update({(spec.name, w.key): c for w, c in zip(windows, described, strict=True)})
            else:
                out.found[spec.name] = found
                out.sizes[spec.name] = sum(f.entry.size for f in found.files) if found else 0
                out.counts[spec.name] = len(found.files) if found else 0
                for w in windows:
                    out.files[spec.name, w.key] = (
                        [(source.uri(f.entry.path), f) for f in files_in_window(found, w.start, w.end, now)]
                        if source is not None and found is not None
                        else []
                    )
        progress.step()
    return out


def files_to_read(listing: Listing, sources: Mapping[str, Source]) -> list[tuple]:
    """The distinct (path, format, file system) items the listed datasets' partitions need."""
    items: dict[tuple, None] = {}
    for (name, _), files in listing.files.items():
        found, source = listing.found[name], sources.get(listing.specs[name].source or "")
        if found is not None and isinstance(source, FileSource):
            items.update(dict.fromkeys((path, found.format, source.fs_spec) for path, _ in files))
    return list(items)


def observe(listing: Listing, results: Mapping[str, FileResult], report: ScanReport) -> Observed:
    """Each partition's contents, from the files' read `results` (keyed by path) and the tables'."""
    report.files_read += len(results)
    # what the files and tables say enters the snapshot here: within the limits the store keeps
    contents = {cell: within_limits(c, listing.specs[cell[0]].uri) for cell, c in listing.described.items()}
    readable: dict[Cell, list[tuple[str, int]]] = {}
    for (name, pk), files in listing.files.items():
        missing = () if listing.found[name] is not None else (not_found(listing.specs[name]),)
        found = contents[name, pk] = within_limits(file_contents(files, results, missing), listing.specs[name].uri)
        failed = {e.path for e in found.errors}  # unreadable, damaged, or still being written
        readable[name, pk] = [(p, f.entry.size) for p, f in files if p not in failed]
    return Observed(contents, readable, listing.sizes, listing.counts)
