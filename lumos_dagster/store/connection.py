"""The store's database connection and its lifecycle: the engine, one transaction at a time on a
connection kept from first use to `close()`, and the schema version check (and migration) on open.

SQLAlchemy Core over SQLite (default, WAL mode) or PostgreSQL, so the same code serves a laptop
and a deployment. The store's jobs (registry, history, outbox, …) are mixins built on
`StoreConnection`; `SnapshotStore` (store.py) composes them.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Self

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from lumos_dagster.floor.errors import StoreError
from lumos_dagster.floor.extras import needs
from lumos_dagster.floor.masking import AMBIGUOUS_PASSWORD, ambiguous_password, mask_secrets, shown_url
from lumos_dagster.floor.plugins import expand_secrets
from lumos_dagster.store.faults import fault_message
from lumos_dagster.store.sql_tables import MIGRATIONS, SCHEMA_VERSION, meta_table, metadata


def _engine(url: str) -> Engine:
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///") :]
        if path and path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        engine = sa.create_engine(url, connect_args={"timeout": 60})

        @sa.event.listens_for(engine, "connect")
        def _pragmas(
            conn: sqlite3.Connection, _record: object
        ) -> None:  # WAL: readers never block the writer, two runs can share it
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA busy_timeout=60000")
            # NORMAL: in WAL mode a commit is a write into the WAL, not an fsync (the WAL is synced
            # at checkpoints). The store stays consistent through any crash of Lumos or the machine;
            # a power loss may lose the last commits (snapshots re-taken by the next run, a delivery
            # sent again, idempotently). FULL would cost an fsync per transaction.
            conn.execute("PRAGMA synchronous=NORMAL")

        return engine
    with needs("postgres", "a store on PostgreSQL"):
        return sa.create_engine(url, pool_pre_ping=True)


_IDLE_PING_SECONDS = 10.0  # a server connection unused this long is checked before use


class StoreConnection:
    """The base of the store's mixins: its engine, its one connection and the transactions on it."""

    def __init__(self, url: str, where: str = "store.url"):
        """`url` may hold `${VAR}` (a password): read from the environment now, never kept or shown."""
        self.url = url
        self._conn: Connection | None = None
        self._used = 0.0  # monotonic time the connection was last used
        self._lock = threading.RLock()  # a Connection is not thread-safe
        expanded = expand_secrets(url, where)
        if ambiguous_password(expanded):  # the driver's errors would quote the password's end as the host
            raise StoreError(f"cannot open the snapshot store at {shown_url(url)}: {AMBIGUOUS_PASSWORD}")
        try:
            self.engine = _engine(expanded)
            with self._tx() as conn:
                tables = set(sa.inspect(conn).get_table_names())
                if "lumos_snapshots" in tables and "lumos_meta" not in tables:
                    raise StoreError(
                        f"the snapshot store at {shown_url(url)} was written by an earlier Lumos, before stores had "
                        "a schema version: start a new store (e.g. remove .lumos/store.db and run `lumos discover`)"
                    )
                metadata.create_all(conn)
            self._check_schema_version()
        except sa.exc.SQLAlchemyError as exc:
            self.close()
            fault = fault_message(exc, url)  # once connected, a fault is what it is, not "cannot open"
            if fault is not None:
                raise StoreError(fault) from exc
            # the driver's message may quote the URL, password included
            reason = " ".join(str(getattr(exc, "orig", None) or exc).split())  # the driver's words, on one line
            raise StoreError(f"cannot open the snapshot store at {shown_url(url)}: {mask_secrets(reason)}") from exc
        except BaseException:
            self.close()
            raise

    @contextmanager
    def _tx(self) -> Iterator[Connection]:
        """One transaction on the store's connection, opened at first use and kept. A server
        connection idle for a while is checked first (the server may have restarted); one that
        breaks is dropped, and the next call connects again."""
        with self._lock:
            conn = self._connection()
            try:
                with conn.begin():
                    yield conn
            except sa.exc.DBAPIError as exc:
                if exc.connection_invalidated or conn.invalidated:
                    self._drop_connection()
                raise
            finally:
                self._used = time.monotonic()

    def _connection(self) -> Connection:
        conn = self._conn
        if conn is not None and conn.dialect.name != "sqlite" and time.monotonic() - self._used > _IDLE_PING_SECONDS:
            try:
                conn.exec_driver_sql("SELECT 1")
                conn.rollback()
            except sa.exc.DBAPIError:
                self._drop_connection()
                conn = None
        if conn is None or conn.closed or conn.invalidated:
            self._drop_connection()
            conn = self._conn = self.engine.connect()
        return conn

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except sa.exc.SQLAlchemyError:
                pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check_schema_version(self) -> None:
        t = meta_table
        version = t.c.key == "schema_version"
        with self._tx() as conn:
            found = conn.execute(sa.select(t.c.value).where(version)).scalar()
            if found is None:
                try:
                    conn.execute(t.insert().values(key="schema_version", value=str(SCHEMA_VERSION)))
                except sa.exc.IntegrityError:  # another process created it meanwhile
                    pass
                return
            if int(found) < SCHEMA_VERSION:
                # take the writer's lock first, then read again: two processes opening an old store migrate it once
                conn.execute(t.update().where(version).values(value=t.c.value))
                # scalar_one: the row read above is still there (nothing deletes it)
                found = conn.execute(sa.select(t.c.value).where(version)).scalar_one()
                inspector = sa.inspect(conn)
                for step in range(int(found) + 1, SCHEMA_VERSION + 1):
                    for change in MIGRATIONS[step]:
                        if callable(change):
                            change(conn)
                            continue
                        if isinstance(change, sa.Index):
                            change.create(conn, checkfirst=True)
                            continue
                        table, name = change
                        if name in {c["name"] for c in inspector.get_columns(table.name)}:
                            continue  # there already (each change is made once, whatever the store holds)
                        kind = table.c[name].type.compile(dialect=conn.dialect)
                        conn.execute(sa.text(f"ALTER TABLE {table.name} ADD COLUMN {name} {kind}"))
                        inspector.clear_cache()
                conn.execute(t.update().where(version).values(value=str(SCHEMA_VERSION)))
            elif int(found) > SCHEMA_VERSION:
                raise StoreError(
                    f"the snapshot store at {shown_url(self.url)} has schema version {found}, this Lumos uses "
                    f"{SCHEMA_VERSION}: use the Lumos that wrote it, or export it with that one (`lumos export`) and "
                    "import it here"
                )

    def close(self) -> None:
        with self._lock:
            self._drop_connection()
        engine = getattr(self, "engine", None)  # None when the URL itself was refused
        if engine is not None:
            engine.dispose()
