"""The physical floor: one plain Python process reading every file's schema as cheaply as it can.

    .venv/bin/python -m benchmarks.floor ROOT      prints {"datasets": n, "files": n}

Parquet and ORC: the footer only; Avro: the header only (no record decoded); CSV: the first
64 KiB block; JSON lines: the first lines. A dataset is a file's folder relative to the root,
without its trailing `key=value` partition folders; entries starting with `_` or `.` are skipped.
Field paths are flattened as in `benchmarks.lake`: the column, and `parent.child` for the
children of a struct or of a list of structs.
"""

import itertools
import json
import os
import sys
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.orc as pa_orc
import pyarrow.parquet as pq

CSV_BLOCK = 1 << 16
JSON_LINES = 10


def _arrow_paths(fields, prefix: str = "") -> list[str]:
    paths = []
    for field in fields:
        path = prefix + field.name
        paths.append(path)
        kind = field.type
        if pa.types.is_list(kind) or pa.types.is_large_list(kind):
            kind = kind.value_type
        if pa.types.is_struct(kind):
            paths += _arrow_paths(kind, path + ".")
    return paths


def _avro_record(kind) -> dict | None:
    """The record a field's type is, or holds as array items or in a nullable union."""
    if isinstance(kind, list):
        return next((r for r in map(_avro_record, kind) if r is not None), None)
    if isinstance(kind, dict):
        if kind["type"] == "record":
            return kind
        if kind["type"] == "array":
            return _avro_record(kind["items"])
    return None


def _avro_paths(record: dict, prefix: str = "") -> list[str]:
    paths = []
    for field in record["fields"]:
        path = prefix + field["name"]
        paths.append(path)
        child = _avro_record(field["type"])
        if child is not None:
            paths += _avro_paths(child, path + ".")
    return paths


def _json_paths(value, prefix: str, paths: set[str]) -> None:
    for key, child in value.items():
        path = prefix + key
        paths.add(path)
        items = child if isinstance(child, list) else [child]
        for item in items:
            if isinstance(item, dict):
                _json_paths(item, path + ".", paths)


def file_fields(path: str) -> list[str]:
    """The flat field paths of one file's schema, by its extension."""
    ext = path.rsplit(".", 1)[-1]
    if ext == "parquet":
        return _arrow_paths(pq.read_schema(path))
    if ext == "orc":
        return _arrow_paths(pa_orc.ORCFile(path).schema)
    if ext == "avro":
        with open(path, "rb") as fh:
            return _avro_paths(fastavro.reader(fh).writer_schema)
    if ext == "csv":
        options = pa_csv.ReadOptions(block_size=CSV_BLOCK)
        with pa_csv.open_csv(path, read_options=options) as reader:
            return reader.schema.names
    if ext == "jsonl":
        paths: set[str] = set()
        with open(path, "rb") as fh:
            for line in itertools.islice(fh, JSON_LINES):
                if line.strip():
                    _json_paths(json.loads(line), "", paths)
        return list(paths)
    raise ValueError(f"unknown format: {path}")


def _walk(folder: str, dataset: str, found: dict[str, set[str]], counts: dict[str, int]) -> None:
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.startswith(("_", ".")):
                continue
            if entry.is_dir(follow_symlinks=False):
                # partition folders belong to the dataset above them
                child = dataset if "=" in entry.name else f"{dataset}/{entry.name}".lstrip("/")
                _walk(entry.path, child, found, counts)
            else:
                found.setdefault(dataset, set()).update(file_fields(entry.path))
                counts["files"] += 1


def _scan(root: str | Path) -> tuple[dict[str, list[str]], int]:
    found: dict[str, set[str]] = {}
    counts = {"files": 0}
    _walk(str(root), "", found, counts)
    return {name: sorted(paths) for name, paths in sorted(found.items())}, counts["files"]


def floor_scan(root: str | Path) -> dict[str, list[str]]:
    """Dataset (folder relative to `root`) -> sorted flat field paths, from every file under `root`."""
    return _scan(root)[0]


if __name__ == "__main__":
    datasets, files = _scan(sys.argv[1])
    print(json.dumps({"datasets": len(datasets), "files": files}))
