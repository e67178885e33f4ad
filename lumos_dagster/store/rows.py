"""Helpers the store's jobs share: the time of a write, batches of values, a snapshot's row and its
body, INSERT … ON CONFLICT in SQLite's or PostgreSQL's words, and retrying a check-then-insert write
that lost a race."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from lumos_dagster.floor.model import Snapshot
from lumos_dagster.floor.snapshot_json import snapshot_to_json
from lumos_dagster.store.documents import split
from lumos_dagster.store.sql_tables import documents_table


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _aware(d: datetime) -> datetime:
    # SQLite hands datetimes back without their zone; everything stored is UTC
    return d if d.tzinfo else d.replace(tzinfo=timezone.utc)


_CHUNK = 500  # values per IN (...) list: far below any database's bound-parameter limit


def _chunks(values: Sequence, size: int = _CHUNK) -> Iterator[Sequence]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def _snapshot_row(s: Snapshot) -> dict:
    """A capture's row, its body apart (`_body_text`, `_body_hash`: `_with_bodies` stores it)."""
    doc = snapshot_to_json(s)  # model.snapshot_dumps, keeping the schema fingerprint it hashes
    body, digest, own = split(doc, s.captured_at)
    return dict(
        urn=s.dataset.urn,
        partition_key=s.partition_key or "",
        captured_at=s.captured_at,
        version=s.version,
        fingerprint=doc["fingerprint"],
        readable=s.readable,
        unread=len(s.errors),
        document="",
        capture=own,
        _body_text=body,
        _body_hash=digest,
    )


def _with_bodies(conn: Connection, rows: list[dict]) -> list[dict]:
    """`rows` (`_snapshot_row`s) ready to insert: each body stored once (those already there are
    found by their hash), each row with its body's id."""
    bodies = {r["_body_hash"]: r["_body_text"] for r in rows}
    ids = _body_ids(conn, bodies)
    return [{k: v for k, v in r.items() if k[0] != "_"} | {"body": ids[r["_body_hash"]]} for r in rows]


def _body_ids(conn: Connection, bodies: dict[str, str]) -> dict[str, int]:
    """hash → id of each body (hash → text), stored if it was not: a query per 500 hashes, one INSERT
    for those missing. Two writers storing one body at once: the second's INSERT … ON CONFLICT DO
    NOTHING waits for the first to commit, and then finds its row."""
    d = documents_table
    q = sa.select(d.c.hash, d.c.id).where(d.c.hash.in_(sa.bindparam("hashes", expanding=True)))

    def find(hashes: list[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for chunk in _chunks(hashes):
            out.update(conn.execute(q, {"hashes": list(chunk)}).all())
        return out

    ids = find(list(bodies))
    missing = sorted(h for h in bodies if h not in ids)  # in one order: two writers never wait on each other
    if missing:
        stmt = _insert_or_ignore(conn, d, index_elements=[d.c.hash])
        conn.execute(stmt, [{"hash": h, "body": bodies[h]} for h in missing])
        ids.update(find(missing))
    return ids


def _insert_or_ignore(
    conn: Connection, table: sa.Table, index_elements: Sequence[sa.Column] | None = None
) -> sa.Insert:
    """INSERT … ON CONFLICT DO NOTHING into `table`, in the connection's dialect: PostgreSQL's, else
    SQLite's (the dialect modules are imported when first used)."""
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(table).on_conflict_do_nothing(index_elements=index_elements)
    from sqlalchemy.dialects import sqlite

    return sqlite.insert(table).on_conflict_do_nothing(index_elements=index_elements)


def _upsert(conn: Connection, table: sa.Table, index_elements: Sequence[sa.Column], update: Sequence[str]) -> sa.Insert:
    """INSERT … ON CONFLICT (`index_elements`) DO UPDATE the `update` columns to the values inserted,
    in the connection's dialect: PostgreSQL's, else SQLite's."""
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects import postgresql

        pg = postgresql.insert(table)
        return pg.on_conflict_do_update(index_elements=index_elements, set_={c: pg.excluded[c] for c in update})
    from sqlalchemy.dialects import sqlite

    lite = sqlite.insert(table)
    return lite.on_conflict_do_update(index_elements=index_elements, set_={c: lite.excluded[c] for c in update})


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
