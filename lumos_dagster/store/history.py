"""Snapshot history, read: the captures of a dataset before a partition (what a new capture is
versioned against), its latest capture, its whole history, the capture of a version."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from lumos_dagster.floor.model import Snapshot
from lumos_dagster.floor.snapshot_json import snapshot_from_json
from lumos_dagster.store.connection import StoreConnection
from lumos_dagster.store.documents import assemble
from lumos_dagster.store.rows import _chunks
from lumos_dagster.store.sql_tables import (
    documents_table,
    latest_captures,
    snapshots_table,
    stored_document,
    with_bodies,
)

#: a capture's document as a dict (`tables.stored_document`): its row's latest capture
_DOC = stored_document("dict")


class History(StoreConnection):
    """Reads of snapshot history, on their own transaction or on `versioning`'s."""

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
            sa.select(t.c.id, t.c.urn, _DOC)
            .select_from(with_bodies())
            .where(t.c.urn.in_(sa.bindparam("urns", expanding=True)), t.c.partition_key > sa.bindparam("pk"))
            .order_by(t.c.urn, t.c.partition_key, t.c.id)
        )
        out: dict[str, list[tuple[int, Snapshot]]] = {}
        for pk, urns in self._by_partition(firsts).items():
            for chunk in _chunks(urns):
                for sid, urn, document in conn.execute(q, {"urns": list(chunk), "pk": pk}):
                    out.setdefault(urn, []).append((sid, snapshot_from_json(document)))
        return out

    def _one(self, query: sa.Select) -> Snapshot | None:
        with self._tx() as conn:
            row = conn.execute(query.limit(1)).first()
        return snapshot_from_json(row[0]) if row else None

    def previous(self, urn: str, partition_key: str | None) -> Snapshot | None:
        """The latest readable capture of this dataset at or before `partition_key`."""
        with self._tx() as conn:
            return self._previous(conn, urn, partition_key or "")

    @staticmethod
    def _previous(conn: Connection, urn: str, partition_key: str) -> Snapshot | None:
        t = snapshots_table
        q = sa.select(_DOC).select_from(with_bodies())
        q = q.where(t.c.urn == urn, t.c.partition_key <= partition_key, t.c.readable)
        row = conn.execute(q.order_by(t.c.partition_key.desc(), t.c.id.desc()).limit(1)).first()
        return snapshot_from_json(row[0]) if row else None

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
            sa.select(t.c.version, stored_document("raw"))  # assembled for the versions kept only
            .select_from(with_bodies())
            .where(t.c.urn == urn, t.c.partition_key <= partition_key, t.c.readable)
            .order_by(t.c.partition_key, t.c.id)
        )
        by_version: dict[str | None, str] = {}  # a capture's version may be null (`snapshots_table.c.version`)
        for version, document in conn.execute(q):
            by_version.pop(version, None)  # re-insert: ordered by each version's latest capture
            by_version[version] = document
        by_version.pop(previous.version, None)
        return [snapshot_from_json(assemble(d)) for d in by_version.values()] + [previous]

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
        latest = latest_captures(t.c.partition_key <= sa.bindparam("pk"), t.c.readable, mode="dict")
        out: dict[str, list[Snapshot]] = {}
        for pk, urns in self._by_partition(partitions).items():
            for chunk in _chunks(urns):
                for urn, document in conn.execute(latest, {"urns": list(chunk), "pk": pk}):
                    out[urn] = [snapshot_from_json(document)]
        for urn in full:
            if urn in out:
                out[urn] = self._version_history(conn, urn, partitions[urn], full=True)
        return out

    def latest(self, urn: str, partition_key: str | None = None) -> Snapshot | None:
        """The latest capture of a partition, or of the newest partition when None."""
        with self._tx() as conn:
            found = self._latest(conn, urn, partition_key)
        return found[1] if found else None

    @staticmethod
    def _latest(conn: Connection, urn: str, partition_key: str | None = None) -> tuple[int, Snapshot] | None:
        """(id, capture) of `latest`."""
        t = snapshots_table
        q = sa.select(t.c.id, _DOC).select_from(with_bodies()).where(t.c.urn == urn)
        if partition_key is not None:
            q = q.where(t.c.partition_key == partition_key)
        row = conn.execute(q.order_by(t.c.partition_key.desc(), t.c.id.desc()).limit(1)).first()
        return (row[0], snapshot_from_json(row[1])) if row else None

    def last_runs(self, urns: Sequence[str]) -> dict[str, list[Snapshot]]:
        """urn → what its last run judged (governance.status): the captures sharing its newest capture
        time (a run captures all its partitions at one time) and its newest partition's capture, in
        partition then capture order; one query per 500 datasets."""
        t, d = snapshots_table, documents_table
        ranked = (
            sa.select(
                t.c.id,
                (t.c.captured_at == sa.func.max(t.c.captured_at).over(partition_by=t.c.urn)).label("in_last_run"),
                sa.func.row_number()
                .over(partition_by=t.c.urn, order_by=(t.c.partition_key.desc(), t.c.id.desc()))
                .label("rank"),
            )
            .where(t.c.urn.in_(sa.bindparam("urns", expanding=True)))
            .subquery()
        )
        q = (
            sa.select(t.c.urn, _DOC)
            .select_from(ranked.join(t, t.c.id == ranked.c.id).outerjoin(d, d.c.id == t.c.body))
            .where(sa.or_(ranked.c.in_last_run, ranked.c.rank == 1))
            .order_by(t.c.urn, t.c.partition_key, t.c.id)
        )
        out: dict[str, list[Snapshot]] = {}
        with self._tx() as conn:
            for chunk in _chunks(list(urns)):
                for urn, document in conn.execute(q, {"urns": list(chunk)}):
                    out.setdefault(urn, []).append(snapshot_from_json(document))
        return out

    def unread(self, urns: Sequence[str]) -> dict[str, list[Snapshot]]:
        """urn → the latest capture of each of its partitions whose latest capture could not read some
        of its files, in partition order: they stay in `files_readable` until a capture reads them all."""
        with self._tx() as conn:
            return self._unread(conn, urns)

    @staticmethod
    def _unread(conn: Connection, urns: Sequence[str]) -> dict[str, list[Snapshot]]:
        t = snapshots_table
        newer = sa.alias(t)
        q = (
            sa.select(t.c.urn, _DOC)
            .select_from(with_bodies())
            # the few failing rows through their partial index, each checked to be its partition's latest
            .where(t.c.urn.in_(sa.bindparam("urns", expanding=True)), t.c.unread > 0)
            .where(
                ~sa.exists().where(
                    newer.c.urn == t.c.urn, newer.c.partition_key == t.c.partition_key, newer.c.id > t.c.id
                )
            )  # fmt: skip
            .order_by(t.c.urn, t.c.partition_key)
        )
        out: dict[str, list[Snapshot]] = {}
        for chunk in _chunks(list(urns)):
            for urn, document in conn.execute(q, {"urns": list(chunk)}):
                out.setdefault(urn, []).append(snapshot_from_json(document))
        return out

    def history(self, urn: str) -> list[Snapshot]:
        t = snapshots_table
        q = sa.select(_DOC).select_from(with_bodies()).where(t.c.urn == urn)
        with self._tx() as conn:
            return [snapshot_from_json(d) for d in conn.execute(q.order_by(t.c.partition_key, t.c.id)).scalars()]

    def at_version(self, urn: str, version: str) -> Snapshot | None:
        """The latest capture that has this schema version."""
        t = snapshots_table
        q = sa.select(_DOC).select_from(with_bodies()).where(t.c.urn == urn, t.c.version == version)
        return self._one(q.order_by(t.c.partition_key.desc(), t.c.id.desc()))
