"""The tuned event logs (resources/tuning, the instance Lumos ships in dagster.yaml): what they
write is what Dagster's own SQLite and PostgreSQL event logs write, other processes read a run
while it writes, and a crash loses nothing that was committed nor corrupts the instance.

These test the tuned classes themselves, whatever `--dagster-instance` the suite runs with, and are
what `make check-dagster-latest` runs against Dagster's newest release."""

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage

from lumos_dagster.resources.ownership import OWN_RUN_TAGS
from lumos_dagster.resources.tuning import LumosSqliteEventLogStorage
from tests.conftest import instance_yaml

ROOT = Path(__file__).resolve().parents[1]
PARTITIONS = dg.DailyPartitionsDefinition(start_date="2026-11-01")
INSTANCE_YAML = instance_yaml("tuned")

pytestmark = [pytest.mark.tuning, pytest.mark.dagster]


def _job(n: int):
    specs = [dg.AssetSpec(f"a{i}", partitions_def=PARTITIONS) for i in range(n)]
    checks = [dg.AssetCheckSpec(c, asset=s.key, blocking=c == "gate") for s in specs for c in ("gate", "note")]

    @dg.multi_asset(specs=specs, check_specs=checks, can_subset=True, partitions_def=PARTITIONS, name="datasets")
    def datasets(context: dg.AssetExecutionContext):
        for i, key in enumerate(sorted(context.selected_asset_keys)):
            context.log.info(f"dataset {key.to_user_string()}")
            if i == 0:  # one through an output, as when a later step consumes it
                yield dg.MaterializeResult(asset_key=key, metadata={"rows": i}, data_version=dg.DataVersion("v"))
            else:
                for pk in context.partition_keys:
                    yield dg.AssetMaterialization(key, partition=pk, metadata={"rows": i},
                                                  tags={"dagster/data_version": f"v{i}"})  # fmt: skip
            yield dg.AssetCheckEvaluation(asset_key=key, check_name="gate", passed=True, blocking=True)
            yield dg.AssetCheckEvaluation(asset_key=key, check_name="note", passed=i % 2 == 0,
                                          severity=dg.AssetCheckSeverity.WARN)  # fmt: skip

    return dg.Definitions(assets=[datasets]).resolve_implicit_global_asset_job_def()


def _tables(base_dir: Path) -> dict:
    """Every row of every event-log table, run shards and index alike (wall-clock columns aside)."""
    out = {}
    for db in sorted(base_dir.glob("*.db")):
        conn = sqlite3.connect(db)
        names = [r[0] for r in conn.execute("select name from sqlite_master where type='table'")]
        for name in names:
            columns = [
                f'"{r[1]}"'
                for r in conn.execute(f'pragma table_info("{name}")')
                if r[1] not in ("create_timestamp", "migration_completed")
            ]
            rows = conn.execute(f'select {", ".join(columns)} from "{name}"').fetchall()
            out[f"{db.stem if db.stem == 'index' else 'run'}.{name}"] = rows
        conn.close()
    return out


def _events(n: int, partitions: tuple[str, ...]) -> list:
    """What runs of `_job(n)` emit, one run per partition."""
    source = dg.DagsterInstance.ephemeral()
    job = _job(n)
    events = []
    for key in partitions:
        events += source.all_logs(job.execute_in_process(instance=source, partition_key=key).run_id)
    return events


def _stock_and_ours(database: str, request, tmp_path: Path):
    """Dagster's own event log and Lumos', on fresh databases, and a reader of each one's tables."""
    if database == "sqlite":
        stock, ours = SqliteEventLogStorage(str(tmp_path / "stock")), LumosSqliteEventLogStorage(str(tmp_path / "ours"))
        return stock, ours, lambda which: _tables(tmp_path / which)
    from dagster_postgres.event_log.event_log import PostgresEventLogStorage

    from lumos_dagster.resources.tuning import LumosPostgresEventLogStorage

    urls = dict(zip(("stock", "ours"), request.getfixturevalue("postgres_databases"), strict=True))
    stock, ours = PostgresEventLogStorage(urls["stock"]), LumosPostgresEventLogStorage(urls["ours"])
    return stock, ours, lambda which: _pg_tables(urls[which])


