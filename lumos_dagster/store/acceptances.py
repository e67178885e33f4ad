"""Breaking changes accepted for one version of a dataset (`model.Acceptance`), kept in the snapshot store.

lumos.yaml accepts changes by declaration (`accept_major`, `compatibility.allow`). A CI that has
had a breaking change approved records it here instead, through the API (`POST
/v1/dataset/acceptances?name=…`, a write): the acceptance names the dataset, the version the
change brings (e.g. `2.0.0`), optionally the field path (glob) and change kind, and why. The gate
(`lumos gate`, the API's check and gate) honours it for that version only: the next breaking change
needs its own.

The table lives beside the store's own (`lumos_acceptances`) and is created on first write; a
store without it has no acceptances.
"""

from __future__ import annotations

from datetime import datetime, timezone

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from lumos_dagster.floor.model import Acceptance

metadata = sa.MetaData()

acceptances_table = sa.Table(
    "lumos_acceptances",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("dataset", sa.String(1024), nullable=False),
    sa.Column("version", sa.String(64), nullable=False),
    sa.Column("path", sa.String(1024), nullable=False),
    sa.Column("kind", sa.String(64)),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("accepted_by", sa.String(256), nullable=False),
    sa.Column("accepted_at", sa.DateTime(timezone=True), nullable=False),
    sa.Index("ix_lumos_acceptances_dataset", "dataset", "version"),
)


def create_table(conn: Connection) -> None:
    metadata.create_all(conn, checkfirst=True)


def record(
    conn: Connection, dataset: str, version: str, path: str, kind: str | None, reason: str, by: str
) -> Acceptance:
    """Record an acceptance in the caller's transaction."""
    create_table(conn)
    now = datetime.now(timezone.utc)
    conn.execute(
        acceptances_table.insert().values(
            dataset=dataset, version=version, path=path, kind=kind, reason=reason, accepted_by=by, accepted_at=now
        )
    )
    return Acceptance(dataset, version, path, kind, reason, by, now)


def acceptances(conn: Connection, datasets: list[str] | None = None) -> list[Acceptance]:
    """The acceptances of `datasets` (all, when None), oldest first."""
    if not sa.inspect(conn).has_table(acceptances_table.name):
        return []
    t = acceptances_table
    q = sa.select(t).order_by(t.c.id)
    if datasets is not None:
        q = q.where(t.c.dataset.in_(datasets))
    out = []
    for r in conn.execute(q).mappings():
        at = r["accepted_at"]
        out.append(
            Acceptance(r["dataset"], r["version"], r["path"], r["kind"], r["reason"], r["accepted_by"],
                       at if at.tzinfo else at.replace(tzinfo=timezone.utc))
        )  # fmt: skip
    return out
