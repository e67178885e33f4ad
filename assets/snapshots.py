"""The dataset op: Lumos' snapshot run (`lumos_dagster.run.snapshot`) seen from Dagster. It builds
the run's services from the op's resources, runs it over the op's selected datasets and
partitions, and turns each batch's outcome into events, nothing more.

Why events rather than outputs: in Dagster 1.13 each output an op yields costs a walk over all of
the op's outputs (so an op of N datasets costs N²), plus a step-output event and, for a check
result, a database query. So a dataset's materialization and checks are yielded as events
(`AssetMaterialization`, `AssetCheckEvaluation`), never outputs: no step consumes a dataset
in-run (lineage-linked datasets share an op, and the reports read the store).

A failed check does not fail the run: the dataset that broke shows its failed check, the datasets
held back behind it are not materialized (they say why), and the rest of the batch is recorded as
usual. `lumos gate` is what fails a CI job on a breaking change.
"""

import json
import logging
from typing import Mapping, Sequence

from dagster import AssetExecutionContext, AssetKey, AssetMaterialization, AssetObservation, MetadataValue

from lumos_dagster.assets.checks import evaluation
from lumos_dagster.assets.metadata import newest, not_snapshotted, partition_metadata, snapshot_metadata
from lumos_dagster.assets.runtime import hours_from_runs
from lumos_dagster.cost.pricing import Bills
from lumos_dagster.floor.config import LumosConfig
from lumos_dagster.floor.dataset_specs import Catalogue, DatasetSpec
from lumos_dagster.floor.naming import RELEASE_TAG
from lumos_dagster.floor.progress import Progress
from lumos_dagster.floor.windows import Window
from lumos_dagster.floor.wording import VISIBLE_LOG
from lumos_dagster.governance.checks import READABLE_CHECK
from lumos_dagster.governance.profiling import PartitionFiles
from lumos_dagster.resources.spark import LumosSparkResource, schema_reader
from lumos_dagster.resources.store import CatalogsResource, SnapshotStoreResource
from lumos_dagster.resources.tuning.dagster_private import DATA_VERSION_IS_USER_PROVIDED_TAG, DATA_VERSION_TAG
from lumos_dagster.run.snapshot import BatchOutcome, Services, SnapshotRun, held_message
from lumos_dagster.schema.gate import how_to_accept
from lumos_dagster.sources import Source

#: a run's step seconds, summed over its ops (a run tag: JSON, step → seconds)
SECONDS_TAG = "lumos/step_seconds"
#: an observation's metadata on the page of a dataset held back behind an upstream's failed blocking check
HELD_BACK = "lumos/held_back"


def _services(context: AssetExecutionContext, spark: LumosSparkResource, config: LumosConfig, bills: Bills) -> Services:
    def hours(name: str) -> float | None:
        decl = config.declaration(name)
        asset = decl.cost.compute.dagster_asset if decl and decl.cost and decl.cost.compute else None
        return hours_from_runs(context.instance, asset) if asset else None

    def profile(d: DatasetSpec, files: PartitionFiles):
        from lumos_dagster.spark.profile import profile_files

        paths = [p for p, _ in files.files]
        return profile_files(spark.spark_session, paths, d.format, d.profile.sample if d.profile else 1.0, files.fs)

    read = schema_reader(spark, config.spark)
    return Services(read=read, hours=hours, bills=bills.month, profile=profile, say=context.log.info,
                    engine=read.engine)  # fmt: skip


