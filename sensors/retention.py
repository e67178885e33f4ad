"""Retention as a Dagster job, daily: what Dagster and the store keep of the past is bounded.

Dagster OSS keeps every run and its event log forever, and a Lumos deployment runs a lot (a run per
cadence and batch, sensors' runs, syncs): its run and event-log storage grows by every run's events
(and, on stock SQLite storage, a file per run). `lumos_retention` deletes runs created more than
`retention.dagster_runs_days` ago (default 30), through Dagster's instance API
(`get_run_records(RunsFilter(created_before=…))`, then `delete_run`), a batch at a time, leaving the
runs still in progress alone. `delete_run` removes a run, its tags and its event log, but not what
the event log storage indexes of its asset checks (`asset_check_executions`): those of the runs
deleted are removed too, on the event log storage's own connection (`index_connection()`). On stock
SQLite storage each run's events are a file of their own (`history/runs/<run id>.db`, ~100 KB
however few its events), which `delete_run` empties and leaves: it is removed (`path_for_shard`,
and the run forgotten from the storage's `_initialized_dbs`, so that a later read of the run in the
same process finds no events rather than a file without tables).

It also prunes the snapshot store's outbox (`SnapshotStore.prune_outbox`): entries delivered (or
found unchanged, or superseded) more than `store.retention.outbox_days` ago (default 7).

What Dagster keeps per asset (its latest materialization, the asset's key) and per code version
(job snapshots) is not per run: it stays.
"""

import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Callable

import sqlalchemy as sa
from dagster import (
    DagsterInstance,
    DagsterRunStatus,
    DefaultScheduleStatus,
    OpExecutionContext,
    RunsFilter,
    ScheduleDefinition,
    job,
    op,
)

from lumos_dagster.resources.store import SnapshotStoreResource

RETENTION_JOB = "lumos_retention"
#: `retention.dagster_runs_days`' default: a month of runs kept, to look into
RUNS_DAYS = 30.0
#: `store.retention.outbox_days`' default (lumos_dagster.store.outbox.OUTBOX_DAYS)
OUTBOX_DAYS = 7.0
#: runs deleted at a time: one query for them, one statement for their checks' rows
BATCH = 100
#: daily, in the quiet hours after the midnight snapshot schedules (UTC)
RETENTION_CRON = "30 4 * * *"
#: the runs retention deletes: those that ended. Queued, starting, started, canceling or suspended
#: runs, however old, are left alone (and counted).
ENDED = (DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED)

_CHECKS = sa.table("asset_check_executions", sa.column("run_id"))  # Dagster's, in its event log storage


@dataclass
class RunRetention:
    """What `delete_old_runs` did."""

    cutoff: datetime
    deleted: int = 0
    check_rows: int = 0  # asset_check_executions rows of the runs deleted
    files: int = 0  # per-run event log files removed (stock SQLite storage)
    left_in_progress: int = 0  # runs older than the cutoff that have not ended
    seconds: float = 0.0
    failed: dict[str, str] = field(default_factory=dict)  # run id → why it could not be deleted

    def render(self) -> str:
        line = (
            f"deleted {self.deleted} Dagster run(s) created before {self.cutoff:%Y-%m-%d %H:%M} UTC with their event "
            f"logs, {self.check_rows} asset check execution row(s)"
        )
        if self.files:
            line += f" and {self.files} run event log file(s)"
        line += f", in {self.seconds:.1f} s"
        if self.left_in_progress:
            line += f"; {self.left_in_progress} older run(s) not ended, left alone"
        if self.failed:
            line += f"; {len(self.failed)} could not be deleted (first: {next(iter(self.failed.values()))})"
        return line


def _delete_check_rows(instance: DagsterInstance, run_ids: list[str]) -> int:
    """Remove the `asset_check_executions` rows of deleted runs, on the event log storage's own
    connection: what `delete_run` leaves. Storages without that table (not SQL): nothing."""
    storage = instance.event_log_storage
    index_connection = getattr(storage, "index_connection", None)  # SqlEventLogStorage's (SQLite, PostgreSQL, MySQL)
    if index_connection is None or not run_ids:
        return 0
    with index_connection() as conn:  # committed as the storage's own writes are (a transaction, or autocommit)
        return conn.execute(_CHECKS.delete().where(_CHECKS.c.run_id.in_(run_ids))).rowcount or 0


