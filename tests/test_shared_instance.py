"""Lumos on an instance it shares with another team's code location (docs/deploy.md, "On a platform
team's existing instance"): Lumos' runs, every sensor's and schedule's tick, its retention and its
tuned event log leave the other location's runs, events, materializations and check rows as they
were, even when those runs are older than retention's window."""

from datetime import UTC, datetime, timedelta

import pytest
from dagster import DagsterInstance, build_schedule_context, build_sensor_context

from lumos_dagster.definitions import build_definitions
from lumos_dagster.resources.ownership import is_own
from lumos_dagster.resources.tuning import LumosSqliteEventLogStorage
from lumos_dagster.sensors.retention import RETENTION_JOB, delete_old_runs
from tests.conftest import instance_yaml
from tests.test_retention import LEDGER, _other_run, _other_team
from tests.test_sensors import make_project

pytestmark = [pytest.mark.dagster, pytest.mark.tuning]


def test_lumos_runs_ticks_and_retention_leave_another_location_as_it_was(tmp_path, monkeypatch):
    home = tmp_path / "dagster"
    home.mkdir()
    (home / "dagster.yaml").write_text(instance_yaml("tuned"))
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    cfg = make_project(tmp_path)
    defs = build_definitions(cfg)
    with DagsterInstance.get() as instance:
        assert isinstance(instance.event_log_storage, LumosSqliteEventLogStorage)
        others = [_other_run(instance) for _ in range(3)]
        before = _other_team(instance, others)
        assert len(before["materializations"]) == 3 and before["check executions"] == 3

        # a Lumos run on the tuned instance, as its schedule would launch it
        ran = defs.resolve_job_def("lumos_daily_snapshots").execute_in_process(
            instance=instance, partition_key="2026-11-25"
        )
        assert ran.success and is_own(instance.get_run_by_id(ran.run_id).tags)
        # every sensor's and schedule's tick, on this instance
        for sensor in defs.sensors:
            context = build_sensor_context(instance=instance, definitions=defs, last_sensor_start_time=1.0)
            sensor.evaluate_tick(context)
        midnight = datetime(2026, 11, 26, tzinfo=UTC)
        for schedule in defs.schedules:
            context = build_schedule_context(instance=instance, scheduled_execution_time=midnight,
                                             repository_def=defs.get_repository_def())  # fmt: skip
            schedule.evaluate_tick(context)
        # retention as scheduled, then as it runs two months on: every run here is past its window
        assert defs.resolve_job_def(RETENTION_JOB).execute_in_process(instance=instance).success
        done = delete_old_runs(instance, days=30, now=datetime.now(UTC) + timedelta(days=60))
        assert done.deleted == 2 and not done.failed  # Lumos' snapshot run and its retention run
        assert instance.get_run_by_id(ran.run_id) is None

        assert _other_team(instance, others) == before
        assert instance.get_run_by_id(instance.get_latest_materialization_event(LEDGER).run_id) is not None
