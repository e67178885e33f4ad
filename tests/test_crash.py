"""A Lumos run killed mid-way (`kill -9`): the Dagster instance, the snapshot store and the catalog
outbox stay whole and agree, and the next run completes."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import psutil
import pytest
import yaml

from benchmarks.lake import FIRST_DAY, generate_lake
from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog
from lumos_dagster.floor.config import load_config
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


def _monitored(home: Path, run_id: str) -> dg.DagsterRunStatus:
    """The run's status once dagster-daemon's run monitoring (polling each second) has seen it, or
    after 60 s. The daemon loads no code location: monitoring is the instance's."""
    (home / "workspace.yaml").write_text("load_from: []\n")
    daemon = subprocess.Popen([str(BIN / "dagster-daemon"), "run", "-w", str(home / "workspace.yaml")], cwd=home,
                              env={**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": str(ROOT)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        with dg.DagsterInstance.get() as instance:
            while (status := instance.get_run_by_id(run_id).status) == dg.DagsterRunStatus.STARTED:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.5)
        return status
    finally:
        os.killpg(daemon.pid, signal.SIGKILL)
        daemon.wait()


def test_a_run_killed_mid_way_loses_nothing_and_the_next_run_completes(tmp_path, monkeypatch):
    """And leaves no process behind within 5 s, and run monitoring shows it failed, not started."""
    generate_lake(tmp_path / "lake", DATASETS, 1, 1)
    home = tmp_path / "dagster"
    home.mkdir()
    instance_config = yaml.safe_load((ROOT / "dagster.yaml").read_text())
    instance_config["run_monitoring"]["poll_interval_seconds"] = 1
    # the tuning corner's optional launcher, that tells a run's process died (Dagster's own cannot)
    instance_config["run_launcher"] = {"module": "lumos_dagster.resources.tuning.launcher", "class": "LumosRunLauncher"}
    (home / "dagster.yaml").write_text(yaml.safe_dump(instance_config))
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
    workers: set[int] = set()
    forked: set[int] = set()
    try:
        deadline = time.monotonic() + 240
        with dg.DagsterInstance.get() as instance:
            while time.monotonic() < deadline and run.poll() is None:
                runs = instance.get_runs()
                if runs and len(_materialized(instance, runs[0].run_id)) >= 20:
                    break
                time.sleep(0.05)
        # killed while the delivery worker runs and schema readers read the next batch (forked: the run's
        # command line); its other children are Dagster's (compute log capture)
        while time.monotonic() < deadline and run.poll() is None:
            workers = descendants(run.pid)
            if len(forked := _forked(run.pid, workers)) >= 2:
                break
            time.sleep(0.01)
    finally:
        run.kill()  # SIGKILL mid-run: no flush, no clean-up
        run.wait()
    assert len(forked) >= 2  # the delivery worker, and schema readers reading ahead
    assert_ended(workers, within=5)

    with dg.DagsterInstance.get() as instance:
        (killed,) = instance.get_runs()
        assert killed.status == dg.DagsterRunStatus.STARTED  # what the UI showed, for good
    assert _monitored(home, killed.run_id) == dg.DagsterRunStatus.FAILURE
    with dg.DagsterInstance.get() as instance:
        (failure,) = instance.all_logs(killed.run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
        assert f"its process {run.pid} on " in failure.message  # and why

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


def test_the_launcher_fails_a_run_only_when_its_process_is_known_to_be_gone():
    """Run monitoring asks the launcher about each STARTED run: FAILED only for a process of this
    host that ended (or whose pid another process took); a run it cannot check stays RUNNING."""
    from dagster._core.launcher import WorkerStatus
    from dagster._core.storage.dagster_run import DagsterRun

    from lumos_dagster.resources.ownership import PROCESS_TAG as TAG
    from lumos_dagster.resources.ownership import place as _place
    from lumos_dagster.resources.ownership import started as _started
    from lumos_dagster.resources.tuning.launcher import LumosRunLauncher

    ended = subprocess.Popen(["true"])
    ended.wait()
    me, here = os.getpid(), _place()
    cases = {
        "this process": ({"place": here, "pid": me, "started": _started(me)}, WorkerStatus.RUNNING),
        "a process that ended": ({"place": here, "pid": ended.pid, "started": "1"}, WorkerStatus.FAILED),
        "its pid taken by another process": ({"place": here, "pid": me, "started": "1"}, WorkerStatus.FAILED),
        "another host or container": ({"place": "elsewhere", "pid": ended.pid, "started": "1"}, WorkerStatus.RUNNING),
        "no process recorded": (None, WorkerStatus.RUNNING),
    }
    launcher = LumosRunLauncher()
    got = {
        what: launcher.check_run_worker_health(
            DagsterRun(job_name="j", run_id=what.replace(" ", "-"), tags={TAG: json.dumps(tag)} if tag else {})
        ).status
        for what, (tag, _) in cases.items()
    }
    assert got == {what: status for what, (_, status) in cases.items()}


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
    process = subprocess.Popen(
        [sys.executable, "-c", RECORDER, f"sqlite:///{tmp_path}/store.db", str(tmp_path / "lite.db")],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    worker = int(process.stdout.readline())
    process.kill()
    process.wait()
    assert_ended({worker}, within=5)  # gone with the run: nothing left holding the store and the catalog open


def reads_forever(item):
    """A schema reader busy when the run is killed (a slow or stuck file): says its pid, never returns."""
    os.write(1, f"{os.getpid()}\n".encode())  # one write: the two workers' lines never interleave
    time.sleep(600)


POOL = """
import sys
from lumos_dagster.formats.readers import PoolReader
from tests.test_crash import reads_forever
PoolReader(reads_forever, workers=2, start=sys.argv[1])([("/a.parquet", None), ("/b.parquet", None)])
"""


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_the_schema_readers_end_with_a_run_that_is_killed(start):
    """Busy pool workers outlived a killed run (5 of 10 tries), holding the store's SQLite file open."""
    process = subprocess.Popen([sys.executable, "-c", POOL, start], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    try:
        readers = {int(process.stdout.readline()) for _ in range(2)}
        left = descendants(process.pid)
        assert readers <= left
    finally:
        process.kill()
        process.wait()
    assert_ended(left, within=5)


def descendants(pid: int) -> set[int]:
    return {p.pid for p in psutil.Process(pid).children(recursive=True)}


def _forked(parent: int, pids: set[int]) -> set[int]:
    """The processes of `pids` forked from `parent` (they have its command line)."""
    out = set()
    for pid in pids:
        try:
            if psutil.Process(pid).cmdline() == psutil.Process(parent).cmdline():
                out.add(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def assert_ended(pids: set[int], within: float) -> None:
    """Each process ends within `within` seconds (a zombie has ended: it waits for init to reap it)."""
    deadline = time.monotonic() + within
    while True:
        alive = set()
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    alive.add(pid)
            except psutil.NoSuchProcess:
                pass
        if not alive:
            return
        if time.monotonic() > deadline:
            for pid in alive:  # leave nothing behind for the next test either
                os.kill(pid, signal.SIGKILL)
            raise AssertionError(f"processes {sorted(alive)} outlived their killed run by {within:g} s")
        time.sleep(0.1)
