"""`lumos deploy`: Lumos as a Dagster deployment on this machine, run the way docs/deploy.md describes
one — Dagster's own PostgreSQL storage, the daemon with queued runs and run monitoring, one code
server per code location (`dagster code-server start`, which the webserver can reload) and the
webserver — each its own process, in its own session, everything under one folder:

    <folder>/dagster/dagster.yaml   the instance (DAGSTER_HOME of every process and run worker)
    <folder>/workspace.yaml         one grpc_server per code location
    <folder>/logs/<process>.log     what each process prints
    <folder>/pids.json              process → pid, each the leader of its own process group
    <folder>/deployment.json        the webserver's port and the code locations, for `status`

`Deployment` is the same for Python (the benchmarks): `up()`, `down()`, `processes()`, `graphql()`.
Dagster itself is never imported here (the core does not import it, `lint-imports`): the processes
run Dagster's own commands, and everything is asked of the webserver's GraphQL.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import click
import yaml

from lumos_dagster.cli.instance import MONITOR_POLL_SECONDS, PYTHON_LOGS, TELEMETRY
from lumos_dagster.cli.output import echo
from lumos_dagster.errors import LumosError

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg.rows import TupleRow
    from sqlalchemy.engine import URL

DEFAULT_FOLDER = ".lumos/deploy"
PG_URL_ENV = "LUMOS_DAGSTER_PG_URL"
DEFAULT_PG_URL = "postgresql+psycopg2://postgres@127.0.0.1:5432/lumos_dagster"
#: the PostgreSQL password goes to the processes' environment, never into dagster.yaml
PASSWORD_ENV = "DAGSTER_PG_PASSWORD"
#: what Lumos' sensors ask to reload a code location through (sensors/reload.py)
WEBSERVER_URL_ENV = "LUMOS_DAGSTER_URL"
CODE_SERVER_PREFIX = "code-server-"
LOCATION_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.-]*"

WORKSPACE_QUERY = """{ workspaceOrError { __typename
  ... on Workspace { locationEntries { name loadStatus
    locationOrLoadError { __typename ... on PythonError { message errorChain { error { message } } } } } }
  ... on PythonError { message } } }"""
DAEMONS = "{ instance { daemonHealth { allDaemonStatuses { daemonType required healthy lastHeartbeatTime } } } }"
IN_FLIGHT = "{ runsOrError(filter: {statuses: [STARTING, STARTED]}) { ... on Runs { results { runId } } } }"
TERMINATE = """mutation($ids: [String!]!) {
  terminateRuns(runIds: $ids, terminatePolicy: MARK_AS_CANCELED_IMMEDIATELY) { __typename } }"""

INSTANCE_NOTES = """\
# - Dagster's own PostgreSQL storages, scheme postgresql+psycopg2: under SQLAlchemy 2.1 a plain
#   postgresql:// means psycopg 3, on which Dagster's event log fails to bind NOTIFY's payload;
# - queued runs, max_concurrent_runs at once;
# - Dagster's own DefaultRunLauncher (none named): nothing Lumos-only is asked of the launcher; an
#   instance of Docker or Kubernetes names Dagster's launcher for them instead;
# - run monitoring: a run that never starts fails after start_timeout_seconds, one still running
#   after max_runtime_seconds fails then;
# - defs_state_storage: the content of the code-location state whose versions the database keeps
#   (Lumos' registry): it goes with this database; beyond one machine, shared storage (s3://…);
# - freshness disabled: Dagster's freshness daemon writes an event for each asset without a policy.
"""


class DeployError(LumosError):
    """The deployment cannot start, or is not there."""


@dataclass(frozen=True)
class Location:
    name: str
    config: Path  # its lumos.yaml
    port: int  # its code server's


class Deployment:
    """A deployment in `folder`: code locations `locations` (name → lumos.yaml), the webserver on
    `port`, code servers on `code_port`, `code_port + 1`, … (default: free ports), Dagster's storage in
    the PostgreSQL database of `pg_url` (created if missing), `max_concurrent_runs` run workers at once;
    `tuned`: Lumos' tuning of Dagster (resources/tuning: its grouped PostgreSQL event log and patches)."""

    def __init__(
        self,
        folder: str | Path = DEFAULT_FOLDER,
        locations: Mapping[str, str | Path] | None = None,
        port: int = 3000,
        max_concurrent_runs: int = 2,
        pg_url: str = DEFAULT_PG_URL,
        tuned: bool = False,
        code_port: int | None = None,
    ):
        self.folder = Path(folder).absolute()
        self.port = port
        self.max_concurrent_runs = max_concurrent_runs
        self.pg_url = pg_url
        self.tuned = tuned
        named = dict(locations or {})
        for name in named:
            if not re.fullmatch(LOCATION_NAME, name):
                raise DeployError(f"code location name {name!r}: use letters, digits, '_', '-' and '.'")
        ports = [code_port + i for i in range(len(named))] if code_port else [_free_port() for _ in named]
        self.locations = [
            Location(name, Path(config).absolute(), p) for (name, config), p in zip(named.items(), ports, strict=True)
        ]
        self._started: dict[str, subprocess.Popen] = {}  # the processes this object started

    @classmethod
    def open(cls, folder: str | Path = DEFAULT_FOLDER) -> Deployment:
        """The deployment `up` wrote in `folder` (to look at or stop it; without the PostgreSQL password)."""
        path = Path(folder) / "deployment.json"
        if not path.is_file():
            raise DeployError(f"no deployment in {Path(folder).absolute()} (no deployment.json): `lumos deploy up`")
        saved = json.loads(path.read_text())
        deployment = cls(folder, {}, saved["port"], saved["max_concurrent_runs"], saved["pg_url"], saved["tuned"])
        deployment.locations = [Location(n, Path(c), p) for n, c, p in saved["locations"]]
        return deployment

    # -- where things are

    @property
    def dagster_home(self) -> Path:
        return self.folder / "dagster"

    @property
    def workspace(self) -> Path:
        return self.folder / "workspace.yaml"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self, process: str) -> Path:
        return self.folder / "logs" / f"{process}.log"

    def instance_env(self) -> dict[str, str]:
        """What a process needs in its environment to use this deployment's Dagster instance."""
        password = _url(self.pg_url).password
        return {"DAGSTER_HOME": str(self.dagster_home), **({PASSWORD_ENV: password} if password else {})}

    # -- what is written

    def instance_config(self) -> dict:
        """dagster.yaml: Dagster's PostgreSQL storages, queued runs, run monitoring, tick retention, no
        freshness daemon."""
        url = _url(self.pg_url)

        def storage(module: str, cls: str) -> dict:
            db: dict[str, Any] = {
                "username": url.username or "postgres",
                "hostname": url.host or "127.0.0.1",
                "port": url.port or 5432,
                "db_name": url.database,
                # a plain postgresql:// resolves to psycopg 3 under SQLAlchemy 2.1, on which Dagster's own
                # event log fails: it binds a parameter into NOTIFY (dagster_postgres/event_log/event_log.py)
                "scheme": "postgresql+psycopg2",
            }
            if url.password:
                db["password"] = {"env": PASSWORD_ENV}
            if url.query:
                db["params"] = dict(url.query)
            return {"module": module, "class": cls, "config": {"postgres_db": db}}

        event_log = (
            ("lumos_dagster.resources.tuning", "LumosPostgresEventLogStorage")
            if self.tuned
            else ("dagster_postgres.event_log", "PostgresEventLogStorage")
        )
        return {
            "run_storage": storage("dagster_postgres.run_storage", "PostgresRunStorage"),
            "schedule_storage": storage("dagster_postgres.schedule_storage", "PostgresScheduleStorage"),
            "event_log_storage": storage(*event_log),
            "run_coordinator": {
                "module": "dagster.core.run_coordinator",
                "class": "QueuedRunCoordinator",
                "config": {"max_concurrent_runs": self.max_concurrent_runs, "dequeue_interval_seconds": 2},
            },
            "run_monitoring": {
                "enabled": True,
                # a run whose worker never reports that it started fails after this
                "start_timeout_seconds": 180,
                # DefaultRunLauncher cannot tell a run's process died: such a run stays STARTED until its
                # max runtime fails it: an hour, well above a run of the largest code location
                # (docs/deploy.md: ~1 min)
                "max_runtime_seconds": 3600,
                "poll_interval_seconds": MONITOR_POLL_SECONDS,
            },
            "retention": {
                kind: {"purge_after_days": {"skipped": 1, "success": 7, "failure": 30}}
                for kind in ("schedule", "sensor")
            },
            # Dagster's default, said aloud: beyond one machine it must be shared (s3://…, gs://…)
            "defs_state_storage": {
                "module": "dagster",
                "class": "UPathDefsStateStorage",
                "config": {"base_path": str(self.dagster_home / "defs_state")},
            },
            # Dagster's freshness daemon evaluates every asset of every location each 30 s, and for an
            # asset without a freshness policy (none of Lumos' has one) writes one event the first time:
            # at 100,000 datasets it held most of the daemon's CPU and 4.7 GB (docs/deploy.md)
            "freshness": {"enabled": False},
            "telemetry": TELEMETRY,
            "python_logs": PYTHON_LOGS,
        }

    def write(self) -> None:
        """dagster.yaml, workspace.yaml and deployment.json."""
        self.dagster_home.mkdir(parents=True, exist_ok=True)
        (self.folder / "logs").mkdir(exist_ok=True)
        header = "# written by `lumos deploy up` (lumos_dagster/cli/deploy.py): changes are overwritten\n"
        (self.dagster_home / "dagster.yaml").write_text(
            header + INSTANCE_NOTES + yaml.safe_dump(self.instance_config(), sort_keys=False)
        )
        servers = [
            {"grpc_server": {"host": "127.0.0.1", "port": x.port, "location_name": x.name}} for x in self.locations
        ]
        self.workspace.write_text(header + yaml.safe_dump({"load_from": servers}, sort_keys=False))
        saved = {
            "port": self.port,
            "max_concurrent_runs": self.max_concurrent_runs,
            "pg_url": _url(self.pg_url).set(password=None).render_as_string(hide_password=False),
            "tuned": self.tuned,
            "locations": [[x.name, str(x.config), x.port] for x in self.locations],
        }
        (self.folder / "deployment.json").write_text(json.dumps(saved, indent=2) + "\n")

    def commands(self) -> dict[str, tuple[list[str], dict[str, str]]]:
        """process name → (command, environment beyond the instance's), in the order they start."""
        out = {
            CODE_SERVER_PREFIX + x.name: (
                [_bin("dagster"), "code-server", "start", "-m", "lumos_dagster.definitions", "-h", "127.0.0.1",
                 "-p", str(x.port), "--location-name", x.name],
                {"LUMOS_CONFIG": str(x.config), WEBSERVER_URL_ENV: self.url},
            )
            for x in self.locations
        }  # fmt: skip
        out["webserver"] = (
            [_bin("dagster-webserver"), "-h", "127.0.0.1", "-p", str(self.port), "-w", str(self.workspace)],
            {},
        )
        out["daemon"] = ([_bin("dagster-daemon"), "run", "-w", str(self.workspace)], {})
        return out

    # -- up and down

    def up(self, timeout: float = 180, reset: bool = False) -> float:
        """Start every process and wait until the webserver answers with every code location loaded
        and the daemon beats; the seconds it took. On failure everything started is stopped and
        DeployError names the log. `reset`: drop Dagster's database first (its runs, ticks and
        code-location state), e.g. after the folder was deleted."""
        started = time.monotonic()
        if not self.locations:
            raise DeployError("no code location: give at least one lumos.yaml")
        if self.running():
            raise DeployError(f"a deployment is already running from {self.folder}: `lumos deploy down` first")
        for what, port in [
            ("the webserver", self.port),
            *((f"code location {x.name}", x.port) for x in self.locations),
        ]:
            if not _port_free(port):
                raise DeployError(f"port {port} for {what} is in use (another deployment? choose another port)")
        self._check_configs()
        prepare_database(self.pg_url, self.dagster_home, reset)
        self.write()
        deadline = started + timeout
        try:
            self._create_storage()
            commands = self.commands()
            for name in [n for n in commands if n.startswith(CODE_SERVER_PREFIX)]:
                self._start(name, *commands[name])
            # a code server listens once its code is loaded; the webserver and the daemon load the
            # workspace when they start, and would keep a location that did not answer as an error
            for x in self.locations:
                self._wait(lambda x=x: not _port_free(x.port), deadline, f"code server {x.name} to listen")
            self._start("webserver", *commands["webserver"])
            self._wait(self._loaded, deadline, "the webserver to load every code location")
            # then the daemon, whose sensors' first ticks may ask the webserver to reload a location
            since = time.time()
            self._start("daemon", *commands["daemon"])
            self._wait(lambda: not self.unhealthy_daemons(since), deadline, "the daemon's first heartbeats")
        except BaseException:
            self.down()
            raise
        return time.monotonic() - started

    def down(self, timeout: float = 20) -> list[str]:
        """Cancel the runs in flight, then stop every process with its process group (a code server's
        gRPC child, run workers): SIGTERM, then SIGKILL after `timeout` s. The names of the processes
        that were running."""
        self.cancel_runs()
        pids = {name: pid for name, pid in self.pids().items() if self._ours(pid)}
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5)):
            left = [pid for pid in pids.values() if self._group_alive(pid)]
            for pid in left:
                _killpg(pid, sig)
            deadline = time.monotonic() + wait
            while any(self._group_alive(pid) for pid in left) and time.monotonic() < deadline:
                time.sleep(0.2)
        self._started.clear()
        (self.folder / "pids.json").unlink(missing_ok=True)
        return list(pids)

    def cancel_runs(self) -> list[str]:
        """Mark the runs in flight canceled (and signal their workers) through the webserver, if it runs:
        a worker that dies with its code server would leave its run STARTED, holding a place in the
        queue until run monitoring fails it (once the daemon runs again). Queued runs wait for the next `up`."""
        if "webserver" not in self.running():
            return []
        try:
            runs = self.graphql(IN_FLIGHT, timeout=10)["runsOrError"]["results"]
            if runs:
                self.graphql(TERMINATE, {"ids": [r["runId"] for r in runs]})
        except Exception:  # the webserver does not answer: the runs stay as they are
            return []
        return [r["runId"] for r in runs]

    # -- looking at it

    def pids(self) -> dict[str, int]:
        path = self.folder / "pids.json"
        return json.loads(path.read_text()) if path.is_file() else {}

    def running(self) -> dict[str, int]:
        """The processes of pids.json still alive."""
        return {name: pid for name, pid in self.pids().items() if self._ours(pid) and self._alive(pid)}

    def processes(self) -> dict[str, Any]:
        """Each live process: a psutil.Process (its children are the code server's gRPC server and the
        run workers), or its pid without psutil (the `bench` extra)."""
        try:
            import psutil
        except ImportError:
            return self.running()
        out = {}
        for name, pid in self.running().items():
            try:
                out[name] = psutil.Process(pid)
            except psutil.NoSuchProcess:
                pass
        return out

    def rss_mb(self) -> dict[str, float | None]:
        """Resident memory of each live process with its children, in MB (None without psutil)."""
        out: dict[str, float | None] = {}
        for name, process in self.processes().items():
            if isinstance(process, int):
                out[name] = None
                continue
            total = 0
            for p in [process, *process.children(recursive=True)]:
                try:
                    total += p.memory_info().rss
                except Exception:  # it exited meanwhile
                    pass
            out[name] = total / 2**20
        return out

    def graphql(self, query: str, variables: Mapping[str, Any] | None = None, timeout: float = 30) -> dict:
        """The `data` of a GraphQL request to the webserver; DeployError on GraphQL errors."""
        import httpx

        response = httpx.post(
            f"{self.url}/graphql", json={"query": query, "variables": variables or {}}, timeout=timeout
        )
        body = response.json()
        if body.get("errors"):
            raise DeployError(f"GraphQL: {'; '.join(e.get('message', str(e)) for e in body['errors'])}")
        return body["data"]

    def unhealthy_daemons(self, since: float = 0) -> list[str]:
        """The daemons (sensors, schedules, run queue, backfills, monitoring, …) the webserver does not
        see healthy, or whose last heartbeat is older than `since` (epoch s)."""
        statuses = self.graphql(DAEMONS)["instance"]["daemonHealth"]["allDaemonStatuses"]
        return [
            d["daemonType"]
            for d in statuses
            if d["required"] and not (d["healthy"] and (d["lastHeartbeatTime"] or 0) >= since)
        ]

    def location_status(self) -> dict[str, tuple[str, str | None]]:
        """code location → (LOADING or LOADED, its load error or None), as the webserver sees them."""
        data = self.graphql(WORKSPACE_QUERY)["workspaceOrError"]
        if data["__typename"] != "Workspace":
            raise DeployError(f"the webserver's workspace: {data.get('message')}")
        return {e["name"]: (e["loadStatus"], _error(e["locationOrLoadError"])) for e in data["locationEntries"]}

    # -- inside

    def _check_configs(self) -> None:
        from lumos_dagster.config import load_config

        for x in self.locations:
            try:
                load_config(str(x.config))
            except LumosError as exc:
                raise DeployError(f"code location {x.name}: {exc}") from None

    def _create_storage(self) -> None:
        # Dagster's processes create the instance's tables on first use, each on its own: code
        # servers starting together on a new database race to CREATE TABLE and all but one fail
        done = subprocess.run(
            [_bin("dagster"), "instance", "migrate"], cwd=self.dagster_home, env=self._environment({}),
            stdin=subprocess.DEVNULL, capture_output=True, text=True,
        )  # fmt: skip
        if done.returncode:
            why = done.stderr or done.stdout
            raise DeployError(f"`dagster instance migrate` for {self.dagster_home} failed:\n{why}")

    def _environment(self, env: dict[str, str]) -> dict[str, str]:
        environment = {k: v for k, v in os.environ.items() if k not in ("LUMOS_CONFIG", "DAGSTER_IS_DEV_CLI")}
        environment.update(self.instance_env(), PYTHONUNBUFFERED="1", **env)
        return environment

    def _start(self, name: str, command: list[str], env: dict[str, str]) -> None:
        environment = self._environment(env)
        with open(self.log(name), "wb") as log:  # a file, never a pipe nobody reads
            # a session of its own: `make deploy` returns, and `down` stops the whole group
            self._started[name] = subprocess.Popen(
                command, cwd=self.dagster_home, env=environment, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        pids = {**self.pids(), name: self._started[name].pid}
        (self.folder / "pids.json").write_text(json.dumps(pids, indent=2) + "\n")

    def _wait(self, ready, deadline: float, what: str) -> None:
        while True:
            for name, process in self._started.items():
                if process.poll() is not None:
                    raise DeployError(
                        f"{name} exited with code {process.returncode} while starting; its log, "
                        f"{self.log(name)}, ends:\n{_tail(self.log(name))}"
                    )
            if ready():
                return
            if time.monotonic() > deadline:
                raise DeployError(f"timed out waiting for {what}; the logs are in {self.folder / 'logs'}")
            time.sleep(0.3)

    def _loaded(self) -> bool:
        try:
            status = self.location_status()
        except Exception:  # the webserver does not answer yet
            return False
        for x in self.locations:
            load, error = status.get(x.name, ("LOADING", None))
            if error is not None:
                log = self.log(CODE_SERVER_PREFIX + x.name)
                raise DeployError(f"code location {x.name} failed to load ({x.config}; log: {log}):\n{error}")
        return all(status.get(x.name, ("LOADING",))[0] == "LOADED" for x in self.locations)

    def _ours(self, pid: int) -> bool:
        """Whether `pid` (from pids.json) is still this deployment's process group: a dead leader's
        group keeps its id until its last member exits; a live leader must run on our DAGSTER_HOME
        (pids.json may have outlived a reboot, and the pid been taken by another process)."""
        if not self._alive(pid):
            return True
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except FileNotFoundError:  # no /proc (macOS): trust pids.json
            return True
        except PermissionError:
            return False
        return f"DAGSTER_HOME={self.dagster_home}".encode() in environ

    def _alive(self, pid: int) -> bool:
        """Whether process `pid` runs (one this object started is reaped once it exits: a zombie would
        still count as a member of its process group)."""
        for process in self._started.values():
            if process.pid == pid:
                return process.poll() is None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def _group_alive(self, pgid: int) -> bool:
        self._alive(pgid)  # reaps our own child
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


#: whether Dagster recorded a code-location state version in its key-value table
#: (dagster/_core/storage/defs_state/base.py: DEFS_STATE_INFO_CURSOR_KEY)
STATE_POINTER = "SELECT 1 FROM kvs WHERE key = '__latest_defs_state_info__'"


def prepare_database(pg_url: str, dagster_home: Path, reset: bool = False) -> None:
    """The database of `pg_url` for the instance in `dagster_home`: created if missing (dropped first
    if `reset`), and marked as that instance's (a comment on the database).

    An instance is its database *and* its DAGSTER_HOME: Dagster keeps the version of a code location's
    state (Lumos' registry, assets/state.py) in the database and its content under
    DAGSTER_HOME/defs_state. A database that holds another (or a deleted) DAGSTER_HOME's instance
    would fail the code location's load ("No state found for key …"), so it is refused here."""
    import psycopg
    from psycopg import sql

    url, database = _url_and_database(pg_url)
    host, port, user = url.host or "127.0.0.1", url.port or 5432, url.username or "postgres"

    def connect(dbname: str) -> Connection[TupleRow]:
        password = url.password or None
        return psycopg.connect(
            host=host, port=port, user=user, password=password, dbname=dbname, autocommit=True, connect_timeout=10
        )

    name, mark = sql.Identifier(database), f"lumos deploy: DAGSTER_HOME={dagster_home}"
    try:
        with connect("postgres") as conn:
            if reset:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
            row = conn.execute(
                "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s", (database,)
            ).fetchone()
            if row is None:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(name))
            elif row[0] != mark or not (dagster_home / "defs_state").is_dir():
                with connect(database) as db:
                    kvs = db.execute("SELECT to_regclass('kvs') IS NOT NULL").fetchone()  # one row, always
                    tables = kvs is not None and kvs[0]
                    pinned = tables and db.execute(STATE_POINTER).fetchone() is not None
                if pinned:
                    whose = (
                        f"{dagster_home}, whose defs_state folder is gone"
                        if row[0] == mark
                        else (row[0] or "").removeprefix("lumos deploy: DAGSTER_HOME=") or "a DAGSTER_HOME elsewhere"
                    )
                    raise DeployError(
                        f"database {database} holds the Dagster instance of {whose}; Dagster keeps a code "
                        "location's state in the database and DAGSTER_HOME/defs_state together: use that folder, "
                        "another --pg-url, or --reset to drop the database (its runs and ticks)"
                    )
            conn.execute(sql.SQL("COMMENT ON DATABASE {} IS {}").format(name, sql.Literal(mark)))
    except psycopg.Error as exc:
        where = f"{user}@{host}:{port}"
        raise DeployError(f"PostgreSQL {where}: {exc} (start it, or pass --pg-url / ${PG_URL_ENV})") from None


