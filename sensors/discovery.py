"""`lumos discover` as a Dagster job, so a deployment keeps its registry in step with storage
without anyone running the command: new datasets recorded (they become assets when the code
location reloads), vanished ones soft-deleted in the catalogs (unless too many vanish at once:
then the run fails saying why), lineage re-read from code and view definitions."""

from dagster import DefaultScheduleStatus, Failure, OpExecutionContext, ScheduleDefinition, job, op

from lumos_dagster.floor.config import LumosConfig
from lumos_dagster.floor.wording import VISIBLE_LOG
from lumos_dagster.inventory.refresh import refresh_registry
from lumos_dagster.resources.ownership import OWN_RUN_TAGS
from lumos_dagster.resources.store import SnapshotStoreResource
from lumos_dagster.sensors.reload import request_reload

# daily, an hour before the snapshot schedules' midnight tick (in the partitions' time zone): the
# registry knows the new datasets and days before they are snapshotted
DISCOVER_CRON = "0 23 * * *"


def discovery_job(config: LumosConfig, known: set[str]):
    """The job and its daily schedule; `known`: the datasets this code location has assets for."""

    @op(name="discover_sources", description="Scan the sources and update the registry (`lumos discover`).")
    def discover_sources(context: OpExecutionContext, lumos_store: SnapshotStoreResource) -> None:
        context.log.addFilter(VISIBLE_LOG)
        with lumos_store.faults(), lumos_store.open() as store:
            refreshed = refresh_registry(config, store, progress=context.log.info)
        for name in refreshed.reconciliation.removed:
            context.log.warning(f"{name} vanished from storage: soft-deleted in the catalogs")
        for problem in refreshed.code.problems if refreshed.code else ():
            context.log.warning(problem)
        new = sorted({r.name for r in refreshed.found.records} - known)
        if new:
            context.log.info(f"{len(new)} new dataset(s), assets after the code location reloads: {', '.join(new)}")
        if new or refreshed.reconciliation.removed:
            origin = context.run.remote_job_origin
            context.log.info(request_reload(origin.location_name if origin else None))
        context.log.info(refreshed.report.render())
        if not refreshed.report.ok:
            raise Failure(description=refreshed.report.render())

    @job(
        name="lumos_discover",
        tags=OWN_RUN_TAGS,
        description="Keep the registry in step with storage (`lumos discover`).",
    )
    def lumos_discover():
        discover_sources()

    schedule = ScheduleDefinition(
        name="lumos_discover_daily",
        job=lumos_discover,
        cron_schedule=DISCOVER_CRON,
        execution_timezone=config.partitions.timezone,
        default_status=DefaultScheduleStatus.RUNNING,
    )
    return lumos_discover, schedule
