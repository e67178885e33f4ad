"""Storage-change sensors: one per file source, running by default. Each tick lists the source,
compares the files with the previous tick's fingerprints (kept in the store, see
lumos_dagster.inventory.watch), and requests exactly the dataset assets and partitions that
changed. Run keys carry a digest of the changes, so a tick evaluated twice requests nothing new.

Nothing waits for a person:
* the first tick records a baseline and requests the newest partition with files (the current one
  for a dataset without dates) of every dataset Dagster has never materialized: a deployment's first
  start snapshots the lake at once, not at the schedule's midnight;
* a file still being written is not taken: a changed file is looked at twice, `SETTLE_SECONDS`
  apart, and taken when its size and modification time are the same at both, whatever its
  modification time says (a clock is never trusted: a time ahead of the sensor's is said, naming
  the file, and the file is taken all the same); one still changing waits for a later tick;
* a file dated in a partition that does not exist yet (tomorrow's folder) waits until it does,
  said in the tick's log, never failing the tick;
* a new dataset is recorded in the registry, the code location is asked to reload
  (`lumos_dagster.sensors.reload`), and once it is an asset the sensor requests its newest partition;
* a dataset whose files are all gone is soft-deleted at once (unless too many of the source vanish
  together: `removal.max_share`), and its tombstone delivered by a `lumos_sync` run.
"""

import json
import time
from collections import defaultdict
from typing import Mapping

from dagster import (
    AssetKey,
    DefaultSensorStatus,
    JobDefinition,
    RunRequest,
    SensorDefinition,
    SensorResult,
    SkipReason,
    sensor,
)

from lumos_dagster.delivery.catalogs import build_catalogs
from lumos_dagster.floor.config import LumosConfig
from lumos_dagster.floor.naming import TRIGGER_TAG, segment
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.floor.wording import few, plural
from lumos_dagster.inventory.refresh import retire, too_many
from lumos_dagster.inventory.watch import FileChange, Look, digest, look, still_changing
from lumos_dagster.sensors.reload import request_reload
from lumos_dagster.sensors.run_tags import AUTOMATION_RUN_TAGS
from lumos_dagster.sensors.schedules import run_groups
from lumos_dagster.sensors.sync import SYNC_JOB
from lumos_dagster.sensors.triggers import Targets
from lumos_dagster.sources import file_records
from lumos_dagster.sources.base import FileSource
from lumos_dagster.store import SnapshotStore
from lumos_dagster.store.roles import RegistryAndHistory, RegistryStore

#: seconds between ticks: a change reaches the catalog within a tick, the queue and one run
INTERVAL = 30
#: while new datasets wait for the code location to know them, a reload is asked again this often
RELOAD_AGAIN = 90


def plan(source: str, changes: list[FileChange], targets: Targets) -> tuple[list[RunRequest], list[FileChange]]:
    """(run requests for the changes of datasets Dagster knows, the changes dated in a partition that
    does not exist yet: they wait)."""
    groups: dict[tuple[str, str], list[FileChange]] = defaultdict(list)
    later = []
    for change in changes:
        name = change.dataset
        if name is not None and targets.known(name):
            keys = targets.keys_for_date(name, change.partition)
            if keys is None:
                later.append(change)
            for pk in keys or ():
                groups[targets.specs[name].cadence, pk].append(change)
    requests = [
        RunRequest(
            run_key=f"storage:{source}:{pk}:{digest(group)}",
            job_name=targets.jobs[cadence].name,
            asset_selection=sorted({targets.keys[str(c.dataset)] for c in group}, key=lambda k: k.to_user_string()),
            partition_key=pk,
            tags={TRIGGER_TAG: "storage-change", "lumos/source": source, **AUTOMATION_RUN_TAGS},
        )
        for (cadence, pk), group in sorted(groups.items())
    ]
    return requests, later


