"""The audit log of the API's writes: who, what, on what, with what outcome, when, from where.

Every call of a write endpoint is recorded, refused ones too (writes disabled, a missing scope, a
conflict), in the store's `lumos_api_audit` table (created on first use) and as a log line on the
`lumos.api.audit` logger. Tokens are never recorded, only the name they are configured under.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

log = logging.getLogger("lumos.api.audit")

metadata = sa.MetaData()

audit_table = sa.Table(
    "lumos_api_audit",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("principal", sa.String(256), nullable=False),  # the token's name, or "-" when none matched
    sa.Column("action", sa.String(64), nullable=False),  # accept | release
    sa.Column("target", sa.String(1024), nullable=False),
    sa.Column("outcome", sa.String(32), nullable=False),  # ok | refused | conflict | invalid | not_found | error
    sa.Column("status", sa.Integer, nullable=False),
    sa.Column("client", sa.String(128)),
    sa.Column("request_id", sa.String(64)),
    sa.Column("detail", sa.Text),  # JSON: the request's fields
)


def record(engine: Engine, principal: str, action: str, target: str, outcome: str, status: int,
           client: str | None, request_id: str | None, detail: dict[str, Any] | None = None) -> None:  # fmt: skip
    row = dict(at=datetime.now(timezone.utc), principal=principal, action=action, target=target[:1024],
               outcome=outcome, status=status, client=client, request_id=request_id,
               detail=json.dumps(detail, sort_keys=True, default=str) if detail else None)  # fmt: skip
    log.info("%s %s %s: %s (%s) by %s from %s [%s]", action, target, outcome, status, detail or "", principal,
             client, request_id)  # fmt: skip
    with engine.begin() as conn:
        metadata.create_all(conn, checkfirst=True)
        conn.execute(audit_table.insert().values(**row))


def entries(engine: Engine, limit: int = 1000) -> list[dict[str, Any]]:
    """The latest `limit` entries, oldest first."""
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table(audit_table.name):
            return []
        t = audit_table
        rows = conn.execute(sa.select(t).order_by(t.c.id.desc()).limit(limit)).mappings().all()
    out = []
    for r in reversed(rows):
        d = dict(r)
        d["detail"] = json.loads(d["detail"]) if d["detail"] else None
        out.append(d)
    return out
