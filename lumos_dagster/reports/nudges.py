"""Nudges: each owner reminded, on `governance.nudge.schedule`, of the datasets lacking required
context (the missing-context report), in `governance.nudge.template`, with escalation.

A dataset's age is the days since a nudge first found it lacking (kept in the store's
`lumos_nudges` table, created on first use); filling the context in ends it, and a later lapse
starts again from zero. `escalate` rules apply by age: `notify_domain_owner` adds the dataset to
the nudge of its domain's owner (`domain_owners`), `deprecate` marks it deprecated in every
DataHub catalog, once; it is un-deprecated when the context is filled in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from lumos_dagster.floor.config import EscalationRule, LumosConfig, NudgeConfig
from lumos_dagster.governance.rules import Todo, post_webhook, todo_json, todo_line

if TYPE_CHECKING:  # for the annotation only: the store imports slowly
    from lumos_dagster.store import SnapshotStore

NOTIFY_DOMAIN_OWNER, DEPRECATE = "notify_domain_owner", "deprecate"
DEPRECATION_NOTE = "Deprecated by Lumos: required context (governance.required) missing too long."

metadata = sa.MetaData()

nudges_table = sa.Table(
    "lumos_nudges",
    metadata,
    sa.Column("dataset", sa.String(1024), primary_key=True),
    sa.Column("since", sa.DateTime(timezone=True), nullable=False),  # first found lacking
    sa.Column("action", sa.String(64)),  # the escalation applied last
)


def escalation(age_days: float, rules: Sequence[EscalationRule]) -> str | None:
    """The action due at this age: that of the rule with the largest `after_days` reached."""
    due = [r for r in rules if age_days >= r.after_days]
    return max(due, key=lambda r: r.after_days).action if due else None


def message(template: str, owner: str, todos: Sequence[Todo]) -> str:
    return template.format(owner=owner, count=len(todos), datasets="\n".join(todo_line(t) for t in todos))


@dataclass
class Round:
    """What one nudge decided: who is told what, and which datasets change deprecation."""

    todos: dict[str, list[Todo]]  # owner → datasets, escalated ones included
    messages: dict[str, str]
    deprecate: list[str] = field(default_factory=list)
    undeprecate: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def decide(conn: Connection, todos: Mapping[str, Sequence[Todo]], domains: Mapping[str, str | None],
           settings: NudgeConfig, now: datetime) -> Round:  # fmt: skip
    """Record who lacks context since when, in the caller's transaction, and decide the round."""
    metadata.create_all(conn, checkfirst=True)
    t = nudges_table
    lacking = {todo.dataset: todo for items in todos.values() for todo in items}
    known = {r.dataset: r for r in conn.execute(sa.select(t.c.dataset, t.c.since, t.c.action))}
    done = [name for name in known if name not in lacking]
    if done:
        conn.execute(t.delete().where(t.c.dataset.in_(done)))
    out = Round({owner: list(items) for owner, items in todos.items()}, {})
    out.undeprecate = [name for name in done if known[name].action == DEPRECATE]
    for name, todo in sorted(lacking.items()):
        if name not in known:
            conn.execute(t.insert().values(dataset=name, since=now, action=None))
            continue
        since = known[name].since
        since = since if since.tzinfo else since.replace(tzinfo=now.tzinfo)  # SQLite forgets the zone
        age = (now - since).total_seconds() / 86400
        action = escalation(age, settings.escalate)
        if action == DEPRECATE and known[name].action != DEPRECATE:
            out.deprecate.append(name)
        if action in (NOTIFY_DOMAIN_OWNER, DEPRECATE):  # a deprecated dataset's domain owner hears of it too
            boss = settings.domain_owners.get(domains.get(name) or "")
            if boss is None:
                out.warnings.append(f"{name}: no governance.nudge.domain_owners entry for domain {domains.get(name)}")
            elif todo not in out.todos.get(boss, []):
                note = replace(todo, missing=(*todo.missing, f"escalated after {age:.0f} days"))
                out.todos.setdefault(boss, []).append(note)
        if action != known[name].action:
            conn.execute(t.update().where(t.c.dataset == name).values(action=action))
    out.messages = {owner: message(settings.template, owner, items) for owner, items in sorted(out.todos.items())}
    return out


def run_nudge(store: SnapshotStore, config: LumosConfig, now: datetime, warn: Callable[[str], None]) -> Round:
    """One nudge: the missing-context report, escalated, posted to `governance.webhook` (JSON with
    a `text` for Slack-like hooks), and deprecations sent to the DataHub catalogs."""
    from lumos_dagster.catalog.datahub import DataHubCatalog
    from lumos_dagster.delivery.catalogs import build_catalogs
    from lumos_dagster.lineage.catalogue import load_catalogue
    from lumos_dagster.reports.overview import Estate, owner_todos
    from lumos_dagster.sources import build_sources

    catalogue = load_catalogue(config, store, {name: s.root for name, s in build_sources(config).items()})
    todos = owner_todos(Estate.load(store, catalogue, now), config, catalogue)
    refs = {d.name: d.ref for d in catalogue.datasets}
    # deprecations are sent before the round is committed: a catalog that is down leaves them due
    with store.engine.begin() as conn:
        decided = decide(conn, todos, {d.name: d.domain for d in catalogue.datasets}, config.governance.nudge, now)
        changes = [(names, deprecated) for names, deprecated in
                   ((decided.deprecate, True), (decided.undeprecate, False)) if names]  # fmt: skip
        for catalog in build_catalogs(config) if changes else ():
            try:
                if isinstance(catalog, DataHubCatalog):
                    for names, deprecated in changes:
                        note = DEPRECATION_NOTE if deprecated else ""
                        catalog.deprecate([refs[n] for n in names if n in refs], note, deprecated)
            finally:
                catalog.close()
    for w in decided.warnings:
        warn(w)
    if config.governance.webhook and decided.messages:
        payload = {"generated_at": now.isoformat(), "owners": todo_json(decided.todos),
                   "messages": decided.messages, "text": "\n\n".join(decided.messages.values())}  # fmt: skip
        post_webhook(config.governance.webhook, payload)
    return decided
