"""Dataset assets: one asset per dataset, deps = lineage, partitions = snapshot times.

The datasets of one cadence live in subsettable `multi_asset`s, one per group of lineage-linked
datasets (a group is never split; unlinked groups are packed up to `CHUNK` datasets an op), so no
op depends on another. A run of many datasets × partitions is one Spark session (resources live
for the run) and one step per op. Each op runs the core pipeline (`lumos_dagster.scan.pipeline`)
over batches of `READ_AHEAD` datasets, the next batch read while this one is recorded, and turns
each finished batch into materializations and check evaluations, nothing more.

Why not one op for every dataset, and why events rather than outputs: in Dagster 1.13 each
output an op yields costs a walk over all of the op's outputs (so an op of N datasets costs N²),
plus a step-output event and, for a check result, a database query. So a dataset's
materialization and checks are yielded as events (`AssetMaterialization`, `AssetCheckEvaluation`),
never outputs: no step consumes a dataset in-run (lineage-linked datasets share an op, and the
reports read the store). docs/performance.md has the figures.
"""

# no `from __future__ import annotations`: Dagster reads the op's parameter annotations
from datetime import date, datetime
from typing import Mapping, Sequence

from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetMaterialization,
    AssetsDefinition,
    AssetSpec,
    BackfillPolicy,
    DailyPartitionsDefinition,
    Failure,
    HourlyPartitionsDefinition,
    MetadataValue,
    MonthlyPartitionsDefinition,
    TimeWindowPartitionsDefinition,
    WeeklyPartitionsDefinition,
    multi_asset,
)
from dagster._core.definitions.data_version import DATA_VERSION_IS_USER_PROVIDED_TAG, DATA_VERSION_TAG

from assets import dagster_speedups
from assets.checks import check_specs, evaluation
from assets.keys import dagster_owners, dagster_tags, group_name
from assets.metadata import newest, snapshot_metadata
from assets.runtime import hours_from_runs
from lumos_dagster.config import LumosConfig, PartitionsConfig
from lumos_dagster.cost.pricing import Bills
from lumos_dagster.governance.alerts import alert_run
from lumos_dagster.naming import RELEASE_TAG, URN_METADATA_KEY
from lumos_dagster.scan.catalogue import Catalogue, DatasetSpec, chunks
from lumos_dagster.scan.judge import READABLE_CHECK, blocking_checks, failure_message, has_data
from lumos_dagster.scan.pipeline import Run, Services, run_pipelines
from lumos_dagster.scan.progress import Progress
from lumos_dagster.scan.record import Recorder
from lumos_dagster.scan.report import ScanReport
from lumos_dagster.sources import Source
from resources.spark import LumosSparkResource, schema_reader
from resources.store import CatalogsResource, SnapshotStoreResource

