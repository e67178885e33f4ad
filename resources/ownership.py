"""Which Dagster runs are Lumos': the tag every Lumos run carries.

Lumos shares its Dagster instance with other teams' code locations, and whatever it does to runs
(retention deletes them, the tuning's event log groups their events) it does to its own runs only,
found by this tag:

* every job Lumos defines carries it (`tags=OWN_RUN_TAGS`: the cadence jobs, discovery, sync,
  retention, nudges), so every run of them has it from its creation: a schedule's, a sensor's, a
  backfill's, one launched from the UI or `dagster job execute`;
* a run of Lumos' assets through Dagster's implicit asset job (`dagster asset materialize`, the UI's
  Materialize button) has no job tags of Lumos': it takes the tag when it opens the snapshot store
  (`claim_run`, resources/store.py), before its first materialization.
"""

from __future__ import annotations

import json
import os
import socket

from dagster import DagsterInstance

#: the tag, and its value on every Lumos run
OWN_TAG = "lumos/run"
OWN_RUN_TAGS = {OWN_TAG: "true"}
#: where a Lumos run runs (the host, its boot and PID namespace, the pid, the process's start): what
#: the optional launcher of the tuning corner (resources/tuning/launcher.py) checks the process by
PROCESS_TAG = "lumos/run_process"


def is_own(tags: dict[str, str]) -> bool:
    return tags.get(OWN_TAG) == OWN_RUN_TAGS[OWN_TAG]


def _read(path: str, link: bool = False) -> str:
    try:
        if link:
            return os.readlink(path)
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return ""


def place() -> str:
    """This host, boot and PID namespace: where a pid names the same process."""
    return " ".join(
        (socket.gethostname(), _read("/proc/sys/kernel/random/boot_id"), _read("/proc/self/ns/pid", link=True))
    )


def started(pid: int) -> str | None:
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


def claim_run(instance: DagsterInstance, run_id: str) -> None:
    """Tag the run as Lumos' and with the process it runs in, in one write."""
    pid = os.getpid()
    process = json.dumps({"place": place(), "pid": pid, "started": started(pid)})
    instance.add_run_tags(run_id, {**OWN_RUN_TAGS, PROCESS_TAG: process})
    # the tuned event log of this process (the tuning corner) groups the run's events from now on
    claim = getattr(instance.event_log_storage, "claim_run", None)
    if callable(claim):
        claim(run_id)
