"""Snapshot history, written: `put` (captures whose versions are already decided: an import, a
tombstone) and `versioning`, the transaction in which a run decides its captures' versions and
stores them, with `Versioning`, what is read and written through it. Each stored capture is queued
in the catalog outbox in the same transaction.

Every capture has its row, and its document's body is stored once however many captures share it
(`rows._with_bodies`): a capture of unchanged content costs its row (partition, capture time, the
data's age, the body's id) and nothing more."""

from __future__ import annotations

import zlib
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from lumos_dagster.floor.model import Acceptance, Snapshot
from lumos_dagster.store.acceptances import acceptances as acceptances_of
from lumos_dagster.store.history import History
from lumos_dagster.store.rows import _now, _snapshot_row, _with_bodies
from lumos_dagster.store.sql_tables import meta_table, outbox_table, snapshots_table

#: PostgreSQL advisory locks that serialize versioning per dataset: (space, slot) pairs, the
#: dataset's URN hashed into a slot (a batch of thousands takes at most this many locks)
_VERSION_LOCK_SPACE, _VERSION_LOCKS = 0x6C756D6F, 256


class Recording(History):
    """Writes of snapshot history, each with its captures' outbox entries."""

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
        rows = _with_bodies(conn, [_snapshot_row(s) for s in snapshots])
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


class Versioning:
    """The reads and writes of `SnapshotStore.versioning`'s transaction."""

    def __init__(self, store: Recording, conn: Connection):
        self.store, self.conn = store, conn

    def before(self, firsts: Mapping[str, str], full: Collection[str] = ()) -> dict[str, list[Snapshot]]:
        """urn → what a capture at `firsts[urn]` is versioned against (`version_histories`)."""
        return self.store._version_histories(self.conn, firsts, full)

    def after(self, firsts: Mapping[str, str]) -> dict[str, list[tuple[int, Snapshot]]]:
        """urn → (id, capture) of each capture of a partition after `firsts[urn]`, in partition then
        capture order."""
        return self.store._later(self.conn, firsts)

    def latest(self, urn: str) -> tuple[int, Snapshot] | None:
        """(id, capture) of the dataset's latest capture, of its newest partition."""
        return self.store._latest(self.conn, urn)

    def acceptances(self, datasets: list[str]) -> list[Acceptance]:
        return acceptances_of(self.conn, datasets)

    def unread(self, urns: Sequence[str]) -> dict[str, list[Snapshot]]:
        """urn → its partitions' latest captures that could not read some files (`History.unread`)."""
        return self.store._unread(self.conn, urns)

    def put(self, snapshots: Sequence[Snapshot], catalogs: Sequence[str]) -> list[int]:
        """Store new captures, queued for each of `catalogs`."""
        return self.store._put(self.conn, snapshots, catalogs) if snapshots else []

    def revise(self, moved: Sequence[tuple[int, Snapshot]]) -> None:
        """Stored captures (id, capture) whose version or changes moved: their rows get the new body
        and version (a row kept whole before schema version 3 gets its capture's own fields too)."""
        if moved:
            t = snapshots_table
            rows = _with_bodies(self.conn, [_snapshot_row(s) for _, s in moved])
            update = t.update().where(t.c.id == sa.bindparam("b_id"))
            self.conn.execute(update.values(
                version=sa.bindparam("version"), body=sa.bindparam("body"), document="",
                capture=sa.case((t.c.body.is_(None), sa.bindparam("own")), else_=t.c.capture),
            ), [
                {"b_id": sid, "version": row["version"], "body": row["body"], "own": row["capture"]}
                for (sid, _), row in zip(moved, rows, strict=True)
            ])  # fmt: skip

    def queue(self, entries: Sequence[tuple[int, str, str]], catalogs: Sequence[str]) -> None:
        """Queue stored captures, (id, urn, partition key) each, for each of `catalogs` again."""
        self.store._queue(self.conn, entries, catalogs)
