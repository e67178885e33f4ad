"""Run workers that share no DAGSTER_HOME with the code server: the code server, the daemon and the run
worker each have a DAGSTER_HOME of their own and meet only through PostgreSQL (Dagster's storage, and
Lumos' snapshot store) and object storage (Dagster's defs state, on fake-gcs-server). The run is
launched as an operator launches one (`dagster job launch`, queued), the daemon hands it to a launcher
that starts `dagster api execute_run` as Dagster's container launchers do (tests/process_launcher.py),
and the worker builds the code location from the registry document the run was planned with, fetched
from the bucket: what the registry became after planning changes nothing of what the run does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from lumos_dagster.floor.config import load_config
from lumos_dagster.store import SnapshotStore
from tests.emulators import free_port, gcs_emulator
from tests.lake import partitioned_lake, register, write_parquet
from tests.process_launcher import PID_TAG

pytestmark = [pytest.mark.deployment, pytest.mark.servers]

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PG = "postgresql+psycopg://postgres@127.0.0.1:5432"
DAY = "2026-11-23"
BUCKET = "lumos-state"
#: gcsfs' default file system first asks Google's gRPC control plane for the bucket's layout, which an
#: emulator has not (a minute's timeout); its JSON API alone, as against real GCS before gcsfs 2025.
PLAIN_GCSFS = {"GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}


@pytest.fixture
def databases():
    """A fresh database for Dagster and a fresh schema in `test` for Lumos' store, dropped afterwards:
    (Dagster's database name, the store's URL)."""
    import psycopg

    name = f"lumos_workers_{os.getpid()}_{int(time.time() * 1000) % 10**8}"
    with psycopg.connect(host="127.0.0.1", user="postgres", dbname="postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    with psycopg.connect(host="127.0.0.1", user="postgres", dbname="test", autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    yield name, f"{PG}/test?options=-csearch_path%3D{name}"
    with psycopg.connect(host="127.0.0.1", user="postgres", dbname="test", autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    with psycopg.connect(host="127.0.0.1", user="postgres", dbname="postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def bucket():
    """fake-gcs-server holding an empty bucket: (its URL, a gcsfs file system on it)."""
    from gcsfs.core import GCSFileSystem

    server = gcs_emulator()
    fs = GCSFileSystem(endpoint_url=server.url, project="test", token="anon", skip_instance_cache=True)
    fs.mkdir(BUCKET)
    yield server.url, fs
    server.stop()


def _instance(database: str, gcs_url: str, **more) -> dict:
    """A dagster.yaml: Dagster's PostgreSQL storages in `database`, defs state in the bucket."""
    db = {"hostname": "127.0.0.1", "port": 5432, "username": "postgres", "db_name": database,
          "scheme": "postgresql+psycopg2"}  # fmt: skip
    storage = {
        f"{kind}_storage": {"module": module, "class": cls, "config": {"postgres_db": db}}
        for kind, module, cls in (
            ("run", "dagster_postgres.run_storage", "PostgresRunStorage"),
            ("event_log", "dagster_postgres.event_log", "PostgresEventLogStorage"),
            ("schedule", "dagster_postgres.schedule_storage", "PostgresScheduleStorage"),
        )
    }
    state = {"base_path": f"gs://{BUCKET}/lumos-defs-state",
             "storage_options": {"endpoint_url": gcs_url, "token": "anon", "project": "test"}}  # fmt: skip
    return {
        **storage,
        "defs_state_storage": {"module": "dagster", "class": "UPathDefsStateStorage", "config": state},
        "freshness": {"enabled": False},  # as `lumos deploy` writes it
        "telemetry": {"enabled": False},
        **more,
    }


def _home(folder: Path, config: dict) -> Path:
    folder.mkdir(parents=True)
    (folder / "dagster.yaml").write_text(yaml.safe_dump(config))
    return folder


