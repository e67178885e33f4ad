"""Lumos' tuning of Dagster: opt-in, with one switch.

What it is. Parts of Dagster replaced for speed, all here and nowhere else:

* `LumosSqliteEventLogStorage` (event_log.py) and `LumosPostgresEventLogStorage`
  (event_log_postgres.py): Dagster's own event logs (same tables, same queries: the UI, the daemon
  and `dagster` commands read them as usual) that keep their connections open and write the
  events of a run in groups instead of one by one;
* three of Dagster's private functions replaced process-wide (speedups.py), which a code location
  of thousands of datasets pays for at load and when it plans a run;
* optional, on one machine: `LumosRunLauncher` (launcher.py), Dagster's DefaultRunLauncher that can
  tell a run's process died.

Every private Dagster name Lumos uses, here or elsewhere, is in one list with the Dagster version
it was checked against: dagster_private.py.

Whose events. Only the events of Lumos' own runs (tagged `lumos/run`, resources/ownership.py) are
grouped; every other run's (another code location's, on a shared instance) are written as Dagster's
own storage writes them, one by one and committed before `store_event` returns.

Why. On Dagster's stock instance each event is written alone, with a new engine or connection:
a dataset-partition (its materialization, two check evaluations and, unless the run defers them,
their three planned events) costs tens of milliseconds of bookkeeping, tuned a few
(`python -m benchmarks.instance`, docs/performance.md). The price: code that depends on Dagster's
internals, checked against Dagster's own classes (tests/test_event_log.py, run against the newest
Dagster release by `make check-dagster-latest`).

The switch: the instance's dagster.yaml naming a tuned event log,

    event_log_storage:
      module: lumos_dagster.resources.tuning
      class: LumosSqliteEventLogStorage

or, on PostgreSQL, `class: LumosPostgresEventLogStorage` with dagster-postgres' own `config`
(`postgres_url: postgresql+psycopg2://…`, docs/deploy.md). The repository's dagster.yaml (what
`lumos init` writes) is Dagster's stock instance, with this switch commented out and explained. Off:
leave `event_log_storage` out (or name Dagster's class), and nothing of Lumos replaces anything of
Dagster.

How the patches follow the switch: building a tuned event log applies them to the process that
builds it, and only then (never on import, never in a process whose instance is stock). Dagster
builds the instance, event log included, before it loads the code location in a code server, a
run worker and `dagster asset materialize`; a process that builds the definitions before its
instance (a script, a test) builds them unpatched, even on a tuned instance.

Tests: `pytest --dagster-instance=tuned` (`make test-tuned`) runs the suite as on a tuned
instance, `make test` as on Dagster's stock one.
"""

from __future__ import annotations

__all__ = ["LumosPostgresEventLogStorage", "LumosSqliteEventLogStorage"]


def __getattr__(name: str):
    # imported when an instance names them (dagster-postgres is an optional dependency, `lumos[postgres]`):
    # a process on Dagster's stock instance imports nothing of the tuned event logs
    if name == "LumosSqliteEventLogStorage":
        from lumos_dagster.resources.tuning.event_log import LumosSqliteEventLogStorage

        return LumosSqliteEventLogStorage
    if name == "LumosPostgresEventLogStorage":
        from lumos_dagster.resources.tuning.event_log_postgres import LumosPostgresEventLogStorage

        return LumosPostgresEventLogStorage
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
