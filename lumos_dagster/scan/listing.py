"""The first two steps of a run: list each dataset's files and plan which ones each partition
needs (`list_files`), then read every distinct file's schema once (`read_files`).

Tables describe themselves instead. A table whose source keeps its history (Iceberg snapshots),
or a table folder in storage (Delta Lake: `scan/tables`), is seen by each partition as of the
end of its window; any other as it is now.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Sequence

from lumos_dagster.formats import FileResult
from lumos_dagster.model import FileError
from lumos_dagster.scan.assemble import Contents, file_contents, files_in_window
from lumos_dagster.scan.catalogue import DatasetSpec
from lumos_dagster.scan.progress import Progress
from lumos_dagster.scan.tables import table_contents
from lumos_dagster.sources import TableDescription, TableSource
from lumos_dagster.tables import table_format

if TYPE_CHECKING:
    from lumos_dagster.scan.pipeline import Run, Services


def not_found(spec: DatasetSpec) -> FileError:
    if spec.source is None:
        return FileError(spec.name, "declared in lumos.yaml but not found in any source (run `lumos discover`)")
    return FileError(spec.uri, "no longer found in storage (deleted or moved?)")


def as_of(states: Sequence[TableDescription], end: datetime | None) -> TableDescription | None:
    """The state a window ending at `end` sees: the last committed before `end` (None: the table did
    not exist yet); the newest when the run has no windows."""
    if end is None:
        return states[-1] if states else None
    return next((s for s in reversed(states) if s.table.committed_at < end), None)


def _contents(desc: TableDescription) -> Contents:
    return Contents(schema=desc.schema, stats=desc.stats, description=desc.description, table=desc.table)


def _describe(source: TableSource, spec: DatasetSpec, ends: Sequence[datetime | None]) -> tuple[int, list[Contents]]:
    """The table's bytes now, and its contents for windows ending at each of `ends`."""
    try:
        states = source.history(spec.location)
        now = source.describe(spec.location) if states is None else (states[-1] if states else None)
    except Exception as exc:  # a database that fails this dataset fails this dataset only
        failed = Contents(errors=(FileError(spec.uri, f"cannot describe it: {type(exc).__name__}: {exc}"),))
        return 0, [failed] * len(ends)
    if now is None:
        return 0, [Contents(errors=(not_found(spec),))] * len(ends)
    if states is None:
        return now.stats.total_bytes, [_contents(now)] * len(ends)
    # a window before the table's first commit has nothing to read, like a day without files
    return now.stats.total_bytes, [_contents(seen) if (seen := as_of(states, end)) else Contents() for end in ends]


def list_files(run: Run, services: Services) -> None:
    # a local folder of 1,000 datasets lists in a fraction of a second: no line; an object store
    # paging through a large prefix says how far it got
    def say(count: int, total: int) -> str:
        return f"listed {count}/{total} datasets ({run.report.files_listed} files)"

    progress = Progress(services.progress, len(run.datasets), say=say)
    for spec in run.datasets:
        source = run.sources.get(spec.source) if spec.source else None
        if isinstance(source, TableSource):
            size, described = _describe(source, spec, [end for _, _, end in run.partitions])
            run.contents.update({(spec.name, pk): c for (pk, _, _), c in zip(run.partitions, described, strict=True)})
            run.sizes[spec.name] = size
        else:
            found = source.dataset(spec.location, spec.format, run.report) if source else None
            table = table_format(found.format) if found else None
            if table is not None:  # a table folder: its log says what each window sees, no file is read
                size, described = table_contents(table, source, found, [end for _, _, end in run.partitions])
                run.contents.update(
                    {(spec.name, pk): c for (pk, _, _), c in zip(run.partitions, described, strict=True)}
                )
                run.sizes[spec.name] = size
            else:
                run.listed[spec.name] = found
                run.sizes[spec.name] = sum(f.entry.size for f in found.files) if found else 0
                for pk, start, end in run.partitions:
                    files = files_in_window(found, start, end) if found else []
                    run.files[spec.name, pk] = [(source.uri(f.entry.path), f) for f in files]
        progress.step()


def files_to_read(run: Run) -> list[tuple]:
    """The distinct (path, format, file system) items the listed datasets' partitions need."""
    specs = {d.name: d for d in run.datasets}
    items = list(
        dict.fromkeys(
            (path, run.listed[name].format, run.sources[specs[name].source].fs_spec)
            for (name, _), files in run.files.items()
            if run.listed[name] is not None
            for path, _ in files
        )
    )
    return items


def take_results(run: Run, results: dict[str, FileResult]) -> None:
    """Each partition's contents from the files' read `results`."""
    specs = {d.name: d for d in run.datasets}
    run.report.files_read = len(results)
    for (name, pk), files in run.files.items():
        missing = () if run.listed[name] is not None else (not_found(specs[name]),)
        run.contents[name, pk] = file_contents(files, results, missing)
        run.readable[name, pk] = [path for path, _ in files if results[path].error is None]


def read_files(run: Run, services: Services) -> None:
    items = files_to_read(run)
    if items:
        services.progress(f"reading the schemas of {len(items)} files")
    take_results(run, services.read(items) if items else {})
