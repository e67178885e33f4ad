"""Issue 42, item 8: store faults as one line. A query stopped at PostgreSQL's statement timeout, a
connection killed (`pg_terminate_backend`) in a command or mid-run, and a full disk (a 2 MB tmpfs
under a SQLite store) each give one `Error:` line saying which it was and that nothing was lost,
never the traceback with the SQL and its parameters; a connection killed mid-run no longer reads
"cannot open the snapshot store"."""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid
from pathlib import Path

import psycopg
import pyarrow as pa
import pytest
import sqlalchemy as sa
import yaml
from click.testing import CliRunner

from lumos_dagster.cli import main
from tests.lake import write_parquet
from tests.test_store import PG

pytestmark = [pytest.mark.dagster, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
BIN = ROOT / ".venv" / "bin"
DAY = "2026-11-25"
ADMIN = PG.replace("+psycopg", "")


def _project(folder: Path, url: str, datasets: int = 3) -> Path:
    for i in range(datasets):
        write_parquet(folder / "lake" / "raw" / f"t{i}" / f"dt={DAY}" / "p.parquet", pa.table({f"c{i}": [1, 2]}))
    config = {"sources": [{"name": "lake", "root": "lake"}], "store": {"url": url},
              "catalog": {"type": "datahub-file", "path": "mcps.json"}, "partitions": {"start": DAY}}  # fmt: skip
    (folder / "lumos.yaml").write_text(yaml.safe_dump(config))
    return folder / "lumos.yaml"


@pytest.fixture
def pg(tmp_path):
    """A project on a fresh PostgreSQL schema, discovered and snapshotted; its config names the
    connections `application_name` so that the test finds them."""
    schema, app = f"lumos_fault_{uuid.uuid4().hex[:8]}", f"lumos_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    url = f"{PG}?options=-csearch_path%3D{schema}&application_name={app}"
    config = _project(tmp_path, url)
    for args in (["discover"], ["snapshot", "--partition", DAY]):
        assert CliRunner().invoke(main, [*args, "-c", str(config)]).exit_code == 0
    yield config, schema, app, url
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _lumos(*args) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([str(BIN / "lumos"), *map(str, args)], capture_output=True, text=True, env=env, timeout=300)


def _one_error_line(output: str, *said: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error:")]
    assert len(errors) == 1, output[-3000:]
    assert "Traceback" not in output and "SELECT" not in output and "[SQL:" not in output, output[-3000:]
    assert "nothing was lost" in errors[0] and all(s in errors[0] for s in said), errors[0]
    return errors[0]


class Locked:
    """An ACCESS EXCLUSIVE lock on a table of the store, held by another connection: Lumos' next query
    of that table waits, deterministically, until the lock goes, its timeout or its end."""

    def __init__(self, schema: str, table: str):
        self.conn = psycopg.connect(ADMIN)
        self.conn.execute(f'LOCK TABLE "{schema}".{table} IN ACCESS EXCLUSIVE MODE')

    def release(self) -> None:
        if not self.conn.closed:
            self.conn.rollback()
            self.conn.close()


def _kill_when_waiting(app: str, lock: Locked, done: threading.Event) -> None:
    """Terminate the backend of `app` (Lumos) once it waits on `lock`, then let the lock go (what
    Lumos does next, say releasing its claims, goes through)."""
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        while not done.is_set():
            pids = conn.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s AND "
                                "wait_event_type = 'Lock'", (app,)).fetchall()  # fmt: skip
            if pids:
                conn.execute("SELECT pg_terminate_backend(%s)", (pids[0][0],))
                break
            time.sleep(0.05)
    lock.release()


def _killed(config: Path, schema: str, app: str, table: str, *command: str, env=None) -> subprocess.CompletedProcess:
    lock, done = Locked(schema, table), threading.Event()
    killer = threading.Thread(target=_kill_when_waiting, args=(app, lock, done))
    killer.start()
    try:
        return subprocess.run([*map(str, command)], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONPATH": str(ROOT), "LUMOS_CONFIG": str(config), **(env or {})},
                              cwd=config.parent)  # fmt: skip
    finally:
        done.set()
        killer.join()


def test_a_query_stopped_at_the_statement_timeout_is_one_line(pg):
    config, schema, app, url = pg
    timed = yaml.safe_load(config.read_text())
    timed["store"]["url"] = url.replace("?options=", "?options=-cstatement_timeout%3D300%20")
    (config.parent / "timed.yaml").write_text(yaml.safe_dump(timed))
    lock = Locked(schema, "lumos_snapshots")
    try:
        out = _lumos("summary", "-c", config.parent / "timed.yaml")
    finally:
        lock.release()
    assert out.returncode == 1
    _one_error_line(out.stdout + out.stderr, "a query reached the store's statement timeout and was stopped",
                    "canceling statement due to statement timeout")  # fmt: skip


def test_a_connection_killed_in_lumos_sync_is_one_line_and_the_next_sync_delivers(pg):
    config, schema, app, url = pg
    out = _killed(config, schema, app, "lumos_outbox", BIN / "lumos", "sync")
    assert out.returncode == 1
    _one_error_line(out.stdout + out.stderr, "the connection to the store was lost",
                    "terminating connection due to administrator command")  # fmt: skip
    again = CliRunner().invoke(main, ["sync", "-c", str(config)])
    assert again.exit_code == 0 and "0 failed" in again.output, again.output


@pytest.mark.parametrize("how", ["lumos snapshot", "a Dagster run"])
def test_a_connection_killed_mid_run_is_said_as_lost_not_as_cannot_open(pg, tmp_path, how):
    config, schema, app, url = pg
    write_parquet(config.parent / "lake" / "raw" / "t0" / f"dt={DAY}" / "q.parquet", pa.table({"c0": [3]}))  # news
    if how == "lumos snapshot":
        out = _killed(config, schema, app, "lumos_snapshots", BIN / "lumos", "snapshot", "--partition", DAY)
        said = out.stdout + out.stderr
        _one_error_line(said, "the connection to the store was lost")
    else:
        home = tmp_path / "dagster_home"
        home.mkdir()
        (home / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text())
        run = [BIN / "dagster", "asset", "materialize", "-m", "lumos_dagster.definitions", "--select", "*"]
        out = _killed(config, schema, app, "lumos_snapshots", *run, "--partition", DAY, env={"DAGSTER_HOME": str(home)})
        said = out.stdout + out.stderr
        assert "the connection to the store was lost" in said and "nothing was lost" in said, said[-3000:]
        assert "[SQL:" not in said, said[-3000:]
    assert out.returncode == 1 and "cannot open the snapshot store" not in said
    again = CliRunner().invoke(main, ["snapshot", "--partition", DAY, "-c", str(config)])  # nothing lost: it goes on
    assert again.exit_code == 0, again.output


@pytest.fixture
def tiny_disk(tmp_path):
    """A 2 MB tmpfs (the tests run as root): a real full disk, not a simulation."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)]).returncode != 0:
        pytest.fail("cannot mount a tmpfs (the full-disk test needs root)")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=True)


def _fill(disk: Path, leave: int) -> None:
    """Fill `disk` but for `leave` bytes."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize > leave + 4096 and os.write(fd, b"\0" * 4096):
            pass
    except OSError:  # ENOSPC: full
        pass
    finally:
        os.close(fd)


@pytest.mark.parametrize("left", [256 * 1024, 0], ids=["fills while the run writes", "full when the store opens"])
def test_a_full_disk_is_one_line_and_nothing_is_lost(tmp_path, tiny_disk, left):
    config = _project(tmp_path, f"sqlite:///{tiny_disk}/store.db", datasets=3)
    for i in range(40):  # wide datasets: their snapshots need more than is left
        columns = {f"column_{i}_{c:04d}_with_a_long_name": [1] for c in range(300)}
        write_parquet(tmp_path / "lake" / "wide" / f"w{i}" / f"dt={DAY}" / "p.parquet", pa.table(columns))
    assert CliRunner().invoke(main, ["discover", "-c", str(config)]).exit_code == 0
    before = _counts(tiny_disk / "store.db")
    _fill(tiny_disk, left)
    out = _lumos("snapshot", "--partition", DAY, "-c", config)
    assert out.returncode == 1
    _one_error_line(out.stdout + out.stderr, "the disk holding the store is full")
    (tiny_disk / "filler").unlink()
    assert _counts(tiny_disk / "store.db") == before  # what was there is there, and nothing half-written
    again = CliRunner().invoke(main, ["snapshot", "--partition", DAY, "-c", str(config)])
    assert again.exit_code == 0, again.output


def _counts(path: Path) -> tuple[int, int]:
    engine = sa.create_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:
            return tuple(conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one()
                         for t in ("lumos_datasets", "lumos_snapshots"))  # type: ignore[return-value]  # fmt: skip
    finally:
        engine.dispose()
