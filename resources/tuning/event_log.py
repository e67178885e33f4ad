"""The tuned SQLite event log (the switch: resources/tuning/__init__.py), and what it shares with
the PostgreSQL one (event_log_postgres.py).

It is Dagster's own SQLite event log: the same files, tables and queries, so the UI, the daemon
and `dagster` commands read it as usual. What changes is how it writes **Lumos' own runs'** events,
which matters when one run records thousands of materializations (Dagster builds and disposes a
database engine for every event, about 10 ms each). Every other run's events (another code
location's on a shared instance) are written as Dagster's own `store_event` writes them, one by one,
committed before `store_event` returns: a process of theirs that dies loses none of them (on the
connections kept open below: like Lumos' own commits, a power cut can lose the last ones). A run is
Lumos' when it carries the tag `lumos/run` (resources/ownership.py) or was launched from Lumos' code
location (its code origin: `-m lumos_dagster.definitions`), read from the run storage once per run
and process, or when this process claimed it (`claim_run`).

* each shard's connection stays open, in WAL mode with `synchronous=NORMAL`: a commit is not an
  fsync. A crash (even `kill -9`) never corrupts the files nor loses a committed event; a power
  cut can lose the last commits;
* the events a Lumos run emits by the thousand (materializations, asset checks, their planned
  events, step outputs, log lines) are written in groups: held in memory for at most `FLUSH_AFTER`
  seconds or `BATCH` events, then written in one transaction per shard with one statement per
  table. Anything that reads or writes otherwise writes the held events first, so this process
  always reads what it wrote; other processes see them at most `FLUSH_AFTER` seconds late. A
  crash (`kill -9`) loses at most those held events, never the consistency of the files: the
  materializations of a fifth of a second, whose snapshots the store has (it is written first);
  the next run of their partitions records them again (docs/reliability.md, "Secrets and killed runs");
* the table and column checks Dagster repeats for every asset event are answered from memory.

Building either tuned event log applies the tuning's process-wide patches (speedups.py) to the
process that builds it: only a process whose instance is tuned is patched.

Readers in other processes (`dagster dev`, the daemon) use this class too (`dagster.yaml`): with
connections kept open, commits land in `<run>.db-wal`, which its watcher follows besides `<run>.db`.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
import threading
import weakref
from abc import ABC, abstractmethod
from collections import OrderedDict
from contextlib import contextmanager
from typing import Iterator, Sequence

import sqlalchemy as sa
from dagster import Field, StringSource
from dagster._core.events import ASSET_CHECK_EVENTS, ASSET_EVENTS, DagsterEventType
from dagster._core.events.log import EventLogEntry
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus
from dagster._core.storage.event_log.schema import (
    AssetCheckExecutionsTable,
    AssetKeyTable,
    SqlEventLogStorageTable,
)
from dagster._core.storage.event_log.sqlite.sqlite_event_log import (
    INDEX_SHARD_NAME,
    SqliteEventLogStorage,
    SqliteEventLogStorageWatchdog,
)
from dagster._core.storage.sql import create_engine
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from dagster._time import datetime_from_timestamp
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import QueuePool
from watchdog.observers import Observer

from lumos_dagster.floor.collector import skip_final_collection
from lumos_dagster.resources.ownership import is_own
from lumos_dagster.resources.tuning import speedups

log = logging.getLogger(__name__)

#: shards kept open at once: the index, the running run's and a few a reader looks at
OPEN_SHARDS = 16
#: events held at most this long, or this many, before they are written: what a `kill -9` can lose.
#: At 0.5 s and 2,000 the run of `python -m benchmarks.instance 1000` (tuned SQLite, 3 runs each on a
#: shared 2-core machine) took 7.6-13.8 s, at 0.2 s and 1,000 6.7-8.0 s: smaller groups cost nothing seen.
FLUSH_AFTER = 0.2
BATCH = 1000

#: the module of Lumos' code location
LUMOS_MODULE = "lumos_dagster.definitions"
#: runs whose ownership (Lumos' or not) a process remembers; a long-lived one (the daemon) reads again
#: the runs it forgot
KNOWN_RUNS = 1000
#: what a run emits per asset; everything else (run and step status, engine events) is written at once
GROUPED = frozenset(
    {
        DagsterEventType.ASSET_MATERIALIZATION,
        DagsterEventType.ASSET_MATERIALIZATION_PLANNED,
        DagsterEventType.ASSET_OBSERVATION,
        DagsterEventType.ASSET_CHECK_EVALUATION,
        DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED,
        DagsterEventType.STEP_OUTPUT,
        DagsterEventType.HANDLED_OUTPUT,
        DagsterEventType.LOADED_INPUT,
    }
)

#: the index's copies of asset and check events, their new ids in the order given (SQLite ≥ 3.35)
_MIRROR = SqlEventLogStorageTable.insert().returning(SqlEventLogStorageTable.c.id, sort_by_parameter_order=True)
INDEXED = ASSET_EVENTS | ASSET_CHECK_EVENTS
_CHECK_PLANNED = AssetCheckExecutionsTable.insert()
_C = AssetCheckExecutionsTable.c
_CHECK_EVALUATED = {  # by whether the evaluation has a partition
    partitioned: AssetCheckExecutionsTable.update()
    .where(
        _C.asset_key == sa.bindparam("b_asset_key"),
        _C.check_name == sa.bindparam("b_check_name"),
        _C.run_id == sa.bindparam("b_run_id"),
        (_C.partition == sa.bindparam("b_partition")) if partitioned else _C.partition.is_(None),
    )
    .values(
        execution_status=sa.bindparam("execution_status"),
        evaluation_event=sa.bindparam("evaluation_event"),
        evaluation_event_timestamp=sa.bindparam("evaluation_event_timestamp"),
        evaluation_event_storage_id=sa.bindparam("evaluation_event_storage_id"),
        materialization_event_storage_id=sa.bindparam("materialization_event_storage_id"),
        partition=sa.bindparam("partition"),
    )
    for partitioned in (False, True)
}


def _pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _of_lumos_location(run) -> bool:
    """A run of Lumos' code location as Lumos ships it (`-m lumos_dagster.definitions`): a run of its
    assets through Dagster's implicit asset job (`dagster asset materialize`, the UI's Materialize)
    carries no Lumos job tag when it is created, its planned events written before it opens the
    store. Read from the run's code origin (the structure of Dagster's private origin classes:
    dagster_private.py)."""
    origin = getattr(run.job_code_origin, "repository_origin", None)
    return getattr(getattr(origin, "code_pointer", None), "module", None) == LUMOS_MODULE


def _groupable(event: EventLogEntry) -> bool:
    # runless events (reported from outside a run) go to the index alone: written at once
    return bool(event.run_id) and (not event.is_dagster_event or event.get_dagster_event().event_type in GROUPED)


class _Watchdog(SqliteEventLogStorageWatchdog):
    """Dagster's watcher of a run's shard, also woken by its write-ahead log."""

    def __init__(self, storage: SqliteEventLogStorage, run_id: str, callback, cursor, **kwargs):
        super().__init__(storage, run_id, callback, cursor, **kwargs)
        self._patterns = [self._log_path, self._log_path + "-wal"]

    @property
    def patterns(self):
        return self._patterns

    def on_modified(self, event) -> None:
        self._process_log()


class GroupedEventWrites(ABC):
    """Holds the events a run emits by the thousand and writes them in groups (`_write`, per
    storage); anything else that reads or writes through the storage writes them first."""

    def _start_grouping(self) -> None:
        # the switch: this process's instance runs on a tuned event log, so the process is tuned too:
        # Dagster's functions patched, and no collection of everything at exit (a process that loads
        # the code location on Dagster's stock instance keeps Python's own collector policy)
        speedups.apply()
        skip_final_collection()
        self._held: list[EventLogEntry] = []
        self._timer: threading.Timer | None = None
        self._flushing = False
        self._lock = threading.RLock()  # the held events; a write of them may run inside a connection's lock
        # held events (by id) written to their run's table already, with their storage ids where the
        # index needs them: a retry after a failed write writes each row once
        self._in_shard: dict[int, int | None] = {}
        self._own: OrderedDict[str, bool] = OrderedDict()  # run id → whether the run is Lumos'
        ref = weakref.ref(self)
        atexit.register(lambda: (storage := ref()) is not None and storage.flush())
        # A process forked (a schema reader, the delivery worker) while the flush thread is inside
        # SQLite would inherit SQLite's locks held, and hang on its own first SQLite call: forks wait
        # for a flush to end, and a child starts with nothing held.
        os.register_at_fork(
            before=lambda: (storage := ref()) is not None and storage._lock.acquire(),
            after_in_parent=lambda: (storage := ref()) is not None and storage._lock.release(),
            after_in_child=lambda: (storage := ref()) is not None and storage._forked(),
        )

    def _forked(self) -> None:
        self._lock, self._held, self._timer, self._in_shard = threading.RLock(), [], None, {}
        self._own = OrderedDict(self._own)

    def claim_run(self, run_id: str) -> None:
        """This process runs `run_id` as Lumos' (resources/ownership.py): its events are grouped."""
        with self._lock:
            self._remember(run_id, True)

    def _remember(self, run_id: str, own: bool) -> bool:
        self._own[run_id] = own
        self._own.move_to_end(run_id)
        while len(self._own) > KNOWN_RUNS:
            self._own.popitem(last=False)
        return own

    def _is_own_run(self, run_id: str) -> bool:
        """Whether `run_id` is Lumos' run: claimed here, or tagged in the instance's run storage. A
        storage without an instance (built alone, as tests do) knows only the runs claimed."""
        own = self._own.get(run_id)
        if own is not None:
            return own
        run = self._instance.get_run_by_id(run_id) if self.has_instance else None
        return self._remember(run_id, run is not None and (is_own(run.tags) or _of_lumos_location(run)))

    def _grouped(self, event: EventLogEntry) -> bool:
        return _groupable(event) and self._is_own_run(event.run_id)

    def store_event(self, event: EventLogEntry) -> None:
        with self._lock:
            self._held.append(event)
            # another run's event is written now, as Dagster writes it (after any held before it, in order)
            if not self._grouped(event) or len(self._held) >= BATCH:
                self._flush_held()
            else:
                self._flush_soon()

    def _flush_soon(self) -> None:
        if self._timer is None:
            self._timer = threading.Timer(FLUSH_AFTER, self._flush_on_timer)
            self._timer.daemon = True
            self._timer.start()

    def _flush_on_timer(self) -> None:
        try:
            self.flush()
        except Exception as error:  # nobody to raise to: say so, and try again (a failed write holds on)
            log.warning(
                "Lumos event log: %d events not written yet (%s); retrying in %ss", len(self._held), error, FLUSH_AFTER
            )

    def store_event_batch(self, events: Sequence[EventLogEntry]) -> None:
        with self._lock:
            if any(self._grouped(e) for e in events):
                for event in events:
                    self.store_event(event)
                return
            self._flush_held()  # another run's batch (`DAGSTER_EVENT_BATCH_SIZE`): as Dagster's storage writes it
        super().store_event_batch(events)

    def flush(self) -> None:
        """Write the held events now."""
        with self._lock:
            self._flush_held()

    def _flush_held(self) -> None:
        """Write the held events in order: each run of grouped ones with `_write`, any other as
        Dagster would. Whatever is not written stays held, to be retried on the timer or at the
        next write, and the error goes to the caller."""
        if not self._held or self._flushing:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._flushing = True
        try:
            while self._held:
                grouped = next((i for i, e in enumerate(self._held) if not self._grouped(e)), len(self._held))
                if grouped:
                    self._write(self._held[:grouped])
                    del self._held[:grouped]
                    self._in_shard = {}
                else:
                    super().store_event(self._held[0])
                    del self._held[0]
        except BaseException:
            self._flush_soon()
            raise
        finally:
            self._flushing = False

    @abstractmethod
    def _write(self, events: list[EventLogEntry]) -> None:
        """Store `events` as Dagster's own `store_event` would each, in as few statements as it takes."""

    @abstractmethod
    def _asset_index_cols(self, conn: Connection) -> bool:
        """Whether the assets table has its index columns (Dagster asks each storage its own way)."""

    def _index(self, conn: Connection, indexed: list[tuple[EventLogEntry, dict, int]]) -> None:
        """What Dagster's `store_event` adds for asset and check events (with their stored ids):
        tags, each asset's row, the check executions."""
        assets = [(e, r, i) for e, r, i in indexed if e.dagster_event_type in ASSET_EVENTS]
        self._store_asset_event_tags(conn, [e for e, _, _ in assets], [i for _, _, i in assets])
        self._asset_entries(conn, assets)
        self._asset_checks(conn, [(e, r, i) for e, r, i in indexed if e.dagster_event_type in ASSET_CHECK_EVENTS])

    def _asset_entries(self, conn: Connection, assets: list[tuple[EventLogEntry, dict, int]]) -> None:
        """Dagster's insert-else-update of each asset's row, as upserts; consecutive events that set
        the same columns go in one statement, in order, so the last event of an asset wins."""
        index_cols = self._asset_index_cols(conn)
        group: list[dict] = []
        for event, event_row, event_id in assets:
            values = self._entry_values(event, event_row, event_id, index_cols)
            if not values or event.get_dagster_event().asset_key is None:
                continue
            row = {"asset_key": event.get_dagster_event().asset_key.to_string(), **values}
            if group and group[-1].keys() != row.keys():
                self._upsert_assets(conn, group)
                group = []
            group.append(row)
        if group:
            self._upsert_assets(conn, group)

    def _entry_values(self, event: EventLogEntry, event_row: dict, event_id: int, index_cols: bool) -> dict:
        """Dagster's `_get_asset_entry_values`, but a materialization's record is written around the
        event's JSON, serialized already for its row, rather than serialized a second time (the test
        against Dagster's own class checks the text is the same)."""
        if not event.get_dagster_event().is_step_materialization:
            return self._get_asset_entry_values(event, event_id, index_cols)
        record = f'{{"__class__": "EventLogRecord", "event_log_entry": {event_row["event"]}, "storage_id": {event_id}}}'
        values = {"last_materialization": record, "last_run_id": event.run_id}
        if index_cols:
            values["last_materialization_timestamp"] = datetime_from_timestamp(event.timestamp)
        return values

    @staticmethod
    def _upsert_assets(conn: Connection, rows: list[dict]) -> None:
        insert = (postgresql_insert if conn.dialect.name == "postgresql" else sqlite_insert)(AssetKeyTable)
        columns = [c for c in rows[0] if c != "asset_key"]
        statement = insert.on_conflict_do_update(
            index_elements=[AssetKeyTable.c.asset_key], set_={c: insert.excluded[c] for c in columns}
        )
        conn.execute(statement, rows)

    def _asset_checks(self, conn: Connection, checks: list[tuple[EventLogEntry, dict, int]]) -> None:
        planned: list[dict] = []
        for event, row, event_id in checks:
            data = event.get_dagster_event().event_specific_data
            timestamp = self._event_insert_timestamp(event)
            if event.dagster_event_type == DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED:
                keys = data.partitions_subset.get_partition_keys() if data.partitions_subset else [None]
                planned += [
                    dict(asset_key=data.asset_key.to_string(), check_name=data.check_name, partition=key,
                         run_id=event.run_id, execution_status=AssetCheckExecutionRecordStatus.PLANNED.value,
                         evaluation_event=row["event"], evaluation_event_timestamp=timestamp,
                         evaluation_event_storage_id=event_id)
                    for key in keys
                ]  # fmt: skip
                continue
            if planned:  # an evaluation updates the row its planned event made
                conn.execute(_CHECK_PLANNED, planned)
                planned = []
            target = data.target_materialization_data
            values = dict(
                execution_status=(
                    AssetCheckExecutionRecordStatus.SUCCEEDED if data.passed else AssetCheckExecutionRecordStatus.FAILED
                ).value,
                evaluation_event=row["event"],
                evaluation_event_timestamp=timestamp,
                evaluation_event_storage_id=event_id,
                materialization_event_storage_id=target.storage_id if target else None,
                partition=data.partition,
            )
            where = dict(
                b_asset_key=data.asset_key.to_string(), b_check_name=data.check_name, b_run_id=event.run_id,
                b_partition=data.partition,
            )  # fmt: skip
            if data.partition is None:
                where.pop("b_partition")
            updated = conn.execute(_CHECK_EVALUATED[data.partition is not None], {**where, **values}).rowcount
            if updated == 0:  # no planned row (Dagster's own fallback)
                conn.execute(
                    _CHECK_PLANNED,
                    dict(
                        asset_key=data.asset_key.to_string(), check_name=data.check_name, run_id=event.run_id, **values
                    ),
                )
        if planned:
            conn.execute(_CHECK_PLANNED, planned)