def _claimed(storage, events: list):
    """`storage`, its runs of `events` claimed as Lumos' (the runs it groups the events of)."""
    for run_id in {e.run_id for e in events}:
        storage.claim_run(run_id)
    return storage


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_it_writes_what_dagsters_own_event_log_writes(database, request, tmp_path):
    events = _events(6, ("2026-11-02", "2026-11-03"))
    assert {e.dagster_event_type for e in events if e.is_dagster_event} >= {
        dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED,
        dg.DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED,
        dg.DagsterEventType.ASSET_MATERIALIZATION,
        dg.DagsterEventType.ASSET_CHECK_EVALUATION,
        dg.DagsterEventType.STEP_OUTPUT,
    }
    stock, ours, tables = _stock_and_ours(database, request, tmp_path)
    _claimed(ours, events)
    for event in events:
        stock.store_event(event)
        ours.store_event(event)
    ours.flush()
    assert tables("ours") == tables("stock")
    # and it reads back what it holds, through Dagster's own queries
    key = dg.AssetKey("a3")
    assert ours.get_latest_materialization_events([key])[key].dagster_event.partition == "2026-11-03"
    ours.dispose()
    stock.dispose()


def test_this_process_reads_its_own_held_events_at_once(tmp_path):
    storage = LumosSqliteEventLogStorage(str(tmp_path))
    events = dg.DagsterInstance.ephemeral()
    run_id = _job(2).execute_in_process(instance=events, partition_key="2026-11-02").run_id
    materialized = events.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
    storage.claim_run(run_id)
    for event in materialized:
        storage.store_event(event)
    assert storage._held  # grouped, not written yet…
    assert len(storage.get_logs_for_run(run_id)) == len(materialized)  # …but read at once
    assert not storage._held
    storage.dispose()


SLOW_RUN = """
import sys, time
import dagster as dg
P = dg.DailyPartitionsDefinition(start_date="2026-11-01")
specs = [dg.AssetSpec(f"a{i}", partitions_def=P) for i in range(int(sys.argv[1]))]
@dg.multi_asset(specs=specs, can_subset=True, partitions_def=P, name="slow")
def slow(context):
    for key in sorted(context.selected_asset_keys):
        yield dg.AssetMaterialization(key, partition=context.partition_key)
        time.sleep(float(sys.argv[2]))
job = dg.Definitions(assets=[slow]).resolve_implicit_global_asset_job_def()
with dg.DagsterInstance.get() as instance:  # a run of Lumos' (its tag): the one whose events are grouped
    result = job.execute_in_process(instance=instance, partition_key="2026-11-02", tags={"lumos/run": "true"})
    print(result.success, flush=True)
"""


def _start(home: Path, datasets: int, pause: float) -> subprocess.Popen:
    env = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", SLOW_RUN, str(datasets), str(pause)], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def _materializations(instance: dg.DagsterInstance, run_id: str | None = None) -> int:
    """Of the given run, else of the newest one."""
    runs = [run_id] if run_id else [r.run_id for r in instance.get_runs(limit=1)]
    events = instance.all_logs(runs[0]) if runs else []
    return sum(e.dagster_event_type == dg.DagsterEventType.ASSET_MATERIALIZATION for e in events)


@pytest.fixture
def home(tmp_path, monkeypatch):
    """An instance as the repository's dagster.yaml makes it: the tuned one, whatever the suite runs on."""
    assert "module: lumos_dagster.resources.tuning" in INSTANCE_YAML
    (tmp_path / "dagster.yaml").write_text(INSTANCE_YAML)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    return tmp_path


def test_another_process_reads_and_watches_a_run_while_it_writes(home):
    """What `dagster dev` does for a running run: fetch its events, then follow new ones."""
    process = _start(home, datasets=40, pause=0.1)
    try:
        with dg.DagsterInstance.get() as instance:
            deadline = time.monotonic() + 60
            while _materializations(instance) < 5 and time.monotonic() < deadline:
                time.sleep(0.2)
            (run,) = instance.get_runs()
            seen_while_running = _materializations(instance)
            assert 5 <= seen_while_running < 40 and process.poll() is None
            followed = []
            instance.watch_event_logs(run.run_id, None, lambda event, cursor: followed.append(event))
            deadline = time.monotonic() + 60
            while (
                instance.get_run_by_id(run.run_id).status != dg.DagsterRunStatus.SUCCESS and time.monotonic() < deadline
            ):
                time.sleep(0.2)
            assert _materializations(instance) == 40

            def watched() -> int:
                return sum(e.dagster_event_type == dg.DagsterEventType.ASSET_MATERIALIZATION for e in followed)

            deadline = time.monotonic() + 60  # the watcher's last wake-up: waited for, not guessed
            while watched() < 40 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert watched() == 40  # the watcher replays from the start, then follows the -wal file
    finally:
        process.kill()
        process.wait()


