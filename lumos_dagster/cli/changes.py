"""`lumos diff`, `gate`, `impact`, `history`, `evolution`, `release`: schema changes."""

from __future__ import annotations

import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import click

from lumos_dagster.cli.common import config_option, load, open_store, text_or_json
from lumos_dagster.cli.output import echo, echo_json, fail
from lumos_dagster.floor.config import LumosConfig, load_config
from lumos_dagster.floor.dataset_specs import Catalogue
from lumos_dagster.floor.errors import LumosError, UnknownDataset
from lumos_dagster.floor.model import BREAKING, DEFAULT_POLICY, POLICIES, dataset_urn
from lumos_dagster.floor.snapshot_json import change_to_json
from lumos_dagster.floor.wording import plural
from lumos_dagster.lineage.catalogue import load_catalogue
from lumos_dagster.lineage.impact import fan_out
from lumos_dagster.lineage.verdicts import consumer_verdicts
from lumos_dagster.reports.changes import diff_report, exit_code, gate_reports, render
from lumos_dagster.schema.history import current_versions, next_release_name, timeline
from lumos_dagster.schema.history import evolution as evolution_of
from lumos_dagster.schema.inputs import load_side
from lumos_dagster.schema.releases import Manifest, write_manifest
from lumos_dagster.sources import build_sources
from lumos_dagster.store import SnapshotStore
from lumos_dagster.store.acceptances import acceptances as acceptances_of
from lumos_dagster.store.roles import RegistryStore

FORMATS = click.Choice(["text", "json", "markdown"])
policy_option = click.option(
    "--policy",
    type=click.Choice(POLICIES, case_sensitive=False),  # each value listed once, `full` accepted too
    default=None,
    help="Compatibility policy (default: the dataset's, else compatibility.policy, else full).",
)


def catalogue_of(config: LumosConfig, store: RegistryStore) -> Catalogue:
    roots = {name: s.root for name, s in build_sources(config).items()}
    return load_catalogue(config, store, roots)


def _stored_catalogue(config: LumosConfig) -> Catalogue:
    store = SnapshotStore(config.store_url)
    try:
        return catalogue_of(config, store)
    finally:
        store.close()


def _emit(text: str, output: str | None) -> None:
    if output:
        with open(output, "w") as fh:
            fh.write(text + "\n")
    echo(*text.split("\n"))


def _optional_config(config_file: str | None) -> LumosConfig | None:
    """`lumos diff` of two files needs no lumos.yaml; use one when it is there."""
    try:
        return load_config(config_file)
    except LumosError:
        if config_file:  # asked for explicitly: its errors matter
            raise
        return None


@click.command()
@click.argument("old")
@click.argument("new")
@policy_option
@click.option("--format", "fmt", type=FORMATS, default="text", show_default=True)
@click.option("--dataset", default=None, help="Dataset the schemas belong to (its policy, owners, downstream).")
@click.option("--output", "-o", default=None, help="Also write the report to this file.")
@config_option
def diff(old, new, policy, fmt, dataset, output, config_file) -> None:
    """Compare two schemas. OLD and NEW: a Lumos snapshot JSON, an Avro schema (.avsc), a
    data file (parquet, orc, avro, csv, json), or DATASET@VERSION (or @latest) from the store.

    Exit code 0 when nothing breaks under the policy, 1 when something does, 2 on bad input.
    """
    try:
        config = _optional_config(config_file)
        opener = (lambda: SnapshotStore(config.store_url)) if config else None
        a, b = load_side(old, opener), load_side(new, opener)
    except LumosError as exc:
        fail(str(exc), 2)
    name = dataset or b.dataset or a.dataset
    if policy:
        chosen = policy.upper()
    elif config:
        chosen = config.policy(name) if name else config.compatibility.policy
    else:
        chosen = DEFAULT_POLICY
    if dataset:
        b = replace(b, dataset=dataset)
    report = diff_report(a, b, chosen, config, (lambda: _stored_catalogue(config)) if config else None)
    _emit(render([report], fmt), output)
    sys.exit(exit_code([report]))


