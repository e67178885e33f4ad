"""Schedules: each cadence's datasets are snapshotted once per partition, as soon as
the partition opens. Off by default, so `dagster dev` on a laptop starts quietly."""

from __future__ import annotations

from dagster import (
    AssetsDefinition,
    AssetSelection,
    DefaultScheduleStatus,
    ScheduleDefinition,
    build_schedule_from_partitioned_job,
    define_asset_job,
)


def cadence_job_name(cadence: str) -> str:
    return f"lumos_{cadence}_snapshots"


def cadence_schedules(assets_by_cadence: dict[str, list[AssetsDefinition]]) -> list[ScheduleDefinition]:
    schedules = []
    for cadence, assets_defs in sorted(assets_by_cadence.items()):
        job = define_asset_job(
            cadence_job_name(cadence),
            selection=AssetSelection.assets(*assets_defs),
            partitions_def=assets_defs[0].partitions_def,
        )
        schedules.append(build_schedule_from_partitioned_job(job, default_status=DefaultScheduleStatus.STOPPED))
    return schedules
