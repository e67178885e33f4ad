"""The catalog outbox: each stored capture is queued for each catalog, and deliveries claim the
entries, send them and mark them (delivered, failed, quarantined), recording what each catalog
now shows so the next delivery skips the same content. Entries done with (delivered, unchanged,
superseded) are kept for a while, then removed (`prune_outbox`): the outbox does not grow with
every capture ever delivered."""

from __future__ import annotations

import os
import socket
import zlib
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from lumos_dagster.floor.model import Snapshot, dataset_urn
from lumos_dagster.floor.snapshot_json import SNAPSHOT_FORMAT, snapshot_from_json
from lumos_dagster.store.connection import StoreConnection
from lumos_dagster.store.rows import _aware, _chunks, _now, _on_conflict_retry, _upsert
from lumos_dagster.store.sql_tables import (
    catalog_state_table,
    outbox_table,
    snapshots_table,
    stored_document,
    with_bodies,
)


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
            if self.document is None:  # not while `__init__`'s rule holds
                raise ValueError("a delivery needs its snapshot or its document")
            self._snapshot = snapshot_from_json(self.document)
            self._snapshot.schema.recorded_with(self.document["fingerprint"])
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


#: the outbox entries done with, that retention removes after `store.retention.outbox_days`
DONE = ("delivered", "unchanged", "superseded")
#: `store.retention.outbox_days`' default: a week of delivered entries kept, to look into
OUTBOX_DAYS = 7.0

_CLAIM_LOCK = 0x6C756D6F73  # PostgreSQL advisory lock key ("lumos") that outbox claims take in turn


def _max_ids(conn: Connection) -> int:
    """Ids one `IN (...)` may list: a whole delivery's in one statement, below the database's limit
    of bound parameters (SQLite: 32,766 since 3.32, 999 before; PostgreSQL: 65,535)."""
    if conn.dialect.name == "sqlite" and conn.dialect.loaded_dbapi.sqlite_version_info < (3, 32):
        return 900
    return 20_000


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


class Outbox(StoreConnection):
    """The catalog outbox: claims, delivery state and marks."""

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
            sa.select(o.c.id, stored_document("dict"))
            .select_from(o.join(with_bodies(), s.c.id == o.c.snapshot_id))
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
        for outbox_id, document in rows:
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

    def catalog_claims(self, catalog: str, urns: Sequence[str]) -> dict[str, str]:
        """urn → what Lumos added to the dataset's shared aspects in the catalog (the catalog's own text),
        for the `urns` delivered there: "" for those delivered before Lumos kept it."""
        t = catalog_state_table
        q = sa.select(t.c.urn, t.c.claims).where(t.c.catalog == catalog)
        out = {}
        with self._tx() as conn:
            for chunk in _chunks(list(urns)):
                out.update({urn: text or "" for urn, text in conn.execute(q.where(t.c.urn.in_(chunk)))})
        return out

    def record_deliveries(
        self,
        catalog: str,
        states: Sequence[tuple[str, str, str]],
        delivered: Sequence[int] = (),
        claims: Mapping[str, str] | None = None,
    ) -> None:
        """What the catalog now shows, (urn, partition, content hash) each, and what Lumos added there
        (`claims`, urn → the catalog's JSON), and, in the same transaction, the outbox entries that
        brought it marked delivered: the outbox never says delivered without the hash that lets the
        next run skip the same content."""
        by_urn = {urn: (pk, h) for urn, pk, h in states}  # one row per dataset: the last one given
        now = _now()
        claims = claims or {}
        rows = [dict(catalog=catalog, urn=u, partition_key=pk, content_hash=h, delivered_at=now, claims=claims.get(u))
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
            changed = ("partition_key", "content_hash", "delivered_at", "claims")
            conn.execute(_upsert(conn, t, [t.c.catalog, t.c.urn], changed), rows)
            return
        existing: set[str] = set()
        for chunk in _chunks([r["urn"] for r in rows]):
            q = sa.select(t.c.urn).where(t.c.catalog == rows[0]["catalog"], t.c.urn.in_(chunk))
            existing.update(conn.execute(q).scalars())
        update = (
            t.update()
            .where(t.c.catalog == sa.bindparam("b_catalog"), t.c.urn == sa.bindparam("b_urn"))
            .values(partition_key=sa.bindparam("partition_key"), content_hash=sa.bindparam("content_hash"),
                    delivered_at=sa.bindparam("delivered_at"), claims=sa.bindparam("claims"))
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

    def prune_outbox(self, days: float = OUTBOX_DAYS, now: datetime | None = None, batch: int = 10_000) -> int:
        """Remove the entries done with (delivered, unchanged, superseded) more than `days` ago
        (`store.retention.outbox_days`), `batch` at a time, each batch its own transaction (a writer
        waits for one batch at most); how many. Pending and quarantined entries stay, however old;
        what each catalog shows stays in `catalog_state`."""
        o = outbox_table
        cutoff = (now or _now()) - timedelta(days=days)
        old = (
            sa.select(o.c.id)
            .where(o.c.status.in_(DONE), o.c.delivered_at < cutoff)
            .order_by(o.c.id)
            .limit(batch)
            .scalar_subquery()
        )
        removed = 0
        while True:
            with self._tx() as conn:
                done = conn.execute(o.delete().where(o.c.id.in_(old))).rowcount
            removed += done
            if done < batch:
                return removed

    def outbox_counts(self, catalog: str) -> dict[str, int]:
        o = outbox_table
        q = sa.select(o.c.status, sa.func.count()).where(o.c.catalog == catalog).group_by(o.c.status)
        with self._tx() as conn:
            return dict(conn.execute(q).all())