def _url(pg_url: str) -> URL:
    return _url_and_database(pg_url)[0]


def _url_and_database(pg_url: str) -> tuple[URL, str]:
    """`pg_url` parsed, and its database; refused unless PostgreSQL with a database."""
    from sqlalchemy.engine import make_url

    url = make_url(pg_url)
    database = url.database
    if not url.drivername.startswith("postgres") or not database:
        raise DeployError(f"{pg_url!r}: not a PostgreSQL URL with a database (postgresql://user@host:5432/db)")
    return url, database


def _error(location: dict | None) -> str | None:
    """A location's load error with its causes (the first says only that loading failed), or None."""
    if not location or "message" not in location:
        return None
    causes = [link["error"]["message"].strip() for link in location.get("errorChain") or ()]
    return "\ncaused by: ".join([location["message"].strip(), *causes])


def _bin(name: str) -> str:
    """The command `name` of this interpreter's environment."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        raise DeployError(f"{name} is not installed beside {sys.executable}")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# -- the command line


def _locations(configs: tuple[str, ...]) -> dict[str, str]:
    """`NAME=PATH` or `PATH` (named after the file: sales.yaml → sales) → {name: path}."""
    out: dict[str, str] = {}
    for item in configs or (os.environ.get("LUMOS_CONFIG", "lumos.yaml"),):
        named = re.fullmatch(rf"({LOCATION_NAME})=(.+)", item)
        name, path = named.groups() if named else (Path(item).stem, item)
        if name in out:
            raise click.UsageError(f"two code locations named {name!r}: name them, --config NAME=PATH")
        if not Path(path).is_file():
            raise click.UsageError(f"{path}: no such lumos.yaml")
        out[name] = path
    return out


folder_option = click.option(
    "--folder", default=DEFAULT_FOLDER, show_default=True, help="The deployment's folder (DAGSTER_HOME, logs, pids)."
)


@click.group()
def deploy() -> None:
    """A Dagster deployment on this machine: PostgreSQL storage, the daemon, queued runs, one code
    server per code location and the webserver (docs/deploy.md)."""


@deploy.command()
@click.option(
    "--config", "-c", "configs", multiple=True,
    help="A code location's lumos.yaml, as PATH (named after the file) or NAME=PATH; repeat for several "
    "(default: $LUMOS_CONFIG or ./lumos.yaml).",
)  # fmt: skip
@folder_option
@click.option("--port", type=click.IntRange(1, 65535), default=3000, show_default=True, help="The webserver's port.")
@click.option(
    "--code-port", type=click.IntRange(1, 65535), default=None, help="First code server port (default: free)."
)
@click.option(
    "--max-concurrent-runs", type=click.IntRange(1), default=2, show_default=True, help="Run workers at once."
)
@click.option("--pg-url", envvar=PG_URL_ENV, default=DEFAULT_PG_URL, show_default=True, help="Dagster's database.")
@click.option(
    "--tuned", is_flag=True, help="Lumos' tuning of Dagster (resources/tuning): its grouped PostgreSQL event log."
)
@click.option("--timeout", type=float, default=180, show_default=True, help="Seconds to wait for every location.")
@click.option("--reset", is_flag=True, help="Drop Dagster's database first: its runs, ticks and code-location state.")
def up(configs, folder, port, code_port, max_concurrent_runs, pg_url, tuned, timeout, reset) -> None:
    """Start the deployment; return once every code location is loaded."""
    try:
        deployment = Deployment(folder, _locations(configs), port, max_concurrent_runs, pg_url, tuned, code_port)
        seconds = deployment.up(timeout, reset)
    except DeployError as exc:
        raise click.ClickException(str(exc)) from None
    names = ", ".join(x.name for x in deployment.locations)
    echo(f"code location(s) {names} loaded in {seconds:.1f} s; logs in {deployment.folder / 'logs'}")
    # nobody needs to materialize anything: sensors/storage.py, first_snapshots
    echo("the sensors' first tick (within a minute) snapshots every dataset never materialized; then the "
         "sensors and schedules keep them")  # fmt: skip
    echo(f"Dagster UI: {deployment.url}   (stop: lumos deploy down --folder {folder})")


@deploy.command()
@folder_option
@click.option("--timeout", type=float, default=20, show_default=True, help="Seconds before SIGKILL.")
def down(folder, timeout) -> None:
    """Stop every process of the deployment (SIGTERM, then SIGKILL), their children included."""
    path = Path(folder)
    deployment = Deployment.open(path) if (path / "deployment.json").is_file() else Deployment(path)
    canceled = deployment.cancel_runs()
    stopped = deployment.down(timeout)
    if canceled:
        echo(f"canceled {len(canceled)} run(s) in flight: {', '.join(canceled)}")
    echo(f"stopped {', '.join(stopped)}" if stopped else f"nothing running from {path.absolute()}")


@deploy.command()
@folder_option
def status(folder) -> None:
    """Each process (pid, alive, RSS with its children) and each code location's load status."""
    try:
        deployment = Deployment.open(folder)
    except DeployError as exc:
        raise click.ClickException(str(exc)) from None
    alive, rss = deployment.running(), deployment.rss_mb()
    echo(f"{'process':<32} {'pid':>8}  alive  {'RSS MB':>7}")
    for name, pid in deployment.pids().items():
        mb = rss.get(name)
        echo(f"{name:<32} {pid:>8}  {'yes' if name in alive else 'no ':<5}  {'-' if mb is None else f'{mb:.0f}':>7}")
    try:
        locations = deployment.location_status()
    except Exception as exc:
        echo(f"webserver {deployment.url}: not answering ({type(exc).__name__})")
        sys.exit(1)
    echo(f"{'code location':<32} status")
    for name, (load, error) in locations.items():
        echo(f"{name:<32} {'ERROR: ' + error.splitlines()[0] if error else load}")
    unhealthy = deployment.unhealthy_daemons()
    echo(f"daemons not healthy: {', '.join(unhealthy)}" if unhealthy else "daemons: healthy")
    echo(f"Dagster UI: {deployment.url}")
    if len(alive) < len(deployment.pids()) or unhealthy or any(error for _, error in locations.values()):
        sys.exit(1)
