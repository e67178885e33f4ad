"""`lumos schema`, `discover`, `demo-lake`, `summary`, `lite`: files, sources and the catalog."""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
import sys
import tempfile
from typing import TYPE_CHECKING, Any

import click

from lumos_dagster.cli.common import config_option, load, open_store
from lumos_dagster.cli.output import echo, echo_json, error, paint
from lumos_dagster.floor.config import DEFAULT_CONFIG
from lumos_dagster.floor.datatypes import schema_to_json, type_str
from lumos_dagster.floor.scan_report import failure_lines
from lumos_dagster.floor.time_partitions import granularity
from lumos_dagster.floor.wording import few, plural, visible
from lumos_dagster.formats import sniff_format

if TYPE_CHECKING:
    from lumos_dagster.formats import FileResult


def _entries(folder: str) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as found:
            return list(found)
    except OSError:  # unreadable: nothing of a table's there
        return []


def _table_schema(folder: str) -> tuple[str | None, FileResult]:
    """The table folder at `folder` as of its latest version, read the way a run reads it (the list
    step's `table_contents`): (its format, its schema); (None, why not) for a folder that is no table."""
    from lumos_dagster.floor.scan_report import ScanReport
    from lumos_dagster.floor.windows import Window
    from lumos_dagster.formats import FileResult
    from lumos_dagster.run.table_listing import table_contents
    from lumos_dagster.sources.builtins import LocalSourceConfig
    from lumos_dagster.sources.local import LocalSource
    from lumos_dagster.table_formats import claim

    # a table keeps its log in a folder of its own (`_delta_log/`, `metadata/`): looked for there
    # first, so a folder that is no table is not walked whole
    logs = [f"{d.name}/{f.name}" for d in _entries(folder) if d.is_dir() for f in _entries(d.path)]
    tables = claim([(path, path) for path in logs])[0]
    if "" not in tables:
        why = "a folder, and no table (Delta, Iceberg) keeps its log there: give the files, or the table's folder"
        return None, FileResult(folder, error=why)
    fmt = tables[""][0]
    parent, name = os.path.split(os.path.abspath(folder))
    source = LocalSource(LocalSourceConfig(root=parent), parent)
    found = source.dataset(name, fmt.type, ScanReport())
    if found is None:
        return fmt.type, FileResult(folder, error=f"a {fmt.type} table that cannot be listed")
    _, (contents,) = table_contents(fmt, source, found, [Window(None)])
    if contents.errors:
        return fmt.type, FileResult(folder, error=contents.errors[0].reason)
    if not contents.schema.fields:
        return fmt.type, FileResult(folder, error=f"a {fmt.type} table whose log lists no version")
    return fmt.type, FileResult(folder, schema=contents.schema, row_count=contents.stats.row_count)


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--flat", is_flag=True, help="Print flat `a.b.c: type` lines instead of JSON.")
def schema(files: tuple[str, ...], flat: bool) -> None:
    """Print the canonical schema of each FILE (Parquet, ORC, Avro, CSV/TSV, JSON), or of a table
    folder (Delta, Iceberg) as of its latest version."""
    from lumos_dagster.formats import readers

    # in worker processes, as discovery reads: a native reader crashing on a file is that file's
    # error, printed below (the pool's own log line about it would say it twice)
    readers.log.setLevel(logging.ERROR)
    folders = {path: _table_schema(path) for path in files if os.path.isdir(path)}
    results = readers.PoolReader()([(path, None) for path in files if path not in folders])
    results.update({path: found for path, (_, found) in folders.items()})
    out, failed = {}, 0
    for path in files:
        fs = results[path]
        if fs.error is not None or fs.schema is None:  # a schema, or an error saying why not
            error(f"{path}: {fs.error}")
            failed += 1
            continue
        if fs.warning:
            echo(f"{paint('Warning:', 'yellow')} {path}: {fs.warning}", err=True)  # its schema follows
        if flat:
            echo(f"# {path}")
            for p, f in fs.schema.flatten():
                echo(f"{p}: {type_str(f.type)}{'' if f.nullable else ' not null'}")
        else:
            fmt = folders[path][0] if path in folders else sniff_format(path)
            named: dict[str, Any] = {} if fs.schema.name is None else {"name": fs.schema.name}  # an Avro record's
            named |= {"aliases": list(fs.schema.aliases)} if fs.schema.aliases else {}
            out[path] = {"format": fmt, "row_count": fs.row_count, **named, "fields": schema_to_json(fs.schema)}
    if out:
        echo_json(out if len(files) > 1 else next(iter(out.values())), default=str)
    if failed:
        sys.exit(1)