def first_snapshots(instance, source: str, targets: Targets, max_datasets: int,
                    newest: Mapping[str, str | None] | None = None) -> list[RunRequest]:  # fmt: skip
    """The first snapshot of each of the source's datasets that Dagster has never materialized: its
    partition of `newest[name]` (the date of its newest files: a lake's last day, not an empty today),
    else the current one, in runs of whole ops of at most `max_datasets` datasets as the schedules run
    them. What a first start snapshots without a person."""
    ours = targets.of_source(source)
    latest = instance.get_latest_materialization_events(ours) if ours else {}
    never = {key for key in ours if latest.get(key) is None}
    names = {key: name for name, key in targets.keys.items()}
    requests = []
    for cadence, assets_defs in sorted(targets.assets.items()):
        runs: dict[tuple[str, int], list[AssetKey]] = {}
        for i, group in enumerate(run_groups(assets_defs, max_datasets)):
            for key in (k for k in group if k in never):
                day = (newest or {}).get(names[key])
                keys = targets.keys_for_date(names[key], day) or targets.keys_for_date(names[key], None)
                if keys:  # a dataset whose partitions have not started has no partition to take yet
                    runs.setdefault((keys[-1], i), []).append(key)
        requests += [
            RunRequest(run_key=f"first:{source}:{pk}:{i}", job_name=targets.jobs[cadence].name, asset_selection=keys,
                       partition_key=pk, tags={TRIGGER_TAG: "first-start", "lumos/source": source,
                                               **AUTOMATION_RUN_TAGS})
            for (pk, i), keys in sorted(runs.items())
        ]  # fmt: skip
    return requests


def newcomers(waiting: dict[str, str | None]) -> list[FileChange]:
    """The new datasets waiting for the code location to know them, as changes of each one's newest file."""
    return [FileChange(f"(new dataset {name})", "created", name, day, name) for name, day in waiting.items()]


def is_preview(context) -> bool:
    """Dagster evaluates every tick of a started sensor with the time it was started; a preview (the
    UI's "Preview tick", `dagster sensor preview`) gets none, and its cursor is thrown away. Dagster
    has no other sign of one (1.13)."""
    return context.last_sensor_start_time is None


def _record_new(store: RegistryStore, source: FileSource, seen: Look, waiting: dict) -> list[str]:
    """Record the new datasets in the registry; they wait for the code location to know them."""
    store.upsert_datasets(file_records(source, seen.new_datasets))
    for name, ds in seen.new_datasets.items():
        dates = [d for f in ds.files if (d := ds.file_date(f)) is not None]
        waiting[name] = max(dates).isoformat() if dates else None
    return sorted(seen.new_datasets)


