"""Assembling each dataset partition's snapshot from what was observed (the `assemble` step)."""

from __future__ import annotations

import fnmatch
from dataclasses import replace
from datetime import datetime
from typing import Sequence

from lumos_dagster.floor.dataset_specs import DatasetSpec, Enrichment
from lumos_dagster.floor.datatypes import Field, Schema, map_struct_fields
from lumos_dagster.floor.model import DEFAULT_POLICY, DatasetRef, Snapshot, Snapshots, TableTotals
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.run.contents import Contents, Observed


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

            def inside(inner: tuple[Field, ...], p: str = path) -> tuple[Field, ...]:
                return walk(inner, p + ".")

            out.append(
                replace(
                    f,
                    type=map_struct_fields(f.type, inside),
                    description=f.description or enrichment.column_descriptions.get(path),
                    terms=tuple(dict.fromkeys(f.terms + terms)),
                    is_key=f.is_key or path in enrichment.keys,
                )
            )
        return tuple(out)

    return replace(schema, fields=walk(schema.fields, ""))


def build_snapshot(
    ref: DatasetRef,
    partition_key: str | None,
    captured_at: datetime,
    contents: Contents,
    enrichment: Enrichment,
    policy: str = DEFAULT_POLICY,
    totals: TableTotals | None = None,
) -> Snapshot:
    """The snapshot as observed, not yet versioned: its version is decided when the store keeps it
    (`run.record`), against what the store holds then."""
    schema = documented(contents.schema, enrichment)
    return Snapshot(
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
        policy=policy,
        totals=totals,
    )


def _totals(spec: DatasetSpec, observed: Observed) -> TableTotals | None:
    """The whole table's files and bytes as the run listed them, when a partition is one day of it (files
    in dated folders); a table format's version and a database table are the whole table already."""
    if spec.time_partition_key is None or spec.name not in observed.counts:
        return None
    return TableTotals(observed.counts[spec.name], observed.sizes[spec.name], spec.first_partition)


def assemble(datasets: Sequence[DatasetSpec], keys: Sequence[str | None], observed: Observed,
             captured_at: datetime, report: ScanReport) -> Snapshots:  # fmt: skip
    """Each partition's snapshot (dataset → partition key → snapshot); unreadable files go to `report`."""
    out: Snapshots = {}
    for spec in datasets:
        totals = _totals(spec, observed)
        out[spec.name] = per_partition = {
            pk: build_snapshot(spec.ref, pk, captured_at, observed.contents[spec.name, pk], spec.enrichment,
                               spec.policy, totals)
            for pk in keys
        }  # fmt: skip
        for s in per_partition.values():
            for e in s.errors:
                report.fail(e.path, e.reason)
        if any(not s.readable and s.errors for s in per_partition.values()):
            report.datasets_failed += 1
    report.datasets_found += len(datasets)
    return out