class LumosSqliteEventLogStorage(GroupedEventWrites, SqliteEventLogStorage):
    def __init__(self, base_dir: str, inst_data=None):
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        self._tables: set[str] = set()
        self._columns: dict[tuple[str, str], bool] = {}
        self._start_grouping()
        super().__init__(base_dir, inst_data)
        self._db_lock = self._lock  # a write of held events runs inside `_connect`'s lock

    @classmethod
    def config_type(cls):
        return {"base_dir": Field(StringSource, is_required=False)}

    @classmethod
    def from_config_value(cls, inst_data, config_value) -> "LumosSqliteEventLogStorage":
        # where Dagster's default SQLite storage keeps the run shards, so an instance can switch either way
        base_dir = config_value.get("base_dir")
        if not base_dir and os.environ.get("DAGSTER_HOME"):
            base_dir = os.path.join(os.environ["DAGSTER_HOME"], "history", "runs")
        elif not base_dir:
            # Dagster's CLI without DAGSTER_HOME runs on a temporary instance, removed at exit, that takes
            # the working directory's dagster.yaml (this repository's): the events go, and are gone, with it
            base_dir = tempfile.mkdtemp(prefix="lumos-dagster-events-")
            atexit.register(shutil.rmtree, base_dir, True)
        return cls(base_dir, inst_data=inst_data)

    # ------------------------------------------------------------------ connections

    def _engine(self, shard: str) -> Engine:
        engine = self._engines.get(shard)
        if engine is not None:
            self._engines.move_to_end(shard)
            return engine
        engine = create_engine(
            self.conn_string_for_shard(shard),
            poolclass=QueuePool,
            pool_size=1,
            max_overflow=2,
            connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS, "check_same_thread": False},
        )
        sa.event.listen(engine, "connect", _pragmas)
        self._engines[shard] = engine
        while len(self._engines) > OPEN_SHARDS:
            self._engines.popitem(last=False)[1].dispose()
        if shard not in self._initialized_dbs:
            self._initdb(engine)
            self._initialized_dbs.add(shard)
        return engine

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        with self._db_lock:
            self._flush_held()  # whatever reads or writes next sees the held events
            with self._engine(shard).connect() as conn, conn.begin():
                yield conn

    def has_table(self, table_name: str) -> bool:
        # tables are created, never dropped: a table found once is there for good
        if table_name not in self._tables and super().has_table(table_name):
            self._tables.add(table_name)
        return table_name in self._tables

    def _has_asset_key_col_on_connection(self, conn: Connection, column_name: str) -> bool:
        # asked for every asset event; columns are added by migrations, never removed
        key = (str(conn.engine.url), column_name)
        if not self._columns.get(key):
            self._columns[key] = super()._has_asset_key_col_on_connection(conn, column_name)
        return self._columns[key]

    def _asset_index_cols(self, conn: Connection) -> bool:
        return self._has_asset_key_index_cols_on_connection(conn)

    def _write(self, events: list[EventLogEntry]) -> None:
        """Into each run's shard, then asset and check events mirrored into the index, as Dagster's
        SQLite event log does: one transaction per shard."""
        rows = [self._event_to_row(e) for e in events]
        by_run: dict[str, list[tuple[EventLogEntry, dict]]] = {}
        for event, row in zip(events, rows, strict=True):
            if id(event) not in self._in_shard:
                by_run.setdefault(row["run_id"], []).append((event, row))
        for run_id, pairs in by_run.items():
            with self._engine(run_id).begin() as conn:
                conn.execute(SqlEventLogStorageTable.insert(), [row for _, row in pairs])
            self._in_shard.update(dict.fromkeys(id(event) for event, _ in pairs))
        indexed = [(e, r) for e, r in zip(events, rows, strict=True) if e.dagster_event_type in INDEXED]
        if indexed:
            with self._engine(INDEX_SHARD_NAME).begin() as conn:
                ids = conn.execute(_MIRROR, [row for _, row in indexed]).scalars().all()
                self._index(conn, [(e, r, i) for (e, r), i in zip(indexed, ids, strict=True)])

    # ------------------------------------------------------------------ lifecycle

    def _dispose_engines(self) -> None:
        with self._db_lock:
            while self._engines:
                self._engines.popitem()[1].dispose()

    def wipe(self) -> None:
        with self._db_lock:
            self._held = []
        self._dispose_engines()  # before the files go
        super().wipe()

    def dispose(self) -> None:
        self.flush()
        self._dispose_engines()
        super().dispose()

    def watch(self, run_id: str, cursor, callback) -> None:
        if not self._obs:
            self._obs = Observer()
            self._obs.start()
        watchdog = _Watchdog(self, run_id, callback, cursor)
        self._watchers[run_id][callback] = (watchdog, self._obs.schedule(watchdog, self._base_dir, recursive=True))
