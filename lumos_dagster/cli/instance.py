"""The Dagster instance Lumos recommends on one machine, as one text: the repository's dagster.yaml
(tests/test_init.py checks it is this text), what `lumos init` writes into its Dagster home, and the
settings `lumos deploy` shares with it (its launcher, run monitoring's poll, telemetry, the console)."""

from __future__ import annotations

import yaml

RUN_LAUNCHER = {"module": "lumos_dagster.resources.launcher", "class": "LumosRunLauncher"}
MONITOR_POLL_SECONDS = 30
TELEMETRY = {"enabled": False}
PYTHON_LOGS = {"python_log_level": "INFO"}

HEADER = """\
# The Dagster instance Lumos recommends on one machine: `lumos init` writes it into the Dagster home it
# makes, and `make demo`/`make ui` copy this file into $DAGSTER_HOME. Written from
# lumos_dagster/cli/instance.py: change it there (tests/test_init.py compares the two).
"""

#: (why, settings), in the file's order
BLOCKS: list[tuple[str, dict]] = [
    (
        """\
Dagster's SQLite storage, tuned: the event log names Lumos' tuning (resources/tuning), an event
log that keeps its connections open and writes the events of a run in groups, so a run records
thousands of materializations in seconds instead of minutes; a process whose instance names it
also gets the tuning's patches of Dagster (resources/tuning/speedups.py). This block is the
switch: without it the instance is Dagster's stock one and nothing of Dagster is replaced.
Deployments use PostgreSQL (docs/deploy.md).""",
        {"event_log_storage": {"module": "lumos_dagster.resources.tuning", "class": "LumosSqliteEventLogStorage"}},
    ),
    (
        """\
A run whose process dies (`kill -9`, the OOM killer) is marked FAILED by dagster-daemon's run
monitoring within poll_interval_seconds, instead of showing STARTED for good: Lumos' launcher is
Dagster's DefaultRunLauncher that can tell a run's process is gone (resources/launcher.py).
Without a daemon running (`dagster asset materialize` alone) nothing watches until one starts.""",
        {
            "run_launcher": RUN_LAUNCHER,
            "run_monitoring": {"enabled": True, "poll_interval_seconds": MONITOR_POLL_SECONDS},
            "telemetry": TELEMETRY,
        },
    ),
    (
        """\
The console of a run at INFO (Dagster's default for a job without loggers is DEBUG: a line for
every event, thousands a run, ~0.7 s of a 1,000-dataset run). The event log and the UI keep
every event at any level; `--config-json '{"loggers": {"console": {"config": {"log_level":
"DEBUG"}}}}'` brings the lines back for one run.""",
        {"python_logs": PYTHON_LOGS},
    ),
]


def instance_yaml() -> str:
    """dagster.yaml of the recommended instance, commented."""
    out = [HEADER]
    for why, settings in BLOCKS:
        out += ["".join(f"# {line}\n" for line in why.splitlines()), yaml.safe_dump(settings, sort_keys=False)]
    return "".join(out)