IO_MANAGER_KEY = "lumos_io_manager"
#: unlinked datasets packed per op (a lineage group larger than this is one op of its own): few ops,
#: so a run pays few steps, delivery workers and first batches read without anything to overlap
CHUNK = 1000
#: datasets stored, delivered and yielded at a time: progress shows, memory stays small
FIRST_BATCH, BATCH = 50, 500
#: datasets an op takes through the pipeline at a time (whole lineage groups): the next batch's files
#: are read while this one's events are recorded, and a run's memory is bounded by a batch
READ_AHEAD = 200

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
    description = d.description or f"{d.format or 'dataset'} at {d.uri}"  # the text the catalogs get
    return AssetSpec(
        key=keys[d.name],
        deps=[keys[u] for u in d.upstream + d.missing_upstream],
        description=description,
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


def _services(context: AssetExecutionContext, spark: LumosSparkResource, store, config: LumosConfig,
              specs: Mapping[str, DatasetSpec], bills: Bills) -> Services:  # fmt: skip
    def stored(name: str, pk: str | None):
        """The same partition's snapshot, else the latest one before it (another cadence, or not yet
        materialized); the latest of all when `pk` is None."""
        urn = specs[name].ref.urn
        return store.latest(urn, pk) or (store.previous(urn, pk) if pk is not None else None)

    def hours(name: str) -> float | None:
        decl = config.declaration(name)
        asset = decl.cost.compute.dagster_asset if decl and decl.cost and decl.cost.compute else None
        return hours_from_runs(context.instance, asset) if asset else None

    def profile(d: DatasetSpec, files: Sequence[str]):
        from spark.profile import profile_files

        return profile_files(spark.spark_session, files, d.format, d.profile.sample)

    return Services(
        read=schema_reader(spark, config.spark),
        history=store.version_histories,
        stored=stored,
        hours=hours,
        bills=bills.month,
        profile=profile,
        progress=context.log.info,
        acceptances=store.acceptances,
    )


def held_changes(run: Run, d: DatasetSpec) -> str:
    """A held-back dataset's own schema changes, found in this run: said now, recorded and judged when
    it is released (docs/compatibility.md)."""
    own = [c for s in run.snapshots[d.name].values() for c in s.changes]
    if not own:
        return ""
    shown = ", ".join(f"{c.kind} `{c.path}`" for c in own[:5]) + (f" and {len(own) - 5} more" if len(own) > 5 else "")
    return f"; its own schema changes, judged when it is released: {shown}"


def _events(context: AssetExecutionContext, run: Run, keys: Mapping[str, AssetKey], recorder: Recorder,
            blocking: frozenset[str], progress: Progress):  # fmt: skip
    kept = [d for d in run.datasets if run.judgements[d.name].held_back is None]
    for d in run.datasets:
        held = run.judgements[d.name].held_back
        if held is not None:
            why = f"upstream {held[1]} failed {held[0]}"
            context.log.warning(f"{d.name}: not materialized: {why}{held_changes(run, d)}")
    # the first batch is delivered before its events go out (a catalog that is down shows from the
    # first materialization on): it is small; later ones are delivered while Dagster records events
    starts = [0, *range(FIRST_BATCH, len(kept), BATCH)] if kept else []
    for start, end in zip(starts, [*starts[1:], len(kept)], strict=True):
        batch = kept[start:end]
        # a partition with no files is not a snapshot: not stored, delivered or materialized
        cells = [(d.name, pk) for d in batch for pk, s in run.snapshots[d.name].items() if has_data(s)]
        stored, pending = recorder.record([run.snapshots[name][pk] for name, pk in cells])
        for (name, pk), s in zip(cells, stored, strict=True):  # versioned by the store: events say what it keeps
            run.snapshots[name][pk] = s
        for d in batch:  # lineage order: upstreams first
            key, snaps = keys[d.name], {pk: s for pk, s in run.snapshots[d.name].items() if has_data(s)}
            outcomes = run.judgements[d.name].checks
            if snaps:
                metadata = snapshot_metadata(snaps, d.time_partition_key, keys, d.source_root)
                metadata.update({f"lumos/pending/{name}": MetadataValue.int(n) for name, n in pending.items()})
                tags = {DATA_VERSION_TAG: newest(snaps).fingerprint, DATA_VERSION_IS_USER_PROVIDED_TAG: "true"}
                for pk in context.partition_keys:
                    if pk in snaps:
                        yield AssetMaterialization(asset_key=key, partition=pk, metadata=metadata, tags=tags)
            else:  # nothing landed for any partition: only the check that says so
                outcomes = [o for o in outcomes if o.name == READABLE_CHECK]
            for outcome in outcomes:
                yield evaluation(key, outcome, blocking)
            progress.step()
        progress.done()
    if len(kept) < len(run.datasets):  # held back: through, if not recorded; the count reaches the op's total
        progress.step(len(run.datasets) - len(kept))
        progress.done()


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
    specs: Mapping[str, DatasetSpec],
) -> AssetsDefinition:
    blocking = blocking_checks(config)

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
        selected = [d for d in datasets if keys[d.name] in context.selected_asset_keys]
        windows = [
            (pk, w.start, w.end)
            for pk in context.partition_keys
            for w in (partitions.time_window_for_partition_key(pk),)
        ]
        context.log.info(f"snapshotting {len(selected)} datasets × {len(windows)} partitions")
        # first: its delivery worker builds the catalogs while the pipeline reads
        recorder = lumos_catalogs.recorder(lumos_store.store_url, context.log.warning)
        judgements, report = {}, ScanReport()
        release = context.run.tags.get(RELEASE_TAG)
        with lumos_store.open() as store:
            services = _services(context, spark, store, config, specs, bills)
            batches = chunks(selected, READ_AHEAD)
            progress = Progress(context.log.info, len(selected))  # one count for the op's batches
            for run in run_pipelines(config, catalogue, sources, batches, windows, services):
                for warning in run.warnings:
                    context.log.warning(warning)
                report.add(run.report)  # one report for the op, said once its batches are recorded
                yield from _events(context, run, keys, recorder, blocking, progress)
                if release:  # a refresh after a release: the versions it brought (as the store numbered them)
                    store.record_release_versions(
                        release, {d.name: v for d in run.datasets if (v := newest(run.snapshots[d.name]).version)}
                    )
                # here, not in the gate: a change failing the gate is still recorded, and its owners told once
                recorded = [s for d in run.datasets if run.judgements[d.name].held_back is None
                            for s in run.snapshots[d.name].values()]  # fmt: skip
                alert_run(store, config, catalogue, recorded, context.log.warning)
                judgements.update(run.judgements)
        context.log.info("scan report:\n" + report.render())
        # instead of Dagster's own error for a failed blocking check, which names only the check
        stopped = failure_message(judgements, blocking)
        if stopped is not None:
            raise Failure(description=stopped)

    return _snapshots


def build_dataset_assets(
    config: LumosConfig, catalogue: Catalogue, sources: Mapping[str, Source], keys: Mapping[str, AssetKey]
) -> tuple[dict[str, list[AssetsDefinition]], list[AssetSpec]]:
    """(cadence → the multi_assets of its datasets, external specs for missing upstreams)."""
    dagster_speedups.apply()
    bills = Bills(config, catalogue)  # one per code location: the bills are read once
    specs = catalogue.by_name()
    by_cadence: dict[str, list[AssetsDefinition]] = {}
    for cadence in sorted({d.cadence for d in catalogue.datasets}):
        ours = [d for d in catalogue.datasets if d.cadence == cadence]
        first = min((d.first_partition for d in ours if d.first_partition), default=None)
        partitions = partitions_def(config.partitions, cadence, first)
        parts = chunks(ours, CHUNK)
        by_cadence[cadence] = [
            _multi_asset(
                f"lumos_{cadence}_datasets" + (f"_{i + 1}" if i else ""),
                cadence, part, keys, sources, partitions, config, catalogue, bills, specs,
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
