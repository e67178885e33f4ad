"""Dataset assets: one asset per dataset, deps = lineage, partitions = snapshot times.

The datasets of one cadence live in subsettable `multi_asset`s, one per group of lineage-linked
datasets (a group is never split; unlinked groups are packed up to `CHUNK` datasets an op), so no
op depends on another. A run of many datasets × partitions is one Spark session (resources live
for the run) and one step per op, whose body is the snapshot run (`lumos_dagster.assets.snapshots`).

Why not one op for every dataset: in Dagster 1.13 each output an op yields costs a walk over all
of the op's outputs (so an op of N datasets costs N²); docs/performance.md has the figures.
"""

# no `from __future__ import annotations`: Dagster reads the op's parameter annotations
from datetime import date, datetime
from typing import Mapping

from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    AssetSpec,
    BackfillPolicy,
    DailyPartitionsDefinition,
    HourlyPartitionsDefinition,
    MetadataValue,
    MonthlyPartitionsDefinition,
    TimeWindowPartitionsDefinition,
    WeeklyPartitionsDefinition,
    multi_asset,
)

from lumos_dagster.assets.checks import check_specs
from lumos_dagster.assets.keys import dagster_owners, dagster_tags, group_name
from lumos_dagster.assets.snapshots import snapshot_events
from lumos_dagster.cost.pricing import Bills
from lumos_dagster.floor.config import LumosConfig, PartitionsConfig
from lumos_dagster.floor.dataset_specs import Catalogue, DatasetSpec, chunks
from lumos_dagster.floor.naming import URN_METADATA_KEY
from lumos_dagster.resources.spark import LumosSparkResource
from lumos_dagster.resources.store import CatalogsResource, SnapshotStoreResource
from lumos_dagster.sources import Source

IO_MANAGER_KEY = "lumos_io_manager"
#: unlinked datasets packed per op (a lineage group larger than this is one op of its own): few ops,
#: so a run pays few steps, delivery workers and first batches read without anything to overlap
CHUNK = 1000

_PARTITIONS = {
    "hourly": HourlyPartitionsDefinition,
    "daily": DailyPartitionsDefinition,
    "weekly": WeeklyPartitionsDefinition,
    "monthly": MonthlyPartitionsDefinition,
}


def partitions_def(config: PartitionsConfig, cadence: str, first: str | None = None) -> TimeWindowPartitionsDefinition:
    """`first`: the earliest time partition discovery saw (ISO date): where partitions start unless
    lumos.yaml sets `partitions.start`, so the UI does not count hundreds of days before the data."""
    day = config.start if "start" in config.model_fields_set or first is None else date.fromisoformat(first)
    # end_offset=1: today's (this hour's…) partition exists, it is the snapshot of now
    start = datetime.combine(day, datetime.min.time())
    return _PARTITIONS[cadence](start_date=start, timezone=config.timezone, end_offset=1)


def _asset_spec(d: DatasetSpec, keys: Mapping[str, AssetKey]) -> AssetSpec:
    return AssetSpec(
        key=keys[d.name],
        deps=[keys[u] for u in d.upstream + d.missing_upstream],
        # the text the catalogs get, and none where they get none: where it lives is `lumos/location`
        description=d.description,
        group_name=group_name(d.domain, keys[d.name]),
        kinds={k for k in (d.format, d.platform) if k},
        owners=dagster_owners(d.enrichment.owners),
        tags=dagster_tags(d.enrichment.tags),
        metadata={
            # what AssetSpec.with_io_manager_key sets, without building every spec twice: assets of
            # other runs read the snapshots back through it
            "dagster/io_manager_key": IO_MANAGER_KEY,
            URN_METADATA_KEY: d.ref.urn,
            "lumos/name": d.name,
            "lumos/source": d.source or "(declared only)",
            "lumos/location": MetadataValue.path(d.uri),
        },
        # held back when an upstream fails a blocking check in the same run
        skippable=True,
    )


def _multi_asset(
    name: str,
    cadence: str,
    datasets: list[DatasetSpec],
    keys: Mapping[str, AssetKey],
    sources: Mapping[str, Source],
    partitions: TimeWindowPartitionsDefinition,
    config: LumosConfig,
    catalogue: Catalogue,
    bills: Bills,
) -> AssetsDefinition:
    @multi_asset(
        name=name,
        specs=[_asset_spec(d, keys) for d in datasets],
        check_specs=[spec for d in datasets for spec in check_specs(config, d, keys[d.name])],
        can_subset=True,
        partitions_def=partitions,
        backfill_policy=BackfillPolicy.single_run(),
        description=f"Snapshots of {cadence} datasets: schema, version, lineage, cost and quality.",
    )
    def _snapshots(
        context: AssetExecutionContext,
        spark: LumosSparkResource,
        lumos_store: SnapshotStoreResource,
        lumos_catalogs: CatalogsResource,
    ):
        yield from snapshot_events(context, spark, lumos_store, lumos_catalogs, datasets, keys, config, catalogue,
                                   sources, bills, partitions)  # fmt: skip

    return _snapshots


def build_dataset_assets(
    config: LumosConfig, catalogue: Catalogue, sources: Mapping[str, Source], keys: Mapping[str, AssetKey]
) -> tuple[dict[str, list[AssetsDefinition]], list[AssetSpec]]:
    """(cadence → the multi_assets of its datasets, external specs for missing upstreams)."""
    bills = Bills(config, catalogue)  # one per code location: the bills are read once
    by_cadence: dict[str, list[AssetsDefinition]] = {}
    for cadence in sorted({d.cadence for d in catalogue.datasets}):
        ours = [d for d in catalogue.datasets if d.cadence == cadence]
        first = min((d.first_partition for d in ours if d.first_partition), default=None)
        partitions = partitions_def(config.partitions, cadence, first)
        parts = chunks(ours, CHUNK)
        by_cadence[cadence] = [
            _multi_asset(
                f"lumos_{cadence}_datasets" + (f"_{i + 1}" if i else ""),
                cadence, part, keys, sources, partitions, config, catalogue, bills,
            )
            for i, part in enumerate(parts)
        ]  # fmt: skip
    externals = [
        AssetSpec(
            key=keys[name],
            description=f"Named as upstream of {', '.join(users)} in lumos.yaml, but no source has it.",
            group_name="missing",
        )
        for name, users in catalogue.missing_upstreams.items()
    ]
    return by_cadence, externals
