"""`lumos sync` as a Dagster job: what the outbox holds delivered to every catalog. Sensors request it
when they queue something without a snapshot run to deliver it (a vanished dataset's tombstone)."""

from collections.abc import Mapping

from dagster import JobDefinition, OpExecutionContext, job, op

from lumos_dagster.delivery.outbox import deliver
from lumos_dagster.resources.ownership import OWN_RUN_TAGS
from lumos_dagster.resources.store import CatalogsResource, SnapshotStoreResource

SYNC_JOB = "lumos_sync"


@op(name="deliver_outbox", description="Deliver what the outbox holds to every catalog (`lumos sync`).")
def deliver_outbox(context: OpExecutionContext, lumos_store: SnapshotStoreResource,
                   lumos_catalogs: CatalogsResource) -> None:  # fmt: skip
    with lumos_store.open() as store:
        for catalog in lumos_catalogs.adapters():
            try:
                report = deliver(store, catalog)
            finally:
                catalog.close()
            context.log.info(f"{catalog.name}: {report.delivered} delivered, {report.unchanged} unchanged, "
                             f"{len(report.failed)} failed (left queued)")  # fmt: skip


def sync_job(resources: Mapping[str, object]) -> JobDefinition:
    """The job, its resources bound here: where Definitions binds them, Dagster 1.13 copies each sensor that
    requests the job, and the copy warns (BetaWarning, the sensor's `owners` passed as [] for none) at every
    load of the code location."""

    @job(
        name=SYNC_JOB,
        tags=OWN_RUN_TAGS,
        description="Deliver what the outbox holds to every catalog (`lumos sync`).",
        resource_defs={key: resources[key] for key in ("lumos_store", "lumos_catalogs")},
    )
    def lumos_sync():
        deliver_outbox()

    return lumos_sync
