"""What a deployment of Lumos is, as configuration: Dagster's instance (dagster.yaml), its workspace,
and the processes — a code server per code location, the webserver and the daemon — for a real
supervisor: supervisord's configuration (what `lumos deploy up` runs), systemd units, or the values
of Dagster's own Helm chart (`dagster`) on Kubernetes. Nothing here starts anything (deployment.py).

The webserver and the daemon load the workspace once, when they start, and keep a code location that
did not answer yet as an error: under either supervisor they start through `wait_ports`, once every
code server (and, for the daemon, the webserver) accepts connections."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import yaml

from lumos_dagster.cli.instance import MONITOR_POLL_SECONDS, PYTHON_LOGS, TELEMETRY
from lumos_dagster.floor.errors import LumosError

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

DEFAULT_FOLDER = ".lumos/deploy"
PG_URL_ENV = "LUMOS_DAGSTER_PG_URL"
DEFAULT_PG_URL = "postgresql+psycopg2://postgres@127.0.0.1:5432/lumos_dagster"
#: the PostgreSQL password goes to the processes' environment, never into a file Lumos writes
PASSWORD_ENV = "DAGSTER_PG_PASSWORD"
#: what Lumos' sensors ask to reload a code location through (sensors/reload.py)
WEBSERVER_URL_ENV = "LUMOS_DAGSTER_URL"
CODE_SERVER_PREFIX = "code-server-"
LOCATION_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.-]*"
HEADER = "written by `lumos deploy` (lumos_dagster/cli/deploy_config.py): changes are overwritten"
#: seconds a supervisor waits after SIGTERM before it kills a process group
STOP_SECONDS = 20
#: the port of a code server on Kubernetes (Dagster's chart: one Service per user deployment)
CHART_CODE_PORT = 3030

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


class Layout:
    """A deployment in `folder`: code locations `locations` (name → lumos.yaml), the webserver on
    `port`, code servers on `code_port`, `code_port + 1`, … (default: free ports), Dagster's storage in
    the PostgreSQL database of `pg_url`, `max_concurrent_runs` run workers at once; `tuned`: Lumos'
    tuning of Dagster (resources/tuning: its grouped PostgreSQL event log and patches)."""

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
        self.port, self.max_concurrent_runs, self.pg_url, self.tuned = port, max_concurrent_runs, pg_url, tuned
        named = dict(locations or {})
        for name in named:
            if not re.fullmatch(LOCATION_NAME, name):
                raise DeployError(f"code location name {name!r}: use letters, digits, '_', '-' and '.'")
        ports = [code_port + i for i in range(len(named))] if code_port else [free_port() for _ in named]
        self.locations = [
            Location(name, Path(config).absolute(), p) for (name, config), p in zip(named.items(), ports, strict=True)
        ]

    # -- where things are

    @property
    def dagster_home(self) -> Path:
        return self.folder / "dagster"

    @property
    def workspace(self) -> Path:
        return self.folder / "workspace.yaml"

    @property
    def supervisord_conf(self) -> Path:
        return self.folder / "supervisord.conf"

    @property
    def socket(self) -> Path:
        return self.folder / "supervisor.sock"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self, process: str) -> Path:
        return self.folder / "logs" / f"{process}.log"

    def instance_env(self) -> dict[str, str]:
        """What a process needs in its environment to use this deployment's Dagster instance."""
        password = pg_url(self.pg_url).password
        return {"DAGSTER_HOME": str(self.dagster_home), **({PASSWORD_ENV: password} if password else {})}

    # -- Dagster's files

    def instance_config(self) -> dict:
        """dagster.yaml: Dagster's PostgreSQL storages, queued runs, run monitoring, tick retention, no
        freshness daemon."""
        url = pg_url(self.pg_url)
        db: dict[str, Any] = {
            "username": url.username or "postgres",
            "hostname": url.host or "127.0.0.1",
            "port": url.port or 5432,
            "db_name": url.database,
            # a plain postgresql:// resolves to psycopg 3 under SQLAlchemy 2.1, on which Dagster's own
            # event log fails: it binds a parameter into NOTIFY (dagster_postgres/event_log/event_log.py)
            "scheme": "postgresql+psycopg2",
            **({"password": {"env": PASSWORD_ENV}} if url.password else {}),
            **({"params": dict(url.query)} if url.query else {}),
        }

        def storage(module: str, cls: str) -> dict:
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
            "retention": {kind: {"purge_after_days": TICK_DAYS} for kind in ("schedule", "sensor")},
            # Dagster's default, said aloud: beyond one machine it must be shared (s3://…, gs://…)
            "defs_state_storage": defs_state_storage(str(self.dagster_home / "defs_state")),
            # Dagster's freshness daemon evaluates every asset of every location each 30 s, and for an
            # asset without a freshness policy (none of Lumos' has one) writes one event the first time:
            # at 100,000 datasets it held most of the daemon's CPU and 4.7 GB (docs/deploy.md)
            "freshness": {"enabled": False},
            "telemetry": TELEMETRY,
            "python_logs": PYTHON_LOGS,
        }

    def write(self) -> None:
        """dagster.yaml, workspace.yaml, supervisord.conf and deployment.json (what `open` reads back)."""
        self.dagster_home.mkdir(parents=True, exist_ok=True)
        (self.folder / "logs").mkdir(exist_ok=True)
        (self.dagster_home / "dagster.yaml").write_text(
            f"# {HEADER}\n{INSTANCE_NOTES}{yaml.safe_dump(self.instance_config(), sort_keys=False)}"
        )
        servers = [
            {"grpc_server": {"host": "127.0.0.1", "port": x.port, "location_name": x.name}} for x in self.locations
        ]
        self.workspace.write_text(f"# {HEADER}\n{yaml.safe_dump({'load_from': servers}, sort_keys=False)}")
        self.supervisord_conf.write_text(self.supervisord())
        saved = {
            "port": self.port,
            "max_concurrent_runs": self.max_concurrent_runs,
            "pg_url": pg_url(self.pg_url).set(password=None).render_as_string(hide_password=False),
            "tuned": self.tuned,
            "locations": [[x.name, str(x.config), x.port] for x in self.locations],
        }
        (self.folder / "deployment.json").write_text(json.dumps(saved, indent=2) + "\n")

    # -- the processes

    def commands(self) -> dict[str, tuple[list[str], dict[str, str]]]:
        """process name → (command, environment beyond the instance's), in the order they start."""
        codes = [f"127.0.0.1:{x.port}" for x in self.locations]
        wait = [sys.executable, "-m", "lumos_dagster.cli.wait_ports"]
        out = {
            CODE_SERVER_PREFIX + x.name: (
                [bin_path("dagster"), "code-server", "start", "-m", "lumos_dagster.definitions", "-h", "127.0.0.1",
                 "-p", str(x.port), "--location-name", x.name],
                {"LUMOS_CONFIG": str(x.config), WEBSERVER_URL_ENV: self.url},
            )
            for x in self.locations
        }  # fmt: skip
        out["webserver"] = (
            [*wait, *codes, "--", bin_path("dagster-webserver"), "-h", "127.0.0.1", "-p", str(self.port),
             "-w", str(self.workspace)],
            {},
        )  # fmt: skip
        # the daemon's sensors may ask the webserver to reload a location from their first tick
        out["daemon"] = ([*wait, *codes, f"127.0.0.1:{self.port}", "--", bin_path("dagster-daemon"), "run", "-w",
                          str(self.workspace)], {})  # fmt: skip
        return out

    def supervisord(self) -> str:
        """supervisord's configuration: every process in its own process group, stopped with it
        (the code servers' gRPC servers and run workers too), its output in logs/NAME.log. The
        PostgreSQL password is not in it: supervisord passes on its own environment's."""
        home = _escape(str(self.dagster_home))
        programs = [
            SUPERVISORD_PROGRAM.format(
                name=name, command=_escape(shlex.join(command)), home=home, priority=priority, stop=STOP_SECONDS,
                env=_env({**env, "PYTHONUNBUFFERED": "1"}), log=_escape(str(self.log(name))),
            )
            for priority, (name, (command, env)) in enumerate(self.commands().items(), start=1)
        ]  # fmt: skip
        folder = _escape(str(self.folder))
        main = SUPERVISORD.format(header=HEADER, folder=folder, socket=_escape(str(self.socket)), home=home,
                                  env=_env({"DAGSTER_HOME": str(self.dagster_home)}))  # fmt: skip
        return "\n".join([main, *programs])

    def systemd_units(self) -> dict[str, str]:
        """unit file name → content: a service per process, `lumos.target` to start and stop them
        together. The PostgreSQL password comes from `<folder>/dagster.env` (DAGSTER_PG_PASSWORD=…)."""
        units = {}
        for name, (command, env) in self.commands().items():
            environment = {"DAGSTER_HOME": str(self.dagster_home), **env, "PYTHONUNBUFFERED": "1"}
            units[f"lumos-{name}.service"] = SYSTEMD_SERVICE.format(
                header=HEADER, name=name, home=self.dagster_home, folder=self.folder, stop=STOP_SECONDS,
                env=" ".join(shlex.quote(f"{k}={v}") for k, v in environment.items()).replace("%", "%%"),
                command=shlex.join(command).replace("%", "%%"),
            )  # fmt: skip
        units["lumos.target"] = SYSTEMD_TARGET.format(header=HEADER, units=" ".join(units))
        return units

    def helm_values(self, image: str, defs_state: str, release: str = "dagster") -> dict:
        """The values of Dagster's Helm chart (`dagster`): each code location a user deployment (its
        lumos.yaml from the ConfigMap `lumos-config`, mounted at /etc/lumos), Dagster's storage in
        this PostgreSQL database (its password in the chart's secret), the instance as dagster.yaml's."""
        repository, _, tag = image.rpartition(":")
        if not repository or "/" in tag:  # no tag (a registry's port is not one)
            repository, tag = image, "latest"
        url = pg_url(self.pg_url)
        deployments = [
            {
                "name": f"lumos-{x.name}".lower().replace("_", "-").replace(".", "-"),
                "image": {"repository": repository, "tag": tag, "pullPolicy": "IfNotPresent"},
                "codeServerArgs": ["-m", "lumos_dagster.definitions", "--location-name", x.name],
                "port": CHART_CODE_PORT,
                "env": [
                    {"name": "LUMOS_CONFIG", "value": f"/etc/lumos/{x.name}.yaml"},
                    {"name": WEBSERVER_URL_ENV, "value": f"http://{release}-dagster-webserver:80"},
                ],
                "includeConfigInLaunchedRuns": {"enabled": True},
                "volumes": [{"name": "lumos-config", "configMap": {"name": "lumos-config"}}],
                "volumeMounts": [{"name": "lumos-config", "mountPath": "/etc/lumos", "readOnly": True}],
            }
            for x in self.locations
        ]
        # the chart names each kind of tick; -1: kept (Dagster's default)
        retention = {kind: {"purgeAfterDays": {**TICK_DAYS, "started": -1}} for kind in ("schedule", "sensor")}
        return {
            "dagster-user-deployments": {"enabled": True, "enableSubchart": True, "deployments": deployments},
            "postgresql": {
                "enabled": False,
                "postgresqlHost": url.host or "127.0.0.1",
                "postgresqlUsername": url.username or "postgres",
                "postgresqlDatabase": url.database,
                "postgresqlScheme": "postgresql+psycopg2",
                "postgresqlParams": dict(url.query),
                "service": {"port": url.port or 5432},
            },
            # the password: in the secret the chart's global.postgresqlSecretName names, made by you
            "generatePostgresqlPasswordSecret": False,
            "dagsterDaemon": {
                "runCoordinator": {
                    "enabled": True,
                    "type": "QueuedRunCoordinator",
                    "config": {
                        "queuedRunCoordinator": {
                            "maxConcurrentRuns": self.max_concurrent_runs,
                            "dequeueIntervalSeconds": 2,
                        }
                    },
                },  # fmt: skip
                # no max runtime in the chart: K8sRunLauncher tells a worker died (DefaultRunLauncher cannot)
                "runMonitoring": {
                    "enabled": True,
                    "startTimeoutSeconds": 180,
                    "pollIntervalSeconds": MONITOR_POLL_SECONDS,
                },  # fmt: skip
            },
            "retention": {"enabled": True, **retention},
            "telemetry": TELEMETRY,
            "pythonLogs": {"pythonLogLevel": PYTHON_LOGS["python_log_level"]},
            # what the chart has no key of its own for
            "additionalInstanceConfig": {
                "defs_state_storage": defs_state_storage(defs_state),
                "freshness": {"enabled": False},
            },  # fmt: skip
        }


