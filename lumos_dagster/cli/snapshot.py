"""`lumos snapshot`: the snapshot run a Dagster materialization makes, without Dagster."""

from __future__ import annotations

import fnmatch
import sys
from datetime import datetime, timezone

import click

from lumos_dagster.cli.common import config_option, load, open_store
from lumos_dagster.cli.output import echo, echo_json
from lumos_dagster.floor.wording import plural


@click.command()
@config_option
@click.option("--select", default=None, help="Comma-separated dataset names or globs (default: every dataset).")
@click.option("--partition", default=None, help="Partition key, e.g. 2026-11-25 (default: each cadence's current one).")
@click.option("--partition-range", default=None, help="FIRST...LAST partition keys, both included.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON (step seconds included).")
def snapshot(config_file: str | None, select: str | None, partition: str | None, partition_range: str | None,
             as_json: bool) -> None:  # fmt: skip
    """Snapshot datasets into the store and the catalogs, as `dagster asset materialize` does.

    Exit code 0 when nothing failed a blocking check, 1 when something did, 2 on bad input."""
    from lumos_dagster.delivery.catalogs import build_catalogs
    from lumos_dagster.delivery.worker import Delivery
    from lumos_dagster.floor.windows import partition_at, partition_window, partition_windows
    from lumos_dagster.formats.readers import auto_reader
    from lumos_dagster.lineage.catalogue import load_catalogue
    from lumos_dagster.run.snapshot import Services, SnapshotRun
    from lumos_dagster.sources import build_sources

    if partition and partition_range:
        raise click.UsageError("give --partition or --partition-range, not both")
    config = load(config_file)
    sources = build_sources(config)
    store = open_store(config)
    say = (lambda text: echo(text, err=True)) if not as_json else (lambda text: None)
    try:
        catalogue = load_catalogue(config, store, {name: s.root for name, s in sources.items()})
        patterns = [p.strip() for p in select.split(",")] if select else ["*"]
        chosen = [d for d in catalogue.datasets if any(fnmatch.fnmatchcase(d.name, p) for p in patterns)]
        if not chosen:
            raise click.UsageError(f"--select {select!r} matches no dataset (run `lumos discover`?)")
        tz, now = config.partitions.timezone, datetime.now(timezone.utc)
        delivery = Delivery(config.store_url, lambda: build_catalogs(config), say)
        read = auto_reader()
        services = Services(read=read, say=say, engine=read.engine)
        run = SnapshotRun(config, catalogue, sources, store, delivery, services)
        done = {}
        try:
            for cadence in sorted({d.cadence for d in chosen}):  # each cadence its own partitions, as its assets
                try:
                    if partition_range:
                        first, _, last = partition_range.partition("...")
                        windows = partition_windows(cadence, first, last, tz)
                    else:
                        windows = [partition_window(cadence, partition or partition_at(cadence, now, tz), tz)]
                except ValueError as exc:
                    raise click.UsageError(f"{cadence} datasets: {exc}") from None
                ours = [d for d in chosen if d.cadence == cadence]
                say(f"snapshotting {plural(len(ours), f'{cadence} dataset')} × {plural(len(windows), 'partition')}")
                outcome = run.complete(ours, windows)
                for warning in outcome.warnings:
                    say(f"warning: {warning}")
                done.update(outcome.snapshots)
        finally:
            delivery.finish()
    finally:
        store.close()
    failure = run.failure
    if as_json:
        echo_json({
            "datasets": {name: {pk: s.version for pk, s in snaps.items()} for name, snaps in done.items()},
            "failed": failure,
            "report": {"files_listed": run.report.files_listed, "files_read": run.report.files_read,
                       "failures": [list(f) for f in run.report.failures]},
            "seconds": run.seconds,
        })  # fmt: skip
    else:
        echo(*run.report.render().split("\n"))
        if failure:
            echo("failed blocking checks:", *failure.split("\n"))
    sys.exit(1 if failure else 0)
