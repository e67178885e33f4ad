"""The nudge as a Dagster job on `governance.nudge.schedule`: owners reminded of the context their
datasets lack, escalated by age (`lumos_dagster/governance/nudges.py`). Defined only when a cron is
set, and then running: setting it is asking for it."""

from datetime import datetime, timezone

from dagster import DefaultScheduleStatus, OpExecutionContext, ScheduleDefinition, job, op

from lumos_dagster.floor.config import LumosConfig
from lumos_dagster.reports.nudges import run_nudge
from lumos_dagster.resources.ownership import OWN_RUN_TAGS
from lumos_dagster.resources.store import SnapshotStoreResource


def nudge_job(config: LumosConfig):
    """The job and its schedule; None when `governance.nudge.schedule` is unset."""
    cron = config.governance.nudge.schedule
    if not cron:
        return None

    @op(name="nudge_owners", description="Remind owners of missing context; escalate by age.")
    def nudge_owners(context: OpExecutionContext, lumos_store: SnapshotStoreResource) -> None:
        store = lumos_store.open()
        try:
            done = run_nudge(store, config, datetime.now(timezone.utc), context.log.warning)
        finally:
            store.close()
        context.log.info(
            f"nudged {len(done.messages)} owner(s); deprecated {len(done.deprecate)}, "
            f"un-deprecated {len(done.undeprecate)} dataset(s)"
        )

    @job(name="lumos_nudge", tags=OWN_RUN_TAGS, description="Remind owners of missing context (governance.nudge).")
    def lumos_nudge():
        nudge_owners()

    schedule = ScheduleDefinition(
        name="lumos_nudge_schedule",
        job=lumos_nudge,
        cron_schedule=cron,
        execution_timezone="UTC",
        default_status=DefaultScheduleStatus.RUNNING,
    )
    return lumos_nudge, schedule
