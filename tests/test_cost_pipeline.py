"""Cost through the whole pipeline: FOCUS bills and declared compute priced in the Dagster
run, rolled up along lineage from upstream rollups, shown in Dagster and DataHub, reported,
and turned into savings."""

import json
import os
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner
from dagster import DagsterInstance, Definitions, asset, materialize

from lumos_dagster.assets.runtime import hours_from_runs
from lumos_dagster.cli import main
from lumos_dagster.cost.billing import BillingError, allocate, read_focus
from lumos_dagster.definitions import build_definitions
from lumos_dagster.floor.config import BillingRule, load_config
from tests.lake import COST_NAMES as NAMES
from tests.lake import cost_example, focus_rows, lite_properties, register, write_parquet

pytestmark = pytest.mark.dagster


@pytest.fixture
def example(tmp_path, spark):
    """The design's graph as a lake, with its storage billed and its compute declared."""
    cost_example(tmp_path)
    cfg = load_config(str(tmp_path / "lumos.yaml"))
    register(cfg)
    return cfg


def run_job(cfg, instance, keys=None, partition="2026-11-25"):
    job = build_definitions(cfg).resolve_implicit_global_asset_job_def()
    from dagster import AssetKey

    selection = [AssetKey(k.split("/")) for k in keys] if keys else None
    return job.execute_in_process(partition_key=partition, instance=instance, asset_selection=selection)


def test_costs_roll_up_along_lineage_in_the_dagster_run(example, tmp_path):
    instance = DagsterInstance.ephemeral()
    result = run_job(example, instance)
    assert result.success
    md = {
        "/".join(m.asset_key.path): m.metadata for m in result.asset_materializations_for_node("lumos_daily_datasets")
    }
    assert md["events/ml_predictions"]["lumos/cost_total"].value == pytest.approx(7000)  # 1,500 + 2,200 + 3,000 + 300
    assert md["events/event_metrics"]["lumos/cost_total"].value == pytest.approx(1200)
    assert md["events/raw_events"]["lumos/cost_direct"].value == pytest.approx(500)
    assert "bill prices" in md["events/raw_events"]["lumos/cost_basis"].value
    assert lite_properties(example.lite_path, "events/ml_predictions")["lumos.cost"] == "7000.00 USD/month"

    # a downstream partition materialized on its own reads its upstreams' stored rollups
    alone = run_job(example, DagsterInstance.ephemeral(), ["events/ml_predictions"])
    (m,) = alone.asset_materializations_for_node("lumos_daily_datasets")
    assert m.metadata["lumos/cost_total"].value == pytest.approx(7000)
    # …and where the upstreams have no snapshot of that partition yet, their latest one before it (the
    # dataset has that day's files: a day without files is no snapshot)
    write_parquet(tmp_path / "lake" / "events" / "ml_predictions" / "dt=2026-11-26/part.parquet", pa.table({"x": [1]}))
    later = run_job(example, DagsterInstance.ephemeral(), ["events/ml_predictions"], partition="2026-11-26")
    (m,) = later.asset_materializations_for_node("lumos_daily_datasets")
    assert m.metadata["lumos/cost_total"].value == pytest.approx(7000)


def test_last_touch_in_a_run_of_one_dataset_still_sees_the_consumers_outside_it(example, tmp_path):
    config = yaml.safe_load((tmp_path / "lumos.yaml").read_text())
    config["cost"]["method"] = "last_touch"
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump(config))
    cfg = load_config(str(tmp_path / "lumos.yaml"))
    for i, name in enumerate(NAMES):  # event_metrics last: it takes all of raw_events
        stamp = datetime(2026, 11, 25, 10 + (9 if name == "event_metrics" else i), tzinfo=UTC).timestamp()
        os.utime(tmp_path / "lake" / "events" / name / "dt=2026-11-25" / "part.parquet", (stamp, stamp))

    def inherited(result, name):
        md = {"/".join(m.asset_key.path): m.metadata for m in result.asset_materializations_for_node(
            "lumos_daily_datasets")}  # fmt: skip
        return md[f"events/{name}"]["lumos/cost_inherited"].value

    everything = run_job(cfg, DagsterInstance.ephemeral())
    assert (inherited(everything, "event_metrics"), inherited(everything, "cleaned_events")) == (500, 0)
    alone = run_job(cfg, DagsterInstance.ephemeral(), ["events/cleaned_events"])
    assert inherited(alone, "cleaned_events") == 0  # not raw_events' 500 a second time


