"""The code server and every run worker build the code location from the same registry document
(Dagster defs state, `lumos_dagster.assets.state`): a run does what it was planned with, whatever the registry
became meanwhile, and the next load of the code location sees the registry as it is."""

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from dagster import AssetCheckKey, AssetKey, DagsterInstance, DagsterRunStatus
from dagster._cli.job import _create_run
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import ModuleTarget
from dagster._grpc.types import ExecuteRunArgs
from dagster._serdes import serialize_value

from lumos_dagster.floor.config import load_config
from lumos_dagster.store import SnapshotStore
from tests.lake import partitioned_lake, register, write_parquet

pytestmark = pytest.mark.dagster

ROOT = Path(__file__).resolve().parents[1]
DAGSTER = str(Path(sys.executable).parent / "dagster")


def _location_keys(instance) -> tuple[set[str], object]:
    """Load the code location as a code server does: (its dataset asset keys, the location)."""
    target = ModuleTarget(module_name="lumos_dagster.definitions", attribute=None, working_directory=str(ROOT),
                          location_name="lumos")  # fmt: skip
    context = WorkspaceProcessContext(instance, target)
    location = context.create_request_context().get_code_location("lumos")
    repo = next(iter(location.get_repositories().values()))
    keys = {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys() if not k.path[0].startswith("lumos")}
    return keys, (context, location, repo)


def _project(tmp_path, monkeypatch):
    """A lake holding sales/orders (and whatever the test wrote under tmp_path/lake), registered, and a
    Dagster home on Dagster's stock instance as DAGSTER_HOME: (the configuration, the home)."""
    partitioned_lake(tmp_path / "lake", "sales/orders", days=1)
    config = {"sources": [{"name": "lake", "root": "lake"}], "store": {"path": "store.db"},
              "catalog": {"path": "lite.db"}, "partitions": {"start": "2026-11-20"}}  # fmt: skip
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump(config))
    cfg = load_config(str(tmp_path / "lumos.yaml"))
    register(cfg)
    home = tmp_path / "dagster"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")  # Dagster's stock instance
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return cfg, home


def test_a_run_worker_builds_the_definitions_its_run_was_planned_with(tmp_path, monkeypatch):
    write_parquet(tmp_path / "lake" / "ref" / "countries" / "c.parquet", pa.table({"code": ["FR"]}))
    cfg, home = _project(tmp_path, monkeypatch)
    monkeypatch.setenv("LUMOS_CONFIG", cfg.source_file)

    with DagsterInstance.get() as instance:
        keys, (context, location, repo) = _location_keys(instance)
        with context:
            assert keys == {"sales/orders", "ref/countries"}
            job = repo.get_full_job("lumos_daily_snapshots")
            run = _create_run(instance=instance, code_location=location, remote_repo=repo, remote_job=job,
                              run_config={}, tags={"dagster/partition": "2026-11-23"}, op_selection=None,
                              run_id=None)  # fmt: skip
        plan = instance.get_execution_plan_snapshot(run.execution_plan_snapshot_id)
        assert plan.repository_load_data.defs_state_info is not None  # the registry document, pinned

        # between planning and running, one dataset vanishes from the registry and another appears
        (tmp_path / "lake" / "ref" / "countries" / "c.parquet").unlink()
        with SnapshotStore(cfg.store_url) as store:
            store.mark_removed(["urn:lumos:dataset:file:ref/countries"])
        write_parquet(tmp_path / "lake" / "crm" / "contacts" / "a.parquet", pa.table({"id": [1]}))
        register(cfg)

        args = ExecuteRunArgs(job_origin=run.job_code_origin, run_id=run.run_id, instance_ref=instance.get_ref())
        worker = subprocess.run([DAGSTER, "api", "execute_run", serialize_value(args)], capture_output=True,
                                text=True, cwd=ROOT, timeout=300)  # fmt: skip
        assert worker.returncode == 0, worker.stderr[-3000:]
        assert instance.get_run_by_id(run.run_id).status == DagsterRunStatus.SUCCESS
        # the run worker built what the run was planned with: the vanished dataset included (its check
        # says its files are gone), the new one not
        assert instance.get_latest_materialization_event(AssetKey(["sales", "orders"])) is not None
        readable = AssetCheckKey(AssetKey(["ref", "countries"]), "files_readable")
        (check,) = instance.event_log_storage.get_latest_asset_check_execution_by_key([readable]).values()
        assert check.run_id == run.run_id and check.status.value == "FAILED"
        assert instance.get_latest_materialization_event(AssetKey(["crm", "contacts"])) is None

        reloaded, (context, _, _) = _location_keys(instance)  # the next load: the registry as it is now
        context.__exit__(None, None, None)
        assert reloaded == {"sales/orders", "crm/contacts"}
    assert os.path.isdir(home / "storage" / "defs_state") or any(home.rglob("defs_state"))


def test_a_run_in_the_process_that_planned_it_builds_what_was_planned(tmp_path, monkeypatch):
    """`dagster asset materialize` plans and runs in one process and reconstructs the job several
    times with no pinned version: each reconstruction builds from the state the plan used, without
    reading the registry again."""
    from dagster._core.definitions.definitions_load_context import DefinitionsLoadContext, DefinitionsLoadType
    from dagster._core.storage.defs_state.base import set_defs_state_storage

    from lumos_dagster.assets.state import registry_state

    cfg, _ = _project(tmp_path, monkeypatch)
    with DagsterInstance.get() as instance, set_defs_state_storage(instance.defs_state_storage):
        with DefinitionsLoadContext.scoped(DefinitionsLoadContext(DefinitionsLoadType.INITIALIZATION)):
            planned = registry_state(cfg)
        write_parquet(tmp_path / "lake" / "crm" / "contacts" / "a.parquet", pa.table({"id": [1]}))
        register(cfg)  # a dataset recorded after planning
        with DefinitionsLoadContext.scoped(DefinitionsLoadContext(DefinitionsLoadType.RECONSTRUCTION)):
            rebuilt = registry_state(cfg)
        with DefinitionsLoadContext.scoped(DefinitionsLoadContext(DefinitionsLoadType.INITIALIZATION)):
            reloaded = registry_state(cfg)
    assert rebuilt.digest == planned.digest
    assert reloaded.digest != planned.digest  # the next load sees the registry as it is
