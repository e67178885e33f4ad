"""What a dataset materialization shows in Dagster: native metadata keys first."""

from typing import Any, Mapping, Sequence

from dagster import (
    AssetKey,
    MetadataValue,
    TableColumn,
    TableColumnConstraints,
    TableColumnDep,
    TableColumnLineage,
    TableSchema,
)

from lumos_dagster.floor.datatypes import type_str
from lumos_dagster.floor.model import SchemaChange, Snapshot
from lumos_dagster.floor.wording import visible
from lumos_dagster.governance.checks import CHANGE_HEADER, change_rows, error_rows

MAX_ROWS = 20


def column_schema(snapshot: Snapshot) -> TableSchema:
    """Nested fields flattened to `a.b.c` rows: Dagster's column schema is a flat table."""
    return TableSchema(
        columns=[
            TableColumn(
                name=visible(path),
                type=type_str(f.type),
                description=None if f.description is None else visible(f.description),
                constraints=TableColumnConstraints(nullable=f.nullable),
                tags={t: "" for t in f.terms} or None,  # glossary terms
            )
            for path, f in snapshot.schema.flatten()
        ]
    )


def column_lineage(snapshot: Snapshot, keys: Mapping[str, AssetKey]) -> TableColumnLineage | None:
    deps: dict[str, list[TableColumnDep]] = {}
    for e in snapshot.upstream:
        for c in e.columns:
            if e.upstream.name in keys:
                deps.setdefault(c.downstream, []).append(TableColumnDep(keys[e.upstream.name], c.upstream))
    return TableColumnLineage(deps_by_column=deps) if deps else None


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def governance_metadata(last: Snapshot, keys: Mapping[str, AssetKey]) -> dict[str, Any]:
    md: dict[str, Any] = {}
    lineage = column_lineage(last, keys)
    if lineage is not None:
        md["dagster/column_lineage"] = MetadataValue.column_lineage(lineage)
        # the open-source UI draws `dagster/column_lineage` nowhere (Dagster+ does): a table it shows
        md["lumos/column_lineage"] = md_table(
            ("column", "from"),
            [(f"`{c.downstream}`", f"`{e.upstream.name}`.`{c.upstream}`") for e in last.upstream for c in e.columns],
        )
    jobs = sorted({f"{e.job.orchestrator}: {e.job.name}" for e in last.upstream if e.job})
    if jobs:
        md["lumos/built_by"] = MetadataValue.text(", ".join(jobs))
    if last.sla:
        md["lumos/sla"] = MetadataValue.text(last.sla)
    if last.terms:
        md["lumos/glossary_terms"] = MetadataValue.text(", ".join(last.terms))
    q = last.quality
    if q is not None:
        if q.score is not None:  # a number: Dagster plots it over the materializations
            md["lumos/quality_score"] = MetadataValue.float(round(q.score, 3))
        md["lumos/freshness"] = MetadataValue.text(
            q.freshness + (f" ({q.age_hours:g} h old, SLA {last.sla})" if q.age_hours is not None and last.sla else "")
        )
        if q.assertions:
            md["lumos/assertions"] = md_table(
                ("status", "check", "dimension", "column", "from", "message"),
                [(a.status, a.name, a.dimension, a.column or "-", a.source, a.message or "") for a in q.assertions],
            )
    p = last.profile
    if p is not None:
        md["lumos/profiled_rows"] = MetadataValue.int(p.row_count)
        md["lumos/profile"] = md_table(
            ("column", "nulls", "distinct ≈", "min", "max"),
            [(c.path, _percent(c.null_fraction), str(c.distinct if c.distinct is not None else "-"), c.min or "-",
              c.max or "-") for c in p.columns],
        )  # fmt: skip
        if p.sample_fraction < 1:
            md["lumos/profile_sample"] = MetadataValue.float(p.sample_fraction)
        if p.partial is not None:  # `profile.max_bytes` stopped it: its rows are those of the files read
            md["lumos/profile_partial"] = MetadataValue.text(f"read {p.partial}")
    return md


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> MetadataValue:
    def cell(text: str) -> str:
        return visible(str(text)).replace("|", "/")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows[:MAX_ROWS]]
    if len(rows) > MAX_ROWS:
        lines.append(f"| … {len(rows) - MAX_ROWS} more |" + " |" * (len(header) - 1))
    return MetadataValue.md("\n".join(lines))


