"""Retention (sensors/retention.py): Dagster runs older than the window deleted with their event logs,
their asset checks' rows and (stock SQLite) their event log files, on real instances: Dagster's stock
SQLite storage, the repository's tuned one, PostgreSQL storage (dagster-postgres) and the ephemeral
in-memory one; recent runs and runs still in progress kept."""

from __future__ import annotations

import os
import time
import uuid
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml
from dagster import (
    AssetCheckResult,
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
    DefaultScheduleStatus,
    Definitions,
    asset,
    asset_check,
    build_op_context,
    materialize,
)
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage

from lumos_dagster.resources.store import SnapshotStoreResource
from lumos_dagster.sensors.retention import RETENTION_JOB, delete_old_runs, retention_job
from tests.conftest import instance_yaml

pytestmark = pytest.mark.dagster

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@asset
def orders():
    return 1


@asset
def customers(orders):
    return orders + 1


@asset_check(asset=orders)
def orders_fresh():
    return AssetCheckResult(passed=True)


@asset_check(asset=customers)
def customers_fresh():
    return AssetCheckResult(passed=False)


ESTATE = [orders, customers, orders_fresh, customers_fresh]


@contextmanager
def _instance(kind: str, home: Path, monkeypatch) -> DagsterInstance:
    """A real instance: `sqlite` (Dagster's stock storage in a DAGSTER_HOME), `tuned` (the repository's
    dagster.yaml), `postgresql` (dagster-postgres on a scratch database), `ephemeral` (in memory)."""
    if kind == "ephemeral":
        with DagsterInstance.ephemeral() as instance:
            yield instance
        return
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    database = None
    if kind == "postgresql":
        database = f"lumos_retention_{uuid.uuid4().hex[:10]}"
        admin = sa.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{database}"')
        settings = {"storage": {"postgres": {"postgres_db": {
            "username": "postgres", "password": "", "hostname": "127.0.0.1", "port": 5432, "db_name": database,
            "scheme": "postgresql+psycopg2"}}}, "telemetry": {"enabled": False}}  # fmt: skip
        (home / "dagster.yaml").write_text(yaml.safe_dump(settings))
    else:
        (home / "dagster.yaml").write_text(instance_yaml("stock" if kind == "sqlite" else "tuned"))
    try:
        with DagsterInstance.get() as instance:
            yield instance
    finally:
        if database is not None:
            with admin.connect() as conn:
                conn.exec_driver_sql(f'DROP DATABASE "{database}" WITH (FORCE)')
            admin.dispose()


def _counts(instance: DagsterInstance, run_ids: list[str]) -> dict[str, int]:
    """Per run group: what the instance keeps of them (runs, their events, their indexed events and
    asset check rows, their event log files)."""
    storage = instance.event_log_storage
    with storage.index_connection() as conn:
        indexed = conn.execute(
            sa.text("SELECT count(*) FROM event_logs WHERE run_id IN :ids").bindparams(
                sa.bindparam("ids", expanding=True)
            ),
            {"ids": run_ids},
        ).scalar()
        checks = conn.execute(
            sa.text("SELECT count(*) FROM asset_check_executions WHERE run_id IN :ids").bindparams(
                sa.bindparam("ids", expanding=True)
            ),
            {"ids": run_ids},
        ).scalar()
    paths = [storage.path_for_shard(r) for r in run_ids] if isinstance(storage, SqliteEventLogStorage) else []
    files = [p for p in paths if os.path.exists(p)]  # before the events are read: reading a deleted run's
    return {  # makes its file again, empty
        "files": len(files),
        "file bytes": sum(os.path.getsize(p) for p in files),
        "runs": sum(instance.get_run_by_id(r) is not None for r in run_ids),
        "events": sum(len(instance.all_logs(r)) for r in run_ids),
        "indexed events": indexed,
        "check rows": checks,
    }