def test_a_run_killed_mid_way_leaves_the_instance_whole_and_readable(home):
    process = _start(home, datasets=400, pause=0.01)
    try:
        with dg.DagsterInstance.get() as instance:
            deadline = time.monotonic() + 60
            while _materializations(instance) < 50 and time.monotonic() < deadline:
                time.sleep(0.1)
    finally:
        process.kill()  # SIGKILL: no flush, no clean-up
        process.wait()
    for db in home.rglob("*.db"):
        conn = sqlite3.connect(db)
        assert conn.execute("pragma integrity_check").fetchone() == ("ok",), db
        conn.close()
    with dg.DagsterInstance.get() as instance:
        (run,) = instance.get_runs()
        kept = _materializations(instance)
        assert 50 <= kept < 400  # what was committed survived; the run stays STARTED, as Dagster leaves it
        assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.STARTED
        records = instance.get_asset_records([dg.AssetKey("a0")])
        assert records and records[0].asset_entry.last_materialization is not None
    again = _start(home, datasets=400, pause=0)
    out, err = again.communicate(timeout=240)
    assert again.returncode == 0 and out.strip() == "True", err[-2000:]
    with dg.DagsterInstance.get() as instance:
        latest = instance.get_runs(limit=1)[0]
        assert latest.status == dg.DagsterRunStatus.SUCCESS and _materializations(instance) == 400
        assert _materializations(instance, run.run_id) == kept


@pytest.fixture
def postgres_databases():
    """Two fresh databases on the PostgreSQL server, dropped afterwards."""
    import sqlalchemy as sa

    admin = sa.create_engine("postgresql+psycopg://postgres@127.0.0.1:5432/test", isolation_level="AUTOCOMMIT")
    names = [f"lumos_events_{os.getpid()}_{i}_{int(time.time() * 1000) % 10**8}" for i in range(2)]
    with admin.connect() as conn:
        for name in names:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    yield [f"postgresql+psycopg2://postgres@127.0.0.1:5432/{name}" for name in names]
    with admin.connect() as conn:
        for name in names:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.dispose()


def _pg_tables(url: str) -> dict:
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    out = {}
    with engine.connect() as conn:
        for table in sa.inspect(conn).get_table_names():
            columns = [c["name"] for c in sa.inspect(conn).get_columns(table)]
            kept = [f'"{c}"' for c in columns if c not in ("create_timestamp", "migration_completed")]
            order = '"id"' if "id" in columns else kept[0]
            out[table] = conn.exec_driver_sql(f'select {", ".join(kept)} from "{table}" order by {order}').fetchall()
    engine.dispose()
    return out


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_a_write_that_fails_is_retried_without_writing_a_row_twice(database, request, tmp_path, monkeypatch):
    from lumos_dagster.resources.tuning.event_log import GroupedEventWrites

    events = _events(3, ("2026-11-02",))
    stock, ours, tables = _stock_and_ours(database, request, tmp_path)
    _claimed(ours, events)
    index = GroupedEventWrites._index
    failures = []

    def index_fails_once(self, conn, indexed):
        if not failures:
            failures.append(True)
            raise OSError("disk full")  # after the events' own rows were written
        index(self, conn, indexed)

    monkeypatch.setattr(GroupedEventWrites, "_index", index_fails_once)
    for event in events:
        stock.store_event(event)
        try:
            ours.store_event(event)
        except OSError:
            pass  # the caller sees the failure; the events stay held, this one too
    ours.flush()
    assert failures and tables("ours") == tables("stock")
    ours.dispose()
    stock.dispose()


def test_a_fork_waits_for_a_write_in_progress(tmp_path):
    """A child forked while another thread writes SQLite would inherit SQLite's locks held."""
    import threading

    storage = LumosSqliteEventLogStorage(str(tmp_path))
    writing = threading.Event()

    def write() -> None:
        with storage._lock:  # as a flush on the timer thread holds it
            writing.set()
            time.sleep(0.5)

    thread = threading.Thread(target=write)
    thread.start()
    writing.wait()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os._exit(0 if not storage._held else 1)
    waited = time.monotonic() - start
    _, status = os.waitpid(pid, 0)
    thread.join()
    assert waited >= 0.4 and os.waitstatus_to_exitcode(status) == 0
    storage.dispose()


