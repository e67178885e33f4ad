"""`lumos cost` and `lumos savings`: what datasets cost, and what switching them off saves."""

from __future__ import annotations

import re

import click

from lumos_dagster.cli.changes import catalogue_of
from lumos_dagster.cli.common import config_option, load, open_store, text_or_json
from lumos_dagster.cli.output import echo, echo_json
from lumos_dagster.floor.errors import UnknownDataset
from lumos_dagster.floor.wording import plural
from lumos_dagster.reports import cost as cost_report


def _month(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not re.match(cost_report.MONTH, value):
        raise click.BadParameter(f"{value} is not a month (YYYY-MM, 01 to 12)")
    return value


@click.command()
@config_option
@click.option("--month", default=None, callback=_month, help="YYYY-MM (default: the newest month priced).")
@click.option("--format", "fmt", type=click.Choice(list(cost_report.RENDER)), default="text", show_default=True)
@click.option("--output", "-o", default=None, help="Also write the report to this file.")
def cost(config_file, month, fmt, output) -> None:
    """The cost report: by dataset, owner, domain, platform; month over month; unconsumed datasets."""
    config = load(config_file)
    store = open_store(config)
    try:
        report = cost_report.build(store, catalogue_of(config, store), month)
    finally:
        store.close()
    text = cost_report.RENDER[fmt](report)
    if output:
        with open(output, "w") as fh:
            fh.write(text)
    echo(*text.removesuffix("\n").split("\n"))


@click.command()
@config_option
@click.option("--datasets", required=True, help="Comma-separated datasets to switch off.")
@click.option("--month", default=None, callback=_month, help="Prices of this month, YYYY-MM (default: the newest).")
@text_or_json
def savings(config_file, datasets, month, fmt) -> None:
    """What switching DATASETS off saves: they go, everything downstream goes, and so does every
    upstream nobody else reads. Shared upstreams still in use are not counted."""
    config = load(config_file)
    store = open_store(config)
    try:
        catalogue = catalogue_of(config, store)
        report = cost_report.build(store, catalogue, month)
    finally:
        store.close()
    try:
        result = cost_report.savings(report, catalogue, [d.strip() for d in datasets.split(",")])
    except UnknownDataset as exc:
        raise click.ClickException(str(exc)) from None
    owners = cost_report.affected_owners(catalogue, result)
    if fmt == "json":
        doc = {"month": report.month, "currency": report.currency, **cost_report.savings_to_json(result, owners)}
        echo_json(doc)
        return
    c = report.currency
    echo(f"switching off {', '.join(result.requested)} removes {plural(len(result.removed), 'dataset')}:")
    for name in result.removed:
        echo(f"  {name}")
    echo(f"saves {result.monthly:,.2f} {c} a month (storage {result.storage:,.2f}, compute "
               f"{result.compute:,.2f}), {result.annual:,.2f} {c} a year")  # fmt: skip
    echo(f"owners to ask: {', '.join(owners) or 'nobody owns them'}")
    echo(f"risk: {result.risk}" + (f" ({'; '.join(result.reasons)})" if result.reasons else ""))
