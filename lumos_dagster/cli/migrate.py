"""`lumos migrate`: export → validate → import → compare, between the store and any catalog
Lumos can read back, ending with the design's migration report."""

from __future__ import annotations

import sys

import click

from lumos_dagster.cli.common import config_option, open_store
from lumos_dagster.cli.output import echo, fail
from lumos_dagster.cli.portable import TARGET_HELP, _catalog, _config, _estate, _problems, counts
from lumos_dagster.estate import carry, portable
from lumos_dagster.floor.errors import LumosError


def _target_reader(spec: str, config):
    """(what the target holds now, as an estate; its name; what it cannot hold; how to write into it)."""
    if spec == "store":
        if config is None:
            raise click.ClickException("store: needs a lumos.yaml (--config)")

        def read() -> portable.Estate:
            store = open_store(config)
            try:
                return portable.from_store(store)
            finally:
                store.close()

        def write(estate: portable.Estate) -> None:
            store = open_store(config)
            try:
                portable.import_into_store(estate, store, progress)
            finally:
                store.close()

        return read, "store", carry.cannot_hold(None), write
    catalog = _catalog(spec, config)
    if not hasattr(catalog, "read_all"):
        raise click.ClickException(f"{spec}: Lumos cannot read this catalog back, so a migration into it cannot be "
                                   "verified (see `lumos docs catalogs`)")  # fmt: skip

    def write_catalog(estate: portable.Estate) -> None:
        try:
            portable.import_into_catalog(estate, catalog, progress=progress)
        finally:
            catalog.close()

    read_catalog = lambda: portable.from_snapshots(catalog.read_all(), catalog.name)
    return read_catalog, catalog.name, catalog.cannot_hold, write_catalog


def progress(message: str) -> None:
    echo(message, err=True)


@click.command()
@config_option
@click.option("--from", "source", required=True, help=f"Where from: {TARGET_HELP}, or a portable snapshot file.")
@click.option("--to", "target", required=True, help=f"Where to migrate to: {TARGET_HELP}.")
@click.option(
    "--allow-limits", is_flag=True, help="Succeed when all not carried is what the target cannot hold (its history)."
)
def migrate(config_file, source, target, allow_limits) -> None:
    """Move the metadata estate from one place to another and verify it: export → validate →
    import → compare, then report datasets, lineage edges, versions, owners, tags and glossary
    terms carried / expected, and what needs manual mapping. Exit 1 on any loss. Run again, it
    writes nothing when the target already holds everything."""
    config = _config(config_file, required="store" in (source, target))
    try:
        estate = _estate(source, config, portable.DEFAULT_MAX_BYTES)
        read, name, limits, write = _target_reader(target, config)
        before = carry.carried(estate, read(), name, limits)
        if before.complete:
            echo(f"nothing to migrate: {name} already holds everything")
            _finish(before, allow_limits)
        doc = portable.to_json(estate)
        check = portable.validate(doc)
        echo(f"exported from {estate.source}: {counts(check)}")
        if not check.ok:
            _problems(check)
            fail(f"{source}: the export is invalid, nothing was written to {name}", 1)
        write(estate)
        _finish(carry.carried(estate, read(), name, limits), allow_limits)
    except LumosError as exc:
        fail(str(exc), 1)


def _finish(report: carry.Carried, allow_limits: bool) -> None:
    for line in report.lines():
        echo(line)
    sys.exit(1 if report.lost or (report.not_held and not allow_limits) else 0)
