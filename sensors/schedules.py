"""Schedules: each cadence's datasets are snapshotted once per partition, when the partition has
ended: the tick at 00:00 snapshots yesterday, whose `dt=` folder is complete (Dagster's own
partitioned schedules would take the day that just began, before its folder can exist). Running by
default: a deployment keeps its catalog true without anyone starting them.

A cadence with more datasets than `partitions.datasets_per_run` is split into several runs a
tick, each a run of whole ops (an op holds whole lineage groups, so no run depends on another),
so the run workers of a deployment snapshot a large estate side by side.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Sequence

from dagster import (
    AssetKey,
    AssetsDefinition,
    AssetSelection,
    DefaultScheduleStatus,
    RunRequest,
    ScheduleDefinition,
    ScheduleEvaluationContext,
    SkipReason,
    define_asset_job,
    schedule,
)

from lumos_dagster.floor.windows import snapshot_cron
from lumos_dagster.resources.ownership import OWN_RUN_TAGS
from lumos_dagster.sensors.run_tags import AUTOMATION_RUN_TAGS
from lumos_dagster.sensors.triggers import AssetJob

PERIOD = {"hourly": "hour", "daily": "day", "weekly": "week", "monthly": "month"}


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


def ended_partition(partitions, tick: datetime) -> str | None:
    """The partition that ends at `tick` (a partition boundary): the last complete one."""
    moment = tick.timestamp() - 1
    if moment < partitions.start.timestamp():
        return None
    return partitions.get_partition_key_for_timestamp(moment)


def cadence_jobs(assets_by_cadence: dict[str, list[AssetsDefinition]]) -> dict[str, AssetJob]:
    """Each cadence's snapshot job: what its schedule and the change sensors request runs of."""
    return {
        cadence: define_asset_job(cadence_job_name(cadence), selection=AssetSelection.assets(*defs), tags=OWN_RUN_TAGS)
        for cadence, defs in sorted(assets_by_cadence.items())
    }


def _snapshot_schedule(job, partitions, groups: list[list[AssetKey]], cadence: str, max_datasets: int,
                       lag: timedelta):  # fmt: skip
    split = len(groups) > 1
    runs = f", as {len(groups)} runs of at most {max_datasets} datasets" if split else ""
    later = f", {lag} after it ends" if lag else ""

    @schedule(
        name=f"{job.name}_schedule",
        cron_schedule=snapshot_cron(cadence, lag),
        execution_timezone=partitions.timezone,
        job=job,
        default_status=DefaultScheduleStatus.RUNNING,
        description=f"The {cadence} snapshot of the {PERIOD[cadence]} that just ended{later}{runs}.",
    )
    def _snapshot(context: ScheduleEvaluationContext):
        key = ended_partition(partitions, context.scheduled_execution_time - lag)
        if key is None:
            return SkipReason("no partition has ended yet")
        if not split:
            return RunRequest(run_key=key, partition_key=key, tags=AUTOMATION_RUN_TAGS)
        return [
            RunRequest(run_key=f"{key}:{i}", partition_key=key, asset_selection=keys, tags=AUTOMATION_RUN_TAGS)
            for i, keys in enumerate(groups, 1)
        ]

    return _snapshot


def cadence_schedules(
    assets_by_cadence: dict[str, list[AssetsDefinition]],
    jobs: dict[str, AssetJob],
    max_datasets: int,
    lag: timedelta = timedelta(),
) -> list[ScheduleDefinition]:
    """Each cadence's snapshot schedule, ticking `lag` after each partition ends."""
    schedules = []
    for cadence, assets_defs in sorted(assets_by_cadence.items()):
        groups = run_groups(assets_defs, max_datasets)
        schedules.append(
            _snapshot_schedule(jobs[cadence], assets_defs[0].partitions_def, groups, cadence, max_datasets, lag)
        )
    return schedules