@click.command()
@config_option
@click.option("--datasets", default=None, help="Comma-separated dataset names (default: every dataset).")
@click.option("--since", default=None, help="Only versions first seen after this ISO 8601 time (the CI run's start).")
@click.option("--partition", default=None, help="Judge this partition's latest capture (default: the newest).")
@click.option("--format", "fmt", type=FORMATS, default="text", show_default=True)
@click.option("--output", "-o", default=None, help="Also write the report to this file.")
def gate(config_file, datasets, since, partition, fmt, output) -> None:
    """The CI gate: judge the datasets' latest versions under their policies.

    Exit code 0 when no unaccepted breaking change is found, 1 otherwise, 2 on bad input.
    """
    config = load(config_file)
    try:
        cutoff = datetime.fromisoformat(since) if since else None
    except ValueError:
        fail(f"--since {since!r} is not an ISO 8601 time", 2)
    if cutoff is not None and cutoff.tzinfo is None:
        cutoff = cutoff.replace(tzinfo=UTC)
    store = open_store(config)
    try:
        catalogue = catalogue_of(config, store)
        known = catalogue.by_name()
        names = [n.strip() for n in datasets.split(",")] if datasets else list(known)
        unknown = [n for n in names if n not in known]
        if unknown:
            fail(str(UnknownDataset(unknown, known)), 2)
        with store.engine.connect() as conn:  # breaking changes accepted through the API
            accepted = acceptances_of(conn, names)
        reports = gate_reports(config, store, catalogue, names, cutoff, partition, accepted)
    finally:
        store.close()
    _emit(render(reports, fmt), output)
    sys.exit(exit_code(reports))


@click.command()
@click.argument("files", nargs=-1)
@config_option
def changed(files, config_file) -> None:
    """The Dagster asset selection of what changed FILES touch (SQL files, the dbt project,
    lumos.yaml) and their consumers: `*` when lumos.yaml changed, nothing when no dataset is
    touched. CI feeds it `git diff --name-only`. It reads the code in the working tree and
    writes nothing (the store may be the shared one)."""
    from lumos_dagster.lineage.changed import selection, touched
    from lumos_dagster.lineage.resolve import current_code

    config = load(config_file)
    store = open_store(config)
    try:
        catalogue = catalogue_of(config, store)
        code = current_code(store, config)
    finally:
        store.close()
    echo(selection(touched(files, config, code.docs), catalogue.asset_paths()))


@click.command()
@click.argument("dataset", required=False)
@click.option("--depth", type=int, default=None, help="Stop after this many lineage hops.")
@click.option("--top", type=int, default=10, show_default=True, help="Without DATASET: rank this many by fan-out.")
@text_or_json
@config_option
def impact(dataset, depth, top, fmt, config_file) -> None:
    """Who is downstream of DATASET (depth, owners) and what its breaking changes do to each:
    BREAKING, COMPATIBLE, or POSSIBLY BREAKING where column lineage is unknown, with what to do;
    without DATASET, the riskiest datasets by downstream fan-out."""
    config = load(config_file)
    store = open_store(config)
    try:
        catalogue = catalogue_of(config, store)
        if dataset is None:
            ranking = fan_out(catalogue)[:top]
            if fmt == "json":
                echo_json([{"dataset": n, "downstream": k} for n, k in ranking])
            else:
                echo(f"the {len(ranking)} datasets with the most downstream (`lumos impact DATASET` for one):")
                echo(f"{'downstream':>10}  dataset")
                for n, k in ranking:
                    echo(f"{k:>10}  {n}")
            return
        if dataset not in catalogue.by_name():
            raise click.ClickException(str(UnknownDataset([dataset], catalogue.by_name())))
        spec = catalogue.by_name()[dataset]
        snap = store.latest(spec.ref.urn)
    finally:
        store.close()
    breaking = [c for c in (snap.changes if snap else ()) if c.severity == BREAKING]
    affected = consumer_verdicts(catalogue, dataset, breaking, depth)
    if fmt == "json":
        echo_json(
            {
                "dataset": dataset,
                "version": snap.version if snap else None,
                "breaking_changes": [change_to_json(c, ("path", "kind", "old", "new")) for c in breaking],
                "downstream": [
                    {
                        "name": a.name,
                        "depth": a.depth,
                        "via": a.via,
                        "owners": [o.id for o in a.owners],
                        "reached_by": list(a.reached_by),
                        "verdict": a.verdict,
                        "reads": list(a.reads),
                        "recommendation": a.recommendation,
                    }
                    for a in affected
                ],
            }
        )
        return
    echo(f"{dataset} {snap.version if snap else '(never materialized)'}: {len(affected)} downstream dataset(s)")
    for c in breaking:
        echo(f"  breaking: {c.kind} {c.path} ({c.old or '-'} → {c.new or '-'})")
    for a in affected:
        owners = ", ".join(o.id for o in a.owners) or "no owner"
        indent = "  " * (a.depth - 1)
        echo(f"  {indent}└ {a.name}  {a.label}  (depth {a.depth}, via {a.via}; {owners})")
        echo(f"  {indent}    {a.recommendation}")


