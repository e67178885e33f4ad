"""`lumos sync`, `export`, `import`, `validate`, `compare`: delivery and portable snapshots."""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime
from typing import cast

import click

from lumos_dagster.catalog.builtins import CATALOGS
from lumos_dagster.catalog.datahub_file import DataHubFileCatalog
from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog
from lumos_dagster.cli.common import config_option, load, open_store, text_or_json
from lumos_dagster.cli.output import echo, echo_json, fail
from lumos_dagster.delivery.catalogs import build_catalogs
from lumos_dagster.delivery.outbox import deliver
from lumos_dagster.estate import carry, portable
from lumos_dagster.estate import context as estate_context
from lumos_dagster.floor.config import LumosConfig
from lumos_dagster.floor.errors import LumosError
from lumos_dagster.floor.wording import plural

TARGET_HELP = (
    "`store`, a catalog of lumos.yaml by type or name (`datahub-lite`, `datahub-rest`…), "
    "or `datahub-lite:PATH` / `datahub-file:PATH`"
)


def _catalog(spec: str, config: LumosConfig | None):
    """An adapter for a catalog spec; explicit paths need no lumos.yaml."""
    kind, _, path = spec.partition(":")
    if path and kind == "datahub-lite":
        return DataHubLiteCatalog(path)
    if path and kind == "datahub-file":
        return DataHubFileCatalog(path)
    if config is None:
        raise click.ClickException(f"{spec}: a catalog of lumos.yaml, but no lumos.yaml was found (--config)")
    for catalog in build_catalogs(config):
        if catalog.name == spec or catalog.name.split(":", 1)[0] == spec:
            return catalog
    known = ", ".join(c.name for c in build_catalogs(config)) or "none"
    raise click.ClickException(f"{spec}: no such catalog in {config.source_file} (catalogs: {known})")


def _estate(spec: str, config: LumosConfig | None, max_bytes: int) -> portable.Estate:
    """A portable snapshot from a file, the store, or a catalog that can be read."""
    if os.path.isfile(spec):
        doc = portable.load(spec, max_bytes, notice=_notice)
        check = portable.validate(doc)
        if not check.ok:
            raise portable.EstateError(f"{spec}: invalid: " + "; ".join(check.problems[:5]))
        if check.stale:
            _notice(f"{spec}: derived parts recomputed where they disagree with the snapshots "
                    f"({plural(len(check.stale), 'place')}; `lumos validate` lists them)")  # fmt: skip
        return portable.from_json(doc)
    if spec == "store":
        if config is None:
            raise click.ClickException("store: needs a lumos.yaml (--config)")
        store = open_store(config)
        try:
            return portable.from_store(store)
        finally:
            store.close()
    catalog = _catalog(spec, config)
    if not hasattr(catalog, "read_all"):
        raise click.ClickException(
            f"{spec}: Lumos cannot read this catalog back (`lumos docs catalogs` says which it can)"
        )
    return portable.from_snapshots(catalog.read_all(), source=catalog.name, environment=getattr(catalog, "env", None))


def _cannot_hold(spec: str, config: LumosConfig | None) -> frozenset[str]:
    """What a file, the store or a catalog keeps nothing of (lumos_dagster.estate.carry)."""
    if os.path.isfile(spec) or spec == "store":
        return frozenset()
    return carry.cannot_hold(_catalog(spec, config))


def _notice(message: str) -> None:
    echo(message, err=True)


def _config(config_file: str | None, required: bool) -> LumosConfig | None:
    try:
        return load(config_file)
    except click.ClickException:
        if required or config_file:
            raise
        return None