def changes_table(changes: Sequence[SchemaChange]) -> MetadataValue:
    return md_table(CHANGE_HEADER, change_rows(changes))


def newest(snapshots: Mapping[str | None, Snapshot]) -> Snapshot:
    return snapshots[max(snapshots, key=lambda k: k or "")]


def partition_metadata(snapshot: Snapshot, time_key: str | None) -> dict[str, Any]:
    """One partition's own figures, on its materialization, a backfill's as a single partition's: its
    rows, as `dagster/partition_row_count` when the dataset is date-partitioned (that day's rows), else
    `dagster/row_count` (the table's)."""
    if snapshot.stats.row_count is None:
        return {}
    dated = snapshot.stats.partition_values.get(time_key or "")
    return {
        "dagster/partition_row_count" if dated else "dagster/row_count": MetadataValue.int(snapshot.stats.row_count)
    }


def not_snapshotted(keys: Sequence[str], dated: bool) -> dict[str, Any]:
    """Why partitions of a run over several are not materialized: they held no file. A dataset not
    partitioned by date has no history in storage but its files' times: a partition holds the files
    modified before its end, so a backfill over days before they were written finds nothing there."""
    if not keys:
        return {}
    span = keys[0] if len(keys) == 1 else f"{keys[0]} … {keys[-1]} ({len(keys)} partitions)"
    undated = ("no file modified before its end: the dataset is not partitioned by date, and its files were all "
               "written since (a partition holds the files that existed by its end)")  # fmt: skip
    why = "no file dated in it" if dated else undated
    return {"lumos/not_snapshotted": MetadataValue.text(f"{span}: {why}")}


def snapshot_metadata(
    snapshots: Mapping[str | None, Snapshot],
    time_key: str | None = None,
    keys: Mapping[str, AssetKey] | None = None,
    root: str | None = None,
) -> dict[str, Any]:
    """What the materializations of one run of a dataset share: over a partition range it describes
    the newest partition; each partition's own figures are `partition_metadata`'s. `root`: the
    source's, which unreadable files are shown relative to."""
    last = newest(snapshots)
    md: dict[str, Any] = {
        "dagster/column_schema": MetadataValue.table_schema(column_schema(last)),
        "lumos/version": MetadataValue.text(last.version or "none"),
        "lumos/change_class": MetadataValue.text(last.change_class or "none"),
        "lumos/fingerprint": MetadataValue.text(last.fingerprint),
        "lumos/files": MetadataValue.int(last.stats.file_count),
        "lumos/bytes": MetadataValue.int(last.stats.total_bytes),
        "lumos/fields": MetadataValue.int(len(last.schema.flatten())),
        **governance_metadata(last, keys or {}),
    }
    if last.previous_version:
        md["lumos/previous_version"] = MetadataValue.text(last.previous_version)
    if last.changes:
        md["lumos/changes"] = changes_table(last.changes)
    if len(snapshots) > 1:
        md["lumos/partitions_in_run"] = MetadataValue.int(len(snapshots))
        in_order = [s for _, s in sorted(snapshots.items(), key=lambda i: i[0] or "")]
        versions = dict.fromkeys(s.version or "none" for s in in_order)
        md["lumos/versions_in_run"] = MetadataValue.text(" → ".join(versions))
    if last.stats.last_modified:
        md["lumos/last_modified"] = MetadataValue.timestamp(last.stats.last_modified)
    if last.cost is not None:  # numbers: Dagster plots them over the materializations
        md["lumos/cost_direct"] = MetadataValue.float(round(last.cost.direct, 2))
        md["lumos/cost_inherited"] = MetadataValue.float(round(last.cost.inherited, 2))
        md["lumos/cost_total"] = MetadataValue.float(round(last.cost.total, 2))
        md["lumos/cost_basis"] = MetadataValue.text(f"{last.cost.period}, {last.cost.currency}, "
                                                    f"{last.cost.basis} prices, {last.cost.method}")  # fmt: skip
    errors = error_rows(snapshots, root)
    if errors:
        md["lumos/errors"] = md_table(("file", "reason"), errors)
    if last.conflicts:
        md["lumos/conflicts"] = md_table(
            ("field", "files disagree"),
            [
                (f"`{c.path}`", f"{c.resolution}: " + "; ".join(f"{v.type} in {v.file_count}" for v in c.variants))
                for c in last.conflicts
            ],
        )
    return md
