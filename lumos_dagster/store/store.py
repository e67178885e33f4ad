"""The snapshot store: dataset registry, snapshot history and the catalog outbox.

SQLAlchemy Core over SQLite (default, WAL mode) or PostgreSQL, so the same code serves
a laptop and a deployment. Snapshots are kept as their portable JSON document, with the
columns needed to find them (dataset, partition, capture order) alongside.

A store holds one database connection from its first use to `close()` (use it as a context
manager: `with SnapshotStore(url) as store:`), and writes many rows with one statement per
table: recording and delivering a dataset costs a fraction of a millisecond, whatever the
number of datasets.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Collection, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from lumos_dagster.errors import StoreError
from lumos_dagster.model import (
    SNAPSHOT_FORMAT,
    Acceptance,
    DatasetRecord,
    Snapshot,
    dataset_urn,
    snapshot_from_json,
    snapshot_loads,
    snapshot_to_json,
)
from lumos_dagster.plugins import expand_secrets, mask_secrets
from lumos_dagster.store.acceptances import acceptances as acceptances_of
from lumos_dagster.store.tables import (
    MIGRATIONS,
    SCHEMA_VERSION,
    catalog_state_table,
    code_table,
    datasets_table,
    file_state_table,
    latest_captures,
    meta_table,
    metadata,
    outbox_table,
    releases_table,
    snapshots_table,
)


@dataclass(frozen=True)
class Release:
    name: str
    created_at: datetime
    versions: dict[str, str]


class Delivery:
    """A snapshot queued for a catalog. Read from the store, it is first its stored document:
    what delivery decides on (dataset, partition, removal, content hash) is read from that, and
    the Snapshot is built only for what is sent."""

    __slots__ = ("outbox_id", "document", "_snapshot")

    def __init__(self, outbox_id: int, snapshot: Snapshot | None = None, document: dict | None = None):
        if snapshot is None and document is None:
            raise ValueError("a delivery needs its snapshot or its document")
        self.outbox_id = outbox_id
        self.document = document  # the snapshot's portable JSON document, as stored
        self._snapshot = snapshot

    @property
    def snapshot(self) -> Snapshot:
        if self._snapshot is None:
            self._snapshot = snapshot_from_json(self.document)
        return self._snapshot

    @property
    def urn(self) -> str:
        if self.document is None:
            return self.snapshot.dataset.urn
        ref = self.document["dataset"]
        return dataset_urn(ref["platform"], ref["name"])

    @property
    def partition_key(self) -> str | None:
        return self.snapshot.partition_key if self.document is None else self.document["partition_key"]

    @property
    def removed(self) -> bool:
        return self.snapshot.removed if self.document is None else bool(self.document.get("removed"))

    def __repr__(self) -> str:
        return f"Delivery({self.outbox_id}, {self.urn}, {self.partition_key})"


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _aware(d: datetime) -> datetime:
    # SQLite hands datetimes back without their zone; everything stored is UTC
    return d if d.tzinfo else d.replace(tzinfo=timezone.utc)


def _engine(url: str) -> Engine:
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///") :]
        if path and path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        engine = sa.create_engine(url, connect_args={"timeout": 60})

        @sa.event.listens_for(engine, "connect")
        def _pragmas(conn, _record):  # WAL: readers never block the writer, two runs can share it
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA busy_timeout=60000")
            # NORMAL: in WAL mode a commit is a write into the WAL, not an fsync (the WAL is synced
            # at checkpoints). The store stays consistent through any crash of Lumos or the machine;
            # a power loss may lose the last commits (snapshots re-taken by the next run, a delivery
            # sent again, idempotently). FULL would cost an fsync per transaction.
            conn.execute("PRAGMA synchronous=NORMAL")

        return engine
    return sa.create_engine(url, pool_pre_ping=True)


_CHUNK = 500  # values per IN (...) list: far below any database's bound-parameter limit
_IDLE_PING_SECONDS = 10.0  # a server connection unused this long is checked before use
_CLAIM_LOCK = 0x6C756D6F73  # PostgreSQL advisory lock key ("lumos") that outbox claims take in turn
#: PostgreSQL advisory locks that serialize versioning per dataset: (space, slot) pairs, the
#: dataset's URN hashed into a slot (a batch of thousands takes at most this many locks)
_VERSION_LOCK_SPACE, _VERSION_LOCKS = 0x6C756D6F, 256


def _max_ids(conn: Connection) -> int:
    """Ids one `IN (...)` may list: a whole delivery's in one statement, below the database's limit
    of bound parameters (SQLite: 32,766 since 3.32, 999 before; PostgreSQL: 65,535)."""
    if conn.dialect.name == "sqlite" and conn.dialect.dbapi.sqlite_version_info < (3, 32):
        return 900
    return 20_000


def _chunks(values: Sequence, size: int = _CHUNK) -> Iterator[Sequence]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def _snapshot_row(s: Snapshot) -> dict:
    doc = snapshot_to_json(s)  # model.snapshot_dumps, keeping the schema fingerprint it hashes
    return dict(
        urn=s.dataset.urn,
        partition_key=s.partition_key or "",
        captured_at=s.captured_at,
        version=s.version,
        fingerprint=doc["fingerprint"],
        readable=s.readable,
        document=json.dumps(doc, sort_keys=True, separators=(",", ":")),
    )


def _digest(document: str) -> str:
    """An imported snapshot's identity, with its dataset and partition: its whole stored document."""
    return hashlib.sha256(document.encode()).hexdigest()


