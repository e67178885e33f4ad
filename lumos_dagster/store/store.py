"""The snapshot store: dataset registry, snapshot history and the catalog outbox.

SQLAlchemy Core over SQLite (default, WAL mode) or PostgreSQL, so the same code serves
a laptop and a deployment. Snapshots are kept as their portable JSON document, with the
columns needed to find them (dataset, partition, capture order) alongside.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable, Iterable, Sequence, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from lumos_dagster.errors import StoreError
from lumos_dagster.model import DatasetRecord, Snapshot, snapshot_dumps, snapshot_loads
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


@dataclass
class Delivery:
    outbox_id: int
    snapshot: Snapshot


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

        return engine
    return sa.create_engine(url, pool_pre_ping=True)


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
    def __init__(self, url: str):
        self.url = url
        try:
            self.engine = _engine(url)
            tables = set(sa.inspect(self.engine).get_table_names())
            if "lumos_snapshots" in tables and "lumos_meta" not in tables:
                raise StoreError(
                    f"the snapshot store at {url} was written by an earlier Lumos, before stores had a schema "
                    "version: start a new store (e.g. remove .lumos/store.db and run `lumos discover`)"
                )
            metadata.create_all(self.engine)
            self._check_schema_version()
        except sa.exc.SQLAlchemyError as exc:
            raise StoreError(f"cannot open the snapshot store at {url}: {exc.__class__.__name__}: {exc}") from exc

    def _check_schema_version(self) -> None:
        t = meta_table
        with self.engine.begin() as conn:
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
        self.engine.dispose()

    # ------------------------------------------------------------ registry

    def upsert_datasets(self, records: Iterable[DatasetRecord]) -> int:
        records = list(records)
        return _on_conflict_retry(lambda: self._upsert_datasets(records))

    def _upsert_datasets(self, records: list[DatasetRecord]) -> int:
        now = _now()
        n = 0
        with self.engine.begin() as conn:
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
        with self.engine.begin() as conn:
            conn.execute(t.update().where(t.c.urn.in_(list(urns))).values(removed_at=_now()))

    def datasets(self, include_removed: bool = False) -> list[DatasetRecord]:
        t = datasets_table
        q = sa.select(t).order_by(t.c.name)
        if not include_removed:
            q = q.where(t.c.removed_at.is_(None))
        with self.engine.connect() as conn:
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
        """Store snapshots and, in the same transaction, queue them for each of `catalogs`."""
        ids = []
        now = _now()
        with self.engine.begin() as conn:
            for s in snapshots:
                pk = s.partition_key or ""
                sid = conn.execute(
                    snapshots_table.insert().values(
                        urn=s.dataset.urn,
                        partition_key=pk,
                        captured_at=s.captured_at,
                        version=s.version,
                        fingerprint=s.fingerprint,
                        readable=s.readable,
                        document=snapshot_dumps(s),
                    )
                ).inserted_primary_key[0]
                ids.append(sid)
                for catalog in catalogs:
                    conn.execute(
                        outbox_table.insert().values(
                            snapshot_id=sid,
                            catalog=catalog,
                            urn=s.dataset.urn,
                            partition_key=pk,
                            status="pending",
                            attempts=0,
                            created_at=now,
                        )
                    )
        return ids

    def _one(self, query) -> Snapshot | None:
        with self.engine.connect() as conn:
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
        with self.engine.connect() as conn:
            for version, document in conn.execute(q):
                by_version.pop(version, None)  # re-insert: ordered by each version's latest capture
                by_version[version] = document
        by_version.pop(previous.version, None)
        return [snapshot_loads(d) for d in by_version.values()] + [previous]

    def latest(self, urn: str, partition_key: str | None = None) -> Snapshot | None:
        """The latest capture of a partition, or of the newest partition when None."""
        t = snapshots_table
        q = sa.select(t.c.document).where(t.c.urn == urn)
        if partition_key is not None:
            q = q.where(t.c.partition_key == partition_key)
        return self._one(q.order_by(t.c.partition_key.desc(), t.c.id.desc()))

    def history(self, urn: str) -> list[Snapshot]:
        t = snapshots_table
        with self.engine.connect() as conn:
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
        with self.engine.connect() as conn:
            return {p: (f, d, pt) for p, f, d, pt in conn.execute(q)}

    def save_file_state(
        self, source: str, generation: int, rows: Iterable[tuple[str, str, str | None, str | None]]
    ) -> None:
        """Write a generation of a source's file state; only it and the one before are kept, so
        a tick whose cursor was never committed can be evaluated again against the same state."""
        t = file_state_table
        with self.engine.begin() as conn:
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
            with self.engine.begin() as conn:
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
            with self.engine.begin() as conn:
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
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(t).order_by(t.c.created_at, t.c.name)).mappings().all()
        return [Release(r["name"], _aware(r["created_at"]), json.loads(r["versions"])) for r in rows]

    # -------------------------------------------------------------- code

    def save_code(self, docs: dict[str, dict]) -> None:
        """Replace what code says about datasets (read whole at each discovery)."""
        with self.engine.begin() as conn:
            conn.execute(code_table.delete())
            if docs:
                conn.execute(
                    code_table.insert(), [{"dataset": k, "doc": json.dumps(v, sort_keys=True)} for k, v in docs.items()]
                )

    def code(self) -> dict[str, dict]:
        with self.engine.connect() as conn:
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
        with self.engine.connect() as conn:
            return [Delivery(r[0], snapshot_loads(r[1])) for r in conn.execute(q)]

    def catalog_state(self, catalog: str) -> dict[str, tuple[str, str]]:
        """urn → (partition the catalog shows, hash of what was sent)."""
        t = catalog_state_table
        q = sa.select(t.c.urn, t.c.partition_key, t.c.content_hash).where(t.c.catalog == catalog)
        with self.engine.connect() as conn:
            return {urn: (pk, h) for urn, pk, h in conn.execute(q)}

    def record_delivery(self, catalog: str, urn: str, partition_key: str, content_hash: str) -> None:
        t = catalog_state_table
        values = {"partition_key": partition_key, "content_hash": content_hash, "delivered_at": _now()}
        where = (t.c.catalog == catalog) & (t.c.urn == urn)

        def upsert() -> None:
            with self.engine.begin() as conn:
                if conn.execute(t.update().where(where).values(**values)).rowcount == 0:
                    conn.execute(t.insert().values(catalog=catalog, urn=urn, **values))

        _on_conflict_retry(upsert)

    def outbox_errors(self, catalog: str, limit: int = 20) -> list[tuple[str, int, str, datetime]]:
        """Pending deliveries that failed: (urn, attempts, last error, queued at), oldest first."""
        o = outbox_table
        q = (
            sa.select(o.c.urn, o.c.attempts, o.c.last_error, o.c.created_at)
            .where(o.c.catalog == catalog, o.c.status == "pending", o.c.last_error.is_not(None))
            .order_by(o.c.id)
            .limit(limit)
        )
        with self.engine.connect() as conn:
            return [(u, a, e, _aware(c)) for u, a, e, c in conn.execute(q)]

    def mark(self, outbox_ids: Sequence[int], status: str, error: str | None = None) -> None:
        if not outbox_ids:
            return
        o = outbox_table
        values: dict = {"status": status, "attempts": o.c.attempts + 1, "last_error": error}
        if status != "pending":
            values["delivered_at"] = _now()
        with self.engine.begin() as conn:
            conn.execute(o.update().where(o.c.id.in_(list(outbox_ids))).values(**values))

    def outbox_counts(self, catalog: str) -> dict[str, int]:
        o = outbox_table
        q = sa.select(o.c.status, sa.func.count()).where(o.c.catalog == catalog).group_by(o.c.status)
        with self.engine.connect() as conn:
            return dict(conn.execute(q).all())
