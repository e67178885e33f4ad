"""Retention as a Dagster job, daily: what Dagster and the store keep of Lumos' past is bounded.

Dagster OSS keeps every run and its event log forever, and a Lumos deployment runs a lot (a run per
cadence and batch, sensors' runs, syncs): its run and event-log storage grows by every run's events.
`lumos_retention` deletes **Lumos' own** runs (those tagged `lumos/run`, resources/ownership.py)
created more than `retention.dagster_runs_days` ago (default 30), through Dagster's public instance
API only: `get_run_records(RunsFilter(tags=…, created_before=…, statuses=…))`, paged by cursor, then
`delete_run` for each, leaving the runs still in progress alone. Another code location's runs on the
same instance, their events, materializations and checks, are never read nor deleted. Off:
`retention.dagster_runs_days: null` in lumos.yaml.

What `delete_run` leaves is left: on Dagster's SQL storages, the asset check executions rows of a
deleted run (`asset_check_executions`) and, on stock SQLite storage, each deleted run's emptied
event log file (`history/runs/<run id>.db`); docs/deploy.md says so.

It also prunes the snapshot store's outbox (`SnapshotStore.prune_outbox`): entries delivered (or
found unchanged, or superseded) more than `store.retention.outbox_days` ago (default 7).

What Dagster keeps per asset (its latest materialization, the asset's key) and per code version
(job snapshots) is not per run: it stays.
"""

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Callable

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

from lumos_dagster.resources.ownership import OWN_RUN_TAGS
from lumos_dagster.resources.store import SnapshotStoreResource

RETENTION_JOB = "lumos_retention"
#: `retention.dagster_runs_days`' default: a month of runs kept, to look into
RUNS_DAYS = 30.0
#: `store.retention.outbox_days`' default (lumos_dagster.store.outbox.OUTBOX_DAYS)
OUTBOX_DAYS = 7.0
#: runs listed at a time
BATCH = 100
#: daily, in the quiet hours after the midnight snapshot schedules (UTC)
RETENTION_CRON = "30 4 * * *"
#: the runs retention deletes: those that ended. Queued, starting, started, canceling or suspended
#: runs, however old, are left alone (and counted).
ENDED = (DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED)


@dataclass
class RunRetention:
    """What `delete_old_runs` did."""

    cutoff: datetime
    deleted: int = 0
    left_in_progress: int = 0  # runs older than the cutoff that have not ended
    seconds: float = 0.0
    failed: dict[str, str] = field(default_factory=dict)  # run id → why it could not be deleted

    def render(self) -> str:
        line = (
            f"deleted {self.deleted} Lumos run(s) created before {self.cutoff:%Y-%m-%d %H:%M} UTC with their event "
            f"logs, in {self.seconds:.1f} s"
        )
        if self.left_in_progress:
            line += f"; {self.left_in_progress} older run(s) not ended, left alone"
        if self.failed:
            line += f"; {len(self.failed)} could not be deleted (first: {next(iter(self.failed.values()))})"
        return line


def delete_old_runs(
    instance: DagsterInstance,
    days: float = RUNS_DAYS,
    now: datetime | None = None,
    batch: int = BATCH,
    log: Callable[[str], None] = lambda _: None,
) -> RunRetention:
    """Delete Lumos' runs (tagged `lumos/run`) that ended and were created more than `days` before
    `now` (default: now), oldest first, with their event logs; no other run is read or deleted."""
    started = time.perf_counter()
    cutoff = (now or datetime.now(timezone.utc)) - timedelta(days=days)
    out = RunRetention(cutoff)
    old = RunsFilter(tags=OWN_RUN_TAGS, created_before=cutoff, statuses=list(ENDED))
    # the runs to delete, paged by cursor before any goes (a page's cursor is a run of it: deleted,
    # it would page no further)
    run_ids: list[str] = []
    while True:
        page = instance.get_run_records(
            filters=old, limit=batch, ascending=True, cursor=run_ids[-1] if run_ids else None
        )
        run_ids += [r.dagster_run.run_id for r in page]
        if len(page) < batch:
            break
    for run_id in run_ids:
        try:
            instance.delete_run(run_id)
        except Exception as exc:  # noqa: BLE001 - one run that cannot go holds back no other
            out.failed[run_id] = f"{type(exc).__name__}: {exc}"
            continue
        out.deleted += 1
        if out.deleted % batch == 0:
            log(f"deleted {out.deleted} run(s) so far ({time.perf_counter() - started:.1f} s)")
    out.left_in_progress = instance.get_runs_count(
        RunsFilter(tags=OWN_RUN_TAGS, created_before=cutoff, statuses=[s for s in DagsterRunStatus if s not in ENDED])
    )
    out.seconds = time.perf_counter() - started
    return out


def retention_job(runs_days: float | None = RUNS_DAYS, outbox_days: float = OUTBOX_DAYS, cron: str = RETENTION_CRON):
    """The job and its daily schedule (running by default): `runs_days` is `retention.dagster_runs_days`
    (None: Dagster's runs are kept, the job prunes the outbox only), `outbox_days` is
    `store.retention.outbox_days`."""

    @op(name="apply_retention", description="Delete Lumos' old Dagster runs and old delivered outbox entries.")
    def apply_retention(context: OpExecutionContext, lumos_store: SnapshotStoreResource) -> None:
        if runs_days is None:
            context.log.info("Dagster runs kept: retention.dagster_runs_days is off in lumos.yaml")
            report = None
        else:
            report = delete_old_runs(context.instance, runs_days, log=context.log.debug)
            context.log.info(report.render())
        started = time.perf_counter()
        with lumos_store.open() as store:
            pruned = store.prune_outbox(outbox_days)
        context.log.info(
            f"removed {pruned} outbox entr{'y' if pruned == 1 else 'ies'} done with more than {outbox_days:g} "
            f"day(s) ago, in {time.perf_counter() - started:.1f} s"
        )
        for run_id, why in (report.failed if report else {}).items():
            context.log.warning(f"run {run_id} could not be deleted: {why}")

    @job(name=RETENTION_JOB, tags=OWN_RUN_TAGS, description="Keep what Dagster and the store keep of the past bounded.")
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