def _insert_missing(conn: Connection, table: sa.Table, rows: list[dict]) -> None:
    """Insert the rows whose primary key is not taken, keep those that are (INSERT … ON CONFLICT DO
    NOTHING: one statement, no race with another writer)."""
    if not rows:
        return
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    conn.execute(insert(table).on_conflict_do_nothing(), rows)


T = TypeVar("T")


def _on_conflict_retry(write: Callable[[], T], attempts: int = 3) -> T:
    """Run a check-then-insert write again when another run inserted the same key first: the
    next attempt finds the row and updates it."""
    for _ in range(attempts - 1):
        try:
            return write()
        except sa.exc.IntegrityError:
            continue
    return write()


_HOST = zlib.crc32(socket.gethostname().encode())


def claim_owner() -> str:
    """A delivery's name on its claims (32 characters, the column's width): this host, this process
    and a random part. A later delivery on the same host takes over the claims of a process that is
    gone (a run killed mid-delivery) at once, rather than when their lease runs out."""
    return f"{_HOST:08x}{os.getpid():08x}{os.urandom(8).hex()}"


def _gone(owner: str) -> bool:
    """Whether `owner` was a process of this host that no longer exists (unknown: not gone)."""
    if len(owner) != 32 or owner[:8] != f"{_HOST:08x}":
        return False
    try:
        os.kill(int(owner[8:16], 16), 0)
    except ProcessLookupError:
        return True
    except (OSError, ValueError):
        return False
    return False


