"""Importing an estate (`lumos import`): registry records, snapshots and releases written in one
transaction, idempotently."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from lumos_dagster.floor.errors import StoreError
from lumos_dagster.floor.masking import shown_url
from lumos_dagster.floor.model import DatasetRecord, Snapshot
from lumos_dagster.floor.snapshot_json import snapshot_dumps
from lumos_dagster.store.connection import StoreConnection
from lumos_dagster.store.releases import Release
from lumos_dagster.store.rows import _chunks, _insert_or_ignore, _now, _snapshot_row, _with_bodies
from lumos_dagster.store.sql_tables import datasets_table, releases_table, snapshots_table, stored_document, with_bodies


def _digest(document: str) -> str:
    """An imported snapshot's identity, with its dataset and partition: its whole stored document."""
    return hashlib.sha256(document.encode()).hexdigest()


def _insert_missing(conn: Connection, table: sa.Table, rows: list[dict]) -> None:
    """Insert the rows whose primary key is not taken, keep those that are (INSERT … ON CONFLICT DO
    NOTHING: one statement, no race with another writer)."""
    if not rows:
        return
    conn.execute(_insert_or_ignore(conn, table), rows)


class Imports(StoreConnection):
    """Importing an estate."""

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
                        q = sa.select(t.c.urn, t.c.partition_key, stored_document("text")).select_from(with_bodies())
                        stored.update((u, pk, _digest(d)) for u, pk, d in conn.execute(q.where(t.c.urn.in_(chunk))))
                    new = []
                    for row, s in zip(rows, snapshots, strict=True):
                        key = (row["urn"], row["partition_key"], _digest(snapshot_dumps(s)))
                        if key not in stored:
                            stored.add(key)
                            new.append(row)
                    if new:
                        conn.execute(t.insert(), _with_bodies(conn, new))
                    written, skipped = written + len(new), skipped + len(rows) - len(new)
                _insert_missing(conn, releases_table, [
                    dict(name=r.name, created_at=r.created_at, versions=json.dumps(dict(sorted(r.versions.items()))))
                    for r in releases
                ])  # fmt: skip
        except sa.exc.SQLAlchemyError as exc:
            reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
            raise StoreError(f"import into {shown_url(self.url)} failed, nothing was written: {reason}") from exc
        return written, skipped
