"""Table change sensors: one per table source with a cheap fingerprint listing (warehouses, Kafka),
running by default.
Each tick reads every table's fingerprint in one listing (a warehouse's INFORMATION_SCHEMA) and requests the
current partition of exactly the datasets whose tables changed (lumos_dagster.inventory.table_watch); the
first tick, the current partition of every dataset never materialized."""

import json

from dagster import DefaultSensorStatus, SensorDefinition, SensorResult, SkipReason, sensor

from lumos_dagster.floor.naming import segment
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.inventory.table_watch import look_tables
from lumos_dagster.sensors.storage import INTERVAL, first_snapshots, is_preview, plan
from lumos_dagster.sensors.triggers import Targets
from lumos_dagster.sources.base import TableSource
from lumos_dagster.store import SnapshotStore


def table_sensor(source: TableSource, store_url: str, targets: Targets, max_datasets: int,
                 interval: int = INTERVAL) -> SensorDefinition:  # fmt: skip
    """`max_datasets`: the most a first start's run takes (`partitions.datasets_per_run`)."""
    cadences = sorted({s.cadence for s in targets.specs.values() if s.source == source.name})

    @sensor(
        name=f"lumos_tables_{segment(source.name)}",
        description=f"Re-snapshots the tables and views of {source.root} whose columns or state changed.",
        minimum_interval_seconds=interval,
        default_status=DefaultSensorStatus.RUNNING,
        jobs=[targets.jobs[c] for c in cadences] or None,
    )
    def _tables(context):
        cursor = json.loads(context.cursor) if context.cursor else {}
        report = ScanReport()
        store = SnapshotStore(store_url)
        preview = is_preview(context)
        try:
            # a preview shows what a tick would request, and writes nothing
            seen = look_tables(source, store, cursor.get("generation"), report, cursor.get("state"), save=not preview)
        finally:
            store.close()
        if seen is None:  # keep the cursor: the next tick compares with the same state
            return SkipReason(f"cannot read {source.root}: {report.failures[0][1]}")
        next_cursor = json.dumps({"generation": seen.generation, "state": seen.state})
        if seen.baseline:  # the first start: what was never materialized is snapshotted now
            first = first_snapshots(context.instance, source.name, targets, max_datasets)
            if first:
                return SensorResult(run_requests=first, cursor=next_cursor)
            return SensorResult(skip_reason=f"baseline of {seen.files} tables recorded", cursor=next_cursor)
        unknown = sorted({c.dataset for c in seen.changes if c.kind == "created" and not targets.known(c.dataset)})
        if unknown:  # `lumos discover` (or its job) records them; they become assets after a reload
            context.log.info(f"new tables in {source.root}: {', '.join(unknown)}")
        requests, _ = plan(source.name, seen.changes, targets)  # a table's change is now: never a later partition
        return SensorResult(run_requests=requests, cursor=next_cursor)

    return _tables
