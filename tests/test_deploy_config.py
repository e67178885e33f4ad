"""What `lumos deploy` writes, checked by the tools that read it: supervisord's own configuration
parser, systemd's verifier (`systemd-analyze verify`), and the values schema of Dagster's Helm chart
(helm itself is not installed here). tests/test_deploy.py runs the supervisord deployment itself."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time

import jsonschema
import pytest
import yaml

from lumos_dagster.cli.deploy_config import Layout

PASSWORD = "s3cr%t"  # a `%` too: supervisord and systemd both expand it
PG_URL = f"postgresql+psycopg2://dagster:{PASSWORD}@db.internal:5433/dagster?sslmode=require"

# The part of Dagster's chart values schema (dagster-io/dagster, helm/dagster/values.schema.json, the
# `dagster` chart as of Dagster 1.13) that the values Lumos writes touch: each object's properties as the
# chart names them; where the chart allows no other key (additionalProperties: false) so does this.
_STR, _INT, _BOOL, _OBJ = {"type": "string"}, {"type": "integer"}, {"type": "boolean"}, {"type": "object"}
_LIST = {"type": "array"}
_TICKS = {"type": "object", "additionalProperties": False, "required": ["skipped", "success", "failure", "started"],
          "properties": {k: _INT for k in ("skipped", "success", "failure", "started")}}  # fmt: skip
_TICK_RETENTION = {"type": "object", "required": ["purgeAfterDays"],
                   "properties": {"purgeAfterDays": {"anyOf": [_INT, _TICKS]}}}  # fmt: skip
_IMAGE = {"type": "object", "required": ["repository", "pullPolicy"],
          "properties": {"repository": _STR, "tag": {"type": ["string", "integer", "null"]},
                         "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]}}}  # fmt: skip
_USER_DEPLOYMENT_KEYS = (
    "name image dagsterApiGrpcArgs codeServerArgs includeConfigInLaunchedRuns deploymentNamespace port env "
    "envConfigMaps envSecrets annotations nodeSelector affinity tolerations podSecurityContext securityContext "
    "resources livenessProbe readinessProbe startupProbe labels volumeMounts volumes schedulerName initContainers "
    "sidecarContainers"
).split()
_DAEMON_KEYS = (
    "enabled image runCoordinator heartbeatTolerance env envConfigMaps envSecrets deploymentLabels labels "
    "nodeSelector affinity tolerations podSecurityContext securityContext resources livenessProbe readinessProbe "
    "startupProbe annotations runMonitoring runRetries sensors schedules schedulerName volumeMounts volumes "
    "initContainerResources"
).split()
#: run monitoring is a free object in the schema: these are the keys the chart's instance template reads
_RUN_MONITORING_KEYS = "enabled startTimeoutSeconds cancelTimeoutSeconds maxResumeRunAttempts pollIntervalSeconds"
CHART = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        **{k: _OBJ for k in ("dagsterWebserver", "rabbitmq", "redis", "flower", "ingress", "computeLogManager",
                             "scheduler", "runLauncher", "busybox", "migrate", "serviceAccount", "global")},
        "generatePostgresqlPasswordSecret": _BOOL,
        "generateCeleryConfigSecret": _BOOL,
        "imagePullSecrets": _LIST,
        "dagster-user-deployments": {
            "type": "object", "additionalProperties": False,
            "properties": {"enabled": _BOOL, "enableSubchart": _BOOL, "imagePullSecrets": _LIST, "deployments": {
                "type": "array", "items": {
                    "type": "object", "required": ["name", "image", "port"], "additionalProperties": False,
                    "properties": {**{k: {} for k in _USER_DEPLOYMENT_KEYS}, "name": _STR, "image": _IMAGE,
                                   "codeServerArgs": {"type": "array", "items": _STR}, "port": _INT,
                                   "env": {"anyOf": [_OBJ, {"type": "array", "items": {
                                       "type": "object", "required": ["name"]}}]},
                                   "volumes": _LIST, "volumeMounts": _LIST},
                }}},
        },
        "postgresql": {
            "type": "object", "additionalProperties": False,
            "properties": {"image": _OBJ, "enabled": _BOOL, "postgresqlHost": _STR, "postgresqlUsername": _STR,
                           "postgresqlPassword": _STR, "postgresqlDatabase": _STR, "postgresqlParams": _OBJ,
                           "postgresqlScheme": _STR,
                           "service": {"type": "object", "required": ["port"], "properties": {"port": _INT}}},
        },
        "pythonLogs": {
            "type": "object", "additionalProperties": False,
            "properties": {"pythonLogLevel": {"enum": ["CRITICAL", "FATAL", "ERROR", "WARN", "WARNING", "INFO",
                                                       "DEBUG", "NOTSET"]},
                           "managedPythonLoggers": _LIST, "dagsterHandlerConfig": _OBJ},
        },
        "dagsterDaemon": {
            "type": "object", "additionalProperties": False,
            "properties": {
                **{k: {} for k in _DAEMON_KEYS},
                "runCoordinator": {
                    "type": "object", "required": ["enabled", "type", "config"], "additionalProperties": False,
                    "properties": {"enabled": _BOOL, "type": {"enum": ["QueuedRunCoordinator", "CustomRunCoordinator"]},
                                   "config": {"type": "object", "properties": {"queuedRunCoordinator": {
                                       "type": "object", "additionalProperties": False,
                                       "properties": {k: {} for k in (
                                           "maxConcurrentRuns", "tagConcurrencyLimits", "dequeueIntervalSeconds",
                                           "dequeueNumWorkers", "dequeueUseThreads", "blockOpConcurrencyLimitedRuns")},
                                   }}}},
                },
                "runMonitoring": {"type": "object", "additionalProperties": False,
                                  "properties": {k: {} for k in _RUN_MONITORING_KEYS.split()}},
            },
        },
        "telemetry": {"type": "object", "additionalProperties": False, "required": ["enabled"],
                      "properties": {"enabled": _BOOL}},
        "retention": {"type": "object", "additionalProperties": False, "required": ["enabled", "sensor", "schedule"],
                      "properties": {"enabled": _BOOL, "sensor": _TICK_RETENTION, "schedule": _TICK_RETENTION,
                                     "autoMaterialize": _TICK_RETENTION}},
        "additionalInstanceConfig": _OBJ,
    },
}  # fmt: skip


@pytest.fixture
def layout(tmp_path) -> Layout:
    configs = {"sales": tmp_path / "sales.yaml", "crm.eu": tmp_path / "crm.yaml"}
    return Layout(tmp_path / "deploy", configs, port=3999, max_concurrent_runs=3, pg_url=PG_URL, code_port=4500)


def test_supervisord_reads_the_configuration_as_written(layout):
    from supervisor.options import ServerOptions

    layout.write()
    text = layout.supervisord_conf.read_text()
    assert "s3cr" not in text and "s3cr" not in (layout.dagster_home / "dagster.yaml").read_text()
    options = ServerOptions()
    options.realize(args=["-c", str(layout.supervisord_conf)])
    programs = {g.name: g.process_configs[0] for g in options.process_group_configs}
    commands = layout.commands()
    assert list(programs) == list(commands)  # started in this order (priority), stopped in reverse
    for name, program in programs.items():
        command, env = commands[name]
        assert program.command.split() == command  # the paths here have no spaces
        assert program.stopasgroup and program.killasgroup and program.autorestart
        assert program.stdout_logfile == str(layout.log(name)) and program.redirect_stderr
        # supervisord's own environment (DAGSTER_HOME), then the program's
        assert program.environment == {"DAGSTER_HOME": str(layout.dagster_home), **env, "PYTHONUNBUFFERED": "1"}
        assert program.directory == str(layout.dagster_home)
    assert programs["code-server-crm.eu"].command.endswith("-p 4501 --location-name crm.eu")
    # the webserver waits for every code server, the daemon for the webserver too
    assert programs["webserver"].command.split("--")[0].split()[-2:] == ["127.0.0.1:4500", "127.0.0.1:4501"]
    assert programs["daemon"].command.split(" -- ")[0].endswith("127.0.0.1:4501 127.0.0.1:3999")
    assert options.serverurl == f"unix://{layout.socket}"


def test_systemd_units_pass_systemd_analyze_verify(layout, tmp_path):
    # evidence that cannot run fails: `make test` installs Debian's systemd where it is missing
    assert shutil.which("systemd-analyze"), "systemd-analyze is not installed (Debian's systemd: `make systemd`)"
    units = tmp_path / "units"
    units.mkdir()
    for name, text in layout.systemd_units().items():
        assert "s3cr" not in text
        (units / name).write_text(text)
    assert sorted(p.name for p in units.iterdir()) == [
        "lumos-code-server-crm.eu.service", "lumos-code-server-sales.service", "lumos-daemon.service",
        "lumos-webserver.service", "lumos.target",
    ]  # fmt: skip
    done = subprocess.run(["systemd-analyze", "verify", "--man=no", *sorted(units.iterdir())], cwd=units,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    # a unit systemd would refuse fails the same check: it is not a check that always passes
    broken = units / "lumos-webserver.service"
    broken.write_text(broken.read_text().replace("ExecStart=", "ExecStart=/no/such/"))
    done = subprocess.run(["systemd-analyze", "verify", "--man=no", str(broken)], cwd=units,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode != 0 and "/no/such/" in done.stderr


def test_helm_values_keep_to_the_dagster_charts_schema(layout):
    text = yaml.safe_dump(layout.helm_values("registry.internal:5000/lumos:0.1.0", "s3://bucket/state", "prod"))
    assert "s3cr" not in text and "&id" not in text  # no password, no YAML anchors
    values = yaml.safe_load(text)
    jsonschema.validate(values, CHART)
    (sales, crm) = values["dagster-user-deployments"]["deployments"]
    assert sales["image"] == {
        "repository": "registry.internal:5000/lumos",
        "tag": "0.1.0",
        "pullPolicy": "IfNotPresent",
    }
    assert crm["name"] == "lumos-crm-eu"  # a Kubernetes name
    assert crm["codeServerArgs"] == ["-m", "lumos_dagster.definitions", "--location-name", "crm.eu"]
    assert {"name": "LUMOS_DAGSTER_URL", "value": "http://prod-dagster-webserver:80"} in crm["env"]
    assert values["postgresql"]["postgresqlHost"] == "db.internal" and values["postgresql"]["service"]["port"] == 5433
    assert values["postgresql"]["postgresqlParams"] == {"sslmode": "require"}
    assert values["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]["maxConcurrentRuns"] == 3
    extra = values["additionalInstanceConfig"]
    assert extra["defs_state_storage"]["config"] == {"base_path": "s3://bucket/state"}
    assert extra["freshness"] == {"enabled": False}
    # the check refuses what the chart refuses
    values["dagsterDaemon"]["runMonitoring"]["maxRuntimeSeconds"] = 3600
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(values, CHART)


@pytest.mark.slow  # seconds of its own (a budget reached, a build, a process): make test
def test_wait_ports_starts_the_command_once_the_port_listens():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        waiting = subprocess.Popen(
            [sys.executable, "-m", "lumos_dagster.cli.wait_ports", f"127.0.0.1:{port}", "--", sys.executable, "-c",
             "print('started')"], stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        time.sleep(1.5)
        assert waiting.poll() is None  # nothing listens yet
        s.listen()
        out, _ = waiting.communicate(timeout=30)
    assert (waiting.returncode, out) == (0, "started\n")
