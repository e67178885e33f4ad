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

from lumos_dagster.datasets import DatasetSpec
from lumos_dagster.discovery import DiscoveredDataset
from lumos_dagster.model import FileError, Snapshot
from lumos_dagster.report import ScanReport
from lumos_dagster.snapshots import build_snapshot, files_in_window
from lumos_dagster.sources import Source
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


def _not_found(spec: DatasetSpec) -> FileError:
    if spec.source is None:
        return FileError(spec.name, "declared in lumos.yaml but not found in any source (run `lumos discover`)")
    return FileError(spec.uri, "no longer found in storage (deleted or moved?)")


def take_snapshots(
    spark,
    sources: Mapping[str, Source],
    specs: Sequence[DatasetSpec],
    partitions: Sequence[Partition],
    history: HistoryLookup,
    progress: Callable[[str], None] = log.info,
) -> SnapshotRun:
    run = SnapshotRun()
    captured_at = datetime.now(timezone.utc)
    listed: dict[str, DiscoveredDataset | None] = {}
    step = max(1, len(specs) // 10)
    for i, spec in enumerate(specs, 1):
        source = sources.get(spec.source) if spec.source else None
        listed[spec.name] = source.dataset(spec.location, spec.format, run.report) if source else None
        if i % step == 0 or i == len(specs):
            progress(f"listed {i}/{len(specs)} datasets ({run.report.files_listed} files)")

    plan: dict[tuple[str, str | None], list] = {}
    items: list[tuple[str, str | None]] = []
    for spec in specs:
        ds = listed[spec.name]
        for pk, start, end in partitions:
            files = []
            if ds is not None:
                source = sources[spec.source]
                files = [(source.uri(f.entry.path), f) for f in files_in_window(ds, start, end)]
            plan[spec.name, pk] = files
            items.extend((path, ds.format) for path, _ in files)

    progress(f"reading the schemas of {len(set(items))} files on Spark")
    results = read_schemas(spark, items)
    run.report.files_read = len(results)

    for spec in specs:
        ds = listed[spec.name]
        transitive = spec.policy.endswith("_TRANSITIVE")
        past: list[Snapshot] = []
        per_partition: dict[str | None, Snapshot] = {}
        for n, (pk, _, _) in enumerate(sorted(partitions, key=lambda p: p[0] or "")):
            if n == 0:
                past = history(spec.ref.urn, pk, transitive)
            snap = build_snapshot(
                spec.ref,
                pk,
                captured_at,
                plan[spec.name, pk],
                results,
                spec.enrichment,
                past,
                spec.policy,
                extra_errors=() if ds is not None else (_not_found(spec),),
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
