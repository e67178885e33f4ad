"""Breaking-change alerts: the owners of a changed dataset and of its affected consumers are told
once, through `governance.alerts.webhook`, in Slack's or Teams' message format.

Once per change: an alert is queued in the store's `lumos_alerts` table keyed by dataset and
version (created on first use, like `lumos_acceptances`), so a re-run or a retry of the run that
recorded the version queues nothing new. Never dropped: an alert stays pending until the webhook
takes it; each run and `lumos sync` send what is pending. Sending claims a row first, so two
runs sending at once post it once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta, timezone

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from lumos_dagster.floor.config import LumosConfig
from lumos_dagster.floor.dataset_specs import Catalogue
from lumos_dagster.floor.errors import LumosError
from lumos_dagster.floor.model import BREAKING, Snapshot
from lumos_dagster.governance.rules import post_webhook
from lumos_dagster.lineage.verdicts import COMPATIBLE, consumer_verdicts
from lumos_dagster.store import SnapshotStore

metadata = sa.MetaData()

alerts_table = sa.Table(
    "lumos_alerts",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("dataset", sa.String(1024), nullable=False),
    sa.Column("version", sa.String(64), nullable=False),
    sa.Column("alert", sa.Text, nullable=False),  # JSON: what `message` renders
    sa.Column("queued_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("claimed_at", sa.DateTime(timezone=True)),
    sa.Column("sent_at", sa.DateTime(timezone=True)),
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    sa.Column("error", sa.Text),
    sa.UniqueConstraint("dataset", "version", name="uq_lumos_alerts_change"),
)

#: a claim older than this is a sender that died mid-post: the alert is sent again
CLAIM_TIMEOUT = timedelta(minutes=5)


def create_table(conn: Connection) -> None:
    metadata.create_all(conn, checkfirst=True)


def breaking_alert(snapshot: Snapshot, catalogue: Catalogue) -> dict | None:
    """What to tell about the snapshot's breaking changes; None when it has none."""
    breaking = [c for c in snapshot.changes if c.severity == BREAKING]
    if not breaking or snapshot.version is None:
        return None
    name = snapshot.dataset.name
    consumers = consumer_verdicts(catalogue, name, breaking) if name in catalogue.by_name() else []
    return {
        "dataset": name,
        "version": snapshot.version,
        "previous_version": snapshot.previous_version,
        "owners": [o.id for o in snapshot.owners],
        "changes": [f"{c.kind} {c.path or '(dataset)'} ({c.old or '-'} → {c.new or '-'})" for c in breaking],
        "consumers": [
            {"name": v.name, "verdict": v.label, "owners": [o.id for o in v.owners], "recommendation": v.recommendation}
            for v in consumers
            if v.verdict != COMPATIBLE
        ],
        "unaffected": sum(v.verdict == COMPATIBLE for v in consumers),
    }


def _summary(a: dict) -> str:
    since = f" (from {a['previous_version']})" if a["previous_version"] else ""
    return f"Breaking change: {a['dataset']} {a['version']}{since}"


def _consumer_line(c: dict) -> str:
    owners = ", ".join(c["owners"]) or "no owner"
    return f"{c['name']} — {c['verdict']} ({owners}): {c['recommendation']}"


def _consumers_text(a: dict) -> str:
    lines = [_consumer_line(c) for c in a["consumers"]] or ["no consumer reads the changed columns"]
    if a["unaffected"]:
        lines.append(f"{a['unaffected']} other consumer(s) unaffected")
    return "\n".join(lines)


def slack_message(a: dict) -> dict:
    """Slack incoming-webhook payload: `text` (notifications, fallback) and Block Kit `blocks`."""
    owners = ", ".join(a["owners"]) or "no owner"

    def section(text: str) -> dict:
        return {"type": "section", "text": {"type": "mrkdwn", "text": text}}

    return {
        "text": f"{_summary(a)}: {len(a['consumers'])} consumer(s) affected",
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": _summary(a)}},
            section(f"*Owners:* {owners}\n*Changes:*\n" + "\n".join(f"• {c}" for c in a["changes"])),
            section("*Consumers:*\n" + "\n".join(f"• {line}" for line in _consumers_text(a).splitlines())),
        ],
    }


