"""`lumos init`: Lumos set up on a lake in one step, in the user's own folder.

    FOLDER/lumos.yaml                  the lake as one source, commented with what the scan found
    FOLDER/.lumos/store.db             the snapshot store, its registry filled by that scan
    FOLDER/.lumos/dagster/dagster.yaml the Dagster instance Lumos recommends (lumos_dagster/cli/instance.py)
    FOLDER/workspace.yaml              the code location, for `dagster dev -w` and `dagster-webserver -w`
    FOLDER/pyproject.toml              [tool.dagster]: plain `dagster dev` finds the code location

A workspace.yaml or pyproject.toml already there is the user's and is left alone. A Dagster project of
dg's (pyproject.toml's [tool.dg] or dg.toml) gets neither: Lumos goes into it as a component
(lumos_dagster/component.py), and `dagster dev` there would take a workspace.yaml over the project.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tomllib
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

import click

from lumos_dagster.cli.common import open_store
from lumos_dagster.cli.instance import instance_yaml
from lumos_dagster.cli.output import echo
from lumos_dagster.floor.config import CONFIG_ENV, DEFAULT_CONFIG, parse_config
from lumos_dagster.floor.errors import LumosError
from lumos_dagster.floor.model import DatasetRecord
from lumos_dagster.floor.time_partitions import granularity
from lumos_dagster.floor.wording import plural

MODULE = "lumos_dagster.definitions"
COMPONENT = "lumos_dagster.component.LumosComponent"
#: the folder of the project's defs/ that `dg scaffold defs` makes for the Lumos component
COMPONENT_DEFS = "lumos"
HOME = ".lumos/dagster"
SOURCE_NAME = "lake"
#: every asset: Dagster's `*` warns (BetaWarning: `AssetSelection.all`'s include_sources, given by its parser)
EVERY_ASSET = 'key:"*"'
#: the datasets listed by name in lumos.yaml's comments (the rest are counted)
LISTED = 40

WORKSPACE = f"""\
# The Lumos code location (written by `lumos init`): `dagster dev -w workspace.yaml`, or plain `dagster dev`
# in this folder when pyproject.toml has no [tool.dagster] block.
load_from:
  - python_module:
      module_name: {MODULE}
