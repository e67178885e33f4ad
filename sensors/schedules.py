"""Schedules: each cadence's datasets are snapshotted once per partition, as soon as the partition
opens. Off by default, so `dagster dev` on a laptop starts quietly.

A cadence with more datasets than `partitions.datasets_per_run` is split into several runs a
tick, each a run of whole ops (an op holds whole lineage groups, so no run depends on another),
so the run workers of a deployment snapshot a large estate side by side.
"""

from __future__ import annotations

from typing import Sequence

from dagster import (
    AssetKey,
    AssetsDefinition,
    AssetSelection,
    DefaultScheduleStatus,
    RunRequest,
    ScheduleDefinition,
    ScheduleEvaluationContext,
    build_schedule_from_partitioned_job,
    define_asset_job,
    schedule,
)


def cadence_job_name(cadence: str) -> str:
    return f"lumos_{cadence}_snapshots"


def run_groups(assets_defs: Sequence[AssetsDefinition], max_datasets: int) -> list[list[AssetKey]]:
    """The ops' assets, consecutive ops together up to `max_datasets` (an op is never split)."""
    groups: list[list[AssetKey]] = []
    for assets_def in assets_defs:
        keys = sorted(assets_def.keys, key=lambda k: k.to_user_string())
        if not groups or len(groups[-1]) + len(keys) > max_datasets:
            groups.append([])
        groups[-1].extend(keys)
    return groups


def _split_schedule(job, partitions, groups: list[list[AssetKey]], cadence: str, max_datasets: int):
    @schedule(
        name=f"{job.name}_schedule",
        cron_schedule=partitions.get_cron_schedule(),
        execution_timezone=partitions.timezone,
        job=job,
        default_status=DefaultScheduleStatus.STOPPED,
        description=f"The {cadence} snapshot, as {len(groups)} runs of at most {max_datasets} datasets.",
    )
    def _split(context: ScheduleEvaluationContext):
        # the partition that opens at this tick, as Dagster's own partitioned schedules pick it
        key = partitions.get_partition_key_for_timestamp(context.scheduled_execution_time.timestamp())
        return [
            RunRequest(run_key=f"{key}:{i}", partition_key=key, asset_selection=keys)
            for i, keys in enumerate(groups, 1)
        ]

    return _split


def cadence_schedules(
    assets_by_cadence: dict[str, list[AssetsDefinition]], max_datasets: int
) -> list[ScheduleDefinition]:
    schedules = []
    for cadence, assets_defs in sorted(assets_by_cadence.items()):
        partitions = assets_defs[0].partitions_def
        job = define_asset_job(
            cadence_job_name(cadence), selection=AssetSelection.assets(*assets_defs), partitions_def=partitions
        )
        groups = run_groups(assets_defs, max_datasets)
        if len(groups) == 1:
            schedules.append(build_schedule_from_partitioned_job(job, default_status=DefaultScheduleStatus.STOPPED))
        else:
            schedules.append(_split_schedule(job, partitions, groups, cadence, max_datasets))
    return schedules
