"""What Dagster's instance costs a snapshot run: the same run on Dagster's stock instances, with
and without the tag automation's runs carry, and on the tuned ones.

    python -m benchmarks.instance [DATASETS] [--repeat R]

* Dagster's stock SQLite storage (no dagster.yaml): an engine built and disposed per event;
* the same, the run tagged as automation tags its runs (sensors/run_tags.py: no planned events);
* Dagster's stock PostgreSQL storage (dagster-postgres, `postgresql+psycopg2`), on the PostgreSQL
  server at 127.0.0.1:5432, in a database made for the run: a connection per event;
* the same, the run tagged as automation tags its runs;
* the tuned SQLite instance (the repository's dagster.yaml: resources/tuning, grouped writes);
* the tuned PostgreSQL instance (dagster-postgres' run and schedule storage, the tuned event log:
  what docs/deploy.md has a deployment use).

Each: `dagster job execute` of the daily snapshot job over N datasets (one file each, one
partition) and over 1, after the same `lumos discover`; the cost of a dataset-partition is
(run(N) − run(1)) / (N − 1), and so are the events it records.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
import yaml

from benchmarks.lake import FIRST_DAY, generate_lake
from benchmarks.measure import run_measured
from benchmarks.scan import BIN, ROOT, lumos_project
from lumos_dagster.sensors.run_tags import AUTOMATION_RUN_TAGS

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
JOB = "lumos_daily_snapshots"


@dataclass(frozen=True)
class Instance:
    label: str
    postgres: bool
    tuned: bool
    automation: bool  # the run carries automation's tags


INSTANCES = (
    Instance("stock SQLite (no dagster.yaml)", postgres=False, tuned=False, automation=False),
    Instance("stock SQLite, automation's tag", postgres=False, tuned=False, automation=True),
    Instance("stock PostgreSQL (dagster-postgres)", postgres=True, tuned=False, automation=False),
    Instance("stock PostgreSQL, automation's tag", postgres=True, tuned=False, automation=True),
    Instance("tuned SQLite (dagster.yaml's switch on)", postgres=False, tuned=True, automation=False),
    Instance("tuned PostgreSQL", postgres=True, tuned=True, automation=False),
)

#: the newest run's events, counted by a process of the instance
COUNT_EVENTS = """
from dagster import DagsterInstance
with DagsterInstance.get() as instance:
    (run,) = instance.get_runs(limit=1)
    print(len(instance.all_logs(run.run_id)))
"""


def tuned_sqlite_yaml() -> str:
    """The shipped dagster.yaml with its commented switch on: Lumos' tuned SQLite event log."""
    from lumos_dagster.cli.instance import TUNED_EVENT_LOG

    return yaml.safe_dump({**yaml.safe_load((ROOT / "dagster.yaml").read_text()), **TUNED_EVENT_LOG})


def _postgres_database() -> str:
    name = f"lumos_bench_{uuid.uuid4().hex[:8]}"
    engine = sa.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    engine.dispose()
    return name


def _drop(name: str) -> None:
    engine = sa.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    engine.dispose()


def _instance_yaml(instance: Instance, home: Path) -> list[str]:
    """Writes the instance's dagster.yaml (none for stock SQLite); returns the PostgreSQL databases
    to drop afterwards."""
    if not instance.postgres:
        if instance.tuned:
            (home / "dagster.yaml").write_text(tuned_sqlite_yaml())
        return []
    name = _postgres_database()
    url = f"postgresql+psycopg2://postgres@127.0.0.1:5432/{name}"  # dagster-postgres' NOTIFY needs psycopg2
    if not instance.tuned:
        text = f"storage:\n  postgres:\n    postgres_url: {url}\n"
    else:
        text = "".join(
            f"{part}:\n  module: {module}\n  class: {cls}\n  config:\n    postgres_url: {url}\n"
            for part, module, cls in (
                ("run_storage", "dagster_postgres.run_storage", "PostgresRunStorage"),
                ("schedule_storage", "dagster_postgres.schedule_storage", "PostgresScheduleStorage"),
                ("event_log_storage", "lumos_dagster.resources.tuning", "LumosPostgresEventLogStorage"),
            )
        )
    (home / "dagster.yaml").write_text(text + "telemetry:\n  enabled: false\n")
    return [name]


