"""Storage-change sensors: one per file source. Each tick lists the source, compares the
files with the previous tick's fingerprints (kept in the store, see lumos_dagster.inventory.watch),
and requests exactly the dataset assets and partitions that changed. Run keys carry a
digest of the changes, so a tick evaluated twice requests nothing new."""

import json
from collections import defaultdict

from dagster import DefaultSensorStatus, RunRequest, SensorDefinition, SensorResult, SkipReason, sensor

from lumos_dagster.inventory.watch import FileChange, digest, look
from lumos_dagster.naming import TRIGGER_TAG, segment
from lumos_dagster.report import ScanReport
from lumos_dagster.sources import file_records
from lumos_dagster.sources.base import FileSource
from lumos_dagster.store import SnapshotStore
from sensors.triggers import Targets


def plan(source: str, changes: list[FileChange], targets: Targets) -> list[RunRequest]:
    groups: dict[tuple[str, str], list[FileChange]] = defaultdict(list)
    for change in changes:
        if targets.known(change.dataset):
            for pk in targets.keys_for_date(change.dataset, change.partition):
                groups[targets.specs[change.dataset].cadence, pk].append(change)
    return [
        RunRequest(
            run_key=f"storage:{source}:{pk}:{digest(group)}",
            asset_selection=sorted({targets.keys[c.dataset] for c in group}, key=lambda k: k.to_user_string()),
            partition_key=pk,
            tags={TRIGGER_TAG: "storage-change", "lumos/source": source},
        )
        for (_, pk), group in sorted(groups.items())
    ]


def is_preview(context) -> bool:
    """Dagster evaluates every tick of a started sensor with the time it was started; a preview (the
    UI's "Preview tick", `dagster sensor preview`) gets none, and its cursor is thrown away. Dagster
    has no other sign of one (1.13)."""
    return context.last_sensor_start_time is None


def storage_sensor(source: FileSource, store_url: str, targets: Targets, interval: int = 60) -> SensorDefinition:
    selection = targets.of_source(source.name)

    @sensor(
        name=f"lumos_storage_{segment(source.name)}",
        description=f"Re-snapshots the datasets of {source.root} whose files were created, modified or deleted.",
        minimum_interval_seconds=interval,
        default_status=DefaultSensorStatus.STOPPED,
        # a source without datasets yet still records new ones; it just has nothing to request
        asset_selection=selection or None,
    )
    def _storage(context):
        cursor = json.loads(context.cursor) if context.cursor else {}
        report = ScanReport()
        store = SnapshotStore(store_url)
        preview = is_preview(context)  # shows what a tick would request, and writes nothing
        try:
            seen = look(source, store, cursor.get("generation"), report, cursor.get("state"), save=not preview)
            if report.failures:  # keep the cursor: the next tick compares with the same state
                return SkipReason(f"cannot list {source.root}: {report.failures[0][1]}")
            if seen.new_datasets and preview:
                context.log.info(f"new datasets in {source.root}: {', '.join(sorted(seen.new_datasets))} (a preview)")
            elif seen.new_datasets:  # recorded now; they become assets when the code location reloads
                store.upsert_datasets(file_records(source, seen.new_datasets))
                context.log.info(
                    f"new datasets in {source.root}: {', '.join(sorted(seen.new_datasets))} "
                    "(recorded; reload the code location to see them as assets)"
                )
        finally:
            store.close()
        next_cursor = json.dumps({"generation": seen.generation, "state": seen.state})
        if seen.baseline:
            return SensorResult(skip_reason=f"baseline of {seen.files} files recorded", cursor=next_cursor)
        requests = plan(source.name, seen.changes, targets)
        if seen.changes:
            kinds = defaultdict(int)
            for c in seen.changes:
                kinds[c.kind] += 1
            context.log.info(f"{dict(kinds)} in {source.root}: {len(requests)} run request(s)")
        return SensorResult(run_requests=requests, cursor=next_cursor)

    return _storage