@click.command()
@config_option
@click.option("--status", is_flag=True, help="Only show what is queued, delivered and failing, per catalog.")
@click.option(
    "--retry-quarantined", is_flag=True, help="Queue again what a catalog could not take (quarantined), then deliver."
)
def sync(config_file, status, retry_quarantined) -> None:
    """Deliver what the outbox still holds to every catalog (what failed earlier is retried), and
    the breaking-change alerts still pending for governance.alerts.webhook."""
    config = load(config_file)
    store = open_store(config)
    failed = False
    try:
        for catalog in build_catalogs(config):
            if status:
                counts = store.outbox_counts(catalog.name)
                echo(f"{catalog.name}: " + (", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "empty"))
                for urn, attempts, error, queued in store.outbox_errors(catalog.name):
                    age = datetime.now(UTC) - queued
                    echo(f"  pending {urn} for {age.total_seconds() / 3600:.1f} h, {attempts} attempts: {error}")
                _show_quarantined(store, catalog.name)
                continue
            try:
                if retry_quarantined:
                    echo(f"{catalog.name}: {store.retry_quarantined(catalog.name)} quarantined queued again")
                report = deliver(store, catalog, progress=lambda m: echo(m, err=True))
            finally:
                catalog.close()
            echo(
                f"{catalog.name}: {report.delivered} delivered, {report.unchanged} unchanged, "
                f"{report.superseded} superseded, {len(report.failed)} failed, {len(report.quarantined)} quarantined"
            )
            for name, error in list(report.failed.items())[:10]:
                echo(f"  {name}: {error}")
            _show_quarantined(store, catalog.name)
            failed |= bool(report.failed or report.quarantined)
        alerts = config.governance.alerts
        if alerts.webhook and not status:  # breaking-change alerts a run could not send
            from lumos_dagster.governance.alerts import send_pending

            sent, pending = send_pending(store.engine, alerts.webhook, alerts.format)
            echo(f"alerts: {sent} sent, {pending} pending")
            failed |= bool(pending)
    finally:
        store.close()
    sys.exit(1 if failed else 0)


def _show_quarantined(store, catalog: str) -> None:
    quarantined = store.outbox_errors(catalog, status="quarantined")
    for urn, _, error, _ in quarantined:
        echo(f"  quarantined {urn}: {error}")
    if quarantined:
        echo("  (the other datasets are delivered; fix these and run `lumos sync --retry-quarantined`)")


@click.command()
@config_option
@click.option("--from", "source", default="store", show_default=True, help=f"Where to export from: {TARGET_HELP}.")
@click.option("--output", "-o", required=True, help="The portable snapshot file to write.")
@click.option("--target", default=None, help="The catalog type it is meant for (recorded as target_platform).")
def export(config_file, source, output, target) -> None:
    """Write the whole metadata estate as a portable Lumos snapshot (JSON); lumos.yaml, when
    there is one, gives its glossary (definitions, PII) and environment."""
    config = _config(config_file, required=False)
    if target is not None and target not in CATALOGS.names():
        raise click.ClickException(f"--target {target}: not a catalog type (known: {', '.join(CATALOGS.names())})")
    try:
        estate = _estate(source, config, portable.DEFAULT_MAX_BYTES)
    except LumosError as exc:
        raise click.ClickException(str(exc)) from None
    if config is not None:
        estate.glossary = {**estate.glossary, **estate_context.glossary(config)}
        estate.environment = estate.environment or estate_context.environment(config)
    estate.target_platform, estate.exported_by = target, portable.exporter()  # from a file too: this Lumos writes it
    doc = portable.to_json(estate)
    tmp = f"{output}.tmp"
    with open(tmp, "w") as fh:
        json.dump(doc, fh, indent=1, sort_keys=True)
    os.replace(tmp, output)
    check = portable.validate(doc)
    echo(f"{output}: {counts(check)} (from {estate.source})")
    limits = sorted(_cannot_hold(source, config))
    if limits:  # an export from a catalog is its current state: say what it cannot have given
        kinds = ", ".join(carry.NOUNS[w][0] + "s" for w in limits)
        echo(f"  {estate.source} keeps no {kinds}: export from the store for those")
    _problems(check)  # e.g. a schema nested deeper than MAX_NESTING: written, but import would refuse it
    sys.exit(0 if check.ok else 1)


def counts(check: portable.Validation) -> str:
    return (f"{plural(check.datasets, 'dataset')}, {plural(check.versions, 'version')}, "
            f"{plural(check.edges, 'lineage edge')}, {plural(check.releases, 'release')}")  # fmt: skip


def _problems(check: portable.Validation, shown: int = 50) -> None:
    for problem in check.problems[:shown]:
        echo(f"  invalid: {problem}", err=True)
    for part in check.stale[:shown]:
        echo(f"  recomputed: {part}", err=True)
    if len(check.problems) > shown:
        echo(f"  … and {len(check.problems) - shown} more problems", err=True)


@click.command("validate")
@click.argument("file")
@click.option("--max-bytes", type=int, default=portable.DEFAULT_MAX_BYTES, show_default=True)
def validate_file(file, max_bytes) -> None:
    """Check a portable snapshot: its JSON Schema, that every reference resolves; print counts."""
    try:
        doc = portable.load(file, max_bytes, notice=_notice)
    except LumosError as exc:
        fail(str(exc), 1)
    check = portable.validate(doc)
    echo(f"{file}: {counts(check)}")
    _problems(check)
    sys.exit(0 if check.ok else 1)


@click.command("import")
@click.argument("file")
@click.option("--to", "target", required=True, help=f"Where to write: {TARGET_HELP}.")
@config_option
@click.option("--max-bytes", type=int, default=portable.DEFAULT_MAX_BYTES, show_default=True)
def import_file(file, target, config_file, max_bytes) -> None:
    """Write a portable snapshot into the store or a catalog. Nothing is written unless the
    whole file is valid; into the store, all of it is written in one transaction (or nothing), and
    importing it again writes nothing new."""
    config = _config(config_file, required=target == "store")
    try:
        estate = _estate(file, None, max_bytes)
    except LumosError as exc:
        fail(str(exc), 1)
    progress = lambda m: echo(m, err=True)  # noqa: E731
    if target == "store":
        store = open_store(cast(LumosConfig, config))  # _config raised without one: the store needs it
        try:
            known = {r.name for r in store.releases()}  # a release already there is kept as it is
            written, there = portable.import_into_store(estate, store, progress)
        except LumosError as exc:
            fail(str(exc), 1)
        finally:
            store.close()
        kept = sum(r.name in known for r in estate.releases)
        there_too = [plural(there, "snapshot")] + ([plural(kept, "release")] if kept else [])
        echo(f"store: {plural(len(estate.entries), 'dataset')}, {plural(written, 'snapshot')}, "
                   f"{plural(len(estate.releases) - kept, 'release')} written "
                   f"({', '.join(there_too)} already there)")  # fmt: skip
        return
    catalog = _catalog(target, config)
    try:
        sent = portable.import_into_catalog(estate, catalog, progress=progress)
    finally:
        catalog.close()
    echo(f"{catalog.name}: {plural(len(estate.entries), 'dataset')}, {plural(sent, 'item')} written")


@click.command()
@click.argument("left")
@click.argument("right")
@config_option
@text_or_json
def compare(left, right, config_file, fmt) -> None:
    """Compare two estates (portable snapshot files, `store`, or catalogs): datasets, schemas,
    versions, lineage, owners, tags on both sides, and what differs. Exit 1 when they differ."""
    config = _config(config_file, required=False)
    try:
        estates = _estate(left, config, portable.DEFAULT_MAX_BYTES), _estate(right, config, portable.DEFAULT_MAX_BYTES)
        result = portable.compare(*estates)
        # what the right side cannot hold of the left's (a catalog: its history) is said, not a difference
        not_carried = carry.carried(*estates, right, _cannot_hold(right, config))
    except LumosError as exc:
        raise click.ClickException(str(exc)) from None
    if fmt == "json":
        echo_json({"same": result.same, "only_left": result.only_left, "only_right": result.only_right,
                   "differences": result.differences, "not_carried": not_carried.not_held})  # fmt: skip
    else:
        echo("the same" if result.same else "they differ")
        for name in result.only_left:
            echo(f"  only in {left}: {name}")
        for name in result.only_right:
            echo(f"  only in {right}: {name}")
        for name, diffs in result.differences.items():
            for d in diffs:
                echo(f"  {name}: {d}")
        for line in not_carried.not_held_lines():
            echo(f"  {line}")
    sys.exit(0 if result.same else 1)