@pytest.mark.parametrize("kind", ["sqlite", "tuned", "postgresql", "ephemeral"])
def test_runs_older_than_the_window_go_with_their_events_and_check_rows_and_recent_ones_stay(
    kind, tmp_path, monkeypatch
):
    with _instance(kind, tmp_path / "home", monkeypatch) as instance:
        stuck = DagsterRun(job_name="stuck", run_id=str(uuid.uuid4()), status=DagsterRunStatus.STARTED)
        instance.add_run(stuck)  # an old run that never ended: left alone
        old = [materialize(ESTATE, instance=instance, raise_on_error=False).run_id for _ in range(3)]
        time.sleep(1.1)  # run creation times are kept to the second (SQLite)
        window_start = datetime.now(timezone.utc)
        time.sleep(1.1)
        recent = [materialize(ESTATE, instance=instance, raise_on_error=False).run_id]
        before = {"old": _counts(instance, old), "recent": _counts(instance, recent)}
        assert before["old"]["check rows"] == 6 and before["old"]["events"] > 0

        done = delete_old_runs(instance, days=30, now=window_start + timedelta(days=30), batch=2)

        after = {"old": _counts(instance, old), "recent": _counts(instance, recent)}
        assert (done.deleted, done.check_rows, done.left_in_progress, done.failed) == (3, 6, 1, {})
        assert after["old"] == dict.fromkeys(before["old"], 0)  # nothing of them left
        assert after["recent"] == before["recent"]
        assert instance.get_run_by_id(stuck.run_id) is not None
        assert done.files == (3 if kind in ("sqlite", "tuned") else 0)
        print(f"\n{kind}: {before} -> {after}; {done.render()}")  # the figures, with -s


def test_the_retention_job_deletes_ended_runs_and_prunes_the_outbox_daily(tmp_path, monkeypatch):
    from lumos_dagster.model import DatasetRef, Snapshot
    from lumos_dagster.store import SnapshotStore

    store_url = f"sqlite:///{tmp_path}/store.db"
    with SnapshotStore(store_url) as store:
        (sid,) = store.put([Snapshot(DatasetRef("file", "a", "/lake/a"), "2026-11-25", datetime.now(timezone.utc))],
                           catalogs=["c"])  # fmt: skip
        store.mark([sid], "delivered")
    job, schedule = retention_job(runs_days=0, outbox_days=0)  # every run that ended is old, every entry done
    assert (job.name, schedule.job_name, schedule.default_status) == (
        RETENTION_JOB,
        RETENTION_JOB,
        DefaultScheduleStatus.RUNNING,
    )
    resources = {"lumos_store": SnapshotStoreResource(url=store_url)}
    defs = Definitions(jobs=[job], schedules=[schedule], resources=resources)  # as definitions.py would hold it
    assert defs.get_job_def(RETENTION_JOB) is not None

    with _instance("sqlite", tmp_path / "home", monkeypatch) as instance:
        ran = materialize(ESTATE, instance=instance, raise_on_error=False).run_id
        op = job.graph.node_defs[0]
        op(build_op_context(instance=instance, resources=resources))  # the op on its own
        assert instance.get_run_by_id(ran) is None
        again = materialize(ESTATE, instance=instance, raise_on_error=False).run_id
        result = defs.get_job_def(RETENTION_JOB).execute_in_process(instance=instance)  # the job, as scheduled
        assert result.success
        assert instance.get_run_by_id(again) is None
        assert instance.get_run_by_id(result.run_id) is not None  # its own run was in progress: kept
        logged = [e.message for e in instance.all_logs(result.run_id) if e.message]
        assert any(m.startswith("deleted 1 Dagster run(s)") for m in logged), logged
        assert any(m.startswith("removed 0 outbox entries") for m in logged), logged
    with SnapshotStore(store_url) as store:
        assert store.outbox_counts("c") == {}  # removed by the op's first call


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_deleting_a_run_through_dagster_leaves_its_asset_check_rows_behind(kind, tmp_path, monkeypatch):
    """Why retention removes them itself: `DagsterInstance.delete_run` does not (dagster 1.13)."""
    with _instance(kind, tmp_path / "home", monkeypatch) as instance:
        ran = materialize(ESTATE, instance=instance, raise_on_error=False).run_id
        instance.delete_run(ran)
        left = _counts(instance, [ran])
        assert (left["runs"], left["events"], left["indexed events"], left["check rows"]) == (0, 0, 0, 2)