def teams_message(a: dict) -> dict:
    """Teams connector payload: a MessageCard."""
    return {
        "@type": "MessageCard",
        "@context": "https://schema.org/extensions",
        "summary": _summary(a),
        "themeColor": "D83B01",
        "title": _summary(a),
        "sections": [
            {
                "facts": [
                    {"name": "Owners", "value": ", ".join(a["owners"]) or "no owner"},
                    {"name": "Changes", "value": "<br>".join(a["changes"])},
                ]
            },
            {"title": "Consumers", "text": _consumers_text(a).replace("\n", "<br>")},
        ],
    }


MESSAGES: dict[str, Callable[[dict], dict]] = {"slack": slack_message, "teams": teams_message}


def queue(conn: Connection, alerts: Iterable[dict]) -> int:
    """Queue the alerts whose (dataset, version) has none yet, in the caller's transaction; returns
    how many were new. Insert-if-absent, so two runs recording the same change queue it once."""
    create_table(conn)
    rows = [
        {"dataset": a["dataset"], "version": a["version"], "alert": json.dumps(a), "attempts": 0,
         "queued_at": datetime.now(timezone.utc)}
        for a in alerts
    ]  # fmt: skip
    if not rows:
        return 0
    statement: sa.Executable  # each dialect's own INSERT … ON CONFLICT
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects import postgresql

        statement = postgresql.insert(alerts_table).on_conflict_do_nothing(index_elements=["dataset", "version"])
    else:
        from sqlalchemy.dialects import sqlite

        statement = sqlite.insert(alerts_table).on_conflict_do_nothing(index_elements=["dataset", "version"])
    return sum(conn.execute(statement, row).rowcount for row in rows)


def send_pending(engine: Engine, url: str, fmt: str) -> tuple[int, int]:
    """Post every pending alert, oldest first; the first failure stops the round (the webhook is
    down: the rest wait for the next run or `lumos sync`). Returns (sent, still pending)."""
    with engine.begin() as conn:
        create_table(conn)
        pending = conn.execute(
            sa.select(alerts_table.c.id, alerts_table.c.alert)
            .where(alerts_table.c.sent_at.is_(None))
            .order_by(alerts_table.c.id)
        ).all()
    sent = 0
    for row_id, alert in pending:
        now = datetime.now(timezone.utc)
        free = sa.or_(alerts_table.c.claimed_at.is_(None), alerts_table.c.claimed_at < now - CLAIM_TIMEOUT)
        with engine.begin() as conn:  # claim it: another sender now skips it
            claim = alerts_table.update().where(alerts_table.c.id == row_id, alerts_table.c.sent_at.is_(None), free)
            if conn.execute(claim.values(claimed_at=now)).rowcount != 1:
                continue
        try:
            post_webhook(url, MESSAGES[fmt](json.loads(alert)), setting="governance.alerts.webhook")
        except LumosError as exc:
            with engine.begin() as conn:
                conn.execute(
                    alerts_table.update()
                    .where(alerts_table.c.id == row_id)
                    .values(claimed_at=None, attempts=alerts_table.c.attempts + 1, error=str(exc))
                )
            return sent, len(pending) - sent
        with engine.begin() as conn:
            conn.execute(
                alerts_table.update()
                .where(alerts_table.c.id == row_id)
                .values(sent_at=datetime.now(timezone.utc), attempts=alerts_table.c.attempts + 1, error=None)
            )
        sent += 1
    return sent, len(pending) - sent


def alert_run(store: SnapshotStore, config: LumosConfig, catalogue: Catalogue, recorded: Sequence[Snapshot],
              warn: Callable[[str], None]) -> None:  # fmt: skip
    """After a run recorded `recorded`: queue an alert for each dataset whose newest version the run
    brought with a breaking change (a backfill re-recording old versions alerts nobody), then send
    what is pending. A webhook that is down is a warning; its alerts wait."""
    settings = config.governance.alerts
    if not settings.webhook:
        return
    newest: dict[str, Snapshot] = {}
    for s in recorded:
        held = newest.get(s.dataset.urn)
        if s.version is not None and (held is None or (s.partition_key or "") >= (held.partition_key or "")):
            newest[s.dataset.urn] = s
    found = []
    for urn, s in newest.items():
        if (a := breaking_alert(s, catalogue)) and (latest := store.latest(urn)) and latest.version == s.version:
            found.append(a)
    with store.engine.begin() as conn:
        queue(conn, found)
    _, pending = send_pending(store.engine, settings.webhook, settings.format)
    if pending:
        warn(f"governance.alerts: {pending} breaking-change alert(s) wait for the webhook (next run or `lumos sync`)")