@click.command()
@click.argument("dataset")
@text_or_json
@config_option
def history(dataset, fmt, config_file) -> None:
    """The version timeline of DATASET: each version, where it appeared, what changed, releases."""
    config = load(config_file)
    store = open_store(config)
    try:
        known = catalogue_of(config, store).by_name()
        spec = known.get(dataset)
        urn = spec.ref.urn if spec else dataset_urn("file", dataset)
        entries = timeline(store.history(urn))
        releases = store.releases()
    finally:
        store.close()
    if not entries and spec is None:
        raise click.ClickException(str(UnknownDataset([dataset], known)))
    if not entries:
        raise click.ClickException(f"{dataset}: no snapshot in the store yet (materialize it first)")
    in_release = {e.version: [r.name for r in releases if r.versions.get(dataset) == e.version] for e in entries}
    if fmt == "json":
        echo_json(
            [
                {
                    "version": e.version,
                    "previous_version": e.previous_version,
                    "change_class": e.change_class,
                    "first_partition": e.first_partition,
                    "first_captured": e.first_captured.isoformat(),
                    "last_partition": e.last_partition,
                    "captures": e.captures,
                    "releases": in_release[e.version],
                    "changes": [change_to_json(c, ("path", "kind", "severity", "old", "new")) for c in e.changes],
                }
                for e in entries
            ]
        )
        return
    for e in entries:
        rel = f"  releases {', '.join(in_release[e.version])}" if in_release[e.version] else ""
        span = e.first_partition if e.first_partition == e.last_partition else f"{e.first_partition}…{e.last_partition}"
        captures = plural(e.captures, "capture")
        echo(f"{e.version:<10} {e.change_class or '':<6} partitions {span}  ({captures}){rel}")
        for c in e.changes:
            echo(f"    {c.severity:<13} {c.kind} {c.path or '(dataset)'}: {c.old or '-'} → {c.new or '-'}")


@click.command()
@config_option
@click.option("--since", default=None, help="Start of the period, YYYY-MM-DD (default: 30 days ago).")
@click.option("--until", default=None, help="End of the period, YYYY-MM-DD, exclusive (default: now).")
@text_or_json
def evolution(config_file, since, until, fmt) -> None:
    """How schemas evolved over a period: versions, changes, breaking ones, change frequency."""
    config = load(config_file)
    end = datetime.fromisoformat(until).replace(tzinfo=UTC) if until else datetime.now(UTC)
    start = datetime.fromisoformat(since).replace(tzinfo=UTC) if since else end - timedelta(days=30)
    store = open_store(config)
    try:
        rows = [evolution_of(r.name, timeline(store.history(r.urn)), start, end) for r in store.datasets()]
    finally:
        store.close()
    rows.sort(key=lambda r: (-r.changes, r.dataset))
    if fmt == "json":
        echo_json({"since": start.isoformat(), "until": end.isoformat(), "datasets": [r.__dict__ for r in rows]})
        return
    echo(f"{start:%Y-%m-%d} … {end:%Y-%m-%d}")
    echo(f"{'dataset':<40} {'versions':>8} {'changes':>8} {'breaking':>8} {'per 30 d':>9}")
    for r in rows:
        echo(f"{r.dataset:<40} {r.versions:>8} {r.changes:>8} {r.breaking:>8} {r.per_30_days:>9}")


@click.command()
@click.argument("name", required=False)
@config_option
@click.option("--datasets", default=None, help="Comma-separated datasets in the release (default: all).")
@click.option("--list", "list_", is_flag=True, help="List the releases recorded so far.")
def release(name, config_file, datasets, list_) -> None:
    """Record a release and each dataset's schema version at that moment.

    NAME defaults to the next number after the prefix in lumos.yaml (S-311 → S-312). With
    `releases.watch` set, a manifest is also written there: the release sensor then refreshes
    the datasets once the data of their next window after the release is ready."""
    config = load(config_file)
    store = open_store(config)
    try:
        existing = store.releases()
        if list_:
            for r in existing:
                echo(f"{r.name:<10} {r.created_at:%Y-%m-%d %H:%M}  {plural(len(r.versions), 'dataset')}")
            return
        wanted = {n.strip() for n in datasets.split(",")} if datasets else None
        registered = {r.name for r in store.datasets()}
        if wanted and (unknown := sorted(wanted - registered)):
            raise click.ClickException(str(UnknownDataset(unknown, registered)))
        versions, missing = current_versions(store, wanted)
        if missing:
            raise click.ClickException(f"no version in the store for: {', '.join(missing)} (materialize them first)")
        try:
            rel = store.add_release(
                name or next_release_name(config.releases.prefix, [r.name for r in existing]), versions
            )
        except LumosError as exc:
            raise click.ClickException(str(exc)) from None
    finally:
        store.close()
    echo(f"{rel.name}: {plural(len(rel.versions), 'dataset')}")
    for n, v in rel.versions.items():
        echo(f"  {n:<40} {v}")
    if config.releases.watch:
        manifest = Manifest(rel.name, rel.created_at, tuple(sorted(wanted)) if wanted else ())
        written = write_manifest(config.resolve_location(config.releases.watch), manifest, config.releases.endpoint_url)
        echo(f"manifest for the release sensor: {written}")
