"""What a data engineer sees of the code location: groups and labels of the lineage graph, where
partitions start, when schedules run, column lineage and progress lines, and the CLI backfill."""

import os
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from croniter import croniter
from dagster import AssetKey, DagsterInstance, build_schedule_context

from lumos_dagster.assets.metadata import governance_metadata
from lumos_dagster.definitions import build_definitions
from lumos_dagster.floor.config import load_config
from lumos_dagster.floor.model import ColumnMapping, DatasetRef, LineageEdge, Snapshot
from lumos_dagster.floor.progress import Progress
from lumos_dagster.sensors.schedules import ended_partition
from tests.lake import partitioned_lake, register, write_parquet

pytestmark = pytest.mark.dagster

ROOT = Path(__file__).resolve().parents[1]
FIRST = date(2026, 11, 23)  # partitioned_lake's first day
REPORTS = ("lumos_overview", "lumos_cost_report")


def _project(tmp_path, partitions=None) -> str:
    for name in ("raw/orders", "clean/orders", "raw/events"):
        partitioned_lake(tmp_path / "lake", name, days=2, files_per_day=1)
    config = {
        "sources": [{"name": "lake", "root": "lake"}],
        "datasets": [
            {"name": "raw/orders", "domain": "sales", "owners": ["group:platform-data"]},
            {"name": "clean/orders", "domain": "sales", "upstream": ["raw/orders"]},
        ],
        "catalog": {"path": "catalog.db"},
        "store": {"path": "store.db"},
        **({"partitions": partitions} if partitions else {}),
    }
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump(config))
    register(load_config(str(tmp_path / "lumos.yaml")))
    return str(tmp_path / "lumos.yaml")


def test_groups_keep_layers_apart_so_no_group_shows_one_label_twice(tmp_path):
    graph = build_definitions(load_config(_project(tmp_path))).resolve_asset_graph()
    groups = {"/".join(k.path): graph.get(k).group_name for k in graph.get_all_asset_keys()}
    assert groups["raw/orders"] == "sales_raw" and groups["clean/orders"] == "sales_clean"
    assert groups["raw/events"] == "raw"  # no domain declared: discovery's (the folder), not repeated
    labels = [(g, name.rsplit("/", 1)[-1]) for name, g in groups.items()]
    assert len(labels) == len(set(labels))  # Dagster labels a node with its key's last segment
    assert graph.get(AssetKey(["raw", "orders"])).owners == ["team:platform-data"]  # as the catalog spells it


def test_partitions_start_at_the_first_day_of_data_unless_lumos_yaml_says(tmp_path):
    defs = build_definitions(load_config(_project(tmp_path)))
    partitions = defs.resolve_asset_graph().get(AssetKey(["raw", "orders"])).partitions_def
    assert partitions.get_first_partition_key() == str(FIRST)
    explicit = tmp_path / "explicit"
    defs = build_definitions(load_config(_project(explicit, {"start": "2026-11-01"})))
    partitions = defs.resolve_asset_graph().get(AssetKey(["raw", "orders"])).partitions_def
    assert partitions.get_first_partition_key() == "2026-11-01"


def test_the_daily_schedule_snapshots_the_day_that_ended_after_discovery_ran(tmp_path):
    defs = build_definitions(load_config(_project(tmp_path, {"start": "2026-11-01"})))
    schedule = defs.resolve_schedule_def("lumos_daily_snapshots_schedule")
    tick = datetime(2026, 11, 25, tzinfo=UTC)
    context = build_schedule_context(scheduled_execution_time=tick, repository_def=defs.get_repository_def())
    (request,) = schedule.evaluate_tick(context).run_requests
    assert request.partition_key == "2026-11-24"  # complete; the 25th has just begun
    partitions = defs.resolve_asset_graph().get(AssetKey(["raw", "orders"])).partitions_def
    assert ended_partition(partitions, datetime(2026, 11, 1, tzinfo=UTC)) is None  # nothing has ended yet
    discover = defs.resolve_schedule_def("lumos_discover_daily")
    assert discover.execution_timezone == "UTC"  # the partitions' zone
    discovery_tick = croniter(discover.cron_schedule, tick).get_prev(datetime)
    assert tick - discovery_tick == timedelta(hours=1)  # the registry knows the day's folders first


