"""Dagster's DefaultRunLauncher, able to tell that a run's process is gone, so that run monitoring
(`run_monitoring` in dagster.yaml, done by dagster-daemon) marks a dead run FAILED.

Why: Dagster's own launcher cannot check a started run (`supports_check_run_worker_health` is
False). A run whose process was killed (`kill -9`, the OOM killer, a reboot) stayed STARTED until
`max_runtime_seconds`, or for good without one, and the UI showed it running.

How it knows: a run that opens the snapshot store (dataset, report and nudge runs) tags itself with
where it runs: the host, its boot and PID namespace, the pid and the process's start time
(`record_run_process`, called by resources/store.py). The check answers FAILED when that process
is gone from this host or is another process by now (the pid was reused), RUNNING otherwise: a run
of another host, boot or container cannot be checked from here, nor a run without the tag; their
`max_runtime_seconds`, if set, still ends them.
"""

from __future__ import annotations

import json
import os
import socket

from dagster import DagsterInstance
from dagster._core.launcher import CheckRunHealthResult, DefaultRunLauncher, WorkerStatus
from dagster._core.storage.dagster_run import DagsterRun

TAG = "lumos/run_process"


def _read(path: str, link: bool = False) -> str:
    try:
        if link:
            return os.readlink(path)
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _place() -> str:
    """This host, boot and PID namespace: where a pid names the same process."""
    return " ".join(
        (socket.gethostname(), _read("/proc/sys/kernel/random/boot_id"), _read("/proc/self/ns/pid", link=True))
    )


def _started(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot; "" without /proc), None when it has ended."""
    if not os.path.isdir("/proc/self"):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:  # alive, another user's
            pass
        return ""
    stat = _read(f"/proc/{pid}/stat")
    if not stat:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # after the command's name, which may hold spaces
    return None if fields[0] == "Z" else fields[19]  # a zombie has ended; field 22 of stat: its start time


def record_run_process(instance: DagsterInstance, run_id: str) -> None:
    """Tag the run with this process, where `LumosRunLauncher` finds it."""
    pid = os.getpid()
    instance.add_run_tags(run_id, {TAG: json.dumps({"place": _place(), "pid": pid, "started": _started(pid)})})


class LumosRunLauncher(DefaultRunLauncher):
    """DefaultRunLauncher whose runs run monitoring can check (see the module's docstring)."""

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: DagsterRun) -> CheckRunHealthResult:
        try:
            process = json.loads(run.tags[TAG])
            place, pid, started = process["place"], int(process["pid"]), process["started"]
        except (KeyError, TypeError, ValueError):
            return CheckRunHealthResult(WorkerStatus.RUNNING, "its process is not known (no Lumos resource)")
        if place != _place():
            return CheckRunHealthResult(WorkerStatus.RUNNING, "it runs on another host, boot or container")
        now = _started(pid)
        if now is None or (started and now and now != started):
            return CheckRunHealthResult(
                WorkerStatus.FAILED, f"its process {pid} on {socket.gethostname()} ended without finishing the run"
            )
        return CheckRunHealthResult(WorkerStatus.RUNNING)
