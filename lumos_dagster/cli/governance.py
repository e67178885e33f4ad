"""`lumos report` (the estate overview and what each owner must fill in) and `lumos search`."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import click

from lumos_dagster.cli.changes import catalogue_of
from lumos_dagster.cli.common import config_option, load, open_store, text_or_json
from lumos_dagster.errors import LumosError


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
    paths = write_reports(config.resolve(output_dir or config.reports.dir), overview, todos)
    t = overview["totals"]
    click.echo(
        f"{t['datasets']} datasets: {t['owned']} owned, {t['documented']} documented, {t['stale']} stale, "
        f"{t['breaking_this_week']} breaking change(s) this week; {len(todos)} owner(s) with context to fill in"
    )
    for fmt, path in paths.items():
        click.echo(f"  {fmt:<22} {path}")
    if webhook and config.governance.webhook:
        try:
            post_webhook(
                config.governance.webhook, {"generated_at": overview["generated_at"], "owners": todo_json(todos)}
            )
        except LumosError as exc:
            raise click.ClickException(str(exc)) from None
        click.echo(f"  posted the missing-context list to {config.governance.webhook}")


def documents_of(config, store):
    """Everything Lumos knows, one document per dataset (`reports.search.documents`)."""
    from lumos_dagster.reports.search import documents

    return documents(catalogue_of(config, store), lambda d: store.latest(d.ref.urn))


@click.command()
@config_option
@click.argument("query", nargs=-1)
@click.option("--platform", default=None, help="Only datasets on this platform (file, s3, postgres…).")
@click.option("--owner", default=None, help="Only datasets this user or group owns.")
@click.option("--tag", default=None, help="Only datasets with this tag (or glossary term).")
@click.option("--min-quality", type=click.FloatRange(0, 1), default=None, help="Only datasets scoring at least this.")
@click.option("--limit", type=click.IntRange(1), default=20, show_default=True)
@text_or_json
def search(config_file, query, platform, owner, tag, min_quality, limit, fmt) -> None:
    """Find datasets by name, field, description, tag or owner, ranked; offline, from the store."""
    from lumos_dagster.reports.search import search as find

    config = load(config_file)
    store = open_store(config)
    try:
        docs = documents_of(config, store)
    finally:
        store.close()
    hits = find(docs, " ".join(query), platform=platform, owner=owner, tag=tag, min_quality=min_quality, limit=limit)
    by_name = {d.dataset: d for d in docs}
    if fmt == "json":
        rows = [
            {"dataset": h.dataset, "score": round(h.score, 4), "matched": list(h.matched),
             "quality": by_name[h.dataset].quality, "description": by_name[h.dataset].description}
            for h in hits
        ]  # fmt: skip
        click.echo(json.dumps(rows, indent=2))
        return
    if not hits:
        click.echo("no dataset matches")
        return
    for h in hits:
        d = by_name[h.dataset]
        quality = f"  quality {d.quality:.2f}" if d.quality is not None else ""
        click.echo(f"{h.dataset}{quality}  ({', '.join(h.matched) or 'listed'})")
        if d.description:
            click.echo(f"    {d.description}")
