"""Dataset assets: one asset per dataset, deps = lineage, partitions = snapshot times.

All datasets of one cadence live in a single subsettable `multi_asset`, so a code
location with thousands of datasets stays quick to load and a backfill of many
datasets × partitions runs as one op with one Spark session (single-run policy).
"""

# no `from __future__ import annotations`: Dagster reads the op's parameter annotations
from collections import defaultdict
from datetime import datetime
from typing import Any, Mapping

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    AssetSpec,
    BackfillPolicy,
    DailyPartitionsDefinition,
    DataVersion,
    HourlyPartitionsDefinition,
    MaterializeResult,
    MetadataValue,
    MonthlyPartitionsDefinition,
    TableColumn,
    TableColumnConstraints,
    TableSchema,
    TimeWindowPartitionsDefinition,
    WeeklyPartitionsDefinition,
    multi_asset,
)

from assets.keys import asset_keys, dagster_owners, dagster_tags, group_name
from lumos_dagster.config import PartitionsConfig
from lumos_dagster.datasets import Catalogue, DatasetSpec
from lumos_dagster.model import Snapshot, type_str
from lumos_dagster.sources import Source
from resources.io_manager import URN_METADATA_KEY
from resources.spark import LumosSparkResource
from resources.store import SnapshotStoreResource
from spark.snapshot_job import take_snapshots

IO_MANAGER_KEY = "lumos_io_manager"
READABLE_CHECK = "files_readable"
MAX_LISTED_ERRORS = 20

_PARTITIONS = {
    "hourly": HourlyPartitionsDefinition,
    "daily": DailyPartitionsDefinition,
    "weekly": WeeklyPartitionsDefinition,
    "monthly": MonthlyPartitionsDefinition,
}


def partitions_def(config: PartitionsConfig, cadence: str) -> TimeWindowPartitionsDefinition:
    # end_offset=1: today's (this hour's…) partition exists, it is the snapshot of now
    start = datetime.combine(config.start, datetime.min.time())
    return _PARTITIONS[cadence](start_date=start, timezone=config.timezone, end_offset=1)


def _asset_spec(d: DatasetSpec, keys: Mapping[str, AssetKey]) -> AssetSpec:
    description = d.enrichment.description or f"{d.format or 'dataset'} at {d.uri}"
    return AssetSpec(
        key=keys[d.name],
        deps=[keys[u] for u in d.upstream + d.missing_upstream],
        description=description,
        group_name=group_name(d.domain),
        kinds={k for k in (d.format, d.platform) if k},
        owners=dagster_owners(d.enrichment.owners),
        tags=dagster_tags(d.enrichment.tags),
        metadata={
            # what AssetSpec.with_io_manager_key sets, without building every spec twice
            "dagster/io_manager_key": IO_MANAGER_KEY,
            URN_METADATA_KEY: d.ref.urn,
            "lumos/name": d.name,
            "lumos/source": d.source or "(declared only)",
            "lumos/location": MetadataValue.path(d.uri),
        },
        skippable=False,
    )


def column_schema(snapshot: Snapshot) -> TableSchema:
    """Nested fields flattened to `a.b.c` rows: Dagster's column schema is a flat table."""
    return TableSchema(
        columns=[
            TableColumn(
                name=path,
                type=type_str(f.type),
                description=f.description,
                constraints=TableColumnConstraints(nullable=f.nullable),
            )
            for path, f in snapshot.schema.flatten()
        ]
    )


def _md_table(header: str, rows: list[tuple[str, str]]) -> MetadataValue:
    lines = [header, "|---|---|"] + [f"| `{a}` | {b.replace('|', '/')} |" for a, b in rows[:MAX_LISTED_ERRORS]]
    if len(rows) > MAX_LISTED_ERRORS:
        lines.append(f"| … | {len(rows) - MAX_LISTED_ERRORS} more |")
    return MetadataValue.md("\n".join(lines))


