"""Dataset assets: one asset per dataset, deps = lineage, partitions = snapshot times.

All datasets of one cadence live in a single subsettable `multi_asset`, so a code
location with thousands of datasets stays quick to load and a backfill of many
datasets × partitions runs as one op with one Spark session (single-run policy).
"""

# no `from __future__ import annotations`: Dagster reads the op's parameter annotations
from collections import defaultdict
from datetime import datetime, timezone
from typing import Mapping

from dagster import (
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
    TimeWindowPartitionsDefinition,
    WeeklyPartitionsDefinition,
    multi_asset,
)

from assets.checks import (
    COMPATIBLE_CHECK,
    COMPLETE_CHECK,
    check_specs,
    compatible_check,
    complete_check,
    quality_check,
    readable_check,
)
from assets.keys import dagster_owners, dagster_tags, group_name
from assets.metadata import newest, snapshot_metadata
from assets.runtime import hours_from_runs
from lumos_dagster.config import LumosConfig, PartitionsConfig
from lumos_dagster.cost.pricing import Bills, price_run
from lumos_dagster.governance.rules import assess, has_quality_sources, read_assertions, required_of
from lumos_dagster.lineage.impact import downstream
from lumos_dagster.scan.catalogue import Catalogue, DatasetSpec
from lumos_dagster.schema.gate import judge_snapshot
from lumos_dagster.sources import Source
from resources.io_manager import URN_METADATA_KEY
from resources.spark import LumosSparkResource
from resources.store import SnapshotStoreResource
from spark.profile import NotProfiled, profile_files
from spark.snapshot_job import SnapshotRun, take_snapshots

IO_MANAGER_KEY = "lumos_io_manager"
RELEASE_TAG = "lumos/release"  # on runs the release sensor requests

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
        # held back when an upstream fails its schema_compatible gate in the same run
        skippable=True,
    )


def _required_mode(config: LumosConfig, d: DatasetSpec) -> str | None:
    required = config.governance.required
    return required.mode if required_of(d.name, required) else None


def _govern(spark, config: LumosConfig, catalogue: Catalogue, run: SnapshotRun, selected, log) -> None:
    """Profile (opt-in, newest partition of the run) and quality of each snapshot, in place.
    Neither can fail a snapshot: what goes wrong is logged and shown, the schema is still taken."""
    assertions, problems = ({}, [])
    if has_quality_sources(config):
        assertions, problems = read_assertions(config, [d.name for d in catalogue.datasets])
    for problem in problems:
        log.warning(f"quality: {problem}")
    now = datetime.now(timezone.utc)
    for d in selected:
        snaps = run.snapshots[d.name]
        newest_key = max(snaps, key=lambda k: k or "")
        profile = None
        if d.profile is not None:
            files = run.readable.get((d.name, newest_key), [])
            try:
                profile = profile_files(spark, files, d.format, d.profile.sample)
            except NotProfiled as e:
                log.info(f"{d.name}: not profiled: {e}")
            except Exception as e:  # Spark refusing the data must not lose the snapshot
                log.warning(f"{d.name}: profiling failed: {type(e).__name__}: {str(e).splitlines()[0]}")
        for key, s in snaps.items():
            snaps[key] = assess(s, assertions.get(d.name, ()), profile if key == newest_key else None, now)


def _multi_asset(
    cadence: str,
    datasets: list[DatasetSpec],
    keys: Mapping[str, AssetKey],
    sources: Mapping[str, Source],
    partitions: TimeWindowPartitionsDefinition,
    config: LumosConfig,
    catalogue: Catalogue,
) -> AssetsDefinition:
    specs = catalogue.by_name()
    bills = Bills(config, catalogue)
    quality = has_quality_sources(config)

    def price(run, store, instance):
        """Each snapshot's cost; datasets not in this run give their stored snapshot: the same
        partition's, else the latest one before it (another cadence, or not yet materialized);
        the latest of all when `pk` is None."""

        def stored(name: str, pk: str | None):
            urn = specs[name].ref.urn
            return store.latest(urn, pk) or (store.previous(urn, pk) if pk is not None else None)

        def hours(name: str) -> float | None:
            decl = config.declaration(name)
            asset = decl.cost.compute.dagster_asset if decl and decl.cost and decl.cost.compute else None
            return hours_from_runs(instance, asset) if asset else None

        selected = [d for d in datasets if d.name in run.snapshots]
        return price_run(config, catalogue, selected, run.snapshots, run.sizes, stored, bills.month, hours)

    @multi_asset(
        name=f"lumos_{cadence}_datasets",
        specs=[_asset_spec(d, keys) for d in datasets],
        check_specs=[
            spec
            for d in datasets
            for spec in check_specs(keys[d.name], _required_mode(config, d), quality or d.profile is not None)
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
            run = take_snapshots(
                spark.spark_session, sources, selected, windows, store.version_history, context.log.info
            )
            run.snapshots.update(price(run, store, context.instance))
            _govern(spark.spark_session, config, catalogue, run, selected, context.log)
            release = context.run.tags.get(RELEASE_TAG)
            if release:  # a refresh after a release: the versions it brought belong to it
                store.record_release_versions(
                    release, {d.name: v for d in selected if (v := newest(run.snapshots[d.name]).version)}
                )
        finally:
            store.close()
        context.log.info("scan report:\n" + run.report.render())
        # a blocking check stops downstream assets in other ops; within this op, Lumos
        # holds back the datasets downstream of a failed gate itself
        blocking = {COMPATIBLE_CHECK} | ({COMPLETE_CHECK} if config.governance.required.mode == "block" else set())
        blocked: dict[str, tuple[str, str]] = {}  # dataset → (blocking check failed, by which dataset)
        for d in selected:  # lineage order: Dagster wants upstreams yielded first
            stop = next((blocked[u] for u in d.upstream if u in blocked), None)
            if stop is not None:
                blocked[d.name] = stop
                context.log.warning(f"{d.name}: not materialized: upstream {stop[1]} failed {stop[0]}")
                continue
            snaps = run.snapshots[d.name]
            last = newest(snaps)
            verdicts = [judge_snapshot(config, s) for _, s in sorted(snaps.items(), key=lambda i: i[0] or "")]
            checks = [
                readable_check(keys[d.name], snaps),
                compatible_check(keys[d.name], verdicts, downstream(catalogue, d.name)),
            ]
            mode = _required_mode(config, d)
            if mode is not None:
                checks.append(complete_check(keys[d.name], last, config.governance.required))
            if quality or d.profile is not None:
                checks.append(quality_check(keys[d.name], last, config.quality.min_score))
            failed = next((c.check_name for c in checks if not c.passed and c.check_name in blocking), None)
            if failed is not None:
                blocked[d.name] = (failed, d.name)
            yield MaterializeResult(
                asset_key=keys[d.name],
                value=snaps,
                metadata=snapshot_metadata(snaps, d.time_partition_key, keys),
                check_results=checks,
                data_version=DataVersion(last.fingerprint),
            )

    return _snapshots


def build_dataset_assets(
    config: LumosConfig, catalogue: Catalogue, sources: Mapping[str, Source], keys: Mapping[str, AssetKey]
) -> tuple[dict[str, AssetsDefinition], list[AssetSpec]]:
    """(cadence → the multi_asset of its datasets, external specs for missing upstreams)."""
    by_cadence: dict[str, list[DatasetSpec]] = defaultdict(list)
    for d in catalogue.datasets:
        by_cadence[d.cadence].append(d)
    assets = {
        c: _multi_asset(c, ds, keys, sources, partitions_def(config.partitions, c), config, catalogue)
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