class SnapshotStore:
    def __init__(self, url: str, where: str = "store.url"):
        """`url` may hold `${VAR}` (a password): read from the environment now, never kept or shown."""
        self.url = url
        self._conn: Connection | None = None
        self._used = 0.0  # monotonic time the connection was last used
        self._lock = threading.RLock()  # a Connection is not thread-safe
        try:
            self.engine = _engine(expand_secrets(url, where))
            with self._tx() as conn:
                tables = set(sa.inspect(conn).get_table_names())
                if "lumos_snapshots" in tables and "lumos_meta" not in tables:
                    raise StoreError(
                        f"the snapshot store at {mask_secrets(url)} was written by an earlier Lumos, before stores had "
                        "a schema version: start a new store (e.g. remove .lumos/store.db and run `lumos discover`)"
                    )
                metadata.create_all(conn)
            self._check_schema_version()
        except sa.exc.SQLAlchemyError as exc:
            self.close()
            # the driver's message may quote the URL, password included
            reason = " ".join(str(getattr(exc, "orig", None) or exc).split())  # the driver's words, on one line
            raise StoreError(mask_secrets(f"cannot open the snapshot store at {url}: {reason}")) from exc
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

    def __enter__(self) -> SnapshotStore:
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
                found = conn.execute(sa.select(t.c.value).where(version)).scalar()
                for step in range(int(found) + 1, SCHEMA_VERSION + 1):
                    for table, name in MIGRATIONS[step]:
                        kind = table.c[name].type.compile(dialect=conn.dialect)
                        conn.execute(sa.text(f"ALTER TABLE {table.name} ADD COLUMN {name} {kind}"))
                conn.execute(t.update().where(version).values(value=str(SCHEMA_VERSION)))
            elif int(found) > SCHEMA_VERSION:
                raise StoreError(
                    f"the snapshot store at {mask_secrets(self.url)} has schema version {found}, this Lumos uses "
                    f"{SCHEMA_VERSION}: use the Lumos that wrote it, or export it with that one (`lumos export`) and "
                    "import it here"
                )

    def close(self) -> None:
        with self._lock:
            self._drop_connection()
        engine = getattr(self, "engine", None)  # None when the URL itself was refused
        if engine is not None:
            engine.dispose()

    # ------------------------------------------------------------ registry

    def upsert_datasets(self, records: Iterable[DatasetRecord]) -> int:
        records = list(records)
        return _on_conflict_retry(lambda: self._upsert_datasets(records))

    def _upsert_datasets(self, records: list[DatasetRecord]) -> int:
        now = _now()
        n = 0
        with self._tx() as conn:
            existing = {r.urn for r in conn.execute(sa.select(datasets_table.c.urn))}
            for rec in records:
                values = dict(
                    name=rec.name,
                    platform=rec.platform,
                    source=rec.source,
                    location=rec.location,
                    format=rec.format,
                    domain=rec.domain,
                    info=json.dumps(rec.info(), sort_keys=True),
                    last_seen=now,
                    removed_at=None,
                )
                if rec.urn in existing:
                    conn.execute(datasets_table.update().where(datasets_table.c.urn == rec.urn).values(**values))
                else:
                    conn.execute(datasets_table.insert().values(urn=rec.urn, first_seen=now, **values))
                n += 1
        return n

    def mark_removed(self, urns: Sequence[str]) -> None:
        if not urns:
            return
        t = datasets_table
        with self._tx() as conn:
            conn.execute(t.update().where(t.c.urn.in_(list(urns))).values(removed_at=_now()))

    def datasets(self, include_removed: bool = False) -> list[DatasetRecord]:
        t = datasets_table
        q = sa.select(t).order_by(t.c.name)
        if not include_removed:
            q = q.where(t.c.removed_at.is_(None))
        with self._tx() as conn:
            rows = conn.execute(q).mappings().all()
        out = []
        for r in rows:
            info = json.loads(r["info"])
            out.append(
                DatasetRecord(
                    name=r["name"],
                    platform=r["platform"],
                    source=r["source"],
                    location=r["location"],
                    format=r["format"],
                    domain=r["domain"],
                    partition_keys=tuple(info.get("partition_keys", ())),
                    time_partition_key=info.get("time_partition_key"),
                    time_format=info.get("time_format"),
                    file_count=info.get("file_count", 0),
                    total_bytes=info.get("total_bytes", 0),
                    upstream=tuple(info.get("upstream", ())),
                    first_partition=info.get("first_partition"),
                )
            )
        return out

    # ----------------------------------------------------------- snapshots

    def put(self, snapshots: Sequence[Snapshot], catalogs: Sequence[str] = ()) -> list[int]:
        """Store snapshots and, in the same transaction, queue them for each of `catalogs`: one
        multi-row statement per table (ids come back in the snapshots' order). Their versions are
        kept as given (an import, a tombstone); a run's new captures are versioned in `versioning`."""
        if not snapshots:
            return []
        with self._tx() as conn:
            return self._put(conn, snapshots, catalogs)

    @contextmanager
    def versioning(self, urns: Collection[str]) -> Iterator[Versioning]:
        """One transaction that holds the datasets' versioning until it ends: what is read through
        it is what the writes through it build on (the snapshot run decides versions in it). Runs
        versioning one dataset take turns, so two never both find no history. PostgreSQL: an
        advisory lock per dataset, hashed into `_VERSION_LOCKS` slots (its lock table is shared and
        bounded) and taken in one order, so two runs never deadlock. SQLite: the database's one
        writer, taken by a write before the reads."""
        with self._tx() as conn:
            if conn.dialect.name == "postgresql":
                slots = sorted({zlib.crc32(urn.encode()) % _VERSION_LOCKS for urn in urns})
                lock = "SELECT pg_advisory_xact_lock(:space, slot) FROM unnest(CAST(:slots AS integer[])) AS slot"
                conn.execute(sa.text(lock), {"space": _VERSION_LOCK_SPACE, "slots": slots})
            else:
                t = meta_table
                conn.execute(t.update().where(t.c.key == "schema_version").values(value=t.c.value))
            yield Versioning(self, conn)

    def _put(self, conn: Connection, snapshots: Sequence[Snapshot], catalogs: Sequence[str]) -> list[int]:
        rows = [_snapshot_row(s) for s in snapshots]
        ids = self._insert_snapshots(conn, rows)
        self._queue(conn, [(sid, r["urn"], r["partition_key"]) for sid, r in zip(ids, rows, strict=True)], catalogs)
        return ids

    @staticmethod
    def _queue(conn: Connection, entries: Sequence[tuple[int, str, str]], catalogs: Sequence[str]) -> None:
        """Queue stored snapshots, (id, urn, partition key) each, for each of `catalogs`."""
        now = _now()
        queued = [dict(snapshot_id=sid, catalog=c, urn=urn, partition_key=pk, status="pending", attempts=0,
                       created_at=now) for sid, urn, pk in entries for c in catalogs]  # fmt: skip
        if queued:
            conn.execute(outbox_table.insert(), queued)

    @staticmethod
    def _by_partition(firsts: Mapping[str, str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for urn, pk in firsts.items():
            out.setdefault(pk, []).append(urn)
        return out

    def _later(self, conn: Connection, firsts: Mapping[str, str]) -> dict[str, list[tuple[int, Snapshot]]]:
        """urn → (id, capture) of each capture of a partition after `firsts[urn]`, in partition then
        capture order."""
        t = snapshots_table
        q = (
            sa.select(t.c.id, t.c.urn, t.c.document)
            .where(t.c.urn.in_(sa.bindparam("urns", expanding=True)), t.c.partition_key > sa.bindparam("pk"))
            .order_by(t.c.urn, t.c.partition_key, t.c.id)
        )
        out: dict[str, list[tuple[int, Snapshot]]] = {}
        for pk, urns in self._by_partition(firsts).items():
            for chunk in _chunks(urns):
                for sid, urn, document in conn.execute(q, {"urns": list(chunk), "pk": pk}):
                    out.setdefault(urn, []).append((sid, snapshot_loads(document)))
        return out

    @staticmethod
    def _insert_snapshots(conn: Connection, rows: list[dict]) -> list[int]:
        t = snapshots_table
        if conn.dialect.name != "sqlite":  # PostgreSQL: one multi-row INSERT … RETURNING, in the rows' order
            return list(conn.execute(t.insert().returning(t.c.id, sort_by_parameter_order=True), rows).scalars())
        # SQLite: SQLAlchemy would return ordered ids only row by row. One writer at a time holds the
        # database from the first INSERT to the commit, and an INTEGER PRIMARY KEY gives each new row
        # the largest id + 1: the batch's ids are the last len(rows), in order.
        conn.execute(t.insert(), rows)
        last = conn.execute(sa.select(sa.func.max(t.c.id))).scalar_one()
        return list(range(last - len(rows) + 1, last + 1))

    def _one(self, query) -> Snapshot | None:
        with self._tx() as conn:
            row = conn.execute(query.limit(1)).first()
        return snapshot_loads(row[0]) if row else None

    def previous(self, urn: str, partition_key: str | None) -> Snapshot | None:
        """The latest readable capture of this dataset at or before `partition_key`."""
        with self._tx() as conn:
            return self._previous(conn, urn, partition_key or "")

    @staticmethod
    def _previous(conn: Connection, urn: str, partition_key: str) -> Snapshot | None:
        t = snapshots_table
        q = sa.select(t.c.document).where(t.c.urn == urn, t.c.partition_key <= partition_key, t.c.readable)
        row = conn.execute(q.order_by(t.c.partition_key.desc(), t.c.id.desc()).limit(1)).first()
        return snapshot_loads(row[0]) if row else None

    def version_history(self, urn: str, partition_key: str | None, full: bool = False) -> list[Snapshot]:
        """What a new capture at `partition_key` is versioned against: the previous capture
        (see `previous`) and, when `full`, before it the latest capture of every earlier
        version, oldest first."""
        with self._tx() as conn:
            return self._version_history(conn, urn, partition_key or "", full)

    def _version_history(self, conn: Connection, urn: str, partition_key: str, full: bool) -> list[Snapshot]:
        previous = self._previous(conn, urn, partition_key)
        if previous is None or not full:
            return [previous] if previous else []
        t = snapshots_table
        q = (
            sa.select(t.c.version, t.c.document)
            .where(t.c.urn == urn, t.c.partition_key <= partition_key, t.c.readable)
            .order_by(t.c.partition_key, t.c.id)
        )
        by_version: dict[str, str] = {}
        for version, document in conn.execute(q):
            by_version.pop(version, None)  # re-insert: ordered by each version's latest capture
            by_version[version] = document
        by_version.pop(previous.version, None)
        return [snapshot_loads(d) for d in by_version.values()] + [previous]

    def version_histories(
        self, urns: Sequence[str], partition_key: str | None, full: Collection[str] = ()
    ) -> dict[str, list[Snapshot]]:
        """`version_history` of many datasets: their previous captures in one query per 500
        datasets (a run versions thousands), the whole history only of those in `full`."""
        with self._tx() as conn:
            return self._version_histories(conn, dict.fromkeys(urns, partition_key or ""), full)

    def _version_histories(
        self, conn: Connection, partitions: Mapping[str, str], full: Collection[str]
    ) -> dict[str, list[Snapshot]]:
        """`version_histories`, each dataset at its own partition key (urn → key)."""
        t = snapshots_table
        latest = latest_captures(t.c.partition_key <= sa.bindparam("pk"), t.c.readable)
        out: dict[str, list[Snapshot]] = {}
        for pk, urns in self._by_partition(partitions).items():
            for chunk in _chunks(urns):
                for urn, document in conn.execute(latest, {"urns": list(chunk), "pk": pk}):
                    out[urn] = [snapshot_loads(document)]
        for urn in full:
            if urn in out:
                out[urn] = self._version_history(conn, urn, partitions[urn], full=True)
        return out

    def latest(self, urn: str, partition_key: str | None = None) -> Snapshot | None:
        """The latest capture of a partition, or of the newest partition when None."""
        t = snapshots_table
        q = sa.select(t.c.document).where(t.c.urn == urn)
        if partition_key is not None:
            q = q.where(t.c.partition_key == partition_key)
        return self._one(q.order_by(t.c.partition_key.desc(), t.c.id.desc()))

    def history(self, urn: str) -> list[Snapshot]:
        t = snapshots_table
        with self._tx() as conn:
            rows = conn.execute(sa.select(t.c.document).where(t.c.urn == urn).order_by(t.c.partition_key, t.c.id))
            return [snapshot_loads(r[0]) for r in rows]

    def at_version(self, urn: str, version: str) -> Snapshot | None:
        """The latest capture that has this schema version."""
        t = snapshots_table
        q = sa.select(t.c.document).where(t.c.urn == urn, t.c.version == version)
        return self._one(q.order_by(t.c.partition_key.desc(), t.c.id.desc()))

    # -------------------------------------------------------------- import

    def import_estate(
        self, batches: Iterable[tuple[Sequence[DatasetRecord], Sequence[Snapshot]]], releases: Sequence[Release]
    ) -> tuple[int, int]:
        """Write an imported estate (batches of registry records and their snapshots, then releases)
        in one transaction: a failure or an interruption leaves the store as it was. Idempotent: a
        dataset or release already there is kept as it is, and a snapshot already stored (same
        dataset, partition and document) is not stored again. Returns (snapshots written, already there)."""
        t = snapshots_table
        written = skipped = 0
        try:
            with self._tx() as conn:  # SQLite: its first statement writes, so it holds the write lock throughout
                for records, snapshots in batches:
                    now = _now()
                    _insert_missing(conn, datasets_table, [
                        dict(urn=r.urn, name=r.name, platform=r.platform, source=r.source, location=r.location,
                             format=r.format, domain=r.domain, info=json.dumps(r.info(), sort_keys=True),
                             first_seen=now, last_seen=now)
                        for r in records
                    ])  # fmt: skip
                    rows = [_snapshot_row(s) for s in snapshots]
                    stored: set[tuple[str, str, str]] = set()
                    for chunk in _chunks(sorted({r["urn"] for r in rows})):
                        q = sa.select(t.c.urn, t.c.partition_key, t.c.document).where(t.c.urn.in_(chunk))
                        stored.update((u, pk, _digest(d)) for u, pk, d in conn.execute(q))
                    new = []
                    for row in rows:
                        key = (row["urn"], row["partition_key"], _digest(row["document"]))
                        if key not in stored:
                            stored.add(key)
                            new.append(row)
                    if new:
                        conn.execute(t.insert(), new)
                    written, skipped = written + len(new), skipped + len(rows) - len(new)
                _insert_missing(conn, releases_table, [
                    dict(name=r.name, created_at=r.created_at, versions=json.dumps(dict(sorted(r.versions.items()))))
                    for r in releases
                ])  # fmt: skip
        except sa.exc.SQLAlchemyError as exc:
            reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
            raise StoreError(f"import into {mask_secrets(self.url)} failed, nothing was written: {reason}") from exc
        return written, skipped

    # ---------------------------------------------------------- file state

    def file_state(self, source: str, generation: int) -> dict[str, tuple[str, str | None, str | None]]:
        """path → (fingerprint, dataset, partition date) as a sensor recorded it."""
        t = file_state_table
        q = sa.select(t.c.path, t.c.fingerprint, t.c.dataset, t.c.partition).where(
            t.c.source == source, t.c.generation == generation
        )
        with self._tx() as conn:
            return {p: (f, d, pt) for p, f, d, pt in conn.execute(q)}

    def save_file_state(
        self, source: str, generation: int, rows: Iterable[tuple[str, str, str | None, str | None]]
    ) -> None:
        """Write a generation of a source's file state; only it and the one before are kept, so
        a tick whose cursor was never committed can be evaluated again against the same state."""
        t = file_state_table
        with self._tx() as conn:
            conn.execute(t.delete().where(t.c.source == source, t.c.generation == generation))
            conn.execute(t.delete().where(t.c.source == source, t.c.generation < generation - 1))
            batch: list[dict] = []
            for path, fingerprint, dataset, partition in rows:
                batch.append(dict(source=source, generation=generation, path=path, fingerprint=fingerprint,
                                  dataset=dataset, partition=partition))  # fmt: skip
                if len(batch) == 5000:
                    conn.execute(t.insert(), batch)
                    batch = []
            if batch:
                conn.execute(t.insert(), batch)

    # ------------------------------------------------------------ releases

    def add_release(self, name: str, versions: dict[str, str], created_at: datetime | None = None) -> Release:
        release = Release(name, created_at or _now(), dict(sorted(versions.items())))
        try:
            with self._tx() as conn:
                conn.execute(
                    releases_table.insert().values(
                        name=name, created_at=release.created_at, versions=json.dumps(release.versions)
                    )
                )
        except sa.exc.IntegrityError:
            raise StoreError(f"release {name} already exists; releases are immutable, pick the next name") from None
        return release

    def acceptances(self, datasets: list[str]) -> list[Acceptance]:
        """Breaking changes accepted for versions of `datasets` (schema.acceptances: the API writes them)."""
        with self._tx() as conn:
            return acceptances_of(conn, datasets)

    def record_release_versions(self, name: str, versions: dict[str, str]) -> None:
        """Add (or update) datasets' versions in a release, creating it if needed. The release
        sensor starts one run per dataset: runs recording into one release at once each keep theirs."""
        t = releases_table

        def merge() -> None:
            with self._tx() as conn:
                # write first: it takes the row's lock (PostgreSQL) or the database's (SQLite) before the
                # read, so no other run's versions land between this read and this write
                conn.execute(t.update().where(t.c.name == name).values(name=t.c.name))
                row = conn.execute(sa.select(t.c.versions).where(t.c.name == name)).first()
                if row is None:
                    conn.execute(t.insert().values(name=name, created_at=_now(), versions=json.dumps(versions)))
                else:
                    merged = {**json.loads(row[0]), **versions}
                    conn.execute(
                        t.update().where(t.c.name == name).values(versions=json.dumps(dict(sorted(merged.items()))))
                    )

        _on_conflict_retry(merge)

    def releases(self) -> list[Release]:
        t = releases_table
        with self._tx() as conn:
            rows = conn.execute(sa.select(t).order_by(t.c.created_at, t.c.name)).mappings().all()
        return [Release(r["name"], _aware(r["created_at"]), json.loads(r["versions"])) for r in rows]

    # -------------------------------------------------------------- code

    def save_code(self, docs: dict[str, dict]) -> None:
        """Replace what code says about datasets (read whole at each discovery)."""
        with self._tx() as conn:
            conn.execute(code_table.delete())
            if docs:
                conn.execute(
                    code_table.insert(), [{"dataset": k, "doc": json.dumps(v, sort_keys=True)} for k, v in docs.items()]
                )

    def code(self) -> dict[str, dict]:
        with self._tx() as conn:
            rows = conn.execute(sa.select(code_table.c.dataset, code_table.c.doc)).all()
        return {name: json.loads(doc) for name, doc in rows}

    # -------------------------------------------------------------- outbox

    def claim(self, catalog: str, owner: str, lease: float) -> list[Delivery]:
        """Take the catalog's pending entries for `owner` (a delivery) for `lease` seconds: every entry
        of each dataset that no other delivery holds a live claim on, so two deliveries at once never
        send the same entry, nor two partitions of one dataset. A claim that ran out (its delivery
        crashed) is taken over."""
        o, s = outbox_table, snapshots_table
        now = _now()
        live = sa.and_(o.c.catalog == catalog, o.c.status == "pending", o.c.claimed_until >= now)
        held = sa.select(o.c.urn).where(live)
        take = (
            o.update()
            .where(o.c.catalog == catalog, o.c.status == "pending", o.c.urn.not_in(held))
            .values(claimed_by=owner, claimed_until=now + timedelta(seconds=lease))
        )
        q = (
            sa.select(o.c.id, s.c.document)
            .join(s, s.c.id == o.c.snapshot_id)
            .where(o.c.claimed_by == owner, o.c.status == "pending")
            .order_by(o.c.id)
        )
        with self._tx() as conn:
            if conn.dialect.name == "postgresql":
                # claims one at a time: each sees the claims committed before it (SQLite: its UPDATE
                # takes the database's write lock first, which does the same)
                conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_CLAIM_LOCK)))
            owners = conn.execute(sa.select(o.c.claimed_by).where(live).distinct()).scalars().all()
            gone = [x for x in owners if x and _gone(x)]
            if gone:  # claims of a process that died mid-delivery: free now, not when their lease ends
                conn.execute(
                    o.update().where(live, o.c.claimed_by.in_(gone)).values(claimed_by=None, claimed_until=None)
                )
            conn.execute(take)
            rows = conn.execute(q).all()
        out = []
        for outbox_id, text in rows:
            document = json.loads(text)
            if document.get("format_version") != SNAPSHOT_FORMAT:
                snapshot_from_json(document)  # raises, naming the format this Lumos reads
            out.append(Delivery(outbox_id, document=document))
        return out

    def catalog_state(self, catalog: str, urns: Sequence[str] | None = None) -> dict[str, tuple[str, str]]:
        """urn → (partition the catalog shows, hash of what was sent); only `urns`, when given (a
        delivery reads the datasets it delivers, not the whole estate)."""
        t = catalog_state_table
        q = sa.select(t.c.urn, t.c.partition_key, t.c.content_hash).where(t.c.catalog == catalog)
        with self._tx() as conn:
            if urns is None:
                return {urn: (pk, h) for urn, pk, h in conn.execute(q)}
            out = {}
            for chunk in _chunks(list(urns)):
                out.update({urn: (pk, h) for urn, pk, h in conn.execute(q.where(t.c.urn.in_(chunk)))})
            return out

    def record_delivery(self, catalog: str, urn: str, partition_key: str, content_hash: str) -> None:
        self.record_deliveries(catalog, [(urn, partition_key, content_hash)])

    def record_deliveries(
        self, catalog: str, states: Sequence[tuple[str, str, str]], delivered: Sequence[int] = ()
    ) -> None:
        """What the catalog now shows, (urn, partition, content hash) each, and, in the same
        transaction, the outbox entries that brought it marked delivered: the outbox never says
        delivered without the hash that lets the next run skip the same content."""
        by_urn = {urn: (pk, h) for urn, pk, h in states}  # one row per dataset: the last one given
        now = _now()
        rows = [dict(catalog=catalog, urn=u, partition_key=pk, content_hash=h, delivered_at=now)
                for u, (pk, h) in by_urn.items()]  # fmt: skip

        def write() -> None:
            with self._tx() as conn:
                if rows:
                    self._upsert_state(conn, rows)
                self._mark(conn, delivered, "delivered", None)

        _on_conflict_retry(write)

    def _upsert_state(self, conn: Connection, rows: list[dict]) -> None:
        t = catalog_state_table
        name = conn.dialect.name
        if name in ("sqlite", "postgresql"):  # INSERT … ON CONFLICT DO UPDATE: one statement, no race
            if name == "sqlite":
                from sqlalchemy.dialects.sqlite import insert
            else:
                from sqlalchemy.dialects.postgresql import insert
            stmt = insert(t)
            changed = {c: stmt.excluded[c] for c in ("partition_key", "content_hash", "delivered_at")}
            conn.execute(stmt.on_conflict_do_update(index_elements=[t.c.catalog, t.c.urn], set_=changed), rows)
            return
        existing = set()
        for chunk in _chunks([r["urn"] for r in rows]):
            q = sa.select(t.c.urn).where(t.c.catalog == rows[0]["catalog"], t.c.urn.in_(chunk))
            existing.update(conn.execute(q).scalars())
        update = (
            t.update()
            .where(t.c.catalog == sa.bindparam("b_catalog"), t.c.urn == sa.bindparam("b_urn"))
            .values(partition_key=sa.bindparam("partition_key"), content_hash=sa.bindparam("content_hash"),
                    delivered_at=sa.bindparam("delivered_at"))
        )  # fmt: skip
        old = [{**r, "b_catalog": r["catalog"], "b_urn": r["urn"]} for r in rows if r["urn"] in existing]
        if old:
            conn.execute(update, old)
        new = [r for r in rows if r["urn"] not in existing]
        if new:
            conn.execute(t.insert(), new)

    def renew(self, owner: str, lease: float) -> set[int]:
        """Extend `owner`'s claims by `lease` seconds from now; the ids it still holds (a claim that
        ran out may have been taken over meanwhile)."""
        o = outbox_table
        mine = sa.and_(o.c.claimed_by == owner, o.c.status == "pending")
        renew = o.update().where(mine).values(claimed_until=_now() + timedelta(seconds=lease)).returning(o.c.id)
        with self._tx() as conn:
            return set(conn.execute(renew).scalars())

    def release(self, owner: str) -> None:
        """Give up what `owner` still claims: it stays pending, for the next delivery."""
        o = outbox_table
        mine = sa.and_(o.c.claimed_by == owner, o.c.status == "pending")
        with self._tx() as conn:
            conn.execute(o.update().where(mine).values(claimed_by=None, claimed_until=None))

    def retry_quarantined(self, catalog: str) -> int:
        """Queue the catalog's quarantined entries again (their last error kept); how many."""
        o = outbox_table
        with self._tx() as conn:
            done = conn.execute(
                o.update().where(o.c.catalog == catalog, o.c.status == "quarantined").values(status="pending")
            )
            return done.rowcount

    def outbox_errors(
        self, catalog: str, limit: int = 20, status: str = "pending"
    ) -> list[tuple[str, int, str, datetime]]:
        """Entries of `status` (pending: that failed; quarantined) with their last error: (urn,
        attempts, last error, queued at), oldest first."""
        o = outbox_table
        q = (
            sa.select(o.c.urn, o.c.attempts, o.c.last_error, o.c.created_at)
            .where(o.c.catalog == catalog, o.c.status == status, o.c.last_error.is_not(None))
            .order_by(o.c.id)
            .limit(limit)
        )
        with self._tx() as conn:
            return [(u, a, e, _aware(c)) for u, a, e, c in conn.execute(q)]

    def mark(self, outbox_ids: Sequence[int], status: str, error: str | None = None) -> None:
        if not outbox_ids:
            return
        with self._tx() as conn:
            self._mark(conn, outbox_ids, status, error)

    def mark_many(self, marks: Mapping[str, Sequence[int]], error: str | None = None) -> None:
        """Several `mark`s (status → outbox ids) in one transaction, one statement per status."""
        if not any(marks.values()):
            return
        with self._tx() as conn:
            for status, ids in marks.items():
                self._mark(conn, ids, status, error)

    @staticmethod
    def _mark(conn: Connection, outbox_ids: Sequence[int], status: str, error: str | None) -> None:
        o = outbox_table
        # any mark ends the entry's claim: one still pending goes with the next delivery
        values: dict = {"status": status, "attempts": o.c.attempts + 1, "last_error": error, "claimed_by": None,
                        "claimed_until": None}  # fmt: skip
        if status not in ("pending", "quarantined"):
            values["delivered_at"] = _now()
        for chunk in _chunks(list(outbox_ids), _max_ids(conn)):
            conn.execute(o.update().where(o.c.id.in_(chunk)).values(**values))

    def outbox_counts(self, catalog: str) -> dict[str, int]:
        o = outbox_table
        q = sa.select(o.c.status, sa.func.count()).where(o.c.catalog == catalog).group_by(o.c.status)
        with self._tx() as conn:
            return dict(conn.execute(q).all())