"""

PYPROJECT = f"""\
# Written by `lumos init`: `dagster dev` in this folder loads the Lumos code location (lumos.yaml beside it,
# or $LUMOS_CONFIG).
[tool.dagster]
module_name = "{MODULE}"
"""


def source_entry(lake: str, folder: Path, endpoint_url: str | None = None) -> dict:
    """lumos.yaml's source for `lake`: a folder (relative to `folder` when inside it) or s3://bucket/prefix
    (on `endpoint_url`, an S3-compatible store)."""
    if lake.startswith("s3://"):
        bucket, _, prefix = lake.removeprefix("s3://").partition("/")
        if not bucket:
            raise click.ClickException(f"{lake}: name a bucket, s3://bucket/prefix")
        entry = {"name": SOURCE_NAME, "type": "s3", "bucket": bucket, "prefix": prefix.strip("/")}
        return entry | ({"endpoint_url": endpoint_url} if endpoint_url else {})
    if endpoint_url:
        raise click.ClickException(f"--endpoint-url is for an s3:// lake, not {lake}")
    if "://" in lake:
        raise click.ClickException(f"{lake}: a folder or s3://bucket/prefix (other stores: `lumos docs sources`)")
    root = Path(lake).resolve()
    if not root.is_dir():
        raise click.ClickException(f"{lake}: no such folder")
    inside = root == folder or folder in root.parents
    return {"name": SOURCE_NAME, "type": "local", "root": os.path.relpath(root, folder) if inside else str(root)}


def layout(r: DatasetRecord) -> str:
    if r.time_partition_key:
        return f"{granularity(r.time_format)}-partitioned by {r.time_partition_key}"
    if r.partition_keys:
        return f"partitioned by {', '.join(r.partition_keys)} (no date)"
    return "not partitioned"


def found_line(records: list[DatasetRecord]) -> str:
    """`found 30 datasets: 24 daily-partitioned by dt, 6 not partitioned; formats parquet 12, csv 8`."""
    if not records:
        return "found no dataset"
    layouts = ", ".join(f"{n} {what}" for what, n in _most(map(layout, records)))
    formats = ", ".join(f"{fmt} {n}" for fmt, n in _most(r.format or "unknown" for r in records))
    return f"found {plural(len(records), 'dataset')}: {layouts}; formats {formats}"


def _most(values: Iterable[str]) -> list[tuple[str, int]]:
    """Each value and its count, the most frequent first (ties by name)."""
    return sorted(Counter(values).items(), key=lambda item: (-item[1], item[0]))


def _quoted(value: str) -> str:
    """A YAML string as lumos.yaml reads it: `$` written `$$`, not an ${ENV} reference."""
    return json.dumps(value.replace("$", "$$"))


def lumos_yaml(lake: str, source: dict, records: list[DatasetRecord], failures: int, start: str, by: str) -> str:
    """lumos.yaml, commented with what the scan of `lake` found."""
    where = {k: v for k, v in source.items() if k not in ("name", "type")}
    listed = sorted(records, key=lambda r: r.name)
    inventory = "".join(
        f"#   {r.name:<40} {r.format or 'unknown':<8} {plural(r.file_count, 'file'):>10}  {layout(r)}\n"
        for r in listed[:LISTED]
    )
    if len(listed) > LISTED:
        inventory += f"#   … and {len(listed) - LISTED} more (`lumos discover` lists them all)\n"
    failed = f"# {plural(failures, 'failure')} while scanning: `lumos discover` shows them.\n" if failures else ""
    example, upstream = ([r.name for r in listed] + ["sales/orders", "raw/orders"])[:2]
    today = datetime.now(timezone.utc).date().isoformat()
    return (
        f"# Lumos configuration, written by `lumos init` on {today} from a scan of {lake}.\n"
        "# Every key is documented in `lumos docs configuration`. Relative paths are relative to this file;\n"
        "# strings may use ${ENV_VAR} or ${ENV_VAR:-default}. `lumos discover` scans the sources again.\n"
        "\n"
        "# Where the datasets are: folders (local), buckets (s3, azure, gcs), databases, Kafka\n"
        "# (`lumos docs sources`).\n"
        f"# The scan {found_line(records)}:\n"
        f"{inventory}{failed}"
        "sources:\n"
        f"  - name: {SOURCE_NAME}\n"
        f"    type: {source['type']}\n"
        + "".join(f"    {key}: {_quoted(value)}\n" for key, value in where.items())
        + "    # no template: each folder of files is a dataset, key=value folders are its partitions\n"
        '    # (a dt=, date= or day= folder its days); a template names them: "{domain}/{dataset}/dt={date}/*"\n'
        + (
            "    # endpoint_url: http://127.0.0.1:9000   # an S3-compatible store (MinIO…)\n"
            if source["type"] == "s3" and "endpoint_url" not in source
            else ""
        )
        + "\n"
        "# What you know that files cannot say, by dataset name: description, owners, tags, upstream\n"
        "# (lineage), sla, policy (schema compatibility). For example:\n"
        f"#   - name: {example}\n"
        "#     owners: [alice@example.com, group:data-eng]\n"
        f"#     upstream: [{upstream}]\n"
        "datasets: []\n"
        "\n"
        "# Where each snapshot goes: DataHub Lite, a SQLite file (`lumos lite ls /` browses it); datahub-rest\n"
        "# sends to a DataHub server instead, and a list sends to several (`lumos docs catalogs`).\n"
        "catalog:\n"
        "  type: datahub-lite\n"
        "  path: .lumos/catalog.db\n"
        "\n"
        "# Lumos' own SQLite file: the datasets found, every snapshot with its history, the outbox to the catalogs\n"
        "# (url: postgresql+psycopg://… for a shared one).\n"
        "store:\n"
        "  path: .lumos/store.db\n"
        "\n"
        "# A dataset's daily partition is its snapshot as of that day (cadence: hourly, weekly or monthly too).\n"
        "partitions:\n"
        f"  # the first partition: {by}\n"
        f"  start: {start}\n"
        "  cadence: daily\n"
        "  timezone: UTC\n"
    )


def dg_project(folder: Path) -> bool:
    """Whether `folder` is a Dagster project of dg's: dg.toml, or pyproject.toml's [tool.dg], says so."""
    for name, dg in (("dg.toml", lambda doc: doc), ("pyproject.toml", lambda doc: doc.get("tool", {}).get("dg", {}))):
        path = folder / name
        if path.is_file():
            try:
                return dg(tomllib.loads(path.read_text())).get("directory_type") == "project"
            except (tomllib.TOMLDecodeError, UnicodeDecodeError, AttributeError):
                return False
    return False


def next_commands(folder: Path, day: str) -> list[str]:
    """What to run in `folder` after `lumos init`: the UI, and a day's snapshot of every dataset. A project of
    dg's gets the Lumos component first; elsewhere `dg` is pointed at the standalone code location."""
    day_of_every_asset = f"--assets {shlex.quote(EVERY_ASSET)} --partition {day}"
    if dg_project(folder):
        return [f"dg scaffold defs {COMPONENT} {COMPONENT_DEFS}", "dg dev", f"dg launch {day_of_every_asset}"]
    return [f"dg dev -m {MODULE}", f"dg launch -m {MODULE} {day_of_every_asset}"]


