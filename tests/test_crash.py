"""A Lumos run killed mid-way (`kill -9`): the Dagster instance, the snapshot store and the catalog
outbox stay whole and agree, and the next run completes."""

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
import yaml

from benchmarks.lake import FIRST_DAY, generate_lake
from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog
from lumos_dagster.config import load_config
from lumos_dagster.store import SnapshotStore

pytestmark = [pytest.mark.dagster, pytest.mark.servers, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
DATASETS = 1500  # enough that the kill lands mid-run: a run records ~400 datasets a second


def _materialize(env) -> subprocess.Popen:
    cmd = [str(BIN / "dagster"), "asset", "materialize", "-m", "lumos_dagster.definitions",
           "--select", "* and not group:reports", "--partition", str(FIRST_DAY)]  # fmt: skip
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _materialized(instance: dg.DagsterInstance, run_id: str) -> set[str]:
    events = instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
    return {"/".join(e.dagster_event.asset_key.path) for e in events}


def test_a_run_killed_mid_way_loses_nothing_and_the_next_run_completes(tmp_path, monkeypatch):
    generate_lake(tmp_path / "lake", DATASETS, 1, 1)
    home = tmp_path / "dagster"
    home.mkdir()
    (home / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text())
    config_path = tmp_path / "lumos.yaml"
    config_path.write_text(yaml.safe_dump({
        "sources": [{"name": "lake", "root": str(tmp_path / "lake")}],
        "store": {"path": str(tmp_path / "store.db")},
        "catalog": {"path": str(tmp_path / "catalog.db")},
        "partitions": {"start": str(FIRST_DAY)},
    }))  # fmt: skip
    env = {**os.environ, "LUMOS_CONFIG": str(config_path), "DAGSTER_HOME": str(home), "PYTHONPATH": str(ROOT)}
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    subprocess.run([str(BIN / "lumos"), "discover"], env=env, cwd=ROOT, check=True, capture_output=True)

    run = _materialize(env)
    try:
        deadline = time.monotonic() + 240
        with dg.DagsterInstance.get() as instance:
            while time.monotonic() < deadline and run.poll() is None:
                runs = instance.get_runs()
                if runs and len(_materialized(instance, runs[0].run_id)) >= 20:
                    break
                time.sleep(0.05)
    finally:
        run.kill()  # SIGKILL mid-run: no flush, no clean-up
        run.wait()

    for db in [*home.rglob("*.db"), tmp_path / "store.db", tmp_path / "catalog.db"]:
        conn = sqlite3.connect(db)
        assert conn.execute("pragma integrity_check").fetchone() == ("ok",), db
        conn.close()
    config = load_config(str(config_path))
    with SnapshotStore(config.store_url) as store, dg.DagsterInstance.get() as instance:
        (killed,) = instance.get_runs()
        recorded = _materialized(instance, killed.run_id)
        assert 20 <= len(recorded) < DATASETS
        stored = {r.name for r in store.datasets() if store.latest(r.urn) is not None}
        assert recorded <= stored  # Dagster never says "materialized" of a snapshot the store lacks
        engine = store.engine
        with engine.connect() as conn:  # each snapshot was queued for the catalog in its own transaction
            snapshots = conn.exec_driver_sql("select count(*) from lumos_snapshots").scalar()
            queued = conn.exec_driver_sql("select count(*) from lumos_outbox").scalar()
        assert snapshots == queued and snapshots >= len(recorded)

    again = _materialize(env)
    _, err = again.communicate(timeout=600)
    assert again.returncode == 0, err[-3000:]
    with SnapshotStore(config.store_url) as store, dg.DagsterInstance.get() as instance:
        latest = instance.get_runs(limit=1)[0]
        assert latest.status == dg.DagsterRunStatus.SUCCESS
        assert len(_materialized(instance, latest.run_id)) == DATASETS
        assert store.outbox_counts(DataHubLiteCatalog(config.lite_path).name).get("pending", 0) == 0
    assert len(list(DataHubLiteCatalog(config.lite_path).read_all())) == DATASETS


RECORDER = """
import sys, time
from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog
from lumos_dagster.delivery.worker import Delivery
from tests.test_store import record_batch, snap
recorder = Delivery(sys.argv[1], lambda: [DataHubLiteCatalog(sys.argv[2])], print)
record_batch(recorder, [snap("a", "2026-11-20")])
print(recorder._worker.pid, flush=True)
time.sleep(60)
"""


def test_the_delivery_worker_ends_with_a_run_that_is_killed(tmp_path):
    import signal

    process = subprocess.Popen(
        [sys.executable, "-c", RECORDER, f"sqlite:///{tmp_path}/store.db", str(tmp_path / "lite.db")],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    worker = int(process.stdout.readline())
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            return  # gone with the run: nothing left holding the store and the catalog open
        with open(f"/proc/{worker}/stat") as fh:
            if fh.read().split(") ")[1].startswith("Z"):  # ended, waiting to be reaped by init
                return
        time.sleep(0.2)
    raise AssertionError(f"the delivery worker {worker} outlived its run")