@click.command()
@config_option
def discover(config_file: str | None) -> None:
    """Scan the configured sources and record the datasets found in the registry.

    Datasets that vanished from a scanned source are soft-deleted in the catalogs, unless
    more than removal.max_share of the source vanished at once (then nothing is removed)."""
    from lumos_dagster.inventory.refresh import refresh_registry

    config = load(config_file)
    store = open_store(config)
    try:
        refreshed = refresh_registry(config, store, progress=lambda msg: echo(msg, err=True))
    finally:
        store.close()
    found, result, code, report = refreshed.found, refreshed.reconciliation, refreshed.code, refreshed.report
    added = set(result.added)
    for r in sorted(found.records, key=lambda r: r.name):
        time_keys = r.time_partition_key.split("/") if r.time_partition_key else []
        others = [k for k in r.partition_keys if k not in time_keys]
        part = (
            f"partitioned by {r.time_partition_key} ({granularity(r.time_format)})"
            if time_keys
            else "no time partition"
        )
        if others:  # Hive folders that do not drive time are still partition keys
            part += f", keys {', '.join(others)}"
        elif not time_keys:
            part = "not partitioned"
        new = "  (new)" if r.name in added else ""
        echo(f"  {visible(r.name):<40} {r.format:<8} {plural(r.file_count, 'file'):>12}  {part}{new}")
    for name in result.removed:
        echo(f"  {visible(name):<40} removed (soft-deleted in the catalogs)")
    if added or result.removed:
        # a code location builds its assets from the registry when it loads
        echo(
            f"{len(added)} new, {len(result.removed)} removed: a running `dagster dev` shows the change after "
            '"Reload definitions" (Deployment → Code locations); a deployment\'s sensors reload on their own'
        )
    else:
        echo("no dataset new or removed")
    if code is not None:
        edges = sum(len(d.edges) for d in code.docs.values())
        built = plural(len(code.docs), "dataset")
        echo(f"code: {built} built by SQL, dbt or views, {plural(edges, 'lineage edge')}")
        for table, jobs in sorted(code.external.items()):
            echo(f"  {table:<40} read or written by {', '.join(jobs)}, not a dataset Lumos manages")
        for problem in code.problems:
            echo(f"  warning: {problem}")
    echo(*report.render().split("\n"))
    if not report.ok:
        sys.exit(1)


@click.command("demo-lake")
@config_option
@click.option("--root", default=None, help="Where to write (default: the first source's root).")
def demo_lake(config_file: str | None, root: str | None) -> None:
    """Write the sample lake used by `make demo`."""
    from lumos_dagster.cli.demo_lake import build_demo_lake

    if root is None:
        config = load(config_file)
        if not config.sources:
            raise click.ClickException(f"{config.source_file}: sources: no source to write the demo lake into")
        root = config.resolve(config.sources[0].root)
    files = build_demo_lake(root)
    echo(f"wrote {plural(len(files), 'file')} under {root}")


