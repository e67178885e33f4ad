"""A deployment of Lumos on this machine under supervisord (deploy_config.py writes its
configuration): `up()` prepares Dagster's database, runs supervisord and waits until every code
location is loaded and the daemon beats; `down()` has supervisord stop everything; the rest looks at
it — supervisord's view of each process, the webserver's GraphQL. The benchmarks use it too.

Dagster itself is never imported here (the core does not import it, `lint-imports`): the processes
run Dagster's own commands, and everything is asked of the webserver's GraphQL."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from lumos_dagster.cli.deploy_config import (
    CODE_SERVER_PREFIX,
    DEFAULT_FOLDER,
    PG_URL_ENV,
    DeployError,
    Layout,
    Location,
    bin_path,
    pg_url_and_database,
)
from lumos_dagster.floor.errors import LumosError
from lumos_dagster.floor.extras import needs

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg.rows import TupleRow

WORKSPACE_QUERY = """{ workspaceOrError { __typename
  ... on Workspace { locationEntries { name loadStatus
    locationOrLoadError { __typename ... on PythonError { message errorChain { error { message } } } } } }
  ... on PythonError { message } } }"""
DAEMONS = "{ instance { daemonHealth { allDaemonStatuses { daemonType required healthy lastHeartbeatTime } } } }"
IN_FLIGHT = "{ runsOrError(filter: {statuses: [STARTING, STARTED]}) { ... on Runs { results { runId } } } }"
TERMINATE = """mutation($ids: [String!]!) {
  terminateRuns(runIds: $ids, terminatePolicy: MARK_AS_CANCELED_IMMEDIATELY) { __typename } }"""
#: supervisord's states of a process that is not coming up (supervisor/states.py)
FAILED = ("BACKOFF", "EXITED", "FATAL")


class Deployment(Layout):
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

    def up(self, timeout: float = 180, reset: bool = False) -> float:
        """Start supervisord on the configuration and wait until the webserver answers with every code
        location loaded and the daemon beats; the seconds it took. On failure everything is stopped and
        DeployError names the log. `reset`: drop Dagster's database first (its runs, ticks and
        code-location state), e.g. after the folder was deleted."""
        started = time.monotonic()
        if not self.locations:
            raise DeployError("no code location: give at least one lumos.yaml")
        if self.supervisor() is not None:
            raise DeployError(f"a deployment is already running from {self.folder}: `lumos deploy down` first")
        for what, port in [
            ("the webserver", self.port),
            *((f"code location {x.name}", x.port) for x in self.locations),
        ]:
            if not port_free(port):
                raise DeployError(f"port {port} for {what} is in use (another deployment? choose another port)")
        if len(str(self.socket)) > 100:  # AF_UNIX paths are limited to 107 bytes
            raise DeployError(f"{self.folder}: too long a path for supervisord's socket; choose a shorter --folder")
        self._check_configs()
        prepare_database(self.pg_url, self.dagster_home, reset)
        self.write()
        environment = {k: v for k, v in os.environ.items() if k not in ("LUMOS_CONFIG", "DAGSTER_IS_DEV_CLI")}
        try:
            # Dagster's processes create the instance's tables on first use, each on its own: code
            # servers starting together on a new database race to CREATE TABLE and all but one fail
            self._run([bin_path("dagster"), "instance", "migrate"], {**environment, **self.instance_env()})
            # supervisord passes its environment on (the password too, which no file holds) and
            # returns once it runs in the background
            self._run(
                [bin_path("supervisord"), "-c", str(self.supervisord_conf)], {**environment, **self.instance_env()}
            )
            deadline, since = started + timeout, time.time()
            self._wait(lambda: self.supervisor() is not None, deadline, "supervisord to answer")
            self._wait(self._loaded, deadline, "the webserver to load every code location")
            self._wait(lambda: not self.unhealthy_daemons(since), deadline, "the daemon's first heartbeats")
        except BaseException:
            self.down()
            raise
        return time.monotonic() - started

    def down(self, timeout: float = 60) -> list[str]:
        """Cancel the runs in flight, then have supervisord stop every process with its process group (a
        code server's gRPC child, run workers: SIGTERM, SIGKILL after deploy_config.STOP_SECONDS) and
        exit; the names of the processes that were running."""
        server = self.supervisor()
        if server is None:
            return []
        self.cancel_runs()
        running = list(self.running())
        pid = server.supervisor.getPID()
        server.supervisor.shutdown()
        deadline = time.monotonic() + timeout
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        return running

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

    def supervisor(self) -> Any | None:
        """supervisord's XML-RPC interface on the deployment's socket, or None if it does not answer."""
        from xmlrpc.client import ServerProxy

        try:
            from supervisor.xmlrpc import SupervisorTransport
        except ImportError:
            raise DeployError("supervisord is not installed: pip install 'lumos[deploy]'") from None
        if not self.socket.exists():
            return None
        server = ServerProxy("http://127.0.0.1", SupervisorTransport(None, None, f"unix://{self.socket}"))
        try:
            server.supervisor.getState()
        except OSError:
            return None
        return server

    def states(self) -> dict[str, dict[str, Any]]:
        """process name → supervisord's information on it (statename, pid, exitstatus, …)."""
        server = self.supervisor()
        return {p["name"]: p for p in server.supervisor.getAllProcessInfo()} if server else {}

    def pids(self) -> dict[str, int]:
        return {name: p["pid"] for name, p in self.states().items() if p["pid"]}

    def running(self) -> dict[str, int]:
        """The processes supervisord has running: name → pid (each the leader of its process group)."""
        return {name: p["pid"] for name, p in self.states().items() if p["statename"] == "RUNNING"}

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
        with needs("deploy", "lumos deploy"):
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
        from lumos_dagster.floor.config import load_config

        for x in self.locations:
            try:
                load_config(str(x.config))
            except LumosError as exc:
                raise DeployError(f"code location {x.name}: {exc}") from None

    def _run(self, command: list[str], env: dict[str, str]) -> None:
        # output to a file: supervisord, once in the background, would hold a pipe open
        with open(self.log(Path(command[0]).name + "-start"), "w+") as out:
            done = subprocess.run(command, cwd=self.dagster_home, env={**env, "PYTHONUNBUFFERED": "1"},
                                  stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
            if done.returncode:
                out.seek(0)
                raise DeployError(f"`{' '.join(command[-3:])}` for {self.folder} failed:\n{out.read()[-4000:]}")

    def _wait(self, ready, deadline: float, what: str) -> None:
        while True:
            for name, p in self.states().items():
                if p["statename"] in FAILED:
                    raise DeployError(
                        f"{name} exited with code {p['exitstatus']} while starting ({p['statename']}); its log, "
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
    with needs("postgres", "lumos deploy"):
        import psycopg
        from psycopg import sql

    url, database = pg_url_and_database(pg_url)
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


def _error(location: dict | None) -> str | None:
    """A location's load error with its causes (the first says only that loading failed), or None."""
    if not location or "message" not in location:
        return None
    causes = [link["error"]["message"].strip() for link in location.get("errorChain") or ()]
    return "\ncaused by: ".join([location["message"].strip(), *causes])


def port_free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
