"""Taking snapshots of many datasets × partitions in one Spark job.

The driver lists each dataset's files (cheap metadata calls) and decides which files
each partition needs; every distinct file is read once, on the executors, however many
partitions or datasets share it; the driver then merges schemas per snapshot.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Mapping, Sequence

from lumos_dagster.model import FileError, Snapshot
from lumos_dagster.scan.assemble import Contents, build_snapshot, file_contents, files_in_window
from lumos_dagster.scan.catalogue import DatasetSpec
from lumos_dagster.scan.discovery import DiscoveredDataset
from lumos_dagster.scan.report import ScanReport
from lumos_dagster.sources import Source, TableSource
from spark.schemas import read_schemas

log = logging.getLogger(__name__)

#: (partition key, window start, window end); start/end None for an unpartitioned run
Partition = tuple["str | None", "datetime | None", "datetime | None"]
#: (urn, partition key, all versions?) → what to version against, oldest first, previous last
HistoryLookup = Callable[[str, "str | None", bool], "list[Snapshot]"]


@dataclass
class SnapshotRun:
    snapshots: dict[str, dict[str | None, Snapshot]] = field(default_factory=dict)  # name → pk → snapshot
    report: ScanReport = field(default_factory=ScanReport)
    sizes: dict[str, int] = field(default_factory=dict)  # name → bytes of the whole dataset, all partitions
    readable: dict[tuple[str, str | None], list[str]] = field(default_factory=dict)  # (name, pk) → files read


def _not_found(spec: DatasetSpec) -> FileError:
    if spec.source is None:
        return FileError(spec.name, "declared in lumos.yaml but not found in any source (run `lumos discover`)")
    return FileError(spec.uri, "no longer found in storage (deleted or moved?)")


def _table_contents(source: TableSource, spec: DatasetSpec) -> Contents:
    try:
        desc = source.describe(spec.location)
    except Exception as exc:  # a database that fails this dataset fails this dataset only
        return Contents(errors=(FileError(spec.uri, f"cannot describe it: {type(exc).__name__}: {exc}"),))
    if desc is None:
        return Contents(errors=(_not_found(spec),))
    return Contents(schema=desc.schema, stats=desc.stats, description=desc.description)


def take_snapshots(
    spark,
    sources: Mapping[str, Source],
    specs: Sequence[DatasetSpec],
    partitions: Sequence[Partition],
    history: HistoryLookup,
    progress: Callable[[str], None] = log.info,
) -> SnapshotRun:
    """Datasets of file sources are read on Spark; tables describe themselves (a table has
    no history in storage: every partition sees it as it is now)."""
    run = SnapshotRun()
    captured_at = datetime.now(timezone.utc)
    contents: dict[tuple[str, str | None], Contents] = {}
    listed: dict[str, DiscoveredDataset | None] = {}
    step = max(1, len(specs) // 10)
    for i, spec in enumerate(specs, 1):
        source = sources.get(spec.source) if spec.source else None
        if isinstance(source, TableSource):
            described = _table_contents(source, spec)
            contents.update({(spec.name, pk): described for pk, _, _ in partitions})
            run.sizes[spec.name] = described.stats.total_bytes
        else:
            listed[spec.name] = source.dataset(spec.location, spec.format, run.report) if source else None
            run.sizes[spec.name] = sum(f.entry.size for f in listed[spec.name].files) if listed[spec.name] else 0
        if i % step == 0 or i == len(specs):
            progress(f"listed {i}/{len(specs)} datasets ({run.report.files_listed} files)")

    spec_of = {spec.name: spec for spec in specs}
    plan: dict[tuple[str, str | None], list] = {}
    items: list[tuple] = []
    for name, ds in listed.items():
        spec = spec_of[name]
        for pk, start, end in partitions:
            files = []
            if ds is not None:
                source = sources[spec.source]
                files = [(source.uri(f.entry.path), f) for f in files_in_window(ds, start, end)]
                items.extend((path, ds.format, source.fs_spec) for path, _ in files)
            plan[name, pk] = files

    if items:
        progress(f"reading the schemas of {len(set(items))} files on Spark")
    results = read_schemas(spark, items)
    run.report.files_read = len(results)
    for (name, pk), files in plan.items():
        missing = () if listed[name] is not None else (_not_found(spec_of[name]),)
        contents[name, pk] = file_contents(files, results, missing)
        run.readable[name, pk] = [path for path, _ in files if results[path].error is None]

    for spec in specs:
        transitive = spec.policy.endswith("_TRANSITIVE")
        past: list[Snapshot] = []
        per_partition: dict[str | None, Snapshot] = {}
        for n, (pk, _, _) in enumerate(sorted(partitions, key=lambda p: p[0] or "")):
            if n == 0:
                past = history(spec.ref.urn, pk, transitive)
            snap = build_snapshot(
                spec.ref, pk, captured_at, contents[spec.name, pk], spec.enrichment, past, spec.policy
            )
            per_partition[pk] = snap
            # the next partition of this run is versioned against this one, if it could be read
            if snap.readable:
                past = [p for p in past if p.version != snap.version] + [snap]
            for e in snap.errors:
                run.report.fail(e.path, e.reason)
        run.snapshots[spec.name] = per_partition
        if any(not s.readable and s.errors for s in per_partition.values()):
            run.report.datasets_failed += 1
    run.report.datasets_found = len(specs)
    return run
