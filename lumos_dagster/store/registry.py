"""The dataset registry (the datasets discovery found, and when they were removed) and what code
says about them (read whole at each discovery)."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence

import sqlalchemy as sa

from lumos_dagster.floor.model import DatasetRecord
from lumos_dagster.store.connection import StoreConnection
from lumos_dagster.store.rows import _now, _on_conflict_retry
from lumos_dagster.store.sql_tables import code_table, datasets_table


class Registry(StoreConnection):
    """The dataset registry and code docs."""

    def upsert_datasets(self, records: Iterable[DatasetRecord]) -> int:
        records = list(records)
        return _on_conflict_retry(lambda: self._upsert_datasets(records))

    def _upsert_datasets(self, records: list[DatasetRecord]) -> int:
        now, t = _now(), datasets_table
        with self._tx() as conn:
            existing = {r.urn for r in conn.execute(sa.select(t.c.urn))}
            inserts, updates = [], []
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
                    updates.append({"key": rec.urn, **values})
                else:
                    inserts.append({"urn": rec.urn, "first_seen": now, **values})
            # one statement per kind, many rows: a discovery of 10,000 datasets is two round trips
            if inserts:
                conn.execute(t.insert(), inserts)
            if updates:
                conn.execute(t.update().where(t.c.urn == sa.bindparam("key")), updates)
        return len(records)

    def mark_removed(self, urns: Sequence[str]) -> None:
        if not urns:
            return
        t = datasets_table
        with self._tx() as conn:
            conn.execute(t.update().where(t.c.urn.in_(list(urns))).values(removed_at=_now()))

    def datasets(self, include_removed: bool = False, sources: Collection[str] | None = None) -> list[DatasetRecord]:
        """The registry, by name; only the datasets of `sources` when given (a code location or a
        sensor reads its own, not the whole estate's)."""
        t = datasets_table
        q = sa.select(t).order_by(t.c.name)
        if not include_removed:
            q = q.where(t.c.removed_at.is_(None))
        if sources is not None:
            q = q.where(t.c.source.in_(list(sources)))
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