def snapshot_metadata(snapshots: Mapping[str | None, Snapshot], time_key: str | None = None) -> dict[str, Any]:
    """Metadata of one materialization. Over a partition range Dagster records the same
    metadata on every partition, so it describes the newest partition, and per-partition
    figures that would mislead there (row counts) are left to the store."""
    newest = snapshots[max(snapshots, key=lambda k: k or "")]
    md: dict[str, Any] = {
        "dagster/column_schema": MetadataValue.table_schema(column_schema(newest)),
        "lumos/version": MetadataValue.text(newest.version or "none"),
        "lumos/fingerprint": MetadataValue.text(newest.fingerprint),
        "lumos/files": MetadataValue.int(newest.stats.file_count),
        "lumos/bytes": MetadataValue.int(newest.stats.total_bytes),
        "lumos/fields": MetadataValue.int(len(newest.schema.flatten())),
    }
    if len(snapshots) == 1 and newest.stats.row_count is not None:
        # a date-partitioned dataset's partition holds that day's rows, not the table's
        key = (
            "dagster/partition_row_count" if newest.stats.partition_values.get(time_key or "") else "dagster/row_count"
        )
        md[key] = MetadataValue.int(newest.stats.row_count)
    if len(snapshots) > 1:
        md["lumos/partitions_in_run"] = MetadataValue.int(len(snapshots))
    if newest.stats.last_modified:
        md["lumos/last_modified"] = MetadataValue.timestamp(newest.stats.last_modified)
    errors = [(e.path, e.reason) for s in snapshots.values() for e in s.errors]
    if errors:
        md["lumos/errors"] = _md_table("| file | reason |", errors)
    if newest.conflicts:
        md["lumos/conflicts"] = _md_table(
            "| field | files disagree |",
            [
                (c.path, f"{c.resolution}: " + "; ".join(f"{v.type} in {v.file_count}" for v in c.variants))
                for c in newest.conflicts
            ],
        )
    return md


def readable_check(key: AssetKey, snapshots: Mapping[str | None, Snapshot]) -> AssetCheckResult:
    errors = [(e.path, e.reason) for s in snapshots.values() for e in s.errors]
    unreadable = any(not s.readable for s in snapshots.values() if s.errors)
    return AssetCheckResult(
        check_name=READABLE_CHECK,
        asset_key=key,
        passed=not errors,
        severity=AssetCheckSeverity.ERROR if unreadable else AssetCheckSeverity.WARN,
        description=(
            "every file was read"
            if not errors
            else f"{len(errors)} file(s) could not be read" + ("; no schema could be taken" if unreadable else "")
        ),
        metadata={"lumos/errors": _md_table("| file | reason |", errors)} if errors else {},
    )


def _multi_asset(
    cadence: str,
    datasets: list[DatasetSpec],
    keys: Mapping[str, AssetKey],
    sources: Mapping[str, Source],
    partitions: TimeWindowPartitionsDefinition,
) -> AssetsDefinition:
    @multi_asset(
        name=f"lumos_{cadence}_datasets",
        specs=[_asset_spec(d, keys) for d in datasets],
        check_specs=[
            AssetCheckSpec(READABLE_CHECK, asset=keys[d.name], description="Every file of the dataset can be read")
            for d in datasets
        ],
        can_subset=True,
        partitions_def=partitions,
        backfill_policy=BackfillPolicy.single_run(),
        description=f"Snapshots of the {cadence} datasets: schema, version, lineage and stats, taken with Spark.",
    )
    def _snapshots(context: AssetExecutionContext, spark: LumosSparkResource, lumos_store: SnapshotStoreResource):
        selected = [d for d in datasets if keys[d.name] in context.selected_asset_keys]
        windows = [
            (pk, w.start, w.end)
            for pk in context.partition_keys
            for w in (partitions.time_window_for_partition_key(pk),)
        ]
        context.log.info(f"snapshotting {len(selected)} datasets × {len(windows)} partitions")
        store = lumos_store.open()
        try:
            run = take_snapshots(spark.spark_session, sources, selected, windows, store.previous, context.log.info)
        finally:
            store.close()
        context.log.info("scan report:\n" + run.report.render())
        for d in selected:  # lineage order: Dagster wants upstreams yielded first
            snaps = run.snapshots[d.name]
            newest = snaps[max(snaps, key=lambda k: k or "")]
            yield MaterializeResult(
                asset_key=keys[d.name],
                value=snaps,
                metadata=snapshot_metadata(snaps, d.time_partition_key),
                check_results=[readable_check(keys[d.name], snaps)],
                data_version=DataVersion(newest.fingerprint),
            )

    return _snapshots


def build_dataset_assets(
    catalogue: Catalogue, sources: Mapping[str, Source], partitions_config: PartitionsConfig
) -> tuple[dict[str, AssetsDefinition], list[AssetSpec]]:
    """(cadence → the multi_asset of its datasets, external specs for missing upstreams)."""
    names = [d.name for d in catalogue.datasets] + list(catalogue.missing_upstreams)
    keys = asset_keys(names)
    by_cadence: dict[str, list[DatasetSpec]] = defaultdict(list)
    for d in catalogue.datasets:
        by_cadence[d.cadence].append(d)
    assets = {
        c: _multi_asset(c, ds, keys, sources, partitions_def(partitions_config, c))
        for c, ds in sorted(by_cadence.items())
    }
    externals = [
        AssetSpec(
            key=keys[name],
            description=f"Named as upstream of {', '.join(users)} in lumos.yaml, but no source has it.",
            group_name="missing",
        )
        for name, users in catalogue.missing_upstreams.items()
    ]
    return assets, externals
