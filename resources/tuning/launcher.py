"""Optional, in the tuning corner: Dagster's DefaultRunLauncher, able to tell that a run's process
is gone, so that run monitoring (`run_monitoring` in dagster.yaml, done by dagster-daemon) marks a
dead run FAILED.

Why: Dagster's own launcher cannot check a started run (`supports_check_run_worker_health` is
False). A run whose process was killed (`kill -9`, the OOM killer, a reboot) stayed STARTED until
`max_runtime_seconds`, or for good without one, and the UI showed it running.

Nothing of Lumos needs it: `lumos init` and `lumos deploy` leave the instance's launcher Dagster's own
(DefaultRunLauncher, or the Docker or Kubernetes launcher an instance names). An instance on one
machine that wants dead runs failed names it:

    run_launcher:
      module: lumos_dagster.resources.tuning.launcher
      class: LumosRunLauncher

How it knows: a run that opens the snapshot store (dataset, report and nudge runs) tags itself with
where it runs: the host, its boot and PID namespace, the pid and the process's start time
(`claim_run`, resources/ownership.py, called by resources/store.py). The check answers FAILED when that process
is gone from this host or is another process by now (the pid was reused), RUNNING otherwise: a run
of another host, boot or container cannot be checked from here, nor a run without the tag; their
`max_runtime_seconds`, if set, still ends them.
"""

from __future__ import annotations

import json
import socket

from dagster import DagsterRun, DefaultRunLauncher
from dagster._core.launcher import CheckRunHealthResult, WorkerStatus

from lumos_dagster.resources.ownership import PROCESS_TAG, place, started


class LumosRunLauncher(DefaultRunLauncher):
    """DefaultRunLauncher whose runs run monitoring can check (see the module's docstring)."""

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: DagsterRun) -> CheckRunHealthResult:
        try:
            process = json.loads(run.tags[PROCESS_TAG])
            where, pid, began = process["place"], int(process["pid"]), process["started"]
        except (KeyError, TypeError, ValueError):
            return CheckRunHealthResult(WorkerStatus.RUNNING, "its process is not known (no Lumos resource)")
        if where != place():
            return CheckRunHealthResult(WorkerStatus.RUNNING, "it runs on another host, boot or container")
        now = started(pid)
        if now is None or (began and now and now != began):
            return CheckRunHealthResult(
                WorkerStatus.FAILED, f"its process {pid} on {socket.gethostname()} ended without finishing the run"
            )
        return CheckRunHealthResult(WorkerStatus.RUNNING)
