"""`lumos deploy` for real: Dagster's PostgreSQL storage on the local server (a database of the
test's own), two code locations each served by its own `dagster code-server start`, the daemon and
the webserver as separate processes, kept by supervisord. A run launched through the webserver's GraphQL goes through
the queue, runs on its location's code server and reaches DataHub Lite. The storage sensors tick
without anyone starting them: their first tick snapshots every dataset's current partition (nobody
materializes anything), a day that lands is snapshotted, and a new dataset too, once its sensor had
the webserver reload its location. supervisord restarts a process that dies; `down` leaves no
process behind. The other outputs, systemd's units and the values of Dagster's Helm chart, are checked
by systemd's own verifier and against the chart's values schema."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from datetime import date, timedelta
from pathlib import Path

import pytest
import yaml

from lumos_dagster.cli.deploy_config import DeployError
from lumos_dagster.cli.deployment import Deployment, prepare_database
from lumos_dagster.floor.config import load_config
from tests.lake import lite_properties, partitioned_lake, register

pytestmark = pytest.mark.deployment

DAY = date(2026, 11, 24)
LANDED = DAY + timedelta(days=1)  # a day of data that lands while the deployment runs
#: location → (its dataset, its source)
LOCATIONS = {"sales": ("sales/orders", "sales_lake"), "crm": ("crm/customers", "crm_lake")}

LAUNCH = """mutation($params: ExecutionParams!) { launchRun(executionParams: $params) { __typename
  ... on LaunchRunSuccess { run { runId status } }
  ... on Error { message } } }"""
RUN = "query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }"
RUNS = """query($source: String!, $trigger: String!) {
  runsOrError(filter: {tags: [{key: "lumos/source", value: $source}, {key: "lumos/trigger", value: $trigger}]}) {
    ... on Runs { results { runId } } } }"""
SENSORS = """query($location: String!) {
  sensorsOrError(repositorySelector: {repositoryLocationName: $location, repositoryName: "__repository__"}) {
    ... on Sensors { results { name sensorState { status ticks(limit: 5) { status skipReason } } } } } }"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def database():
    """A PostgreSQL database name for Dagster (`up` creates it), dropped afterwards."""
    import psycopg

    name = f"lumos_deploy_{os.getpid()}_{int(time.time() * 1000) % 10**8}"
    yield f"postgresql+psycopg2://postgres@127.0.0.1:5432/{name}"
    with psycopg.connect(host="127.0.0.1", user="postgres", dbname="postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _project(tmp: Path) -> dict[str, Path]:
    """Two lakes in two folders, a lumos.yaml for each (one store, one catalog), both discovered."""
    configs = {}
    for location, (dataset, source) in LOCATIONS.items():
        partitioned_lake(tmp / location, dataset, days=1, start=DAY, files_per_day=1)
        config = {
            "sources": [{"name": source, "type": "local", "root": str(tmp / location)}],
            "store": {"path": str(tmp / "store.db")},
            "catalog": {"type": "datahub-lite", "path": str(tmp / "catalog.db")},
            "partitions": {"start": "2026-11-01"},
        }
        configs[location] = tmp / f"{location}.yaml"
        configs[location].write_text(yaml.safe_dump(config))
        register(load_config(str(configs[location])))
    return configs


def _groups_left(pids: dict[str, int]) -> list[str]:
    """The processes of `pids` whose process group (their children included) still has a member."""
    left = []
    for name, pgid in pids.items():
        try:
            os.killpg(pgid, 0)
            left.append(name)
        except ProcessLookupError:
            pass
    return left


def _processes_of(deployment: Deployment) -> list[int]:
    """Every process on this DAGSTER_HOME: the deployment's, their children (gRPC servers, run workers)."""
    mark = f"DAGSTER_HOME={deployment.dagster_home}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and mark in (proc / "environ").read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except OSError:  # gone meanwhile, or not ours to read
            pass
    return found


def _logs(deployment: Deployment) -> str:
    """The end of every process' log, for a failure's message."""
    return "\n".join(
        f"== {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        for log in sorted((deployment.folder / "logs").glob("*.log"))
    )


def _wait(deployment: Deployment, what: str, check, timeout: float):
    deadline = time.monotonic() + timeout
    while not (value := check()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}\n{_logs(deployment)}")
        time.sleep(0.5)
    return value


def _in_lite(catalog: Path, dataset: str) -> str | None:
    """The partition of `dataset`'s snapshot in DataHub Lite, if it is there."""
    props = lite_properties(catalog, dataset)
    return props["lumos.partition"] if props else None


def _check_instance(deployment: Deployment) -> None:
    """The instance every process loads: Dagster's own classes, its DefaultRunLauncher too, configured as generated."""
    from dagster import DagsterInstance, DefaultRunLauncher
    from dagster._core.definitions.run_request import InstigatorType
    from dagster._core.run_coordinator import QueuedRunCoordinator
    from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage, PostgresScheduleStorage

    with DagsterInstance.from_config(str(deployment.dagster_home)) as instance:
        assert type(instance.run_storage) is PostgresRunStorage
        assert type(instance.event_log_storage) is PostgresEventLogStorage
        assert type(instance.schedule_storage) is PostgresScheduleStorage
        assert isinstance(instance.run_coordinator, QueuedRunCoordinator)
        assert instance.run_coordinator.get_run_queue_config().max_concurrent_runs == 2
        assert instance.run_monitoring_enabled and instance.run_monitoring_max_runtime_seconds == 3600
        assert type(instance.run_launcher) is DefaultRunLauncher  # nothing Lumos-only asked of the launcher
        # no freshness daemon: it would write an event per asset of the estate, none having a policy
        assert "FRESHNESS_DAEMON" not in instance.get_required_daemon_types()
        retention = instance.get_tick_retention_settings(InstigatorType.SENSOR)
        assert {s.value: days for s, days in retention.items()} == {
            "STARTED": -1, "SKIPPED": 1, "SUCCESS": 7, "FAILURE": 30,
        }  # fmt: skip


def _running(deployment: Deployment, location: str) -> bool:
    """Whether `location`'s storage sensor is running, as it must be by default."""
    sensors = deployment.graphql(SENSORS, {"location": location})["sensorsOrError"]["results"]
    (state,) = [s["sensorState"] for s in sensors if s["name"] == f"lumos_storage_{LOCATIONS[location][1]}"]
    return state["status"] == "RUNNING"


def _finished(deployment: Deployment, run_id: str) -> str | None:
    status = deployment.graphql(RUN, {"id": run_id})["runOrError"]["status"]
    return status if status in ("SUCCESS", "FAILURE", "CANCELED") else None


def _requested(deployment: Deployment, location: str, trigger: str = "storage-change") -> str | None:
    """How the newest run `location`'s storage sensor requested (for `trigger`) ended, once it has."""
    found = deployment.graphql(RUNS, {"source": LOCATIONS[location][1], "trigger": trigger})
    runs = found["runsOrError"]["results"]
    return _finished(deployment, runs[0]["runId"]) if runs else None


def _assets(deployment: Deployment, location: str) -> set[str]:
    """The asset keys the webserver has for `location`, as `a/b` strings."""
    query = """query($location: String!) { repositoryOrError(repositorySelector:
      {repositoryLocationName: $location, repositoryName: "__repository__"}) {
        ... on Repository { assetNodes { assetKey { path } } } } }"""
    nodes = deployment.graphql(query, {"location": location})["repositoryOrError"].get("assetNodes", [])
    return {"/".join(node["assetKey"]["path"]) for node in nodes}


def test_two_code_locations_run_through_the_queue_into_datahub_lite(tmp_path, database):
    configs, catalog = _project(tmp_path), tmp_path / "catalog.db"
    # a dataset that appears after `lumos discover`: the crm sensor's first tick records it and asks
    # the webserver (LUMOS_DAGSTER_URL) to reload the crm location; its next tick requests its partition
    partitioned_lake(tmp_path / "crm", "crm/contacts", days=1, start=DAY, files_per_day=1)
    deployment = Deployment(tmp_path / "deploy", configs, port=_free_port(), pg_url=database)
    try:
        seconds = deployment.up(timeout=120)
        pids = deployment.pids()
        assert set(pids) == {"code-server-sales", "code-server-crm", "daemon", "webserver"}
        assert seconds < 90
        assert {name: error for name, (_, error) in deployment.location_status().items()} == {
            "sales": None,
            "crm": None,
        }
        _check_instance(deployment)

        # the storage sensors run without anyone starting them, and their first tick snapshots each dataset's
        # newest partition with files: the catalog fills with nobody materializing anything (issue 41)
        for location, (dataset, _) in LOCATIONS.items():
            assert _running(deployment, location)
            first = lambda x=location: _requested(deployment, x, "first-start")  # noqa: E731
            assert _wait(deployment, f"{location}'s first snapshot", first, 90) == "SUCCESS", _logs(deployment)
            assert _in_lite(catalog, dataset) == str(DAY)
        # a day lands in the sales lake: the next tick (30 s on) requests its partition
        partitioned_lake(tmp_path / "sales", "sales/orders", days=1, start=LANDED, files_per_day=1)
        _wait(deployment, "the crm location to reload", lambda: "crm/contacts" in _assets(deployment, "crm"), 30)
        assert _assets(deployment, "sales") >= {"sales/orders"} and "crm/contacts" not in _assets(deployment, "sales")

        # meanwhile, a materialization of the crm location launched as the UI launches one: queued first
        params = {
            "selector": {
                "repositoryLocationName": "crm",
                "repositoryName": "__repository__",
                "jobName": "__ASSET_JOB",
                "assetSelection": [{"path": ["crm", "customers"]}],
            },
            "executionMetadata": {"tags": [{"key": "dagster/partition", "value": str(DAY)}]},
        }
        launched = deployment.graphql(LAUNCH, {"params": params})["launchRun"]
        assert launched["__typename"] == "LaunchRunSuccess", launched
        assert launched["run"]["status"] == "QUEUED"
        status = _wait(deployment, "the launched run", lambda: _finished(deployment, launched["run"]["runId"]), 90)
        assert status == "SUCCESS", _logs(deployment)
        assert _in_lite(catalog, "crm/customers") == str(DAY)

        for location, dataset, partition in (("sales", "sales/orders", LANDED), ("crm", "crm/contacts", DAY)):
            status = _wait(
                deployment, f"the run {location}'s sensor requests", lambda x=location: _requested(deployment, x), 75
            )
            assert status == "SUCCESS", _logs(deployment)
            assert _in_lite(catalog, dataset) == str(partition)

        rss = deployment.rss_mb()
        assert set(rss) == set(pids) and all(mb is None or mb > 20 for mb in rss.values())

        # `lumos deploy status`: supervisorctl's view of each process, then Lumos' own checks
        shown = subprocess.run([str(Path(sys.executable).parent / "lumos"), "deploy", "status", "--folder",
                                str(deployment.folder)], capture_output=True, text=True, timeout=60)  # fmt: skip
        assert shown.returncode == 0, shown.stdout + shown.stderr
        for name in pids:
            assert any(line.split()[:2] == [name, "RUNNING"] for line in shown.stdout.splitlines()), shown.stdout
        assert "daemons: healthy" in shown.stdout

        # a process that dies is started again by supervisord (through wait_ports: the same command)
        os.kill(pids["daemon"], signal.SIGKILL)
        again = lambda: deployment.running().get("daemon") not in (None, pids["daemon"])  # noqa: E731
        _wait(deployment, "supervisord to restart the daemon", again, 30)
        pids = deployment.pids()
    finally:
        stopped = deployment.down()
    assert set(stopped) == set(pids)
    assert _groups_left(pids) == []
    assert deployment.supervisor() is None and deployment.running() == {}
    assert _processes_of(deployment) == []  # no orphan: no code server's child, no run worker


def test_a_location_that_fails_to_load_fails_up_naming_its_log_and_leaves_nothing(tmp_path, database):
    configs = _project(tmp_path)
    broken = yaml.safe_load(configs["crm"].read_text())
    broken["store"] = {"url": "postgresql+psycopg://postgres@127.0.0.1:1/nowhere"}  # no server there
    configs["crm"].write_text(yaml.safe_dump(broken))
    deployment = Deployment(tmp_path / "deploy", configs, port=_free_port(), pg_url=database)
    with pytest.raises(DeployError) as failed:
        deployment.up(timeout=120)
    message = str(failed.value)
    assert "code location crm failed to load" in message
    assert str(tmp_path / "deploy" / "logs" / "code-server-crm.log") in message
    assert "cannot open the snapshot store" in message  # the cause, not only "loading failed"
    assert deployment.supervisor() is None and _processes_of(deployment) == []


def test_a_database_is_not_shared_by_two_deployment_folders(tmp_path, database):
    """Dagster keeps a code location's state in the database and DAGSTER_HOME together."""
    import psycopg

    first, second = tmp_path / "a" / "dagster", tmp_path / "b" / "dagster"
    prepare_database(database, first)
    name = database.rsplit("/", 1)[1]
    with psycopg.connect(host="127.0.0.1", user="postgres", dbname=name, autocommit=True) as conn:
        conn.execute("CREATE TABLE kvs (key text PRIMARY KEY, value text)")  # as a code location's load leaves it
        conn.execute("INSERT INTO kvs VALUES ('__latest_defs_state_info__', '{}')")
    (first / "defs_state").mkdir(parents=True)
    prepare_database(database, first)  # its own folder: fine
    with pytest.raises(DeployError, match=f"instance of {first}.*--reset"):
        prepare_database(database, second)
    prepare_database(database, second, reset=True)  # dropped, created again
    prepare_database(database, second)