def test_column_lineage_is_a_table_the_open_source_ui_shows():
    orders = DatasetRef("file", "clean/orders", "/lake/clean/orders", "parquet")
    edge = LineageEdge(orders, (ColumnMapping("lifetime_value", "amount"), ColumnMapping("customer_id", "customer_id")))
    snapshot = Snapshot(DatasetRef("file", "analytics/c360", "/lake/c360", "parquet"), None,
                        datetime(2026, 11, 25, tzinfo=UTC), upstream=(edge,))  # fmt: skip
    md = governance_metadata(snapshot, {"clean/orders": AssetKey(["clean", "orders"])})
    assert md["lumos/column_lineage"].value.splitlines() == [
        "| column | from |",
        "|---|---|",
        "| `lifetime_value` | `clean/orders`.`amount` |",
        "| `customer_id` | `clean/orders`.`customer_id` |",
    ]
    assert set(md["dagster/column_lineage"].value.deps_by_column) == {"lifetime_value", "customer_id"}


def test_progress_says_how_far_recording_is_every_few_seconds():
    lines, now = [], [0.0]
    progress = Progress(lines.append, 300, every=5, clock=lambda: now[0])
    for _ in range(149):
        now[0] += 0.02
        progress.step()
    now[0] += 5
    progress.step()  # 150th, 5 s after the last line
    progress.done()  # a batch of the op's several: not the last, and too soon for a line
    for _ in range(150):
        progress.step()
    progress.done()
    assert lines == ["recorded 150/300 datasets", "recorded 300/300 datasets"]


def test_a_cli_backfill_over_every_asset_is_one_run(tmp_path, monkeypatch):
    """The README's backfill: every asset, a partition range, from the command line."""
    path = _project(tmp_path)
    home = tmp_path / "dagster"
    home.mkdir()
    (home / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text())
    env = {**os.environ, "LUMOS_CONFIG": path, "DAGSTER_HOME": str(home)}
    command = [os.path.join(os.path.dirname(sys.executable), "dagster"), "asset", "materialize", "-m",
               "lumos_dagster.definitions", "--select", "*", "--partition-range", f"{FIRST}...{FIRST + timedelta(1)}",
               "--config-json", '{"loggers": {"console": {"config": {"log_level": "INFO"}}}}']  # fmt: skip
    out = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "recorded 3/3 datasets" in out.stderr
    monkeypatch.setenv("DAGSTER_HOME", str(home))  # the event log storage reads it
    with DagsterInstance.from_config(str(home)) as instance:
        (run,) = instance.get_runs()
        keys = {"/".join(k.path) for k in instance.get_asset_keys()}
        assert {"raw/orders", "clean/orders", "raw/events", "lumos_overview", "lumos_cost_report"} <= keys
        partitions = instance.get_materialized_partitions(AssetKey(["raw", "orders"]))
        assert partitions == {str(FIRST), str(FIRST + timedelta(1))}
        # no edge orders them, the step priority does: the reports read what the datasets stored
        done = {k: instance.get_latest_materialization_event(AssetKey(k)).timestamp for k in REPORTS}
        datasets = instance.get_latest_materialization_event(AssetKey(["clean", "orders"])).timestamp
        assert min(done.values()) > datasets
    assert run.is_success


def test_a_held_back_dataset_says_its_own_schema_changes(tmp_path):
    path = _project(tmp_path, {"start": "2026-11-01"})
    instance = DagsterInstance.ephemeral()
    job = build_definitions(load_config(path)).resolve_implicit_global_asset_job_def()
    orders = [AssetKey(["raw", "orders"]), AssetKey(["clean", "orders"])]
    assert job.execute_in_process(instance=instance, partition_key=str(FIRST), asset_selection=orders).success
    day = tmp_path / "lake" / "raw" / "orders" / f"dt={FIRST}"
    write_parquet(str(day / "part-0.parquet"), pa.table({"id": pa.array([1], pa.int64())}))  # `user` dropped
    partitioned_lake(tmp_path / "lake", "clean/orders", days=1, files_per_day=1, extra_field_from=0)  # + coupon
    result = job.execute_in_process(instance=instance, partition_key=str(FIRST), asset_selection=orders,
                                    raise_on_error=False)  # fmt: skip
    messages = [e.user_message for e in instance.all_logs(result.run_id)]
    assert any(
        m.endswith(
            "clean/orders: not materialized: upstream raw/orders failed schema_compatible; its own schema "
            "changes, judged when it is released: FIELD_ADDED `coupon`"
        )  # fmt: skip
        for m in messages
    ), [m for m in messages if "clean/orders" in m]