SUPERVISORD = """\
; {header}
[unix_http_server]
file={socket}
chmod=0700

[supervisord]
logfile={folder}/logs/supervisord.log
pidfile={folder}/supervisord.pid
childlogdir={folder}/logs
directory={home}
environment={env}

[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface

[supervisorctl]
serverurl=unix://{socket}
"""
SUPERVISORD_PROGRAM = """\
[program:{name}]
command={command}
directory={home}
environment={env}
priority={priority}
autorestart=true
startsecs=2
startretries=3
stopasgroup=true
killasgroup=true
stopwaitsecs={stop}
stdout_logfile={log}
stdout_logfile_maxbytes=50MB
stdout_logfile_backups=3
redirect_stderr=true
"""
SYSTEMD_SERVICE = """\
# {header}
[Unit]
Description=Lumos deployment: {name}
PartOf=lumos.target
After=network-online.target postgresql.service

[Service]
Type=simple
WorkingDirectory={home}
Environment={env}
# DAGSTER_PG_PASSWORD=…, if the database has one: never in a unit
EnvironmentFile=-{folder}/dagster.env
ExecStart={command}
Restart=on-failure
RestartSec=5
# the whole control group: a code server's gRPC server and run workers too
KillMode=control-group
TimeoutStopSec={stop}

[Install]
WantedBy=lumos.target
"""
SYSTEMD_TARGET = """\
# {header}
[Unit]
Description=Lumos deployment (code servers, Dagster webserver and daemon)
Wants={units}

[Install]
WantedBy=multi-user.target
"""
#: tick retention, in days, of sensors and schedules (runs: the lumos_retention job)
TICK_DAYS = {"skipped": 1, "success": 7, "failure": 30}


def defs_state_storage(base_path: str) -> dict:
    return {"module": "dagster", "class": "UPathDefsStateStorage", "config": {"base_path": base_path}}


def pg_url(url: str) -> URL:
    return pg_url_and_database(url)[0]


def pg_url_and_database(url: str) -> tuple[URL, str]:
    """`url` parsed, and its database; refused unless PostgreSQL with a database."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    database = parsed.database
    if not parsed.drivername.startswith("postgres") or not database:
        raise DeployError(f"{url!r}: not a PostgreSQL URL with a database (postgresql://user@host:5432/db)")
    return parsed, database


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bin_path(name: str) -> str:
    """The command `name` of this interpreter's environment."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        raise DeployError(f"{name} is not installed beside {sys.executable}")
    return found


def _escape(value: str) -> str:
    """A value for supervisord's configuration, which expands `%(name)s`."""
    return value.replace("%", "%%")


def _env(env: Mapping[str, str]) -> str:
    for key, value in env.items():
        if '"' in value or "\n" in value:
            raise DeployError(f"{key}={value!r}: supervisord cannot pass a value with a quote or a line break")
    return ",".join(f'{key}="{_escape(value)}"' for key, value in env.items())