@click.command()
@config_option
@click.option(
    "--partition", default=None, help="Judge this partition's latest capture (default: each dataset's last run)."
)
def summary(config_file: str | None, partition: str | None) -> None:
    """Print what the store holds for every dataset, its status (governance.status: its last run's
    checks as Dagster recorded them, judged again with today's acceptances), and what the catalog
    received."""
    from lumos_dagster.cli.changes import catalogue_of
    from lumos_dagster.cli.output import paint, status
    from lumos_dagster.governance.status import STATUSES, WARNING, standings

    config = load(config_file)
    store = open_store(config)
    try:  # breaking changes accepted through the API count, as in the gate
        found = standings(config, catalogue_of(config, store), store, partition=partition)
    finally:
        store.close()
    found.sort(key=lambda f: f.spec.name)
    rows, problems = [], []
    for f in found:
        s, said = f.snapshot, f.said
        if s is None:
            rows.append(((visible(f.spec.name), "-", "-", "-", "-", "-"), f.status, said))
            continue
        rows.append(
            (
                (  # as shown: the columns line up on what is printed
                    visible(f.spec.name),
                    s.partition_key or "",
                    s.version or "-",
                    str(len(s.schema.flatten())),
                    str(s.stats.file_count),
                    "?" if s.stats.row_count is None else str(s.stats.row_count),
                ),
                f.status,
                said,
            )
        )
        problems += [(c.severity, f"{f.spec.name}: {c.name}: {c.description}") for c in f.failed]
        problems += [("WARN", f"  {line}") for line in failure_lines(_unread(f.captures))]
        problems += [("WARN", f"{f.spec.name}: field {c.path}: {c.resolution}") for c in s.conflicts]
    header = ("dataset", "partition", "version", "fields", "files", "rows")
    widths = [max(len(r[i]) for r in [header, *(cells for cells, _, _ in rows)]) for i in range(len(header))]
    echo("  ".join(c.ljust(w) for c, w in zip(header, widths, strict=True)) + "  status")
    for cells, word, said in rows:
        echo("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + "  " + status(word, said))
    for severity, p in problems:
        echo(f"  {paint('!', 'red' if severity == 'ERROR' else 'yellow')} {p}")
    counts = {word: sum(1 for _, w, _ in rows if w == word) for word in STATUSES}
    echo(
        f"{plural(len(rows), 'dataset')}: "
        + ", ".join(status(w, f"{n} {'with warnings' if w == WARNING else w}") for w, n in counts.items() if n)
    )
    path = config.lite_path
    if path and os.path.exists(path):
        from lumos_dagster.catalog.datahub_lite import open_lite

        lite = open_lite(path, read_only=True)
        try:
            urns = [u for u in lite.list_ids() if u.startswith("urn:li:dataset:")]
        finally:
            lite.close()
        # `lumos lite` finds the Lite file from lumos.yaml: it works in any folder, unlike `make lite`
        where = (
            ""
            if os.path.abspath(DEFAULT_CONFIG) == os.path.abspath(config.source_file)
            else (f" --config {shlex.quote(config.source_file)}")
        )
        echo(f"DataHub Lite {path}: {plural(len(urns), 'dataset')} (browse it: lumos lite{where} ls /)")


def _unread(captures) -> list[tuple[str, str]]:
    """(file, `reason (partitions)`) of each file the captures could not read, once with its partitions."""
    where: dict[tuple[str, str], list[str]] = {}
    for s in captures:
        for e in s.errors:
            where.setdefault((e.path, e.reason), []).append(s.partition_key or "now")
    return [(path, f"{reason} ({few(keys)})") for (path, reason), keys in where.items()]


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@config_option
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def lite(config_file: str | None, args: tuple[str, ...]) -> None:
    """Run `datahub lite ARGS…` against this project's DataHub Lite file.

    The datahub CLI reads its Lite location from ~/.datahubenv; this runs it with a
    private HOME whose .datahubenv points at lumos.yaml's catalog.path, leaving yours alone.
    """
    import yaml

    from lumos_dagster.catalog.datahub_lite import lite_config

    config = load(config_file)
    path = config.lite_path
    if path is None:
        raise click.ClickException(f"{config.source_file}: catalog: no datahub-lite catalog to run `datahub lite` on")
    if not os.path.exists(path):  # DataHub's CLI would say "unable to open database file" in a traceback
        raise click.ClickException(
            f"{config.source_file}: catalog.path {path}: no DataHub Lite file yet (a run writes it: "
            "materialize a partition first)"
        )
    with tempfile.TemporaryDirectory(prefix="lumos-datahub-") as home:
        with open(os.path.join(home, ".datahubenv"), "w") as fh:
            # the CLI insists on a gms section even for Lite; nothing contacts it
            yaml.safe_dump({"gms": {"server": "http://localhost:8080"}, "lite": lite_config(path, read_only=True)}, fh)
        datahub = os.path.join(os.path.dirname(sys.executable), "datahub")
        env = {**os.environ, "HOME": home, "DATAHUB_TELEMETRY_ENABLED": "false"}
        code = subprocess.call([datahub, "lite", *args], env=env)
    sys.exit(code)
