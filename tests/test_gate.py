"""The schema_compatible gate in Dagster runs, and version history across a backfill."""

from datetime import date
from pathlib import Path

import pyarrow as pa
import pytest
import sqlalchemy as sa
import yaml
from click.testing import CliRunner
from dagster import AssetKey, DagsterInstance

from lumos_dagster.api.service import Lumos
from lumos_dagster.catalog.datahub_lite import open_lite
from lumos_dagster.cli import main
from lumos_dagster.cli.demo_lake import build_demo_lake
from lumos_dagster.definitions import build_definitions
from lumos_dagster.floor.config import load_config
from lumos_dagster.floor.model import dataset_urn
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.lineage.resolve import refresh_code
from lumos_dagster.sources import build_sources, discover
from lumos_dagster.store import SnapshotStore, acceptances
from tests.lake import catalog_urn, demo_config, drop_from_todays_orders, write_parquet

pytestmark = pytest.mark.dagster

ROOT = Path(__file__).resolve().parents[1]
PK = "2026-11-25"


def project(tmp: Path, **overrides) -> Path:
    config = demo_config()
    config["sources"][0]["root"] = "lake"
    config["store"], config["catalog"]["path"] = {"path": "store.db"}, "catalog.db"
    config["partitions"]["start"] = "2026-11-01"
    config.update(overrides)
    (tmp / "lumos.yaml").write_text(yaml.safe_dump(config))
    return tmp / "lumos.yaml"


def run(path: Path, instance, keys=None, **kwargs):
    cfg = load_config(str(path))
    store = SnapshotStore(cfg.store_url)
    store.upsert_datasets(discover(build_sources(cfg), ScanReport()).records)
    refresh_code(store, cfg)
    store.close()
    job = build_definitions(cfg).resolve_implicit_global_asset_job_def()
    selection = [AssetKey(k.split("/")) for k in keys] if keys else None
    # a failed blocking check fails the step (after every event was recorded): the gate fails the run
    return job.execute_in_process(instance=instance, asset_selection=selection, raise_on_error=False, **kwargs)


def materialized(result) -> set[str]:
    return {"/".join(m.asset_key.path) for m in result.asset_materializations_for_node("lumos_daily_datasets")}


def gate(result, name: str):
    return next(
        e
        for e in result.get_asset_check_evaluations()
        if "/".join(e.asset_key.path) == name and e.check_name == "schema_compatible"
    )


def test_a_breaking_change_fails_the_gate_and_holds_back_downstream_until_accepted(tmp_path, spark):
    build_demo_lake(str(tmp_path / "lake"), today=date(2026, 11, 25))
    instance = DagsterInstance.ephemeral()
    path = project(tmp_path)
    keys = ["raw/orders", "clean/orders", "analytics/daily_revenue"]
    assert materialized(run(path, instance, keys, partition_key=PK)) == set(keys)

    drop_from_todays_orders(tmp_path / "lake", "status")
    result = run(path, instance, keys, partition_key=PK)
    check = gate(result, "raw/orders")
    assert not check.passed and result.success  # the dataset that broke shows it; the run goes on
    assert "1 breaking change under FULL (FIELD_REMOVED status), affecting 3 downstream datasets" in check.description
    assert "FIELD_REMOVED" in check.metadata["lumos/unaccepted"].value
    assert "clean/orders" in check.metadata["lumos/downstream"].value
    assert materialized(result) == {"raw/orders"}  # its consumers are held back in this run
    # not failed but held back, saying why on its own page (an observation), with how to go on
    held = {"/".join(o.asset_key.path): o.metadata["lumos/held_back"].value
            for e in result.all_events if e.is_asset_observation
            for o in (e.event_specific_data.asset_observation,)}  # fmt: skip
    assert set(held) == set(keys) - {"raw/orders"}
    assert "not materialized: upstream raw/orders failed schema_compatible" in held["clean/orders"]
    assert "to accept: declare `accept_major` on raw/orders" in held["clean/orders"]
    assert not [e for e in result.all_events if e.is_failure]
    store = SnapshotStore(load_config(str(path)).store_url)
    latest = store.latest("urn:lumos:dataset:file:raw/orders")
    store.close()
    assert (latest.version, latest.previous_version, latest.change_class) == ("2.0.0", "1.0.0", "major")

    config = yaml.safe_load(path.read_text())
    next(d for d in config["datasets"] if d["name"] == "raw/orders")["accept_major"] = 2
    path.write_text(yaml.safe_dump(config))
    result = run(path, instance, keys, partition_key=PK)
    check = gate(result, "raw/orders")
    assert check.passed and result.success and "1 accepted breaking change" in check.description
    assert "expected major bump to 2.x" in check.metadata["lumos/accepted"].value
    assert materialized(result) == set(keys)


