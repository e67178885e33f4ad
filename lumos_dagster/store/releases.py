"""Releases (named sets of dataset versions) and the breaking changes accepted for versions of
datasets (kept by `acceptances.py`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from lumos_dagster.floor.errors import StoreError
from lumos_dagster.floor.model import Acceptance
from lumos_dagster.store.acceptances import acceptances as acceptances_of
from lumos_dagster.store.connection import StoreConnection
from lumos_dagster.store.rows import _aware, _now, _on_conflict_retry
from lumos_dagster.store.sql_tables import releases_table


@dataclass(frozen=True)
class Release:
    name: str
    created_at: datetime
    versions: dict[str, str]


class Releases(StoreConnection):
    """Releases and acceptances."""

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