def run(datasets: int, instance: Instance) -> tuple[float, int]:
    """(wall seconds of the run, events it recorded)."""
    with tempfile.TemporaryDirectory(prefix="lumos-instance-") as tmp:
        folder = Path(tmp)
        generate_lake(folder / "lake", datasets, 1, 1)
        (folder / "lumos").mkdir()
        config = lumos_project(folder / "lake", folder / "lumos")
        home = folder / "dagster"
        home.mkdir()
        databases = _instance_yaml(instance, home)
        env = {**os.environ, "LUMOS_CONFIG": str(config), "DAGSTER_HOME": str(home)}
        try:
            discover = run_measured([str(BIN / "lumos"), "discover"], cwd=str(ROOT), env=env)
            assert discover.returncode == 0, discover.stderr[-2000:]
            tags = {"dagster/partition": str(FIRST_DAY), **(AUTOMATION_RUN_TAGS if instance.automation else {})}
            cmd = [str(BIN / "dagster"), "job", "execute", "-m", "lumos_dagster.definitions", "-j", JOB,
                   "--tags", json.dumps(tags)]  # fmt: skip
            m = run_measured(cmd, cwd=str(ROOT), env=env)
            assert m.returncode == 0, m.stderr[-3000:]
            count = subprocess.run([sys.executable, "-c", COUNT_EVENTS], cwd=str(ROOT), env=env, capture_output=True,
                                   text=True, check=True)  # fmt: skip
            return m.wall_s, int(count.stdout.split()[-1])
        finally:
            for name in databases:
                _drop(name)


def measure(
    datasets: int,
    log=lambda text: print(text, file=sys.stderr, flush=True),
    instances=INSTANCES,
    repeat: int = 1,
) -> list[str]:
    """The table; with `repeat`, each run that many times, instance after instance, keeping the
    fastest (a busy machine only ever slows a run down)."""
    best: dict[Instance, list] = {}
    for round_ in range(repeat):
        for instance in instances:
            (one, one_events), (many, many_events) = run(1, instance), run(datasets, instance)
            log(f"{instance.label}: {one:.1f} s for 1, {many:.1f} s for {datasets} (round {round_ + 1})")
            kept = best.setdefault(instance, [one, many, one_events, many_events])
            kept[0], kept[1] = min(kept[0], one), min(kept[1], many)
    lines = [
        f"### Dagster's instance: {datasets:,} datasets, one partition",
        "",
        "| instance | events per dataset-partition | run of 1 (s) | run of N (s) | ms per dataset-partition |",
        "|---|---:|---:|---:|---:|",
    ]
    for instance, (one, many, one_events, many_events) in best.items():
        per = (many - one) / (datasets - 1) * 1000
        events = (many_events - one_events) / (datasets - 1)
        lines.append(f"| {instance.label} | {events:.1f} | {one:.1f} | {many:.1f} | {per:.1f} |")
    fastest = f", the fastest of {repeat}" if repeat > 1 else ""
    return lines + [
        "",
        f"`dagster job execute -j {JOB}` of N datasets and of 1 (one file each), on a fresh instance each"
        f"{fastest}; a dataset-partition is (run(N) − run(1)) / (N − 1), Lumos' own work (listing, reading, the "
        "store, the catalog) included. Automation's tag: `dagster/defer_asset_events` (sensors/run_tags.py), "
        "which the runs sensors and schedules launch carry: no planned events. Tuned: resources/tuning.",
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instance", description=__doc__.split("\n\n")[0])
    parser.add_argument("datasets", nargs="?", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=1, help="runs of each, the fastest kept")
    args = parser.parse_args()
    print("\n".join(measure(args.datasets, repeat=args.repeat)))
