"""The first two steps of a run: list each dataset's files and plan which ones each partition
needs (`list_files`), then read every distinct file's schema once (`read_files`).

Tables describe themselves instead: a table has no history in storage, so every partition of
the run sees it as it is now.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lumos_dagster.model import FileError
from lumos_dagster.scan.assemble import Contents, file_contents, files_in_window
from lumos_dagster.scan.catalogue import DatasetSpec
from lumos_dagster.sources import TableSource

if TYPE_CHECKING:
    from lumos_dagster.scan.pipeline import Run, Services

PROGRESS_STEPS = 10  # progress lines per listing


def not_found(spec: DatasetSpec) -> FileError:
    if spec.source is None:
        return FileError(spec.name, "declared in lumos.yaml but not found in any source (run `lumos discover`)")
    return FileError(spec.uri, "no longer found in storage (deleted or moved?)")


def _describe(source: TableSource, spec: DatasetSpec) -> Contents:
    try:
        desc = source.describe(spec.location)
    except Exception as exc:  # a database that fails this dataset fails this dataset only
        return Contents(errors=(FileError(spec.uri, f"cannot describe it: {type(exc).__name__}: {exc}"),))
    if desc is None:
        return Contents(errors=(not_found(spec),))
    return Contents(schema=desc.schema, stats=desc.stats, description=desc.description)


def list_files(run: Run, services: Services) -> None:
    every = max(1, len(run.datasets) // PROGRESS_STEPS)
    for i, spec in enumerate(run.datasets, 1):
        source = run.sources.get(spec.source) if spec.source else None
        if isinstance(source, TableSource):
            described = _describe(source, spec)
            run.contents.update({(spec.name, pk): described for pk, _, _ in run.partitions})
            run.sizes[spec.name] = described.stats.total_bytes
        else:
            found = source.dataset(spec.location, spec.format, run.report) if source else None
            run.listed[spec.name] = found
            run.sizes[spec.name] = sum(f.entry.size for f in found.files) if found else 0
            for pk, start, end in run.partitions:
                files = files_in_window(found, start, end) if found else []
                run.files[spec.name, pk] = [(source.uri(f.entry.path), f) for f in files]
        if i % every == 0 or i == len(run.datasets):
            services.progress(f"listed {i}/{len(run.datasets)} datasets ({run.report.files_listed} files)")


def read_files(run: Run, services: Services) -> None:
    specs = {d.name: d for d in run.datasets}
    sources = {name: run.sources[specs[name].source] for name in run.listed if run.listed[name] is not None}
    items = list(
        dict.fromkeys(
            (path, run.listed[name].format, sources[name].fs_spec)
            for (name, _), files in run.files.items()
            if name in sources
            for path, _ in files
        )
    )
    if items:
        services.progress(f"reading the schemas of {len(items)} files")
    results = services.read(items) if items else {}
    run.report.files_read = len(results)
    for (name, pk), files in run.files.items():
        missing = () if run.listed[name] is not None else (not_found(specs[name]),)
        run.contents[name, pk] = file_contents(files, results, missing)
        run.readable[name, pk] = [path for path, _ in files if results[path].error is None]
