"""The bird's-eye view of the estate, from the snapshot store: inventory, stale and unowned
datasets, this week's changes, the riskiest datasets, each dataset's status, coverage and cost —
as the plain dict `overview_render` turns into HTML, Excel, CSV, JSON and markdown — and the
per-owner list of missing context, with links."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from lumos_dagster.floor.config import LumosConfig, RequiredConfig
from lumos_dagster.floor.dataset_specs import Catalogue
from lumos_dagster.floor.model import BREAKING, Snapshot
from lumos_dagster.floor.naming import asset_paths
from lumos_dagster.floor.wording import few
from lumos_dagster.governance.checks import COMPATIBLE_CHECK
from lumos_dagster.governance.rules import Todo, catalog_link, missing_by_owner, todo_json, todo_markdown
from lumos_dagster.governance.status import Standing, standings
from lumos_dagster.lineage.impact import fan_out
from lumos_dagster.reports import cost as cost_report
from lumos_dagster.reports import render as overview_render
from lumos_dagster.store.roles import HistoryAndReleases, HistoryStore

TITLE = "Lumos estate overview"
RISKY_ROWS = 10
COST_ROWS = 10


@dataclass(frozen=True)
class Estate:
    """What the store holds now: each dataset's latest snapshot and this week's snapshots."""

    latest: dict[str, Snapshot]
    week: dict[str, list[Snapshot]]  # oldest first
    # the last time a dataset was modified or queried: its data's last modification, or, for tables
    # whose database counts scans and row changes, the capture from which those counters stopped moving
    last_active: dict[str, datetime] = field(default_factory=dict)

    @classmethod
    def load(cls, store: HistoryStore, catalogue: Catalogue, since: datetime) -> Estate:
        latest, week, active = {}, {}, {}
        for d in catalogue.datasets:
            history = store.history(d.ref.urn)
            if history and not history[-1].removed:
                latest[d.name] = max(history, key=lambda s: (s.partition_key or "", s.captured_at))
                week[d.name] = [s for s in history if s.captured_at >= since]
                times = [t for t in (latest[d.name].stats.last_modified, last_used(history)) if t is not None]
                if times:
                    active[d.name] = max(times)
        return cls(latest, week, active)


_ACTIVITY = ("seq_scan", "idx_scan", "n_tup_ins", "n_tup_upd", "n_tup_del")


def last_used(history: list[Snapshot]) -> datetime | None:
    """When the database's scan and row-change counters last moved, as far as the captures (oldest
    first) tell: the first capture showing their current values. None without counters."""
    counters = sorted(  # by when they were read: a backfill captures old partitions late
        (s.captured_at, tuple(s.stats.usage.get(k) for k in _ACTIVITY)) for s in history if s.stats.usage
    )
    if not counters:
        return None
    since, now = counters[-1]
    for at, values in reversed(counters):
        if values != now:
            break
        since = at
    return since


def _teams(s: Snapshot) -> list[str]:
    groups = [o.id for o in s.owners if o.kind == "group"]
    return groups or [o.id for o in s.owners] or ["(none)"]


def _changes(snapshots: list[Snapshot]) -> list[dict[str, Any]]:
    """One row per version reached this week (many partitions reaching it count once)."""
    rows, seen = [], set()
    for s in sorted(snapshots, key=lambda s: s.captured_at):
        if s.change_class in ("major", "minor", "patch") and s.version not in seen:
            seen.add(s.version)
            rows.append(
                {
                    "dataset": s.dataset.name,
                    "version": s.version,
                    "previous_version": s.previous_version,
                    "change_class": s.change_class,
                    "breaking": sum(c.severity == BREAKING for c in s.changes),
                    "changes": len(s.changes),
                    "when": s.captured_at.isoformat(),
                }
            )
    return rows


def _cost(store: HistoryStore, catalogue: Catalogue) -> dict[str, Any] | None:
    report = cost_report.build(store, catalogue)
    if not report.rows:
        return None
    top = sorted(report.rows, key=lambda r: (-r.total, r.dataset))[:COST_ROWS]
    return {
        "month": report.month,
        "currency": report.currency,
        "total": round(report.direct, 2),
        "by_domain": {k: round(v, 2) for k, v in report.by_domain.items()},
        "top": [{"dataset": r.dataset, "total": round(r.total, 2)} for r in top],
    }


def build_overview(
    store: HistoryAndReleases, catalogue: Catalogue, config: LumosConfig, now: datetime, estate: Estate | None = None
) -> dict[str, Any]:
    estate = estate or Estate.load(store, catalogue, now - timedelta(days=7))
    snaps = estate.latest
    specs = catalogue.by_name()
    n = len(snaps)
    stale_after = timedelta(days=config.governance.stale_days)
    stale: list[dict[str, Any]] = [
        {
            "dataset": name,
            "last_modified": estate.last_active[name].isoformat(),  # or last queried, for tables
            "days": (now - estate.last_active[name]).days,
            "owners": [o.id for o in s.owners],
        }
        for name, s in sorted(snaps.items())
        if name in estate.last_active and now - estate.last_active[name] > stale_after
    ]
    stale.sort(key=lambda r: (-r["days"], r["dataset"]))
    unowned = [
        {"dataset": name, "platform": s.dataset.platform, "domain": s.domain}
        for name, s in sorted(snaps.items())
        if not s.owners
    ]
    changes = sorted(
        (row for name in sorted(estate.week) for row in _changes(estate.week[name])),
        key=lambda r: (r["when"], r["dataset"]),
        reverse=True,
    )
    # each dataset's status as `lumos summary`, the API and Dagster's checks give it (governance.status)
    standing = sorted(standings(config, catalogue, store), key=lambda f: f.spec.name)
    downstream = dict(fan_out(catalogue))
    # the riskiest first: a breaking change that failed its check has happened; then the widest fan-out
    failed = [
        {"dataset": f.spec.name, "downstream": downstream.get(f.spec.name, 0),
         "owners": [o.id for o in f.spec.enrichment.owners], "failed": _failed_change(f)}
        for f in standing
        if any(c.name == COMPATIBLE_CHECK for c in f.failed)
    ]  # fmt: skip
    risky = failed + [
        {"dataset": name, "downstream": count, "owners": [o.id for o in specs[name].enrichment.owners]}
        for name, count in fan_out(catalogue)[: max(0, RISKY_ROWS - len(failed))]
        if count > 0 and name not in {r["dataset"] for r in failed}
    ]
    counts = {
        "owned": sum(bool(s.owners) for s in snaps.values()),
        "documented": sum(bool(s.description) for s in snaps.values()),
        "tagged": sum(bool(s.tags) for s in snaps.values()),
        "with_quality": sum(bool(s.quality and s.quality.assertions) or bool(s.profile) for s in snaps.values()),
    }
    cost = _cost(store, catalogue)
    status = [{"dataset": f.spec.name, "status": f.status, "checks": f.said} for f in standing]
    totals: dict[str, Any] = {
        "datasets": n,
        **counts,
        "unowned": len(unowned),
        "stale": len(stale),
        "breaking_this_week": sum(r["breaking"] for r in changes),
    }
    if cost:
        totals["monthly_cost"] = cost["total"]
    return {
        "title": TITLE,
        "generated_at": now.isoformat(timespec="seconds"),
        "totals": totals,
        "inventory": {
            "by_platform": dict(Counter(s.dataset.platform for s in snaps.values())),
            "by_domain": dict(Counter(s.domain or "(none)" for s in snaps.values())),
            "by_team": dict(Counter(t for s in snaps.values() for t in _teams(s))),
        },
        "stale": stale,
        "unowned": unowned,
        "changes_this_week": changes,
        "risky": risky,
        "status": status,
        "coverage": {
            "owners": counts["owned"] / n if n else 0.0,
            "docs": counts["documented"] / n if n else 0.0,
            "tags": counts["tagged"] / n if n else 0.0,
            "quality": counts["with_quality"] / n if n else 0.0,
        },
        "cost": cost,
    }


def _failed_change(f: Standing) -> str:
    """`2.0.0: FIELD_REMOVED name, FIELD_ADDED nam`: the version whose breaking changes failed its check."""
    s = f.snapshot
    breaking = [c for c in (s.changes if s else ()) if c.severity == BREAKING]
    named = few([f"{c.kind} {c.path or '(dataset)'}" for c in breaking])
    return f"{s.version if s else '-'}: {named}" if breaking else f"{COMPATIBLE_CHECK} failed"


def owner_todos(estate: Estate, config: LumosConfig, catalogue: Catalogue) -> dict[str, list[Todo]]:
    """What each owner must fill in, linked to the catalog and Dagster pages when their URLs are set."""
    gov = config.governance
    paths = asset_paths(d.name for d in catalogue.datasets)

    def links(s: Snapshot) -> tuple[tuple[str, str], ...]:
        out = []
        if gov.catalog_url:
            out.append(("catalog", catalog_link(gov.catalog_url, _datahub_urn(s, config))))
        if gov.dagster_url and s.dataset.name in paths:
            out.append(("dagster", f"{gov.dagster_url.rstrip('/')}/assets/{'/'.join(paths[s.dataset.name])}"))
        return tuple(out)

    return missing_by_owner(estate.latest.values(), gov.required, links)


def _datahub_urn(s: Snapshot, config: LumosConfig) -> str:
    from lumos_dagster.catalog.datahub import dataset_urn

    env = next((c.env for c in config.catalogs if hasattr(c, "env")), "PROD")
    return dataset_urn(s.dataset, env)


def write_reports(folder: str, overview: dict[str, Any], todos: dict[str, list[Todo]],
                  required: RequiredConfig) -> dict[str, str]:  # fmt: skip
    """Every format into `folder`; returns format → path."""
    os.makedirs(folder, exist_ok=True)
    paths = {
        "html": os.path.join(folder, "overview.html"),
        "xlsx": os.path.join(folder, "overview.xlsx"),
        "json": os.path.join(folder, "overview.json"),
        "markdown": os.path.join(folder, "overview.md"),
        "csv": os.path.join(folder, "overview-csv"),
        "missing_context": os.path.join(folder, "missing-context.md"),
        "missing_context_json": os.path.join(folder, "missing-context.json"),
    }
    texts = {
        "html": overview_render.to_html(overview),
        "json": overview_render.to_json(overview),
        "markdown": overview_render.to_markdown(overview),
        "missing_context": "# Missing context, by owner\n\n" + todo_markdown(todos, required),
        "missing_context_json": overview_render.to_json(todo_json(todos)),
    }
    for key, text in texts.items():
        _write_atomically(paths[key], text)
    overview_render.to_xlsx(overview, paths["xlsx"])
    overview_render.to_csv_files(overview, paths["csv"])
    return paths


def _write_atomically(path: str, text: str) -> None:
    """A reader (a browser, a webhook) never sees half a report."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)