def _retire(store: RegistryAndHistory, config: LumosConfig, source: str, vanished: list[str], log) -> list[str]:
    """Soft-delete the datasets whose files are all gone, unless too many of the source went at once."""
    known, vanished_names = store.datasets(sources=[source]), set(vanished)
    gone = [r for r in known if r.name in vanished_names]
    if not gone:
        return []
    why = too_many(len(gone), len(known), config.removal.max_share)
    if why is not None:
        log.warning(f"source {source}: {why}")
        return []
    catalogs = build_catalogs(config)
    try:
        return retire(store, gone, [c.name for c in catalogs])
    finally:
        for catalog in catalogs:
            catalog.close()


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def storage_sensor(
    source: FileSource, config: LumosConfig, targets: Targets, sync: JobDefinition, interval: int = INTERVAL
) -> SensorDefinition:
    """`sync`: the lumos_sync job (sensors.sync.sync_job), which delivers a vanished dataset's tombstone."""
    cadences = sorted({s.cadence for s in targets.specs.values() if s.source == source.name})

    @sensor(
        name=f"lumos_storage_{segment(source.name)}",
        description=f"Re-snapshots the datasets of {source.root} whose files were created, modified or deleted; "
        "records new datasets and soft-deletes vanished ones.",
        minimum_interval_seconds=interval,
        default_status=DefaultSensorStatus.RUNNING,
        # a source without datasets yet still records new ones: its cadence's job, once it has some
        jobs=[*(targets.jobs[c] for c in cadences or [config.partitions.cadence] if c in targets.jobs), sync],
    )
    def _storage(context):
        cursor = json.loads(context.cursor) if context.cursor else {}
        waiting: dict[str, str | None] = cursor.get("new", {})
        report, preview = ScanReport(), is_preview(context)  # a preview shows what a tick would request, writes nothing
        with SnapshotStore(config.store_url) as store:
            seen = look(source, store, cursor.get("generation"), report, cursor.get("state"), save=False)
            if report.failures:  # keep the cursor: the next tick compares with the same state
                return SkipReason(f"cannot list {source.root}: {report.failures[0][1]}")
            now = time.time()
            vanished = [name for name in seen.vanished if targets.known(name)]
            wanted = [c for c in seen.changes if c.dataset not in vanished]
            # looked at again a few seconds on: what still changes is still being written
            settling = still_changing(source, [c for c in wanted if targets.known(c.dataset)], report)
            moving = {c.path for c in settling}
            ready = [c for c in wanted if c.path not in moving]
            # the new datasets Dagster knows now, with the changes: one run request a partition for both
            requests, later = plan(source.name, ready + newcomers(waiting), targets)
            said = []
            if not preview:
                added = _record_new(store, source, seen, waiting) if seen.new_datasets else []
                removed = _retire(store, config, source.name, vanished, context.log) if vanished else []
                state = seen.save(store, source.name, settling + later)
                unknown = [n for n in waiting if not targets.known(n)]
                asked = cursor.get("reload_asked", 0.0)
                if added or removed or (unknown and now - asked > RELOAD_AGAIN):  # the last ask may have been lost
                    origin = context.code_location_origin
                    said.append(request_reload(origin.location_name if origin else None))
                    asked = now
                if added:
                    said.append(f"new datasets recorded: {', '.join(added)}")
                if removed:
                    said.append(f"vanished, soft-deleted: {', '.join(removed)}")
                    tags = {TRIGGER_TAG: "storage-change", **AUTOMATION_RUN_TAGS}
                    requests.append(RunRequest(run_key=f"sync:{source.name}:{seen.generation}", job_name=SYNC_JOB,
                                               tags=tags))  # fmt: skip
            else:
                state, asked = cursor.get("state"), cursor.get("reload_asked", 0.0)
        # still waiting: for the code location to reload, or for their partition to exist
        deferred = {c.dataset for c in later}
        waiting = {n: day for n, day in waiting.items() if not targets.known(n) or n in deferred}
        if settling:
            said.append(f"{len(settling)} file(s) still being written (changed between two looks): taken once they "
                        f"stop changing: {few(sorted(c.path for c in settling))}")  # fmt: skip
        held = {c.path for c in later}
        ahead = {c.path: c.ahead(now) for c in ready if c.path not in held and c.ahead(now)}  # said once: taken now
        if ahead:
            said.append(f"{plural(len(ahead), 'file')} modified up to {_duration(max(ahead.values()))} ahead of this "
                        f"sensor's clock (a writer's clock ahead, or a copy that kept its times), taken all the same: "
                        f"{few(sorted(ahead))}")  # fmt: skip
        if later:
            days = few(sorted({str(c.partition) for c in later}))
            said.append(f"{plural(len(later), 'file')} dated in a partition that does not exist yet ({days}): "
                        f"taken once it does: {few(sorted(c.path for c in later))}")  # fmt: skip
        for line in said:
            context.log.info(line)
        kept = {"generation": seen.generation, "state": state, "new": waiting, "reload_asked": asked}
        next_cursor = json.dumps({k: v for k, v in kept.items() if v}, separators=(",", ":"))  # a few bytes
        if seen.baseline:
            newest: dict[str, str | None] = {}
            for _, dataset, day in seen.current.values():
                if dataset is not None:
                    newest[dataset] = max(newest.get(dataset) or "", day or "") or None
            requests = first_snapshots(context.instance, source.name, targets, config.partitions.datasets_per_run,
                                       newest)  # fmt: skip
            if not requests:
                return SensorResult(skip_reason=f"baseline of {seen.files} files recorded", cursor=next_cursor)
            first = sum(len(r.asset_selection or ()) for r in requests)
            context.log.info(f"baseline of {seen.files} files recorded; the first snapshot of "
                             f"{plural(first, 'dataset')} requested")  # fmt: skip
        return SensorResult(run_requests=requests, cursor=next_cursor)

    return _storage
