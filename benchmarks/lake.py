"""A generated data lake for the schema-snapshot benchmarks, with its ground truth.

    .venv/bin/python -m benchmarks.lake ROOT DATASETS FILES PARTITIONS

Layout: `<root>/d<k>/ds_<i>/dt=YYYY-MM-DD/part-<j>.<ext>`, k = i % 10. Formats rotate by
dataset over parquet, orc, avro, csv and jsonl; every file of a dataset holds the same
table, so each dataset is encoded once and its bytes written to all its files.
`<root>/_truth.json` maps each dataset (`d<k>/ds_<i>`) to its sorted flat field paths:
top-level columns, and `parent.child` for the children of a struct or of a list<struct>.
"""

import io
import json
import math
import os
import random
import sys
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.orc as pa_orc
import pyarrow.parquet as pq

FORMATS = ("parquet", "orc", "avro", "csv", "jsonl")
PRIMITIVES = ("int", "float", "string", "bool", "date", "timestamp")
CHILD_KINDS = ("int", "float", "string", "bool")
FIRST_DAY = date(2026, 11, 1)
EPOCH = datetime(2026, 11, 1, tzinfo=timezone.utc)

ARROW_TYPES = {
    "int": pa.int64(),
    "float": pa.float64(),
    "string": pa.string(),
    "bool": pa.bool_(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
}
AVRO_TYPES = {
    "int": "long",
    "float": "double",
    "string": "string",
    "bool": "boolean",
    "date": {"type": "int", "logicalType": "date"},
    "timestamp": {"type": "long", "logicalType": "timestamp-micros"},
}


def _columns(rng: random.Random, nested: bool) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """(name, kind, children) for 5-12 top-level columns; kind "struct" or "list_struct" has children."""
    count = rng.randint(5, 12)
    kinds = [rng.choice(PRIMITIVES) for _ in range(count - 2 if nested else count)]
    if nested:
        kinds += ["struct", rng.choice(("list_string", "list_struct"))]
        rng.shuffle(kinds)
    columns = []
    for n, kind in enumerate(kinds):
        children = []
        if kind in ("struct", "list_struct"):
            children = [
                (f"{child}_{c}", child) for c, child in enumerate(rng.choices(CHILD_KINDS, k=rng.randint(2, 3)))
            ]
        columns.append((f"{kind}_{n}", kind, children))
    return columns


def _value(rng: random.Random, kind: str, children: list[tuple[str, str]]):
    if kind == "int":
        return rng.randint(-(10**6), 10**6)
    if kind == "float":
        return rng.random() * 1000
    if kind == "string":
        return f"s{rng.randint(0, 10**6)}"
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "date":
        return FIRST_DAY + timedelta(days=rng.randint(0, 365))
    if kind == "timestamp":
        return EPOCH + timedelta(seconds=rng.randint(0, 10**7))
    if kind == "struct":
        return {name: _value(rng, child, []) for name, child in children}
    # lists are never empty: readers that infer from values (jsonl) only see a list<struct>'s children in its items
    if kind == "list_string":
        return [_value(rng, "string", []) for _ in range(rng.randint(1, 3))]
    return [_value(rng, "struct", children) for _ in range(rng.randint(1, 3))]


def _arrow_type(kind: str, children: list[tuple[str, str]]) -> pa.DataType:
    if kind == "struct":
        return pa.struct([(name, ARROW_TYPES[child]) for name, child in children])
    if kind == "list_string":
        return pa.list_(pa.string())
    if kind == "list_struct":
        return pa.list_(_arrow_type("struct", children))
    return ARROW_TYPES[kind]


def _avro_type(kind: str, children: list[tuple[str, str]], name: str):
    if kind == "struct":
        return {
            "type": "record",
            "name": f"{name}_record",
            "fields": [{"name": n, "type": AVRO_TYPES[c]} for n, c in children],
        }
    if kind == "list_string":
        return {"type": "array", "items": "string"}
    if kind == "list_struct":
        return {"type": "array", "items": _avro_type("struct", children, name)}
    return AVRO_TYPES[kind]


def _json_default(value):
    # dates and timestamps become ISO strings, as most jsonl producers write them
    return value.isoformat()


def _encode(fmt: str, columns, records: list[dict]) -> bytes:
    if fmt == "avro":
        schema = {
            "type": "record",
            "name": "row",
            "fields": [{"name": name, "type": _avro_type(kind, ch, name)} for name, kind, ch in columns],
        }
        buffer = io.BytesIO()
        fastavro.writer(buffer, fastavro.parse_schema(schema), records)
        return buffer.getvalue()
    if fmt == "jsonl":
        return "".join(json.dumps(r, default=_json_default) + "\n" for r in records).encode()
    schema = pa.schema([(name, _arrow_type(kind, ch)) for name, kind, ch in columns])
    table = pa.Table.from_pylist(records, schema=schema)
    sink = pa.BufferOutputStream()
    if fmt == "parquet":
        pq.write_table(table, sink)
    elif fmt == "orc":
        pa_orc.write_table(table, sink)
    else:
        pa_csv.write_csv(table, sink)
    return sink.getvalue().to_pybytes()


def generate_lake(
    root: str | Path,
    datasets: int,
    files: int,
    partitions: int,
    seed: int = 0,
    rows: int = 20,
    folders: int = 10,
    first_day: date = FIRST_DAY,
) -> dict[str, list[str]]:
    """Write the lake under `root` and return (and write to `<root>/_truth.json`) its ground truth;
    datasets spread over `folders` top folders (`d<k>`), partitions from `first_day` on."""
    root = Path(root)
    per_partition = math.ceil(files / partitions)
    days = [f"dt={first_day + timedelta(days=p)}" for p in range(partitions)]
    truth = {}
    for i in range(datasets):
        fmt = FORMATS[i % len(FORMATS)]
        rng = random.Random(f"{seed}/{i}")
        columns = _columns(rng, nested=fmt != "csv")
        records = [{name: _value(rng, kind, ch) for name, kind, ch in columns} for _ in range(rows)]
        data = _encode(fmt, columns, records)
        name = f"d{i % folders}/ds_{i}"
        for j in range(files):
            folder = root / name / days[j // per_partition]
            if j % per_partition == 0:
                os.makedirs(folder, exist_ok=True)
            (folder / f"part-{j}.{fmt}").write_bytes(data)
        truth[name] = sorted([col for col, _, _ in columns] + [f"{col}.{c}" for col, _, ch in columns for c, _ in ch])
    (root / "_truth.json").write_text(json.dumps(truth, indent=1, sort_keys=True))
    return truth


if __name__ == "__main__":
    generate_lake(sys.argv[1], *(int(a) for a in sys.argv[2:5]))
