"""The Dagster instance Lumos recommends on one machine, as one text: the repository's dagster.yaml
(tests/test_init.py checks it is this text), what `lumos init` writes into its Dagster home, and the
settings `lumos deploy` shares with it (run monitoring's poll, telemetry, the console).

It is Dagster's stock instance: its own storages and run launcher. Lumos' tuning (resources/tuning)
is there as its switch, commented out: one block to uncomment, nothing else to change."""

from __future__ import annotations

import yaml

MONITOR_POLL_SECONDS = 30
TELEMETRY = {"enabled": False}
PYTHON_LOGS = {"python_log_level": "INFO"}
#: the switch of Lumos' tuning on one machine (resources/tuning/__init__.py)
TUNED_EVENT_LOG = {
    "event_log_storage": {"module": "lumos_dagster.resources.tuning", "class": "LumosSqliteEventLogStorage"}
}

HEADER = """\
# The Dagster instance Lumos recommends on one machine: `lumos init` writes it into the Dagster home it
# makes, and `make demo`/`make ui` copy this file into $DAGSTER_HOME. Written from
# lumos_dagster/cli/instance.py: change it there (tests/test_init.py compares the two).
"""

#: (why, settings, commented out), in the file's order
BLOCKS: list[tuple[str, dict, bool]] = [
    (
        """\
Dagster's stock storage (SQLite files under $DAGSTER_HOME) and its DefaultRunLauncher: nothing of
Lumos is in Dagster's instance. Deployments use PostgreSQL (docs/deploy.md).

Opt-in, Lumos' tuning (resources/tuning): uncomment the block below. Its event log is Dagster's
SQLite one that writes the events of Lumos' own runs (tagged lumos/run) in groups, a few ms per
dataset-partition instead of tens (docs/benchmarks.md); a killed Lumos run can lose its last fifth
of a second of events, which its next run records again. Every other run's events (another code
location's) are written as Dagster writes them, one by one. A process whose instance names it also
gets the tuning's patches of private Dagster functions (resources/tuning/speedups.py).""",
        TUNED_EVENT_LOG,
        True,
    ),
    (
        """\
Run monitoring by dagster-daemon: a run that never starts, or one past max_runtime_seconds, is
marked FAILED. Telling that a run's process died needs a launcher that can check it (Dagster's
Docker and Kubernetes launchers; on one machine, the tuning's optional LumosRunLauncher,
resources/tuning/launcher.py).""",
        {
            "run_monitoring": {"enabled": True, "poll_interval_seconds": MONITOR_POLL_SECONDS},
            "telemetry": TELEMETRY,
        },
        False,
    ),
    (
        """\
The console of a run at INFO (Dagster's default for a job without loggers is DEBUG: a line for
every event, thousands a run, ~0.7 s of a 1,000-dataset run). The event log and the UI keep
every event at any level; `--config-json '{"loggers": {"console": {"config": {"log_level":
"DEBUG"}}}}'` brings the lines back for one run.""",
        {"python_logs": PYTHON_LOGS},
        False,
    ),
]


def _comment(text: str) -> str:
    return "".join(f"# {line}".rstrip() + "\n" for line in text.splitlines())


def instance_yaml() -> str:
    """dagster.yaml of the recommended instance, commented."""
    out = [HEADER]
    for why, settings, commented in BLOCKS:
        body = yaml.safe_dump(settings, sort_keys=False)
        out += [_comment(why), _comment(body) if commented else body]
    return "".join(out)
