"""What Dagster's instance storage costs a snapshot run: the same run on three instances.

    python -m benchmarks.instance [DATASETS]

* Dagster's default SQLite storage (no dagster.yaml): an engine built and disposed per event;
* the instance Lumos ships (dagster.yaml: resources/event_log.py, grouped writes);
* Dagster's PostgreSQL storage (dagster-postgres), on the PostgreSQL server at 127.0.0.1:5432,
  in a database made for the run;
* the same with Lumos' PostgreSQL event log (resources/event_log_postgres.py, grouped writes):
  what docs/deploy.md has a deployment use.

Each: `dagster asset materialize` of N datasets (one file each, one partition) and of 1, after
the same `lumos discover`; the cost of a dataset-partition is (run(N) − run(1)) / (N − 1).
"""

from __future__ import annotations

import os
import sys
import tempfile
import uuid
from pathlib import Path

import sqlalchemy as sa

from benchmarks.lake import FIRST_DAY, generate_lake
from benchmarks.measure import run_measured
from benchmarks.scan import BIN, ROOT, lumos_project

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
INSTANCES = (
    "Dagster's SQLite storage",
    "Lumos' dagster.yaml (SQLite)",
    "Dagster's PostgreSQL storage",
    "Dagster's PostgreSQL storage, Lumos' event log",
)


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


def _instance_yaml(kind: str, home: Path) -> list[str]:
    """Writes the instance's dagster.yaml; returns the PostgreSQL databases to drop afterwards."""
    if kind == INSTANCES[1]:
        (home / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text())
    elif kind in INSTANCES[2:]:
        name = _postgres_database()
        url = f"postgresql+psycopg2://postgres@127.0.0.1:5432/{name}"
        if kind == INSTANCES[2]:
            text = f"storage:\n  postgres:\n    postgres_url: {url}\n"
        else:
            text = "".join(
                f"{part}:\n  module: {module}\n  class: {cls}\n  config:\n    postgres_url: {url}\n"
                for part, module, cls in (
                    ("run_storage", "dagster_postgres.run_storage", "PostgresRunStorage"),
                    ("schedule_storage", "dagster_postgres.schedule_storage", "PostgresScheduleStorage"),
                    ("event_log_storage", "resources.event_log_postgres", "LumosPostgresEventLogStorage"),
                )
            )
        (home / "dagster.yaml").write_text(text + "telemetry:\n  enabled: false\n")
        return [name]
    return []


def run(datasets: int, kind: str) -> float:
    with tempfile.TemporaryDirectory(prefix="lumos-instance-") as tmp:
        folder = Path(tmp)
        generate_lake(folder / "lake", datasets, 1, 1)
        (folder / "lumos").mkdir()
        config = lumos_project(folder / "lake", folder / "lumos")
        home = folder / "dagster"
        home.mkdir()
        databases = _instance_yaml(kind, home)
        env = {**os.environ, "LUMOS_CONFIG": str(config), "DAGSTER_HOME": str(home)}
        try:
            discover = run_measured([str(BIN / "lumos"), "discover"], cwd=str(ROOT), env=env)
            assert discover.returncode == 0, discover.stderr[-2000:]
            cmd = [str(BIN / "dagster"), "asset", "materialize", "-m", "lumos_dagster.definitions",
                   "--select", "* and not group:reports", "--partition", str(FIRST_DAY)]  # fmt: skip
            m = run_measured(cmd, cwd=str(ROOT), env=env)
            assert m.returncode == 0, m.stderr[-3000:]
            return m.wall_s
        finally:
            for name in databases:
                _drop(name)


def measure(datasets: int, log=lambda text: print(text, file=sys.stderr, flush=True)) -> list[str]:
    lines = [
        f"### Dagster's instance storage: {datasets:,} datasets, one partition",
        "",
        "| instance | `dagster asset materialize` of 1 (s) | of N (s) | ms per dataset-partition |",
        "|---|---:|---:|---:|",
    ]
    for kind in INSTANCES:
        one, many = run(1, kind), run(datasets, kind)
        log(f"{kind}: {one:.1f} s for 1, {many:.1f} s for {datasets}")
        lines.append(f"| {kind} | {one:.1f} | {many:.1f} | {(many - one) / (datasets - 1) * 1000:.1f} |")
    return lines


if __name__ == "__main__":
    print("\n".join(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 200)))
