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

import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Collection, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from lumos_dagster.errors import StoreError
from lumos_dagster.model import (
    SNAPSHOT_FORMAT,
    DatasetRecord,
    Snapshot,
    dataset_urn,
    snapshot_from_json,
    snapshot_loads,
    snapshot_to_json,
)
from lumos_dagster.plugins import expand_secrets
from lumos_dagster.store.tables import (
    SCHEMA_VERSION,
    catalog_state_table,
    code_table,
    datasets_table,
    file_state_table,
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


def _max_ids(conn: Connection) -> int:
    """Ids one `IN (...)` may list: a whole delivery's in one statement, below the database's limit
    of bound parameters (SQLite: 32,766 since 3.32, 999 before; PostgreSQL: 65,535)."""
    if conn.dialect.name == "sqlite" and conn.dialect.dbapi.sqlite_version_info < (3, 32):
        return 900
    return 20_000


def _chunks(values: Sequence, size: int = _CHUNK) -> Iterator[Sequence]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


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
                        f"the snapshot store at {url} was written by an earlier Lumos, before stores had a schema "
                        "version: start a new store (e.g. remove .lumos/store.db and run `lumos discover`)"
                    )
                metadata.create_all(conn)
            self._check_schema_version()
        except sa.exc.SQLAlchemyError as exc:
            self.close()
            raise StoreError(f"cannot open the snapshot store at {url}: {exc.__class__.__name__}: {exc}") from exc
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
        with self._tx() as conn:
            found = conn.execute(sa.select(t.c.value).where(t.c.key == "schema_version")).scalar()
            if found is None:
                try:
                    conn.execute(t.insert().values(key="schema_version", value=str(SCHEMA_VERSION)))
                except sa.exc.IntegrityError:  # another process created it meanwhile
                    pass
            elif int(found) != SCHEMA_VERSION:
                raise StoreError(
                    f"the snapshot store at {self.url} has schema version {found}, this Lumos uses "
                    f"{SCHEMA_VERSION}: export it with the Lumos that wrote it (`lumos export`) and import it here"
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
                )
            )
        return out

    # ----------------------------------------------------------- snapshots

    def put(self, snapshots: Sequence[Snapshot], catalogs: Sequence[str] = ()) -> list[int]:
        """Store snapshots and, in the same transaction, queue them for each of `catalogs`: one
        multi-row statement per table (ids come back in the snapshots' order)."""
        if not snapshots:
            return []
        now = _now()
        rows = []
        for s in snapshots:
            doc = snapshot_to_json(s)  # model.snapshot_dumps, keeping the schema fingerprint it hashes
            rows.append(
                dict(
                    urn=s.dataset.urn,
                    partition_key=s.partition_key or "",
                    captured_at=s.captured_at,
                    version=s.version,
                    fingerprint=doc["fingerprint"],
                    readable=s.readable,
                    document=json.dumps(doc, sort_keys=True, separators=(",", ":")),
                )
            )
        with self._tx() as conn:
            ids = self._insert_snapshots(conn, rows)
            queued = [
                dict(
                    snapshot_id=sid,
                    catalog=c,
                    urn=row["urn"],
                    partition_key=row["partition_key"],
                    status="pending",
                    attempts=0,
                    created_at=now,
                )
                for sid, row in zip(ids, rows, strict=True)
                for c in catalogs
            ]
            if queued:
                conn.execute(outbox_table.insert(), queued)
        return ids

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
        t = snapshots_table
        q = sa.select(t.c.document).where(t.c.urn == urn, t.c.partition_key <= (partition_key or ""), t.c.readable)
        return self._one(q.order_by(t.c.partition_key.desc(), t.c.id.desc()))

    def version_history(self, urn: str, partition_key: str | None, full: bool = False) -> list[Snapshot]:
        """What a new capture at `partition_key` is versioned against: the previous capture
        (see `previous`) and, when `full`, before it the latest capture of every earlier
        version, oldest first."""
        previous = self.previous(urn, partition_key)
        if previous is None or not full:
            return [previous] if previous else []
        t = snapshots_table
        q = (
            sa.select(t.c.version, t.c.document)
            .where(t.c.urn == urn, t.c.partition_key <= (partition_key or ""), t.c.readable)
            .order_by(t.c.partition_key, t.c.id)
        )
        by_version: dict[str, str] = {}
        with self._tx() as conn:
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
        t = snapshots_table
        ranked = (
            sa.select(
                t.c.urn,
                t.c.document,
                sa.func.row_number()
                .over(partition_by=t.c.urn, order_by=(t.c.partition_key.desc(), t.c.id.desc()))
                .label("rank"),
            )
            .where(t.c.urn.in_(sa.bindparam("urns", expanding=True)), t.c.partition_key <= (partition_key or ""))
            .where(t.c.readable)
            .subquery()
        )
        latest = sa.select(ranked.c.urn, ranked.c.document).where(ranked.c.rank == 1)
        out: dict[str, list[Snapshot]] = {}
        with self._tx() as conn:
            for start in range(0, len(urns), 500):
                for urn, document in conn.execute(latest, {"urns": list(urns[start : start + 500])}):
                    out[urn] = [snapshot_loads(document)]
        for urn in full:
            if urn in out:
                out[urn] = self.version_history(urn, partition_key, full=True)
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

    def pending(self, catalog: str) -> list[Delivery]:
        o, s = outbox_table, snapshots_table
        q = (
            sa.select(o.c.id, s.c.document)
            .join(s, s.c.id == o.c.snapshot_id)
            .where(o.c.catalog == catalog, o.c.status == "pending")
            .order_by(o.c.id)
        )
        with self._tx() as conn:
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

    def outbox_errors(self, catalog: str, limit: int = 20) -> list[tuple[str, int, str, datetime]]:
        """Pending deliveries that failed: (urn, attempts, last error, queued at), oldest first."""
        o = outbox_table
        q = (
            sa.select(o.c.urn, o.c.attempts, o.c.last_error, o.c.created_at)
            .where(o.c.catalog == catalog, o.c.status == "pending", o.c.last_error.is_not(None))
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
        values: dict = {"status": status, "attempts": o.c.attempts + 1, "last_error": error}
        if status != "pending":
            values["delivered_at"] = _now()
        for chunk in _chunks(list(outbox_ids), _max_ids(conn)):
            conn.execute(o.update().where(o.c.id.in_(chunk)).values(**values))

    def outbox_counts(self, catalog: str) -> dict[str, int]:
        o = outbox_table
        q = sa.select(o.c.status, sa.func.count()).where(o.c.catalog == catalog).group_by(o.c.status)
        with self._tx() as conn:
            return dict(conn.execute(q).all())