def test_the_shipped_instance_prints_progress_not_a_line_per_event_and_keeps_every_event(home, capfd):
    """dagster.yaml's `python_logs` level: the console of a run without loggers is INFO (Dagster's
    default for it is DEBUG, a line per event), while the event log still gets every event."""
    with dg.DagsterInstance.get() as instance:
        result = _job(3).execute_in_process(instance=instance, partition_key="2026-11-02")
        stored = instance.all_logs(result.run_id)
    printed = capfd.readouterr().err
    assert "dataset a1" in printed  # the op's own INFO lines
    assert "ASSET_MATERIALIZATION" not in printed and "STEP_START" not in printed
    kinds = [e.dagster_event_type for e in stored if e.is_dagster_event]
    assert kinds.count(dg.DagsterEventType.ASSET_MATERIALIZATION) == 3
    assert kinds.count(dg.DagsterEventType.ASSET_CHECK_EVALUATION) == 6
    assert dg.DagsterEventType.STEP_START in kinds


DYING_RUN = """
import os, sys
import dagster as dg
@dg.op
def log_five_and_die(context):
    for i in range(5):
        context.log_event(dg.AssetMaterialization(f"other_{i}"))
    os._exit(0)  # within half a second of the first: no flush, no clean-up
@dg.job(name="other_team_job", tags=dict(a.split("=") for a in sys.argv[1:]))
def job():
    log_five_and_die()
with dg.DagsterInstance.get() as instance:
    job.execute_in_process(instance=instance)
"""


@pytest.mark.parametrize("tags, recorded", [((), "all"), (("lumos/run=true",), "not all")])
def test_another_locations_job_that_dies_keeps_every_event_on_the_tuned_instance(home, tags, recorded):
    """Another team's job on the tuned instance logs 5 materializations and dies at once: its events
    are written as Dagster writes them, 5 of 5. The same job as a Lumos run (its tag) is grouped: the
    control that the instance is tuned, and what a killed Lumos run can lose (its next run records it)."""
    env = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": str(ROOT)}
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", DYING_RUN, *tags], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    with dg.DagsterInstance.get() as instance:
        assert isinstance(instance.event_log_storage, LumosSqliteEventLogStorage)
        (run,) = instance.get_runs()
        assert run.status == dg.DagsterRunStatus.STARTED  # it died: nothing marked it ended
        kept = _materializations(instance, run.run_id)
    assert (kept == 5) if recorded == "all" else (kept < 5), (kept, time.monotonic() - start)


@pytest.mark.parametrize("module, tags, grouped", [
    ("lumos_dagster.definitions", {}, True),  # Lumos' location, its implicit asset job: no tag at creation
    ("other_team.definitions", {}, False),
    ("other_team.definitions", OWN_RUN_TAGS, True),
])  # fmt: skip
def test_a_run_is_lumos_by_its_tag_or_its_code_location(module, tags, grouped, home):
    from dagster._core.code_pointer import ModuleCodePointer
    from dagster._core.origin import JobPythonOrigin, RepositoryPythonOrigin

    origin = JobPythonOrigin(
        "__ASSET_JOB", RepositoryPythonOrigin(sys.executable, ModuleCodePointer(module, "defs", None))
    )
    with dg.DagsterInstance.get() as instance:
        run = instance.add_run(dg.DagsterRun(job_name="__ASSET_JOB", run_id="r1", tags=tags, job_code_origin=origin))
        assert instance.event_log_storage._is_own_run(run.run_id) is grouped


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_another_runs_events_and_batches_are_written_at_once_as_dagster_writes_them(database, request, tmp_path):
    events = _events(3, ("2026-11-02",))
    stock, ours, tables = _stock_and_ours(database, request, tmp_path)  # no run claimed: none is Lumos'
    planned = [e for e in events if e.dagster_event_type == dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED]
    for event in (e for e in events if e not in planned):
        stock.store_event(event)
        ours.store_event(event)
        assert not ours._held  # nothing held back, not even for a fifth of a second
    stock.store_event_batch(planned)  # as Dagster hands planned events over with DAGSTER_EVENT_BATCH_SIZE set
    ours.store_event_batch(planned)
    assert not ours._held and tables("ours") == tables("stock")
    ours.dispose()
    stock.dispose()
