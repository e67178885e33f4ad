"""Reading the snapshot store from the API: one read transaction per request, on its own pool.

Each request reads through a `ReadView`: the store's own read methods (`latest`, `history`,
`at_version`, `releases`, …) on one connection inside one read-only transaction, so everything a
request answers comes from one consistent state of the store however a materialization writes
meanwhile:

* SQLite (WAL): the transaction is opened with `BEGIN`, and its first read pins a snapshot of the
  database; WAL readers never block the writer, nor the writer them. The connections are
  `query_only`. A request's deadline stops a long query (a progress handler).
* PostgreSQL: `REPEATABLE READ, READ ONLY`; MVCC readers take no lock a writer waits for (the
  store's advisory locks are the writers' own). `statement_timeout` is what is left until the
  request's deadline.

A pinned view never commits anything: its transaction is rolled back when the request ends.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from lumos_dagster.api.limits import until
from lumos_dagster.floor.plugins import expand_secrets
from lumos_dagster.store import SnapshotStore
from lumos_dagster.store.sql_tables import datasets_table, latest_captures, snapshots_table

_deadline = threading.local()


def read_engine(url: str, connections: int) -> Engine:
    """An engine for read transactions on the store at `url` (`${VAR}`s expanded here)."""
    url = expand_secrets(url, "store.url")
    if url.startswith("sqlite"):
        engine = sa.create_engine(
            url, pool_size=connections, max_overflow=0, pool_timeout=30, connect_args={"check_same_thread": False}
        )

        @sa.event.listens_for(engine, "connect")
        def _connect(dbapi_conn: sqlite3.Connection, _record: object) -> None:
            dbapi_conn.isolation_level = None  # the driver opens no transaction of its own: ours below
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA busy_timeout=60000")
            cur.execute("PRAGMA query_only=ON")
            cur.close()

            def _stop() -> int:  # a non-zero answer interrupts the query
                at = getattr(_deadline, "at", None)
                return 1 if at is not None and time.monotonic() > at else 0

            dbapi_conn.set_progress_handler(_stop, 10_000)

        @sa.event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            conn.exec_driver_sql("BEGIN")

        return engine
    return sa.create_engine(
        url,
        pool_size=connections,
        max_overflow=0,
        pool_timeout=30,
        pool_pre_ping=True,
        isolation_level="REPEATABLE READ",
        execution_options={"postgresql_readonly": True},
    )


class ReadView(SnapshotStore):
    """The store's read methods on one connection, in the transaction the caller opened."""

    _conn: Connection  # the caller's, for the view's whole life: never None here

    def __init__(self, conn: Connection, url: str):  # not super().__init__: it would open a connection
        self.url = url
        self.engine = conn.engine
        self._conn = conn
        self._used = time.monotonic()
        self._lock = threading.RLock()

    @contextmanager
    def _tx(self) -> Iterator[Connection]:
        with self._lock:
            yield self._conn

    def close(self) -> None:  # the connection belongs to `pinned`
        pass

    @property
    def connection(self) -> Connection:
        return self._conn

    def urn_of(self, name: str) -> list[str]:
        """The URNs of live datasets named `name` in the registry."""
        t = datasets_table
        q = sa.select(t.c.urn).where(t.c.name == name, t.c.removed_at.is_(None)).order_by(t.c.urn)
        return list(self._conn.execute(q).scalars())

    def generation(self) -> tuple:
        """Changes whenever a snapshot is stored, a dataset (re)discovered or removed: what cached
        views of the whole estate (lineage, search) are keyed on."""
        s, d = snapshots_table, datasets_table
        top = self._conn.execute(sa.select(sa.func.max(s.c.id))).scalar()
        count, seen, removed = self._conn.execute(
            sa.select(sa.func.count(), sa.func.max(d.c.last_seen), sa.func.max(d.c.removed_at))
        ).one()
        return (top, count, str(seen), str(removed))

    def latest_many(self, urns: list[str]) -> dict[str, str]:
        """urn → the stored document of its latest capture (newest partition, then capture), in one
        query per 500 datasets."""
        q = latest_captures()
        out: dict[str, str] = {}
        for start in range(0, len(urns), 500):
            out.update(dict(self._conn.execute(q, {"urns": urns[start : start + 500]}).all()))
        return out


@contextmanager
def pinned(engine: Engine, url: str, timeout: float | None = None) -> Iterator[ReadView]:
    """A ReadView in one read-only transaction, rolled back at the end; its queries stop at the
    request's deadline (a request that waited for a thread has less left), or after `timeout` seconds."""
    at = until(timeout)
    with engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            _deadline.at = at
        try:
            with conn.begin() as tx:
                if conn.dialect.name == "postgresql" and at is not None:
                    left = max(1, int((at - time.monotonic()) * 1000))
                    conn.exec_driver_sql(f"SET LOCAL statement_timeout = {left}")
                try:
                    yield ReadView(conn, url)
                finally:
                    tx.rollback()
        finally:
            _deadline.at = None