def _env(home: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LUMOS_CONFIG", "DAGSTER_HOME")}
    # `dagster` on the PATH, as in Dagster's images: the container launchers' command names it so
    path = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return {**env, "DAGSTER_HOME": str(home), "PATH": path, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1",
            **PLAIN_GCSFS, **more}  # fmt: skip


def _start(command: list[str], home: Path, env: dict[str, str]) -> subprocess.Popen:
    with open(home / "process.log", "wb") as log:
        return subprocess.Popen(command, cwd=home, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip


def _logs(*homes: Path) -> str:
    return "\n".join(
        f"== {log}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        for home in homes
        for log in sorted(home.glob("*.log"))
    )


def _wait(what: str, check, timeout: float, *homes: Path):
    deadline = time.monotonic() + timeout
    while not (value := check()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}\n{_logs(*homes)}")
        time.sleep(0.5)
    return value


def test_a_run_worker_with_its_own_dagster_home_builds_the_state_its_run_was_planned_with(tmp_path, databases, bucket):
    from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus
    from dagster._core.test_utils import environ

    database, store_url = databases
    gcs_url, fs = bucket
    partitioned_lake(tmp_path / "lake", "sales/orders", days=1)
    write_parquet(tmp_path / "lake" / "ref" / "countries" / "c.parquet", pa.table({"code": ["FR"]}))
    config = {"sources": [{"name": "lake", "root": "lake"}], "store": {"url": store_url},
              "catalog": {"path": "lite.db"}, "partitions": {"start": "2026-11-20"}}  # fmt: skip
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump(config))
    cfg = load_config(str(tmp_path / "lumos.yaml"))
    register(cfg)

    lumos = {"LUMOS_CONFIG": cfg.source_file}
    worker = _home(tmp_path / "worker", _instance(database, gcs_url))
    code = _home(tmp_path / "code-server", _instance(database, gcs_url))
    launcher = {"module": "tests.process_launcher", "class": "ProcessRunLauncher",
                "config": {"dagster_home": str(worker), "env_vars": [f"LUMOS_CONFIG={cfg.source_file}"]}}  # fmt: skip
    coordinator = {"module": "dagster.core.run_coordinator", "class": "QueuedRunCoordinator",
                   "config": {"max_concurrent_runs": 2, "dequeue_interval_seconds": 1}}  # fmt: skip
    daemon = _home(
        tmp_path / "daemon", _instance(database, gcs_url, run_launcher=launcher, run_coordinator=coordinator)
    )
    homes = (code, daemon, worker)
    migrated = subprocess.run([BIN / "dagster", "instance", "migrate"], cwd=daemon, env=_env(daemon),
                              capture_output=True, text=True, timeout=120)  # fmt: skip
    assert migrated.returncode == 0, migrated.stderr

    port = free_port()
    (daemon / "workspace.yaml").write_text(yaml.safe_dump(
        {"load_from": [{"grpc_server": {"host": "127.0.0.1", "port": port, "location_name": "lumos"}}]}
    ))  # fmt: skip
    processes = {
        "code-server": _start([str(BIN / "dagster"), "code-server", "start", "-m", "lumos_dagster.definitions",
                               "-h", "127.0.0.1", "-p", str(port), "--location-name", "lumos"], code,
                              _env(code, **lumos)),
    }  # fmt: skip
    instance = None
    try:
        # the code server publishes the registry: the document in the bucket, its version in PostgreSQL
        ping = [str(BIN / "dagster"), "api", "grpc-health-check", "-p", str(port)]
        _wait("the code server", lambda: subprocess.run(ping, capture_output=True).returncode == 0, 120, *homes)
        (published,) = fs.find(f"{BUCKET}/lumos-defs-state")

        # planned and queued, as an operator launches a run: the plan pins that version
        run_id = "0e5f2a7c-4b1d-4c3e-9a6f-2d8b7c1e5a90"
        tags = json.dumps({"dagster/partition": DAY})
        launch = [str(BIN / "dagster"), "job", "launch", "-w", "workspace.yaml", "-l", "lumos", "-j",
                  "lumos_daily_snapshots", "--run-id", run_id, "--tags", tags]  # fmt: skip
        launched = subprocess.run(launch, cwd=daemon, env=_env(daemon), capture_output=True, text=True, timeout=180)
        assert launched.returncode == 0, launched.stderr[-3000:]
        with environ({"DAGSTER_HOME": str(daemon), **PLAIN_GCSFS}):
            instance = DagsterInstance.get()
        run = instance.get_run_by_id(run_id)
        assert run is not None and run.status == DagsterRunStatus.QUEUED
        plan = instance.get_execution_plan_snapshot(run.execution_plan_snapshot_id)
        pinned = plan.repository_load_data.defs_state_info.info_mapping
        assert [info.version for info in pinned.values()] == [published.rsplit("/", 1)[1]]

        # between planning and running, one dataset vanishes from the registry and another appears
        (tmp_path / "lake" / "ref" / "countries" / "c.parquet").unlink()
        with SnapshotStore(cfg.store_url) as store:
            store.mark_removed(["urn:lumos:dataset:file:ref/countries"])
        write_parquet(tmp_path / "lake" / "crm" / "contacts" / "a.parquet", pa.table({"id": [1]}))
        register(cfg)

        # only now the daemon: it dequeues the run and launches a worker in the worker's DAGSTER_HOME
        processes["daemon"] = _start([str(BIN / "dagster-daemon"), "run", "-w", "workspace.yaml"], daemon,
                                     _env(daemon))  # fmt: skip
        ended = (DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED)
        done = lambda: (r := instance.get_run_by_id(run_id)) is not None and r.status in ended  # noqa: E731
        _wait("the run", done, 240, *homes)
        run = instance.get_run_by_id(run_id)
        assert run.status == DagsterRunStatus.SUCCESS, _logs(*homes)
        # the worker opened the instance of its own DAGSTER_HOME: its compute logs are there
        assert PID_TAG in run.tags and (worker / "storage" / run_id / "compute_logs").is_dir()
        assert not any((home / "storage" / run_id).exists() for home in (code, daemon))

        # it built what it was planned with: the vanished dataset included (its check says its files are
        # gone), the new one not
        events = [e.dagster_event for e in instance.all_logs(run_id) if e.dagster_event]
        built = {e.asset_key.to_user_string() for e in events
                 if e.event_type == DagsterEventType.ASSET_MATERIALIZATION}  # fmt: skip
        assert built == {"sales/orders", "ref/countries"}
        evaluations = [e.event_specific_data for e in events if e.event_type == DagsterEventType.ASSET_CHECK_EVALUATION]
        checks = {(c.asset_key.to_user_string(), c.check_name): c.passed for c in evaluations}
        assert checks[("ref/countries", "files_readable")] is False
        # the snapshot is in the PostgreSQL store
        with SnapshotStore(cfg.store_url) as store:
            snapshot = store.latest("urn:lumos:dataset:file:sales/orders", DAY)
        assert snapshot is not None and snapshot.stats.file_count == 2

        # no process kept defs state on its own disk: it is in the bucket only
        for home in homes:
            assert not [p for p in home.rglob("*") if "defs_state" in p.name], home
    finally:
        for process in processes.values():
            os.killpg(process.pid, signal.SIGTERM)
        for process in processes.values():
            process.wait(timeout=30)
        if instance is not None:  # workers the sensors' runs started may still run
            for record in instance.get_runs():
                if PID_TAG in record.tags and not record.is_finished:
                    try:
                        os.killpg(int(record.tags[PID_TAG]), signal.SIGTERM)
                    except ProcessLookupError:
                        pass
            instance.dispose()
