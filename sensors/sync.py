"""`lumos sync` as a Dagster job: what the outbox holds delivered to every catalog. Sensors request it
when they queue something without a snapshot run to deliver it (a vanished dataset's tombstone)."""

from dagster import OpExecutionContext, job, op

from lumos_dagster.delivery.outbox import deliver
from resources.store import CatalogsResource, SnapshotStoreResource

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


@job(name=SYNC_JOB, description="Deliver what the outbox holds to every catalog (`lumos sync`).")
def lumos_sync():
    deliver_outbox()