class Versioning:
    """The reads and writes of `SnapshotStore.versioning`'s transaction."""

    def __init__(self, store: SnapshotStore, conn: Connection):
        self.store, self.conn = store, conn

    def before(self, firsts: Mapping[str, str], full: Collection[str] = ()) -> dict[str, list[Snapshot]]:
        """urn → what a capture at `firsts[urn]` is versioned against (`version_histories`)."""
        return self.store._version_histories(self.conn, firsts, full)

    def after(self, firsts: Mapping[str, str]) -> dict[str, list[tuple[int, Snapshot]]]:
        """urn → (id, capture) of each capture of a partition after `firsts[urn]`, in partition then
        capture order."""
        return self.store._later(self.conn, firsts)

    def acceptances(self, datasets: list[str]) -> list[Acceptance]:
        return acceptances_of(self.conn, datasets)

    def put(self, snapshots: Sequence[Snapshot], catalogs: Sequence[str]) -> list[int]:
        """Store new captures, queued for each of `catalogs`."""
        return self.store._put(self.conn, snapshots, catalogs) if snapshots else []

    def revise(self, moved: Sequence[tuple[int, Snapshot]]) -> None:
        """Stored captures (id, capture) whose version or changes moved."""
        if moved:
            t = snapshots_table
            update = t.update().where(t.c.id == sa.bindparam("b_id"))
            self.conn.execute(update.values(version=sa.bindparam("version"), document=sa.bindparam("document")), [
                {"b_id": sid, "version": row["version"], "document": row["document"]}
                for sid, row in ((sid, _snapshot_row(s)) for sid, s in moved)
            ])  # fmt: skip

    def queue(self, entries: Sequence[tuple[int, str, str]], catalogs: Sequence[str]) -> None:
        """Queue stored captures, (id, urn, partition key) each, for each of `catalogs` again."""
        self.store._queue(self.conn, entries, catalogs)