def test_an_acceptance_through_the_api_resolves_the_breaking_changes_incident_in_datahub(tmp_path, spark):
    """DataHub users see a breaking change nobody accepted as an incident on the dataset; accepting it
    (the API's POST …/acceptances, here through the service behind it) resolves it with the next
    delivery, without waiting for a new snapshot."""
    build_demo_lake(str(tmp_path / "lake"), today=date(2026, 11, 25))
    instance, path = DagsterInstance.ephemeral(), project(tmp_path)
    run(path, instance, ["raw/orders"], partition_key=PK)
    drop_from_todays_orders(tmp_path / "lake", "status")
    assert not gate(run(path, instance, ["raw/orders"], partition_key=PK), "raw/orders").passed
    cfg = load_config(str(path))
    urn = catalog_urn(cfg, "raw/orders")

    def incidents() -> list:
        lite = open_lite(cfg.lite_path)
        try:
            entities = [next(iter(e.items())) for e in lite.get_all_entities(typed=True)]
        finally:
            lite.close()
        return [a["incidentInfo"] for _, a in entities if "incidentInfo" in a and urn in a["incidentInfo"].entities]

    (raised,) = incidents()
    assert raised.status.state == "ACTIVE" and raised.title == "Breaking schema change: raw/orders 2.0.0"
    with Lumos(cfg) as lumos:
        lumos.accept("raw/orders", "2.0.0", reason="status moved out (SALES-42)")
        assert lumos.accept("raw/orders", "2.0.0", reason="again") is not None  # judged the same: nothing queued
    with SnapshotStore(cfg.store_url) as store:
        latest = store.latest(dataset_urn("file", "raw/orders"))
    assert {c.name: c.passed for c in latest.checks}["schema_compatible"]  # what the catalogs get
    assert CliRunner().invoke(main, ["sync", "-c", str(path)]).exit_code == 0
    (resolved,) = incidents()
    assert (resolved.title, resolved.status.state, resolved.status.stage) == (raised.title, "RESOLVED", "FIXED")


def test_an_allow_rule_accepts_a_breaking_change_with_its_reason(tmp_path, spark):
    build_demo_lake(str(tmp_path / "lake"), today=date(2026, 11, 25))
    instance = DagsterInstance.ephemeral()
    rule = {"dataset": "raw/*", "path": "status", "kind": "FIELD_REMOVED", "reason": "status moved out (SALES-42)"}
    path = project(tmp_path, compatibility={"policy": "FULL", "allow": [rule]})
    run(path, instance, ["raw/orders"], partition_key=PK)
    drop_from_todays_orders(tmp_path / "lake", "status")
    check = gate(run(path, instance, ["raw/orders"], partition_key=PK), "raw/orders")
    assert check.passed, check.metadata["lumos/unaccepted"].value
    assert "status moved out (SALES-42)" in check.metadata["lumos/accepted"].value


def test_a_backfill_rebuilds_the_version_history_of_a_changing_dataset(tmp_path, spark):
    lake = tmp_path / "lake"
    base = {"id": pa.array([1, 2], pa.int64()), "name": pa.array(["a", "b"]), "legacy": pa.array([0, 0], pa.int32())}
    days = {
        "2026-11-21": base,
        "2026-11-22": base,  # unchanged
        "2026-11-23": {**base, "email": pa.array(["x", None])},  # nullable column added: minor
        "2026-11-24": {k: v for k, v in {**base, "email": pa.array(["x", None])}.items() if k != "legacy"},  # major
        "2026-11-25": {k: v for k, v in {**base, "email": pa.array(["x", None])}.items() if k != "legacy"},
    }
    for day, cols in days.items():
        write_parquet(lake / "crm" / "contacts" / f"dt={day}" / "part-0.parquet", pa.table(cols))
    path = project(tmp_path, datasets=[{"name": "crm/contacts", "owners": ["ann@example.com"]}])
    result = run(
        path,
        DagsterInstance.ephemeral(),
        tags={"dagster/asset_partition_range_start": "2026-11-21", "dagster/asset_partition_range_end": PK},
    )
    cfg = load_config(str(path))
    store = SnapshotStore(cfg.store_url)
    history = {s.partition_key: s for s in store.history("urn:lumos:dataset:file:crm/contacts")}
    store.close()
    assert [history[d].version for d in days] == ["1.0.0", "1.0.0", "1.1.0", "2.0.0", "2.0.0"]
    assert [history[d].change_class for d in days] == ["new", "new", "minor", "major", "major"]
    assert [c.kind for c in history["2026-11-24"].changes] == ["FIELD_REMOVED"]
    (md,) = [m.metadata for m in result.asset_materializations_for_node("lumos_daily_datasets")][:1]
    assert md["lumos/versions_in_run"].value == "1.0.0 → 1.1.0 → 2.0.0"
    assert not gate(result, "crm/contacts").passed


def test_an_acceptance_recorded_in_the_store_passes_the_gate_in_dagster_for_that_version_only(tmp_path, spark):
    """What the API's `POST …/acceptances` writes is honoured by the asset check, as by `lumos gate`."""
    build_demo_lake(str(tmp_path / "lake"), today=date(2026, 11, 25))
    instance = DagsterInstance.ephemeral()
    path = project(tmp_path)
    run(path, instance, ["raw/orders"], partition_key=PK)
    drop_from_todays_orders(tmp_path / "lake", "status")
    url = load_config(str(path)).store_url
    engine = sa.create_engine(url)
    with engine.begin() as conn:  # an acceptance of the wrong version first: it must not count
        acceptances.record(conn, "raw/orders", "3.0.0", "status", "FIELD_REMOVED", "not this one", "ci")
    assert not gate(run(path, instance, ["raw/orders"], partition_key=PK), "raw/orders").passed
    with engine.begin() as conn:
        acceptances.record(conn, "raw/orders", "2.0.0", "status", "FIELD_REMOVED", "status moved out (SALES-42)", "ci")
    engine.dispose()
    check = gate(run(path, instance, ["raw/orders"], partition_key=PK), "raw/orders")
    assert check.passed, check.metadata["lumos/unaccepted"].value
    assert "accepted by ci: status moved out (SALES-42)" in check.metadata["lumos/accepted"].value