def _events(context: AssetExecutionContext, batch: BatchOutcome, keys: Mapping[str, AssetKey], progress: Progress):
    for warning in batch.warnings:
        context.log.warning(warning)
    pending = {f"lumos/pending/{name}": MetadataValue.int(n) for name, n in batch.pending.items()}
    # a run of one partition: its check evaluations are of that partition (assets.checks.evaluation)
    partition = context.partition_keys[0] if len(context.partition_keys) == 1 else None
    for o in batch.datasets:  # lineage order: upstreams first
        if o.held_back is not None:  # not materialized, not failed: its page says why, and how to go on
            why = MetadataValue.md(f"{held_message(o)}; to accept: {how_to_accept(o.held_back[1])}")
            for pk in context.partition_keys:
                yield AssetObservation(asset_key=keys[o.spec.name], partition=pk, metadata={HELD_BACK: why})
            progress.step()
            continue
        key, snaps, checks = keys[o.spec.name], o.recorded, o.judgement.checks
        if snaps:
            empty = [pk for pk in context.partition_keys if pk not in snaps]  # said on the others: Missing, why
            metadata = {**snapshot_metadata(snaps, o.spec.time_partition_key, keys, o.spec.source_root), **pending,
                        **not_snapshotted(empty, o.spec.time_partition_key is not None)}  # fmt: skip
            tags = {DATA_VERSION_TAG: newest(snaps).fingerprint, DATA_VERSION_IS_USER_PROVIDED_TAG: "true"}
            for pk in context.partition_keys:
                if pk in snaps:
                    own = {**metadata, **partition_metadata(snaps[pk], o.spec.time_partition_key)}
                    yield AssetMaterialization(asset_key=key, partition=pk, metadata=own, tags=tags)
        else:  # nothing landed for any partition: only the check that says so
            checks = tuple(c for c in checks if c.name == READABLE_CHECK)
        for outcome in checks:
            yield evaluation(key, outcome, partition)
        progress.step()
    progress.done()


def _add_seconds(context: AssetExecutionContext, seconds: Mapping[str, float]) -> None:
    """The run's step seconds as data, for whoever measures runs: summed with its other ops'."""
    found = context.instance.get_run_by_id(context.run.run_id).tags.get(SECONDS_TAG)
    total = json.loads(found) if found else {}
    for step, s in seconds.items():
        total[step] = round(total.get(step, 0.0) + s, 4)
    context.instance.add_run_tags(context.run.run_id, {SECONDS_TAG: json.dumps(total, sort_keys=True)})


class _UnyieldedChecks(logging.Filter):
    """Drops Dagster's note, at the op's end, that it did not yield its checks as outputs: they went
    as evaluations (events, above), and the note lists every check of the op, 2,000 names for 1,000
    datasets, in the console and the event log."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "did not yield or return expected outputs" not in str(record.msg)


UNYIELDED_CHECKS = _UnyieldedChecks()


def snapshot_events(context: AssetExecutionContext, spark: LumosSparkResource, lumos_store: SnapshotStoreResource,
                    lumos_catalogs: CatalogsResource, datasets: Sequence[DatasetSpec], keys: Mapping[str, AssetKey],
                    config: LumosConfig, catalogue: Catalogue, sources: Mapping[str, Source], bills: Bills,
                    partitions):  # fmt: skip
    """The op's body: snapshot the selected `datasets` for the run's partitions, as events."""
    selected = [d for d in datasets if keys[d.name] in context.selected_asset_keys]
    windows = [
        Window(pk, w.start, w.end)
        for pk in context.partition_keys
        for w in (partitions.time_window_for_partition_key(pk),)
    ]
    context.log.addFilter(UNYIELDED_CHECKS)  # the step's own log, which Dagster writes the note to
    context.log.addFilter(VISIBLE_LOG)
    context.log.info(f"snapshotting {len(selected)} datasets × {len(windows)} partitions")
    # first: its delivery worker builds the catalogs while the run reads
    delivery = lumos_catalogs.delivery(lumos_store.store_url, context.log.warning)
    with lumos_store.faults(), lumos_store.open() as store:
        run = SnapshotRun(config, catalogue, sources, store, delivery, _services(context, spark, config, bills),
                          release=context.run.tags.get(RELEASE_TAG))  # fmt: skip
        progress = Progress(context.log.info, len(selected))  # one count for the op's batches
        for batch in run.run(selected, windows):
            yield from _events(context, batch, keys, progress)
    context.log.info("scan report:\n" + run.report.render())
    if run.failure is not None:
        context.log.warning(f"failed blocking checks (not materialized downstream):\n{run.failure}")
    _add_seconds(context, run.seconds)
