"""Assembling each dataset partition's snapshot from what was read (the `assemble` step), and versioning it."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Mapping, Sequence

from lumos_dagster.formats import FileResult
from lumos_dagster.model import (
    DatasetRef,
    Field,
    FileError,
    LineageEdge,
    OperationalStats,
    Owner,
    Schema,
    SchemaConflict,
    Snapshot,
    TableVersion,
    map_struct_fields,
)
from lumos_dagster.scan.discovery import DatasetFile, DiscoveredDataset
from lumos_dagster.scan.merge import merge_schemas
from lumos_dagster.scan.time_partitions import granularity
from lumos_dagster.schema.versioning import DEFAULT_POLICY, assess

if TYPE_CHECKING:
    from lumos_dagster.scan.pipeline import Run, Services


@dataclass(frozen=True)
class Enrichment:
    """What declarations, code and governance rules add to what the files say."""

    description: str | None = None
    domain: str | None = None
    owners: tuple[Owner, ...] = ()
    tags: tuple[str, ...] = ()
    upstream: tuple[LineageEdge, ...] = ()
    sla: str | None = None
    # used only when neither declarations, code nor the source document the dataset
    default_description: str | None = None
    column_descriptions: Mapping[str, str] = field(default_factory=dict)  # flat path → description
    glossary: tuple[tuple[str, str], ...] = ()  # (column-name glob, business term)
    keys: tuple[str, ...] = ()  # declared primary-key columns (flat paths)


def documented(schema: Schema, enrichment: Enrichment) -> Schema:
    """Columns the source leaves undocumented get code's descriptions; glossary terms attach by name;
    declared key columns become the primary key."""
    if not enrichment.column_descriptions and not enrichment.glossary and not enrichment.keys:
        return schema

    def walk(fields: tuple[Field, ...], prefix: str) -> tuple[Field, ...]:
        out = []
        for f in fields:
            path = prefix + f.name
            name = f.name.lower()
            terms = tuple(t for pattern, t in enrichment.glossary if fnmatch.fnmatchcase(name, pattern.lower()))
            out.append(
                replace(
                    f,
                    type=map_struct_fields(f.type, lambda inner, p=path: walk(inner, p + ".")),
                    description=f.description or enrichment.column_descriptions.get(path),
                    terms=tuple(dict.fromkeys(f.terms + terms)),
                    is_key=f.is_key or path in enrichment.keys,
                )
            )
        return tuple(out)

    return Schema(walk(schema.fields, ""))


def files_in_window(ds: DiscoveredDataset, start: datetime | None, end: datetime | None) -> list[DatasetFile]:
    """The files of a time window [start, end): those whose partition date falls in it.

    A dataset without a time partition has no history in storage: every window
    sees all its current files.
    """
    if ds.time_partition_key is None or start is None or end is None:
        return list(ds.files)
    if granularity(ds.time_format) == "hourly":  # partition values are wall-clock time in the window's zone
        lo, hi = start.replace(tzinfo=None), end.replace(tzinfo=None)
        return [f for f in ds.files if (t := ds.file_time(f)) is not None and lo <= t < hi]
    first, last = start.date(), (end - timedelta(microseconds=1)).date()
    return [f for f in ds.files if (d := ds.file_date(f)) is not None and first <= d <= last]


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
    for path, _ in files:
        r = results[path]
        if r.error is not None:
            errors.append(FileError(path, r.error))
        else:
            readable.append(r)
    schema, conflicts = merge_schemas([(r.path, r.schema) for r in readable])
    counts = [r.row_count for r in readable]
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
            row_count=sum(counts) if counts and not errors and None not in counts else None,
            last_modified=datetime.fromtimestamp(max(mtimes), timezone.utc) if mtimes else None,
            partition_values={k: sorted(v) for k, v in partition_values.items()},
        ),
        errors=tuple(errors),
        conflicts=conflicts,
    )


def build_snapshot(
    ref: DatasetRef,
    partition_key: str | None,
    captured_at: datetime,
    contents: Contents,
    enrichment: Enrichment,
    history: Sequence[Snapshot],
    policy: str = DEFAULT_POLICY,
) -> Snapshot:
    """The snapshot, versioned against `history`: the snapshots to compare with, oldest
    first, the previous one last (earlier versions only matter to transitive policies)."""
    schema = documented(contents.schema, enrichment)
    snapshot = Snapshot(
        dataset=ref,
        partition_key=partition_key,
        captured_at=captured_at,
        schema=schema,
        stats=contents.stats,
        description=enrichment.description or contents.description or enrichment.default_description,
        domain=enrichment.domain,
        owners=enrichment.owners,
        tags=enrichment.tags,
        upstream=enrichment.upstream,
        terms=tuple(sorted({t for _, f in schema.flatten() for t in f.terms})),
        sla=enrichment.sla,
        errors=contents.errors,
        conflicts=contents.conflicts,
        table=contents.table,
    )
    return assess(history[-1] if history else None, snapshot, policy, history[:-1])


def assemble(run: Run, services: Services) -> None:
    """Each partition's snapshot, versioned against the store's history and, within the run,
    against the run's previous partition (a backfill rebuilds a version history in one go)."""
    keys = run.partition_keys
    urns = [spec.ref.urn for spec in run.datasets]
    full = [spec.ref.urn for spec in run.datasets if spec.policy.endswith("_TRANSITIVE")]
    histories = services.history(urns, keys[0], full)
    for spec in run.datasets:
        past = histories.get(spec.ref.urn, [])
        per_partition: dict[str | None, Snapshot] = {}
        for pk in keys:
            contents = run.contents[spec.name, pk]
            snap = build_snapshot(spec.ref, pk, run.captured_at, contents, spec.enrichment, past, spec.policy)
            per_partition[pk] = snap
            if snap.readable:  # the run's next partition is versioned against this one
                past = [p for p in past if p.version != snap.version] + [snap]
            for e in snap.errors:
                run.report.fail(e.path, e.reason)
        run.snapshots[spec.name] = per_partition
        if any(not s.readable and s.errors for s in per_partition.values()):
            run.report.datasets_failed += 1
    run.report.datasets_found = len(run.datasets)