def _write_new(path: Path, text: str, overwrite: bool = False) -> bool:
    """Write `path` unless it exists (and not `overwrite`); whether it was written."""
    if path.exists() and not overwrite:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return True


@click.command()
@click.argument("lake", default=".")
@click.option(
    "--dir", "folder", default=".", show_default=True, type=click.Path(file_okay=False),
    help="The folder to set up (created if missing): lumos.yaml, its .lumos/ and the Dagster files go there.",
)  # fmt: skip
@click.option("--endpoint-url", default=None, help="An s3:// lake's S3-compatible endpoint (MinIO…); default: AWS.")
@click.option("--force", is_flag=True, help="Overwrite lumos.yaml and .lumos/dagster/dagster.yaml.")
def init(lake: str, folder: str, endpoint_url: str | None, force: bool) -> None:
    """Set Lumos up on LAKE (a folder or s3://bucket/prefix; default: this folder): scan it once, write a
    commented lumos.yaml and a Dagster home with the instance Lumos recommends, and print what to run next.

    A workspace.yaml and pyproject.toml are written only where there is none."""
    from lumos_dagster.inventory.refresh import refresh_registry

    base = Path(folder).resolve()
    config_file = base / DEFAULT_CONFIG
    if config_file.exists() and not force:
        raise click.ClickException(f"{config_file} exists: `lumos init --force` overwrites it")
    source = source_entry(lake, base, endpoint_url)
    base.mkdir(parents=True, exist_ok=True)
    data = {
        "sources": [source],
        "catalog": {"type": "datahub-lite", "path": ".lumos/catalog.db"},
        "store": {"path": ".lumos/store.db"},
    }
    try:
        config = parse_config(data, file=str(config_file), base_dir=str(base))
    except LumosError as exc:
        raise click.ClickException(str(exc)) from None
    store = open_store(config)
    try:  # the scan records what it found: the code location has its datasets without `lumos discover`
        refreshed = refresh_registry(config, store, progress=lambda msg: echo(msg, err=True))
    finally:
        store.close()
    records, report = refreshed.found.records, refreshed.report
    today = datetime.now(timezone.utc).date().isoformat()
    first = min(((r.first_partition[:10], r.name) for r in records if r.first_partition), default=None)
    start, by = (
        (first[0], f"the earliest day found ({first[1]})") if first else (today, "today (no dated folder found)")
    )
    scanned = lake if "://" in lake else str(Path(lake).resolve())
    config_file.write_text(lumos_yaml(scanned, source, records, len(report.failures), start, by))
    written: list[str] = [DEFAULT_CONFIG]
    kept: list[str] = []
    project = dg_project(base)
    files = [(f"{HOME}/dagster.yaml", instance_yaml(), force)]
    if not project:
        files += [("workspace.yaml", WORKSPACE, False), ("pyproject.toml", PYPROJECT, False)]
    for name, text, overwrite in files:
        (written if _write_new(base / name, text, overwrite) else kept).append(name)

    if not report.ok:
        echo(*report.render().split("\n"), err=True)
    echo(f"{lake}: {found_line(records)}")
    echo(f"wrote in {base}: {', '.join(written)}" + (f"; kept {', '.join(kept)} as they were" if kept else ""))
    # the component names its lumos.yaml; the standalone code location reads LUMOS_CONFIG
    env = {"DAGSTER_HOME": base / HOME} | ({} if project else {CONFIG_ENV: config_file})
    echo("Next:")
    if base != Path.cwd().resolve():
        echo(f"  cd {shlex.quote(str(base))}")
    echo("  export " + " ".join(f"{k}={shlex.quote(str(v))}" for k, v in env.items()))
    for command in next_commands(base, today):
        echo(f"  {command}")
    if not report.ok:  # as `lumos discover`: the files are written, the scan report says what failed
        sys.exit(1)