def test_the_cost_report_and_savings(example, tmp_path):
    run_job(example, DagsterInstance.ephemeral())
    out = CliRunner().invoke(main, ["cost", "-c", str(tmp_path / "lumos.yaml"), "--format", "json"])
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert report["month"] == "2026-11" and report["direct_total"] == pytest.approx(8200)
    assert [d["dataset"] for d in report["unconsumed"]] == ["events/ml_predictions", "events/event_metrics"]
    assert report["by_owner"]["feature@example.com"] == pytest.approx(2200)
    assert report["by_platform"] == {"file": pytest.approx(8200)}
    # what switching off each unconsumed dataset saves: its own cost and the upstreams only it reads
    ml, metrics = report["savings"]
    assert ml["removed"] == ["events/cleaned_events", "events/feature_store", "events/ml_predictions"]
    assert ml["monthly"]["total"] == pytest.approx(6700)  # raw_events stays: event_metrics still reads it
    assert (metrics["removed"], metrics["monthly"]["total"], metrics["risk"]) == (["events/event_metrics"], 1000, "low")
    csv_out = CliRunner().invoke(main, ["cost", "-c", str(tmp_path / "lumos.yaml"), "--format", "csv"]).stdout
    assert csv_out.splitlines()[0].startswith("month,dataset,owners") and len(csv_out.splitlines()) == 6

    saved = CliRunner().invoke(main, ["savings", "-c", str(tmp_path / "lumos.yaml"), "--datasets",
                                      "events/feature_store", "--format", "json"])  # fmt: skip
    doc = json.loads(saved.stdout)
    assert doc["removed"] == ["events/cleaned_events", "events/feature_store", "events/ml_predictions"]
    assert doc["monthly"] == {"storage": 200.0, "compute": 6500.0, "total": 6700.0}
    assert doc["annual"] == {"storage": 2400.0, "compute": 78000.0, "total": 80400.0}
    assert doc["owners"] == ["cleaned@example.com", "feature@example.com", "ml@example.com"]
    assert doc["risk"] == "high"  # three owners to ask


def test_the_cost_report_asset_writes_its_files(example, tmp_path):
    defs = build_definitions(example)
    instance = DagsterInstance.ephemeral()
    run_job(example, instance)
    job = defs.resolve_implicit_global_asset_job_def()
    from dagster import AssetKey

    result = job.execute_in_process(instance=instance, asset_selection=[AssetKey("lumos_cost_report")])
    (m,) = result.asset_materializations_for_node("lumos_reports")
    assert m.metadata["lumos/direct_cost"].value == pytest.approx(8200)
    assert json.loads((tmp_path / ".lumos" / "reports" / "cost-2026-11.json").read_text())["month"] == "2026-11"
    assert "Nobody consumes these" in m.metadata["lumos/summary"].value
    assert "| `events/event_metrics` | 1,000.00 | 12,000.00 |" in m.metadata["lumos/summary"].value


# ------------------------------------------------------------------ billing


def test_focus_exports_in_csv_and_parquet_map_to_datasets(tmp_path):
    rows = [
        (120.0, "arn:aws:s3:::lake", "Amazon S3", "Storage", {}, "2026-11-03T00:00:00Z"),  # bucket-level
        (40.0, "job-17", "Databricks", "Compute", {"lumos_dataset": "b"}, "2026-11-04T00:00:00Z"),
        (7.0, "arn:aws:s3:::lake", "Amazon S3", "Storage", {}, "2026-10-30T00:00:00Z"),  # another month
        (5.0, "vm-1", "Compute Engine", "Compute", {}, "2026-11-05T00:00:00Z"),
    ]
    (tmp_path / "focus.csv").write_text(focus_rows(*rows))
    table = pa.table({
        "EffectiveCost": [r[0] for r in rows], "ResourceId": [r[1] for r in rows], "ServiceName": [r[2] for r in rows],
        "ServiceCategory": [r[3] for r in rows], "Tags": pa.array([list(r[4].items()) for r in rows],
                                                                  pa.map_(pa.string(), pa.string())),
        "ChargePeriodStart": pa.array([datetime.fromisoformat(r[5]) for r in rows], pa.timestamp("s", tz="UTC")),
    })  # fmt: skip
    pq.write_table(table, tmp_path / "focus.parquet")
    rules = [BillingRule(tag="lumos_dataset"), BillingRule(resource="arn:aws:s3:::lake*", datasets="*")]
    for path in ("focus.csv", "focus.parquet"):
        charges = read_focus(str(tmp_path / path))
        got = allocate(charges, rules, {"a": 3 * 2**30, "b": 1 * 2**30}, "2026-11")
        assert got.billed("a", "storage") == pytest.approx(90)  # 120 split 3:1 by bytes
        assert got.billed("b", "storage") == pytest.approx(30)
        assert got.billed("b", "compute") == pytest.approx(40) and got.billed("a", "compute") is None
        assert got.unallocated == pytest.approx(5)


def test_a_file_that_is_not_focus_says_what_is_missing(tmp_path):
    (tmp_path / "bill.csv").write_text("cost,thing\n1,x\n")
    with pytest.raises(BillingError, match="missing column"):
        read_focus(str(tmp_path / "bill.csv"))


def test_compute_hours_come_from_the_dagster_steps_that_produced_the_dataset():
    import time

    @asset(name="orders_etl", key_prefix=["etl"])
    def etl() -> None:
        time.sleep(0.2)

    @asset(name="slow_neighbour", key_prefix=["etl"])
    def neighbour() -> None:  # in the same runs, not part of what etl/orders_etl costs
        time.sleep(1.0)

    instance = DagsterInstance.ephemeral()
    for _ in range(2):
        assert materialize([etl, neighbour], instance=instance).success
    hours = hours_from_runs(instance, "etl/orders_etl")
    assert hours >= 0.4 / 3600  # its two steps slept 0.2 s each
    every_step = sum(
        s.end_time - s.start_time for r in instance.get_runs() for s in instance.get_run_step_stats(r.run_id)
    )
    assert every_step - hours * 3600 >= 2.0  # the neighbour's two 1 s steps are not its cost, however slow the machine
    assert hours_from_runs(instance, "etl/orders_etl", now=datetime(2030, 1, 1, tzinfo=UTC)) == 0
    assert Definitions(assets=[etl])  # the asset is a real Dagster asset
