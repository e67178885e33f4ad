"""What a dataset-partition records on Dagster's own instance, tuned or not: the runs automation
launches skip Dagster's planned events (sensors/run_tags.py), a person's keep them, and a run of
one partition judges that partition, so no planned check execution is left PLANNED."""

from datetime import UTC, datetime

import pyarrow as pa
import pytest
from dagster import AssetCheckKey, AssetKey, DagsterEventType, DagsterInstance, build_schedule_context
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus

from lumos_dagster.definitions import assemble, build_definitions
from lumos_dagster.schema.releases import Manifest
from lumos_dagster.sensors.releases import release_requests, schedule_requests
from lumos_dagster.sensors.run_tags import AUTOMATION_RUN_TAGS
from tests.lake import write_parquet
from tests.test_sensors import Ticks, make_project, settled  # noqa: F401  (fixture)

ORDERS = AssetKey(["sales", "orders"])
PLANNED = {DagsterEventType.ASSET_MATERIALIZATION_PLANNED, DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED}

pytestmark = pytest.mark.dagster


def _run(defs, instance: DagsterInstance, tags: dict, partition_key: str | None = None):
    job = defs.resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(instance=instance, partition_key=partition_key, asset_selection=[ORDERS],
                                    tags=tags, raise_on_error=False)  # fmt: skip
    kinds = [e.dagster_event_type for e in instance.all_logs(result.run_id) if e.is_dagster_event]
    return result, kinds


def _check_statuses(instance: DagsterInstance, names) -> dict:
    """Each check's executions (newest first): (status, partition)."""
    storage = instance.event_log_storage
    return {
        name: [
            (r.status, r.partition) for r in storage.get_asset_check_execution_history(AssetCheckKey(ORDERS, name), 10)
        ]
        for name in names
    }


def test_a_run_the_storage_sensor_requests_records_no_planned_events_but_every_result(tmp_path):
    cfg = make_project(tmp_path)
    defs = build_definitions(cfg)
    ticks = Ticks(defs, "lumos_storage_lake")
    ticks.tick()  # the baseline
    write_parquet(tmp_path / "lake" / "sales" / "orders" / "dt=2026-11-25" / "part-9.parquet", pa.table({"id": [1]}))
    (request,) = ticks.tick().run_requests
    assert AUTOMATION_RUN_TAGS == {"dagster/defer_asset_events": "true"}
    assert request.tags.items() >= AUTOMATION_RUN_TAGS.items()

    instance = DagsterInstance.ephemeral()
    result, kinds = _run(defs, instance, request.tags, request.partition_key)
    assert result.success
    assert not PLANNED & set(kinds)
    assert kinds.count(DagsterEventType.ASSET_MATERIALIZATION) == 1
    evaluations = result.get_asset_check_evaluations()
    assert evaluations and {e.partition for e in evaluations} == {"2026-11-25"}
    assert kinds.count(DagsterEventType.ASSET_CHECK_EVALUATION) == len(evaluations)
    statuses = _check_statuses(instance, {e.check_name for e in evaluations})
    assert all(s == [(AssetCheckExecutionRecordStatus.SUCCEEDED, "2026-11-25")] for s in statuses.values()), statuses
    record = instance.get_latest_materialization_event(ORDERS)
    assert record.dagster_event.partition == "2026-11-25"


def test_a_persons_run_of_one_partition_keeps_its_planned_events_and_leaves_none_planned(tmp_path):
    defs = build_definitions(make_project(tmp_path))
    instance = DagsterInstance.ephemeral()
    result, kinds = _run(defs, instance, {}, "2026-11-25")
    assert result.success
    evaluations = result.get_asset_check_evaluations()
    assert kinds.count(DagsterEventType.ASSET_MATERIALIZATION_PLANNED) == 1
    assert kinds.count(DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED) == len(evaluations) > 0
    assert {e.partition for e in evaluations} == {"2026-11-25"}
    # each planned execution became the evaluation: one row per check, none left PLANNED
    statuses = _check_statuses(instance, {e.check_name for e in evaluations})
    assert all(s == [(AssetCheckExecutionRecordStatus.SUCCEEDED, "2026-11-25")] for s in statuses.values()), statuses


def test_a_run_of_a_range_judges_each_dataset_once_over_the_range(tmp_path):
    defs = build_definitions(make_project(tmp_path))
    instance = DagsterInstance.ephemeral()
    tags = {"dagster/asset_partition_range_start": "2026-11-24", "dagster/asset_partition_range_end": "2026-11-25"}
    result, kinds = _run(defs, instance, tags)
    assert result.success
    assert kinds.count(DagsterEventType.ASSET_MATERIALIZATION) == 2
    evaluations = result.get_asset_check_evaluations()
    assert evaluations and {e.partition for e in evaluations} == {None}


def test_every_run_request_of_automation_carries_the_tag(tmp_path):
    schedule = {"cron": "0 6 * * *", "timezone": "UTC", "lag": "+1h"}
    cfg = make_project(
        tmp_path, releases={"watch": "releases"}, datasets=[{"name": "sales/orders", "schedule": schedule}]
    )
    defs = build_definitions(cfg)
    targets = assemble(cfg).targets
    now = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
    release = Manifest("S-1", datetime(2026, 11, 25, 9, 0, tzinfo=UTC), ("sales/orders",))
    requests = release_requests([release], set(), targets, now)[0] + schedule_requests(targets, now)
    cadence = defs.resolve_schedule_def("lumos_daily_snapshots_schedule")
    context = build_schedule_context(
        scheduled_execution_time=now.replace(hour=0), repository_def=defs.get_repository_def()
    )
    requests += cadence.evaluate_tick(context).run_requests
    assert len(requests) == 3
    assert all(r.tags.items() >= AUTOMATION_RUN_TAGS.items() for r in requests)
