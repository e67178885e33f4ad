"""Per-source file state: what a sensor last saw of a source's files (path → fingerprint, dataset,
partition date), kept in generations so a tick can be evaluated again."""

from __future__ import annotations

from collections.abc import Iterable

import sqlalchemy as sa

from lumos_dagster.store.connection import StoreConnection
from lumos_dagster.store.sql_tables import file_state_table


class FileState(StoreConnection):
    """A source's file state, as its sensor recorded it."""

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
