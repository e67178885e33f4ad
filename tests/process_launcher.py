"""A run launcher for tests: the command Dagster's container launchers (Docker, Kubernetes, ECS) give a
run's container, `dagster api execute_run` with no instance reference, run as a local process with a
DAGSTER_HOME of its own. The worker opens its own instance from that folder's dagster.yaml, as a
container does, rather than the launching process's instance (`DefaultRunLauncher` hands its run
workers the launcher's)."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dagster import Field
from dagster._core.launcher import RunLauncher
from dagster._core.launcher.base import LaunchRunContext
from dagster._grpc.types import ExecuteRunArgs
from dagster._serdes import ConfigurableClass, ConfigurableClassData

PID_TAG = "tests/worker_pid"


class ProcessRunLauncher(RunLauncher, ConfigurableClass):
    """`dagster_home`: the run workers' DAGSTER_HOME; `env_vars`: `KEY=VALUE` for their environment
    (DockerRunLauncher's key), beyond the launching process's."""

    def __init__(
        self, dagster_home: str, env_vars: list[str] | None = None, inst_data: ConfigurableClassData | None = None
    ):
        self.dagster_home = dagster_home
        self.env_vars = env_vars or []
        self._inst_data = inst_data
        super().__init__()

    @property
    def inst_data(self) -> ConfigurableClassData | None:
        return self._inst_data

    @classmethod
    def config_type(cls) -> dict:
        return {"dagster_home": Field(str), "env_vars": Field([str], is_required=False)}

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData, config_value: Mapping[str, Any]) -> ProcessRunLauncher:
        return cls(inst_data=inst_data, **config_value)

    def launch_run(self, context: LaunchRunContext) -> None:
        run = context.dagster_run
        assert run.job_code_origin is not None, f"run {run.run_id} has no code origin"
        command = ExecuteRunArgs(
            job_origin=run.job_code_origin, run_id=run.run_id, instance_ref=None, set_exit_code_on_failure=True
        ).get_command_args()
        env = {**os.environ, "DAGSTER_HOME": self.dagster_home, **dict(v.split("=", 1) for v in self.env_vars)}
        with open(Path(self.dagster_home) / f"worker-{run.run_id}.log", "wb") as log:
            worker = subprocess.Popen(
                command, cwd=self.dagster_home, env=env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        self._instance.add_run_tags(run.run_id, {PID_TAG: str(worker.pid)})

    def terminate(self, run_id: str) -> bool:
        run = self._instance.get_run_by_id(run_id)
        pid = run.tags.get(PID_TAG) if run else None
        if pid is None:
            return False
        try:
            os.killpg(int(pid), signal.SIGTERM)
        except ProcessLookupError:
            return False
        return True
