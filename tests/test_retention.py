"""Retention (sensors/retention.py): Lumos' own Dagster runs older than the window deleted with their
event logs, through Dagster's public API, on real instances: Dagster's stock SQLite storage, the tuned
one, PostgreSQL storage (dagster-postgres) and the ephemeral in-memory one. Another code location's
runs on the same instance, however old, keep every run, event, materialization and check row; Lumos'
recent runs and runs still in progress are kept; off in lumos.yaml, nothing is deleted."""

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
    AssetKey,
    DagsterEventType,
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

from lumos_dagster.floor.config import RetentionConfig
from lumos_dagster.floor.errors import ConfigError
from lumos_dagster.resources.ownership import OWN_RUN_TAGS
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


@asset(key_prefix="other_team")
def ledger():
    return 1


@asset_check(asset=ledger)
def ledger_balanced():
    return AssetCheckResult(passed=True)


#: another team's code location on the same instance: one asset, one check, runs without Lumos' tag
OTHER_TEAM = [ledger, ledger_balanced]
LEDGER = AssetKey(["other_team", "ledger"])


def _lumos_run(instance: DagsterInstance) -> str:
    return materialize(ESTATE, instance=instance, raise_on_error=False, tags=OWN_RUN_TAGS).run_id


def _other_run(instance: DagsterInstance) -> str:
    return materialize(OTHER_TEAM, instance=instance).run_id


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


def _other_team(instance: DagsterInstance, run_ids: list[str]) -> dict:
    """Everything the instance keeps of the other team's runs, to compare before and after."""
    latest = instance.get_latest_materialization_event(LEDGER)
    return {
        **_counts(instance, run_ids),
        "materializations": [
            e.run_id for r in run_ids
            for e in instance.all_logs(r, of_type=DagsterEventType.ASSET_MATERIALIZATION)
        ],
        "latest materialization's run": latest.run_id if latest else None,
        "check executions": len(instance.event_log_storage.get_asset_check_execution_history(
            ledger_balanced.check_key, limit=100)),
    }  # fmt: skip


@pytest.mark.parametrize("kind", ["sqlite", "tuned", "postgresql", "ephemeral"])
def test_lumos_runs_older_than_the_window_go_and_another_locations_runs_all_stay(kind, tmp_path, monkeypatch):
    with _instance(kind, tmp_path / "home", monkeypatch) as instance:
        stuck = DagsterRun(
            job_name="stuck", run_id=str(uuid.uuid4()), status=DagsterRunStatus.STARTED, tags=OWN_RUN_TAGS
        )
        instance.add_run(stuck)  # an old run of Lumos' that never ended: left alone
        old = [_lumos_run(instance) for _ in range(3)]
        others = [_other_run(instance) for _ in range(3)]  # as old as Lumos' old runs
        time.sleep(1.1)  # run creation times are kept to the second (SQLite)
        window_start = datetime.now(timezone.utc)
        time.sleep(1.1)
        recent = [_lumos_run(instance)]
        before = {"old": _counts(instance, old), "recent": _counts(instance, recent)}
        theirs = _other_team(instance, others)
        assert before["old"]["check rows"] == 6 and before["old"]["events"] > 0
        assert theirs["latest materialization's run"] == others[-1] and theirs["check executions"] == 3

        done = delete_old_runs(instance, days=30, now=window_start + timedelta(days=30), batch=2)

        after = {"old": _counts(instance, old), "recent": _counts(instance, recent)}
        assert (done.deleted, done.left_in_progress, done.failed) == (3, 1, {})
        # nothing of Lumos' old runs left but what Dagster's `delete_run` leaves: their asset check rows
        # and (stock SQLite) their emptied files (docs/deploy.md)
        assert {k: v for k, v in after["old"].items() if k in ("runs", "events", "indexed events")} == dict.fromkeys(
            ("runs", "events", "indexed events"), 0
        )
        assert after["old"]["check rows"] == before["old"]["check rows"]
        assert after["recent"] == before["recent"]
        assert instance.get_run_by_id(stuck.run_id) is not None
        # the other team keeps every run, event, materialization and check row
        assert _other_team(instance, others) == theirs
        assert instance.get_run_by_id(instance.get_latest_materialization_event(LEDGER).run_id) is not None
        print(f"\n{kind}: {before} -> {after}; {done.render()}")  # the figures, with -s


def test_paging_reaches_every_old_run_of_many_batches(tmp_path, monkeypatch):
    with _instance("ephemeral", tmp_path, monkeypatch) as instance:
        ran = [_lumos_run(instance) for _ in range(5)] + [_other_run(instance)]
        done = delete_old_runs(instance, days=1, now=datetime.now(timezone.utc) + timedelta(days=2), batch=2)
        assert done.deleted == 5 and [r for r in ran if instance.get_run_by_id(r)] == ran[-1:]


