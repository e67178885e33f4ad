"""The baseline: DataHub's own data-lake source (`type: s3`, `platform: file`), run as a user would.

    .venv/bin/python -m benchmarks.datahub_baseline ROOT WORKDIR     prints {"datasets": n, "with_schema": n}

A recipe with one path_spec, `<root>/{dept}/{table}/dt={partition[0]}/*.*`, and a file sink,
run by `datahub ingest` from its own environment (`.venv-datahub`: the `s3` extra pins an older
pyarrow than Lumos needs) with no DataHub server. Its output is parsed here, in the main
environment, into the same shape as the lake's ground truth.

What the source does with local files, as read in acryl-datahub 1.7.0.17
(`datahub/ingestion/source/s3/source.py`, `data_lake_common/path_spec.py`):
- it walks everything under the include's fixed prefix and stats every file, but infers each
  table's schema from one file only, the most recently modified;
- ORC is not among its file types, so ORC files are filtered out without a warning;
- its Parquet inferrer lists top-level columns only, no struct or list<struct> children;
- a path with any component starting with `_` or `.` is "hidden" and skipped, the lake root's
  own components included: such a root ingests nothing, again without an error.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml
from datahub.metadata.urns import DatasetUrn
from datahub.utilities.urns.field_paths import get_simple_field_path_from_v2_field_path

DATAHUB = Path(__file__).resolve().parents[1] / ".venv-datahub" / "bin" / "datahub"


def _lake_root(root: str | Path) -> Path:
    return Path(root).resolve()


def write_recipe(root: str | Path, out_json: str | Path, recipe_path: str | Path) -> Path:
    """Write the ingestion recipe for the lake under `root`, with a file sink to `out_json`."""
    root = _lake_root(root)
    hidden = [part for part in root.parts if part.startswith(("_", "."))]
    if hidden:
        raise ValueError(f"DataHub's path_spec skips paths under {hidden}: move the lake root {root}")
    recipe = {
        "source": {
            "type": "s3",
            "config": {
                "platform": "file",
                "env": "PROD",
                # one table per d<k>/ds_<i> folder, its dt= folders its partitions; `*.*` takes
                # every extension the source supports
                "path_specs": [{"include": f"{root.as_posix()}/{{dept}}/{{table}}/dt={{partition[0]}}/*.*"}],
                "profiling": {"enabled": False},
            },
        },
        "sink": {"type": "file", "config": {"filename": str(Path(out_json).resolve())}},
    }
    recipe_path = Path(recipe_path)
    recipe_path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return recipe_path


def ingest_command(recipe_path: str | Path) -> tuple[list[str], dict[str, str]]:
    """The command line and environment that run a recipe, for `benchmarks.measure.run_measured`."""
    return [str(DATAHUB), "ingest", "-c", str(recipe_path)], {**os.environ, "DATAHUB_TELEMETRY_ENABLED": "false"}


def run_datahub(root: str | Path, workdir: str | Path) -> tuple[subprocess.CompletedProcess, Path]:
    """Ingest the lake under `root` into `<workdir>/datahub.json`; returns the finished process and that path."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    out_json = workdir / "datahub.json"
    cmd, env = ingest_command(write_recipe(root, out_json, workdir / "recipe.yml"))
    return subprocess.run(cmd, env=env, capture_output=True, text=True), out_json


def datahub_datasets(out_json: str | Path, root: str | Path) -> dict[str, list[str]]:
    """Lake dataset name -> sorted flat field paths, from the file sink's output.

    The source names a local table by its absolute path without the leading slash
    (`tmp/lake/d3/ds_3`); the lake root is stripped from it. A dataset emitted without a
    schemaMetadata aspect is found with no fields.
    """
    prefix = _lake_root(root).as_posix().strip("/") + "/"
    found: dict[str, list[str]] = {}
    for record in json.loads(Path(out_json).read_text()):
        if record.get("entityType") != "dataset":
            continue
        name = DatasetUrn.from_string(record["entityUrn"]).name.removeprefix(prefix)
        fields = found.setdefault(name, [])
        if record["aspectName"] == "schemaMetadata":
            # Avro fields come as v2 paths ([version=2.0].[type=...].a.[type=...].b); the rest plain
            paths = (
                get_simple_field_path_from_v2_field_path(f["fieldPath"]) for f in record["aspect"]["json"]["fields"]
            )
            fields.extend(sorted(paths))
    return dict(sorted(found.items()))


if __name__ == "__main__":
    result, out = run_datahub(sys.argv[1], sys.argv[2])
    if result.returncode:
        sys.exit(result.stderr[-4000:])
    datasets = datahub_datasets(out, sys.argv[1])
    print(json.dumps({"datasets": len(datasets), "with_schema": sum(1 for f in datasets.values() if f)}))
