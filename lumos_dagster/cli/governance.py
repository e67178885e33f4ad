"""`lumos report` (the estate overview and what each owner must fill in) and `lumos search`."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import click

from lumos_dagster.cli.changes import catalogue_of
from lumos_dagster.cli.common import config_option, load, open_store, text_or_json
from lumos_dagster.cli.output import echo, echo_json
from lumos_dagster.floor.errors import LumosError
from lumos_dagster.floor.masking import webhook_shown
from lumos_dagster.floor.model import Snapshot
from lumos_dagster.floor.wording import plural


@click.command()
@config_option
@click.option("--output-dir", "-o", default=None, help="Where to write (default: reports.dir of lumos.yaml).")
@click.option("--webhook/--no-webhook", default=True, help="Post the missing-context list to governance.webhook.")
def report(config_file, output_dir, webhook) -> None:
    """The estate overview — inventory, stale, unowned, this week's changes, riskiest datasets,
    coverage, cost — as HTML, Excel, CSV, JSON and markdown; and each owner's missing context."""
    from lumos_dagster.governance.rules import post_webhook, todo_json
    from lumos_dagster.reports.overview import Estate, build_overview, owner_todos, write_reports

    config = load(config_file)
    now = datetime.now(timezone.utc)
    store = open_store(config)
    try:
        catalogue = catalogue_of(config, store)
        estate = Estate.load(store, catalogue, now - timedelta(days=7))
        overview = build_overview(store, catalogue, config, now, estate)
    finally:
        store.close()
    todos = owner_todos(estate, config, catalogue)
    paths = write_reports(config.resolve(output_dir or config.reports.dir), overview, todos, config.governance.required)
    t = overview["totals"]
    echo(
        f"{plural(t['datasets'], 'dataset')}: {t['owned']} owned, {t['unowned']} unowned, {t['documented']} "
        f"documented, {t['stale']} stale, {plural(t['breaking_this_week'], 'breaking change')} this week; "
        f"riskiest: {_riskiest(overview)}; {plural(len(todos), 'owner')} with context to fill in"
    )
    for fmt, path in paths.items():
        echo(f"  {fmt:<22} {path}")
    if webhook and config.governance.webhook:
        try:
            post_webhook(
                config.governance.webhook, {"generated_at": overview["generated_at"], "owners": todo_json(todos)}
            )
        except LumosError as exc:
            raise click.ClickException(str(exc)) from None
        echo(f"  posted the missing-context list to {webhook_shown(config.governance.webhook)}")


def _riskiest(overview: dict) -> str:
    """The riskiest dataset: a breaking change that failed its check, else the widest fan-out; or none."""
    from lumos_dagster.reports.render import riskiest

    found = riskiest(overview)
    if not found:
        return "none"
    worst = found[0]
    if worst.get("failed"):
        return f"{worst['dataset']} {worst['failed']} (failed schema_compatible)"
    return f"{worst['dataset']} ({plural(worst['downstream'], 'downstream dataset')})"


def _quality(ctx, param, value: float | None) -> float | None:
    """A score from 0 to 1, or a percentage: above 1 is read as one (95 = 0.95)."""
    if value is None:
        return None
    if not 0 <= value <= 100:
        raise click.BadParameter(f"{value:g}: give a score from 0 to 1 (0.95) or a percentage (95)")
    return value / 100 if value > 1 else value


def _age(captured_at: datetime, now: datetime) -> str:
    hours = (now - captured_at).total_seconds() / 3600
    if hours < 1:
        return "<1 h"
    return f"{hours:.0f} h" if hours < 48 else f"{hours / 24:.0f} d"


@click.command()
@config_option
@click.argument("query", nargs=-1)
@click.option("--platform", default=None, help="Only datasets on this platform (file, s3, postgres…).")
@click.option("--owner", default=None, help="Only datasets this user or group owns.")
@click.option("--tag", default=None, help="Only datasets with this tag (or glossary term).")
@click.option(
    "--min-quality",
    type=float,
    callback=_quality,
    default=None,
    help="Only datasets scoring at least this: 0.95, or 95 (a percentage).",
)
@click.option("--limit", type=click.IntRange(1), default=20, show_default=True)
@text_or_json
def search(config_file, query, platform, owner, tag, min_quality, limit, fmt) -> None:
    """Find datasets by name, field, description, tag or owner, ranked; offline, from the store.
    Prints each hit's platform, owners, quality, freshness (the data's age, and its latest snapshot's) and version,
    and what the filters left out and why."""
    from lumos_dagster.reports.search import documents, exclusions
    from lumos_dagster.reports.search import search as find

    config = load(config_file)
    store = open_store(config)
    latest: dict[str, Snapshot | None] = {}
    try:
        docs = documents(catalogue_of(config, store), lambda d: latest.setdefault(d.name, store.latest(d.ref.urn)))
    finally:
        store.close()
    text = " ".join(query)
    filters = {"platform": platform, "owner": owner, "tag": tag, "min_quality": min_quality}
    found = find(docs, text, **filters, limit=len(docs) or 1)
    hits = found[:limit]
    by_name = {d.dataset: d for d in docs}
    matching = {h.dataset for h in find(docs, text, limit=len(docs) or 1)}  # the query alone
    excluded = [(name, exclusions(by_name[name], **filters)) for name in sorted(matching - {h.dataset for h in found})]
    now = datetime.now(timezone.utc)

    def facts(name: str) -> dict:
        d, s = by_name[name], latest.get(name)
        return {
            "platform": d.platform,
            "owners": list(d.owners),
            "quality": d.quality,
            "captured_at": s.captured_at.isoformat() if s else None,
            "data_modified_at": s.stats.last_modified.isoformat() if s and s.stats.last_modified else None,
            "version": s.version if s else None,
        }

    if fmt == "json":
        rows = [
            {"dataset": h.dataset, "score": round(h.score, 4), "matched": list(h.matched), **facts(h.dataset),
             "description": by_name[h.dataset].description}
            for h in hits
        ]  # fmt: skip
        echo_json(rows)
        return
    shown = f"{len(hits)} of {len(found)}" if len(hits) < len(found) else str(len(found))
    echo(f"Results ({shown})")
    for h in hits:
        d, s = by_name[h.dataset], latest.get(h.dataset)
        quality = "unknown" if d.quality is None else f"{d.quality:.2f}"
        # the data's age (its newest file or commit), not the snapshot's: a snapshot taken a minute ago
        # of files untouched for a month is not fresh data
        if s is None:
            freshness = "never snapshotted"
        else:
            modified = s.stats.last_modified
            data = f"data {_age(modified, now)} old" if modified else "data age unknown"
            freshness = f"{data} (snapshot {_age(s.captured_at, now)} ago)"
        echo(f"{h.dataset}  ({', '.join(h.matched) or 'listed'})")
        echo(
            f"    platform {d.platform or '-'} · owner {', '.join(d.owners) or '-'} · quality {quality}"
            f" · freshness {freshness} · version {s.version if s and s.version else '-'}"
        )
        if d.description:
            echo(f"    {d.description}")
    if excluded:
        echo(f"Excluded by the filters ({len(excluded)})")
        for name, reasons in excluded:
            echo(f"  {name}: {'; '.join(reasons)}")