def test_the_retention_job_deletes_lumos_ended_runs_and_prunes_the_outbox_daily(tmp_path, monkeypatch):
    from lumos_dagster.floor.model import DatasetRef, Snapshot
    from lumos_dagster.store import SnapshotStore

    store_url = f"sqlite:///{tmp_path}/store.db"
    with SnapshotStore(store_url) as store:
        (sid,) = store.put([Snapshot(DatasetRef("file", "a", "/lake/a"), "2026-11-25", datetime.now(timezone.utc))],
                           catalogs=["c"])  # fmt: skip
        store.mark([sid], "delivered")
    job, schedule = retention_job(runs_days=1e-9, outbox_days=0)  # every run that ended is old, every entry done
    assert (job.name, schedule.job_name, schedule.default_status) == (
        RETENTION_JOB,
        RETENTION_JOB,
        DefaultScheduleStatus.RUNNING,
    )
    assert job.tags == OWN_RUN_TAGS  # its own runs are Lumos' too
    resources = {"lumos_store": SnapshotStoreResource(url=store_url)}
    defs = Definitions(jobs=[job], schedules=[schedule], resources=resources)  # as definitions.py would hold it
    assert defs.get_job_def(RETENTION_JOB) is not None

    with _instance("sqlite", tmp_path / "home", monkeypatch) as instance:
        ran, other = _lumos_run(instance), _other_run(instance)
        op = job.graph.node_defs[0]
        op(build_op_context(instance=instance, resources=resources))  # the op on its own
        assert instance.get_run_by_id(ran) is None and instance.get_run_by_id(other) is not None
        again = _lumos_run(instance)
        result = defs.get_job_def(RETENTION_JOB).execute_in_process(instance=instance)  # the job, as scheduled
        assert result.success
        assert instance.get_run_by_id(again) is None and instance.get_run_by_id(other) is not None
        assert instance.get_run_by_id(result.run_id) is not None  # its own run was in progress: kept
        logged = [e.message for e in instance.all_logs(result.run_id) if e.message]
        assert any(m.startswith("deleted 1 Lumos run(s)") for m in logged), logged
        assert any(m.startswith("removed 0 outbox entries") for m in logged), logged
    with SnapshotStore(store_url) as store:
        assert store.outbox_counts("c") == {}  # removed by the op's first call


def test_switched_off_it_deletes_no_run_and_still_prunes_the_outbox(tmp_path, monkeypatch):
    store_url = f"sqlite:///{tmp_path}/store.db"
    job, _ = retention_job(runs_days=None, outbox_days=0)
    resources = {"lumos_store": SnapshotStoreResource(url=store_url)}
    with _instance("sqlite", tmp_path / "home", monkeypatch) as instance:
        ran = [_lumos_run(instance), _other_run(instance)]
        result = (
            Definitions(jobs=[job], resources=resources)
            .get_job_def(RETENTION_JOB)
            .execute_in_process(instance=instance)
        )
        assert result.success and all(instance.get_run_by_id(r) is not None for r in ran)
        logged = [e.message for e in instance.all_logs(result.run_id) if e.message]
        assert any("retention.dagster_runs_days is off" in m for m in logged), logged


@pytest.mark.parametrize("off", [None, False])
def test_lumos_yaml_switches_it_off_with_null(off):
    assert RetentionConfig.model_validate({"dagster_runs_days": off}).dagster_runs_days is None
    assert RetentionConfig.model_validate({}).dagster_runs_days == 30


@pytest.mark.parametrize("bad", [0, -3, "never", True, "30 days"])
def test_a_bad_retention_value_names_the_key_and_the_way_to_switch_it_off(bad, tmp_path):
    from lumos_dagster.floor.config import load_config

    path = tmp_path / "lumos.yaml"
    path.write_text(yaml.safe_dump({"sources": [{"name": "lake", "root": str(tmp_path)}],
                                    "retention": {"dagster_runs_days": bad}}))  # fmt: skip
    with pytest.raises(ConfigError) as raised:
        load_config(str(path))
    assert "retention.dagster_runs_days" in str(raised.value) and "dagster_runs_days: null" in str(raised.value)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_deleting_a_run_through_dagster_leaves_its_asset_check_rows_behind(kind, tmp_path, monkeypatch):
    """What docs/deploy.md says `delete_run` leaves, and retention with it (dagster 1.13): Dagster's
    tables are not Lumos' to edit."""
    with _instance(kind, tmp_path / "home", monkeypatch) as instance:
        ran = materialize(ESTATE, instance=instance, raise_on_error=False).run_id
        instance.delete_run(ran)
        left = _counts(instance, [ran])
        assert (left["runs"], left["events"], left["indexed events"], left["check rows"]) == (0, 0, 0, 2)
