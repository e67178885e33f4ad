"""Datasets that vanish from storage are soft-deleted in the catalogs, with a fail-safe."""

import shutil
from datetime import UTC, datetime

import pytest
import yaml
from click.testing import CliRunner
from dagster import DagsterInstance

from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog, open_lite
from lumos_dagster.cli import main
from lumos_dagster.definitions import build_definitions
from lumos_dagster.delivery.outbox import deliver
from lumos_dagster.floor.config import load_config
from lumos_dagster.floor.model import DatasetRef, Snapshot
from lumos_dagster.store import SnapshotStore
from tests.lake import partitioned_lake

pytestmark = pytest.mark.dagster

NAMES = ["sales/orders", "sales/refunds", "crm/contacts", "crm/accounts", "web/clicks"]


def setup(tmp_path):
    for name in NAMES:
        partitioned_lake(tmp_path / "lake", name, days=1, files_per_day=1)
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump({
        "sources": [{"name": "lake", "root": "lake"}],
        "store": {"path": "store.db"},
        "catalog": {"type": "datahub-lite", "path": "lite.db"},
    }))  # fmt: skip
    config = load_config(str(tmp_path / "lumos.yaml"))
    assert discover(tmp_path).exit_code == 0
    # as if every dataset had been materialized once: their snapshots are in the catalog
    store = SnapshotStore(config.store_url)
    catalog = DataHubLiteCatalog(config.lite_path)
    now = datetime.now(UTC)
    refs = [DatasetRef(r.platform, r.name, r.location, r.format) for r in store.datasets()]
    store.put([Snapshot(ref, "2026-11-23", now, version="1.0.0") for ref in refs], catalogs=[catalog.name])
    deliver(store, catalog)
    store.close()
    return config


def discover(tmp_path):
    return CliRunner().invoke(main, ["discover", "-c", str(tmp_path / "lumos.yaml")])


def removed_in_lite(config) -> dict[str, bool]:
    lite = open_lite(config.lite_path, read_only=True)
    try:
        out = {}
        for name in NAMES:
            got = lite.get(f"urn:li:dataset:(urn:li:dataPlatform:file,{name},PROD)", ["status"], typed=True)
            out[name] = got["status"].removed
        return out
    finally:
        lite.close()


def asset_names(config) -> set[str]:
    keys = build_definitions(config).resolve_asset_graph().get_all_asset_keys()
    return {"/".join(k.path) for k in keys} - {"lumos_cost_report", "lumos_overview"}


def test_a_vanished_dataset_is_soft_deleted_and_comes_back_when_it_reappears(tmp_path):
    config = setup(tmp_path)
    shutil.move(tmp_path / "lake" / "web", tmp_path / "parked")
    result = discover(tmp_path)
    assert result.exit_code == 0, result.output
    assert "web/clicks                               removed (soft-deleted in the catalogs)" in result.stdout
    assert removed_in_lite(config) == {n: n == "web/clicks" for n in NAMES}
    assert "web/clicks" not in asset_names(config)
    store = SnapshotStore(config.store_url)
    last = store.latest("urn:lumos:dataset:file:web/clicks")
    store.close()
    # history ends with the removal: a breaking change for whoever read it, hence a major version
    assert (last.version, last.previous_version, last.change_class) == ("2.0.0", "1.0.0", "major")
    assert [(c.kind, c.severity) for c in last.changes] == [("DATASET_REMOVED", "BREAKING")]

    shutil.move(tmp_path / "parked", tmp_path / "lake" / "web")
    assert discover(tmp_path).exit_code == 0
    assert "web/clicks" in asset_names(config)


def test_when_most_datasets_vanish_at_once_nothing_is_removed(tmp_path):
    config = setup(tmp_path)
    for folder in ("sales", "crm"):  # 4 of 5: 80% > 75%
        shutil.rmtree(tmp_path / "lake" / folder)
    result = discover(tmp_path)
    assert result.exit_code == 1
    assert "4 of its 5 datasets vanished at once (more than 75%): nothing was removed" in result.stdout
    assert not any(removed_in_lite(config).values())
    assert asset_names(config) == set(NAMES)


def test_an_unreachable_root_removes_nothing(tmp_path):
    config = setup(tmp_path)
    shutil.move(tmp_path / "lake", tmp_path / "unmounted")
    result = discover(tmp_path)
    assert result.exit_code == 1 and "does not exist" in result.stdout
    assert not any(removed_in_lite(config).values())
    assert asset_names(config) == set(NAMES)


def test_the_lumos_discover_job_removes_in_a_deployment_and_fails_saying_why(tmp_path):
    config = setup(tmp_path)
    defs = build_definitions(config)
    job, schedule = defs.resolve_job_def("lumos_discover"), defs.resolve_schedule_def("lumos_discover_daily")
    assert schedule.job_name == "lumos_discover" and schedule.default_status.value == "RUNNING"

    shutil.move(tmp_path / "lake" / "web", tmp_path / "parked")
    partitioned_lake(tmp_path / "lake", "sales/returns", days=1, files_per_day=1)
    instance = DagsterInstance.ephemeral()
    result = job.execute_in_process(instance=instance)
    assert result.success
    assert removed_in_lite(config) == {n: n == "web/clicks" for n in NAMES}
    logs = [e.user_message for e in instance.all_logs(result.run_id)]
    assert any("web/clicks vanished from storage" in m for m in logs)
    assert any("new dataset(s), assets after the code location reloads: sales/returns" in m for m in logs)
    assert "sales/returns" in asset_names(config)  # a reload sees it

    for folder in ("sales", "crm"):  # most of what is left vanishes: nothing is removed, the run fails
        shutil.rmtree(tmp_path / "lake" / folder)
    failed = job.execute_in_process(instance=DagsterInstance.ephemeral(), raise_on_error=False)
    assert not failed.success
    (failure,) = [e for e in failed.all_events if e.event_type_value == "STEP_FAILURE"]
    assert "nothing was removed" in failure.event_specific_data.error.message
    assert removed_in_lite(config) == {n: n == "web/clicks" for n in NAMES}