def _remove_run_file(instance: DagsterInstance, run_id: str) -> bool:
    """Stock SQLite storage: remove the run's own event log file, which `delete_run` empties and leaves."""
    from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage

    storage = instance.event_log_storage
    if not isinstance(storage, SqliteEventLogStorage):  # consolidated, in memory, PostgreSQL: no file per run
        return False
    path = storage.path_for_shard(run_id)
    removed = False
    for name in (path, f"{path}-wal", f"{path}-shm"):
        try:
            os.remove(name)
            removed = removed or name == path
        except FileNotFoundError:
            pass
    # the storage remembers the shards it created the tables of: a later read of the run (its events:
    # none) makes the file again with its tables, rather than failing on a file without them
    initialized = getattr(storage, "_initialized_dbs", None)
    if isinstance(initialized, set):
        initialized.discard(run_id)
    return removed


def delete_old_runs(
    instance: DagsterInstance,
    days: float = RUNS_DAYS,
    now: datetime | None = None,
    batch: int = BATCH,
    log: Callable[[str], None] = lambda _: None,
) -> RunRetention:
    """Delete the runs that ended and were created more than `days` before `now` (default: now),
    oldest first, `batch` at a time, with their event logs, their asset checks' rows and (stock SQLite
    storage) their event log files."""
    started = time.perf_counter()
    cutoff = (now or datetime.now(timezone.utc)) - timedelta(days=days)
    out = RunRetention(cutoff)
    old = RunsFilter(created_before=cutoff, statuses=list(ENDED))
    tried: set[str] = set()
    while True:
        records = instance.get_run_records(filters=old, limit=batch, ascending=True)
        run_ids = [r.dagster_run.run_id for r in records if r.dagster_run.run_id not in tried]
        if not run_ids:
            break
        tried.update(run_ids)
        deleted = []
        for run_id in run_ids:
            try:
                instance.delete_run(run_id)
            except Exception as exc:  # noqa: BLE001 - one run that cannot go holds back no other
                out.failed[run_id] = f"{type(exc).__name__}: {exc}"
                continue
            deleted.append(run_id)
            out.files += _remove_run_file(instance, run_id)
        out.check_rows += _delete_check_rows(instance, deleted)
        out.deleted += len(deleted)
        log(f"deleted {out.deleted} run(s) so far ({time.perf_counter() - started:.1f} s)")
        if len(records) < batch:
            break
    out.left_in_progress = instance.get_runs_count(
        RunsFilter(created_before=cutoff, statuses=[s for s in DagsterRunStatus if s not in ENDED])
    )
    out.seconds = time.perf_counter() - started
    return out


def retention_job(runs_days: float = RUNS_DAYS, outbox_days: float = OUTBOX_DAYS, cron: str = RETENTION_CRON):
    """The job and its daily schedule (running by default): `runs_days` is `retention.dagster_runs_days`,
    `outbox_days` is `store.retention.outbox_days`."""

    @op(name="apply_retention", description="Delete old Dagster runs and old delivered outbox entries.")
    def apply_retention(context: OpExecutionContext, lumos_store: SnapshotStoreResource) -> None:
        report = delete_old_runs(context.instance, runs_days, log=context.log.debug)
        context.log.info(report.render())
        started = time.perf_counter()
        with lumos_store.open() as store:
            pruned = store.prune_outbox(outbox_days)
        context.log.info(
            f"removed {pruned} outbox entr{'y' if pruned == 1 else 'ies'} done with more than {outbox_days:g} "
            f"day(s) ago, in {time.perf_counter() - started:.1f} s"
        )
        for run_id, why in report.failed.items():
            context.log.warning(f"run {run_id} could not be deleted: {why}")

    @job(name=RETENTION_JOB, description="Keep what Dagster and the store keep of the past bounded.")
    def lumos_retention():
        apply_retention()

    schedule = ScheduleDefinition(
        name=f"{RETENTION_JOB}_daily",
        job=lumos_retention,
        cron_schedule=cron,
        execution_timezone="UTC",
        default_status=DefaultScheduleStatus.RUNNING,
    )
    return lumos_retention, schedule
