"""The conformance corpus: files and tables other engines wrote (Spark with Delta Lake, delta-rs, Iceberg's
Java and Python writers, ORC's Java and C++ writers, Avro's C, Java, JavaScript and Rust writers, spark-avro,
Arrow), each read by Lumos the way a run reads it and by the format's reference implementation, the two
compared field by field.

The corpus lives in ../shared/testdata/corpus; tests/cases/conformance_corpus.yaml names each file's or
table's source (repository, path, commit, licence) and its writer. The references: pyarrow for Parquet, ORC,
CSV and JSON; Apache Avro's own Python library for Avro schemas (fastavro counts the rows); delta-rs for
Delta; pyiceberg for Iceberg. Both sides are brought to one spelling (`Column`) by tables of the
references' types here, independent of Lumos' converters. Where Lumos and the reference differ the
manifest records the difference and why (`known`), and the test asserts it stays exactly that: a fix or
a new difference both show.
"""

from __future__ import annotations

import os
import re
import shutil
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

import avro.schema
import fastavro
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.json as pjson
import pyarrow.orc as porc
import pyarrow.parquet as pq
import pytest
from avro.datafile import DataFileReader
from avro.io import DatumReader
from deltalake import DeltaTable
from pyiceberg import types as it
from pyiceberg.catalog.noop import NoopCatalog
from pyiceberg.io import InputFile, OutputFile
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import ManifestContent
from pyiceberg.table import StaticTable

from lumos_dagster.floor.datatypes import Array, DataType, Enum, Map, Schema, Struct, UnionType, type_str
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.floor.windows import Window
from lumos_dagster.formats import read_file_result, sniff_format
from lumos_dagster.run.table_listing import table_contents
from lumos_dagster.sources.builtins import LocalSourceConfig
from lumos_dagster.sources.local import LocalSource
from lumos_dagster.table_formats import TABLES, ListedFile
from tests.cases import load_cases
from tests.conftest import TESTDATA

CORPUS = TESTDATA / "corpus"

pytestmark = [
    # the Apache Avro library warns of the logical types newer than it (`timestamp-nanos`…): AVRO_LOGICAL maps them
    pytest.mark.filterwarnings("ignore::avro.errors.IgnoredLogicalType"),
]
MANIFEST_NAME = "tests/cases/conformance_corpus.yaml"
MANIFEST = load_cases("conformance_corpus.yaml")
ENTRIES = MANIFEST["entries"]
TABLE_FORMATS = ("delta", "iceberg")


@pytest.fixture(autouse=True)
def _corpus():
    """The corpus is data from other projects' repositories: it lives beside the repository, never in
    it. Missing, every case fails saying where it should be (a skip hid 564 cases on CI once)."""
    if not CORPUS.is_dir():
        pytest.fail(f"the conformance corpus is missing: {CORPUS} (../shared/testdata/corpus beside the clone)")


# ------------------------------------------------------------------ one spelling for both sides


@dataclass(frozen=True)
class Column:
    """One field at any depth, as both sides are compared: its type spelled with the nullability of what
    it holds (`array<int32 not null>`) and a struct as `struct` (its fields are columns of their own)."""

    type: str
    nullable: bool
    field_id: int | None = None
    doc: str | None = None


Columns = dict[str, Column]


@dataclass
class Observed:
    """What one side read of a file or table: its columns, or why it could not read it; and for tables
    each version it read (`history`: version → its columns, files, bytes and partition columns, or why not)."""

    columns: Columns | None = None
    error: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)  # rows, version, partition columns, files, bytes…
    history: dict[str, Any] = field(default_factory=dict)


def _model_type(t: DataType) -> str:
    if isinstance(t, Struct):
        return "struct"
    if isinstance(t, Array):
        return f"array<{_model_type(t.element)}{'' if t.element_nullable else ' not null'}>"
    if isinstance(t, Map):
        return f"map<{_model_type(t.key)}, {_model_type(t.value)}{'' if t.value_nullable else ' not null'}>"
    if isinstance(t, UnionType):
        return "union<" + ", ".join(_model_type(b) for b in t.branches) + ">"
    if isinstance(t, Enum):
        return f"enum {t.name}<{', '.join(t.symbols)}>"
    return type_str(t)


def lumos_columns(schema: Schema) -> Columns:
    return {path: Column(_model_type(f.type), f.nullable, f.field_id, f.description) for path, f in schema.flatten()}


def _struct_inside(t: Any, children: Callable[[Any], Any]) -> Any:
    """The struct a reference type holds through lists and maps (`children` steps in one level), or None."""
    while t is not None and not isinstance(t, list):
        t = children(t)
    return t


def walk(fields: list, spell: Callable, prefix: str = "") -> Columns:
    """Columns from a reference's fields: `spell(field)` gives (name, Column, the fields of the struct it
    holds directly or through lists and maps, or None)."""
    out: Columns = {}
    for f in fields:
        name, column, inner = spell(f)
        out[f"{prefix}{name}"] = column
        if inner is not None:
            out.update(walk(inner, spell, f"{prefix}{name}."))
    return out


# ------------------------------------------------------------------ Arrow: Parquet, ORC, CSV, JSON

ARROW_TYPES = {
    "null": "null",
    "bool": "boolean",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "uint8": "uint8",
    "uint16": "uint16",
    "uint32": "uint32",
    "uint64": "uint64",
    "halffloat": "float16",
    "float": "float32",
    "double": "float64",
    "string": "string",
    "large_string": "string",
    "string_view": "string",
    "binary": "binary",
    "large_binary": "binary",
    "binary_view": "binary",
    "date32[day]": "date",
    "date64[ms]": "date",
    "extension<arrow.uuid>": "uuid",
    "extension<arrow.json>": "json",
}
ARROW_PATTERNS = [
    (r"timestamp\[(\w+)\]", r"timestamp(\1)"),
    (r"timestamp\[(\w+), tz=(.+)\]", r"timestamp(\1, tz=\2)"),
    (r"decimal(?:32|64|128|256)\((\d+), (\d+)\)", r"decimal(\1,\2)"),
    (r"fixed_size_binary\[(\d+)\]", r"fixed(\1)"),
    (r"time(?:32|64)\[(\w+)\]", r"time(\1)"),
    (r"(duration\[\w+\]|month_interval|day_time_interval|month_day_nano_interval)", "interval"),
]


def arrow_type(t: pa.DataType) -> str:
    if pa.types.is_dictionary(t):
        return arrow_type(t.value_type)
    if pa.types.is_struct(t):
        return "struct"
    if pa.types.is_map(t):
        value = arrow_type(t.item_type) + ("" if t.item_field.nullable else " not null")
        return f"map<{arrow_type(t.key_type)}, {value}>"
    if isinstance(t, (pa.ListType, pa.LargeListType, pa.FixedSizeListType)):
        return f"array<{arrow_type(t.value_type)}{'' if t.value_field.nullable else ' not null'}>"
    if pa.types.is_union(t):
        return "union<" + ", ".join(arrow_type(t.field(i).type) for i in range(t.num_fields)) + ">"
    text = str(t)
    if text in ARROW_TYPES:
        return ARROW_TYPES[text]
    for pattern, spelling in ARROW_PATTERNS:
        if re.fullmatch(pattern, text):
            return re.sub(pattern, spelling, text)
    return "unknown"


def _arrow_children(t: pa.DataType) -> Any:
    if pa.types.is_dictionary(t):
        return t.value_type
    if pa.types.is_struct(t):
        return [t.field(i) for i in range(t.num_fields)]
    if pa.types.is_map(t):
        return t.item_type
    if isinstance(t, (pa.ListType, pa.LargeListType, pa.FixedSizeListType)):
        return t.value_type
    return None


def _arrow_field(f: pa.Field) -> tuple:
    meta = f.metadata or {}
    field_id = meta.get(b"PARQUET:field_id")
    inner = _struct_inside(f.type, _arrow_children)
    return f.name, Column(arrow_type(f.type), f.nullable, int(field_id) if field_id else None), inner


def arrow_columns(schema: pa.Schema) -> Columns:
    return walk(list(schema), _arrow_field)


def parquet_reference(path: str) -> Observed:
    return Observed(arrow_columns(pq.read_schema(path)), facts={"rows": pq.read_metadata(path).num_rows})


def orc_reference(path: str) -> Observed:
    f = porc.ORCFile(path)
    return Observed(arrow_columns(f.schema), facts={"rows": f.nrows})


def csv_reference(path: str) -> Observed:
    parse = pcsv.ParseOptions(delimiter="\t" if path.endswith(".tsv") else ",", newlines_in_values=True)
    return Observed(arrow_columns(pcsv.read_csv(path, parse_options=parse).schema))


def json_reference(path: str) -> Observed:
    return Observed(arrow_columns(pjson.read_json(path).schema))


# ------------------------------------------------------------------ Avro: Apache Avro's own schema parser

AVRO_TYPES = {
    "null": "null",
    "boolean": "boolean",
    "int": "int32",
    "long": "int64",
    "float": "float32",
    "double": "float64",
    "bytes": "binary",
    "string": "string",
}
#: logical types as the specification defines them, on the type each annotates (any other is ignored)
AVRO_LOGICAL = {
    ("date", "int"): "date",
    ("time-millis", "int"): "time(ms)",
    ("time-micros", "long"): "time(us)",
    ("timestamp-millis", "long"): "timestamp(ms, tz=UTC)",
    ("timestamp-micros", "long"): "timestamp(us, tz=UTC)",
    ("timestamp-nanos", "long"): "timestamp(ns, tz=UTC)",
    ("local-timestamp-millis", "long"): "timestamp(ms)",
    ("local-timestamp-micros", "long"): "timestamp(us)",
    ("local-timestamp-nanos", "long"): "timestamp(ns)",
    ("uuid", "string"): "uuid",
    ("uuid", "fixed"): "uuid",
    ("duration", "fixed"): "interval",
}


def avro_type(s: avro.schema.Schema) -> tuple[str, bool]:
    """(spelling, whether it admits null)."""
    if isinstance(s, avro.schema.UnionSchema):
        branches = [b for b in s.schemas if b.type != "null"]
        nullable = len(branches) < len(s.schemas)
        if len(branches) == 1:
            return avro_type(branches[0])[0], nullable
        if not branches:
            return "null", True
        return "union<" + ", ".join(avro_type(b)[0] for b in branches) + ">", nullable
    if isinstance(s, (avro.schema.BytesDecimalSchema, avro.schema.FixedDecimalSchema)):
        return f"decimal({s.precision},{s.scale})", False
    logical = AVRO_LOGICAL.get((s.get_prop("logicalType"), s.type))
    if logical and not (logical == "interval" and s.get_prop("size") != 12):
        return logical, False
    if isinstance(s, avro.schema.RecordSchema):
        return "struct", False
    if isinstance(s, avro.schema.EnumSchema):
        return f"enum {s.fullname}<{', '.join(s.symbols)}>", False
    if isinstance(s, avro.schema.FixedSchema):
        return f"fixed({s.size})", False
    if isinstance(s, avro.schema.ArraySchema):
        element, nullable = avro_type(s.items)
        return f"array<{element}{'' if nullable else ' not null'}>", False
    if isinstance(s, avro.schema.MapSchema):
        value, nullable = avro_type(s.values)
        return f"map<string, {value}{'' if nullable else ' not null'}>", False
    return AVRO_TYPES[s.type], s.type == "null"


def _avro_children(s: avro.schema.Schema) -> Any:
    if isinstance(s, avro.schema.UnionSchema):
        branches = [b for b in s.schemas if b.type != "null"]
        return branches[0] if len(branches) == 1 else None
    if isinstance(s, avro.schema.RecordSchema):
        return list(s.fields)
    if isinstance(s, avro.schema.ArraySchema):
        return s.items
    if isinstance(s, avro.schema.MapSchema):
        return s.values
    return None


def _avro_field(f: avro.schema.Field) -> tuple:
    spelling, nullable = avro_type(f.type)
    return f.name, Column(spelling, nullable, f.get_prop("field-id"), f.doc), _struct_inside(f.type, _avro_children)


def avro_reference(path: str) -> Observed:
    with open(path, "rb") as fh:
        reader = DataFileReader(fh, DatumReader())
        schema = reader.datum_reader.writers_schema
        reader.close()
    inner = _avro_children(schema) if isinstance(schema, avro.schema.UnionSchema) else None
    record = inner if isinstance(inner, avro.schema.RecordSchema) else schema  # a record-or-null: the record
    if isinstance(record, avro.schema.RecordSchema):
        columns = walk(list(record.fields), _avro_field)
    else:  # any other schema is one column, `value`
        spelling, nullable = avro_type(schema)
        columns = {"value": Column(spelling, nullable)}
        fields = _struct_inside(schema, _avro_children)
        columns.update(walk(fields, _avro_field, "value.") if fields else {})
    return Observed(columns, facts={"rows": _avro_rows(path)})


def _avro_rows(path: str) -> int | str:
    """The rows a full decode finds; "damaged" when its data cannot be decoded (its header could)."""
    with open(path, "rb") as fh:
        try:
            try:
                return sum(1 for _ in fastavro.reader(fh))
            except UnicodeDecodeError:  # fastavro insists header metadata is UTF-8; Apache Avro's reader does not
                fh.seek(0)
                return sum(1 for _ in DataFileReader(fh, DatumReader()))
        except Exception:  # any decoding failure: the readers' own errors differ by library and damage
            return "damaged"


# ------------------------------------------------------------------ Delta: delta-rs

DELTA_TYPES = {
    "string": "string",
    "long": "int64",
    "integer": "int32",
    "short": "int16",
    "byte": "int8",
    "float": "float32",
    "double": "float64",
    "boolean": "boolean",
    "binary": "binary",
    "date": "date",
    "timestamp": "timestamp(us, tz=UTC)",
    "timestamp_ntz": "timestamp(us)",
    "variant": "variant",
}


def delta_type(t: Any) -> str:
    kind = type(t).__name__
    if kind == "StructType":
        return "struct"
    if kind == "ArrayType":
        return f"array<{delta_type(t.element_type)}{'' if t.contains_null else ' not null'}>"
    if kind == "MapType":
        value = delta_type(t.value_type) + ("" if t.value_contains_null else " not null")
        return f"map<{delta_type(t.key_type)}, {value}>"
    decimal = re.fullmatch(r"decimal\((\d+),\s*(\d+)\)", t.type)
    return f"decimal({decimal[1]},{decimal[2]})" if decimal else DELTA_TYPES.get(t.type, "unknown")


def _delta_children(t: Any) -> Any:
    kind = type(t).__name__
    if kind == "StructType":
        return list(t.fields)
    return t.element_type if kind == "ArrayType" else t.value_type if kind == "MapType" else None


def _delta_field(f: Any) -> tuple:
    meta = f.metadata or {}
    field_id = meta.get("delta.columnMapping.id")
    column = Column(
        delta_type(f.type), f.nullable, int(field_id) if field_id is not None else None, meta.get("comment")
    )
    return f.name, column, _struct_inside(f.type, _delta_children)


def delta_state(dt: DeltaTable) -> dict:
    """A version as delta-rs reads it: its columns, partition columns, live files (`file_uris`) and their
    bytes as the log records them."""
    sizes = pa.table(dt.get_add_actions(flatten=True)).column("size_bytes").to_pylist()
    return {
        "columns": walk(list(dt.schema().fields), _delta_field),
        "partitions": list(dt.metadata().partition_columns),
        "files": len(dt.file_uris()),
        "bytes": sum(sizes),
    }


def delta_reference(path: str, versions: list[str]) -> Observed:
    """The latest version, and each of `versions` as `DeltaTable(path, version=…)` loads it on its own."""
    dt = DeltaTable(path)
    history = {}
    for version in versions:
        try:
            history[version] = delta_state(DeltaTable(path, version=int(version)))
        except Exception as exc:
            history[version] = _first_line(exc)
    latest = delta_state(dt)
    facts = {"version": str(dt.version())} | {k: latest[k] for k in ("partitions", "files", "bytes")}
    return Observed(latest["columns"], facts=facts, history=history)


# ------------------------------------------------------------------ Iceberg: pyiceberg

ICEBERG_TYPES = {
    "boolean": "boolean",
    "int": "int32",
    "long": "int64",
    "float": "float32",
    "double": "float64",
    "date": "date",
    "time": "time(us)",
    "timestamp": "timestamp(us)",
    "timestamptz": "timestamp(us, tz=UTC)",
    "timestamp_ns": "timestamp(ns)",
    "timestamptz_ns": "timestamp(ns, tz=UTC)",
    "string": "string",
    "uuid": "uuid",
    "binary": "binary",
    "unknown": "null",
}


def iceberg_type(t: it.IcebergType) -> str:
    if isinstance(t, it.StructType):
        return "struct"
    if isinstance(t, it.ListType):
        return f"array<{iceberg_type(t.element_type)}{' not null' if t.element_required else ''}>"
    if isinstance(t, it.MapType):
        value = iceberg_type(t.value_type) + (" not null" if t.value_required else "")
        return f"map<{iceberg_type(t.key_type)}, {value}>"
    if isinstance(t, it.DecimalType):
        return f"decimal({t.precision},{t.scale})"
    if isinstance(t, it.FixedType):
        return f"fixed({len(t)})"
    return ICEBERG_TYPES.get(str(t), "unknown")


def _iceberg_children(t: it.IcebergType) -> Any:
    if isinstance(t, it.StructType):
        return list(t.fields)
    return t.element_type if isinstance(t, it.ListType) else t.value_type if isinstance(t, it.MapType) else None


def _iceberg_field(f: it.NestedField) -> tuple:
    column = Column(iceberg_type(f.field_type), not f.required, f.field_id, f.doc)
    return f.name, column, _struct_inside(f.field_type, _iceberg_children)


class MovedIO(PyArrowFileIO):
    """pyiceberg's own FileIO, reading a table copied from where it was written (`written`, the location
    in its metadata) from where it is now (`here`): its metadata names files by absolute paths."""

    def __init__(self, written: str, here: str):
        super().__init__()
        self.written, self.here = written.rstrip("/"), here

    def new_input(self, location: str) -> InputFile:
        if location.startswith(self.written + "/"):
            location = self.here + location[len(self.written) :]
        return super().new_input(location)

    def new_output(self, location: str) -> OutputFile:
        raise AssertionError("the corpus is read, never written")


def iceberg_reference(path: str) -> Observed:
    """The current metadata (the one `version-hint.text` names, else the highest version, as file-system
    tables are found); for each snapshot of its log the schema `scan(snapshot_id=…)` projects and the live
    data files its manifests list, with their bytes; the partition columns of the current spec."""
    table = _iceberg_table(path)
    metadata = table.metadata
    history = {str(e.snapshot_id): _snapshot(table, e.snapshot_id) for e in metadata.snapshot_log}
    current = metadata.current_snapshot()
    facts: dict[str, Any] = {"version": str(current.snapshot_id) if current else ""}
    facts["partitions"] = [table.schema().find_column_name(pf.source_id) for pf in metadata.spec().fields]
    if current is not None:
        state = history.get(facts["version"]) or _snapshot(table, current.snapshot_id)
        if not isinstance(state, str):  # its manifests gone: the schema, spec and version stand, the files unknown
            facts.update(files=state["files"], bytes=state["bytes"])
    return Observed(walk(list(table.schema().fields), _iceberg_field), facts=facts, history=history)


def _iceberg_table(path: str) -> StaticTable:
    """The table at its current metadata, read where it is now."""
    folder = f"{path}/metadata"
    if os.path.exists(f"{folder}/version-hint.text"):
        found = StaticTable.from_metadata(path)  # pyiceberg reads the hint itself
    else:
        names = [n for n in os.listdir(folder) if n.endswith(".metadata.json")]
        found = StaticTable.from_metadata(f"{folder}/{max(names, key=_metadata_version)}")
    io = MovedIO(found.metadata.location, path)
    return StaticTable(("corpus", path), found.metadata, found.metadata_location, io, NoopCatalog("corpus"))


def _snapshot(table: StaticTable, snapshot_id: int) -> dict | str:
    """A snapshot's schema as `scan(snapshot_id=…)` projects it, and its live data files (those of its data
    manifests: pyiceberg plans no scan over equality deletes) and their bytes; or why they cannot be read."""
    try:
        snapshot = table.metadata.snapshot_by_id(snapshot_id)
        manifests = [m for m in snapshot.manifests(table.io) if m.content == ManifestContent.DATA]
        sizes = [
            e.data_file.file_size_in_bytes
            for m in manifests
            for e in m.fetch_manifest_entry(table.io, discard_deleted=True)
        ]
    except Exception as exc:  # its manifest list or a manifest is gone, or unreadable
        return _first_line(exc)
    columns = walk(list(table.scan(snapshot_id=snapshot_id).projection().fields), _iceberg_field)
    return {"columns": columns, "files": len(sizes), "bytes": sum(sizes)}


def _metadata_version(name: str) -> int:
    """`v3.metadata.json` (file-system tables), `00003-<uuid>.metadata.json` (catalogs): 3; else -1."""
    found = re.match(r"v?(\d+)", name)
    return int(found[1]) if found else -1


# ------------------------------------------------------------------ Lumos, as a run reads


def lumos_file(path: str) -> Observed:
    """One file through the per-file reader every engine of a run applies (`read_file_result`)."""
    result = read_file_result((path, sniff_format(path)))
    if result.error is not None:
        return Observed(error=result.error)
    return Observed(lumos_columns(result.schema), facts={"rows": "damaged" if result.damaged else result.row_count})


DAY0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def lumos_table(path: Path, fmt: str, tmp: Path) -> Observed:
    """The table through the run's list step (`table_contents`) over one daily window per version: a copy
    whose version N a Delta log dates at noon on day N (its commit files' modification times, which Delta
    readers take as commit times), an Iceberg table at its own commit times."""
    table_format = TABLES.get(fmt)
    if fmt == "delta":
        shutil.copytree(path, tmp / path.name)
        path = tmp / path.name
        for f in (path / "_delta_log").iterdir():
            if f.name[:20].isdigit():
                at = (DAY0 + timedelta(days=int(f.name[:20]), hours=12)).timestamp()
                os.utime(f, (at, at))
    source = LocalSource(LocalSourceConfig(root=str(path.parent)), str(path.parent))
    found = source.dataset(path.name, fmt, ScanReport())
    if found is None:
        return Observed(error="no table format claims the folder: Lumos lists its files as files")
    # the versions the table's log lists, to give each its window (the first state of each Iceberg snapshot:
    # the write; a schema change committed later under the same snapshot is not a write the reference lists)
    prefix = len(found.location) + 1
    listed = [ListedFile(f.entry.path[prefix:], f.entry.mtime) for f in found.files]
    try:
        versions = table_format.open(source.uri(found.location), None, listed).versions()
    except Exception:  # table_contents says why, below
        versions = []
    firsts = {v.version: v for v in reversed(versions) if v.version}
    ends = [None] + [v.committed_at + timedelta(milliseconds=1) for v in firsts.values()][::-1]
    _, contents = table_contents(table_format, source, found, [Window(None, None, end) for end in ends])
    latest, *windows = contents
    if latest.errors and not latest.schema.fields:
        return Observed(error=latest.errors[0].reason)
    history = {}
    for key, seen in zip(list(firsts)[::-1], windows, strict=True):
        if seen.table is None or seen.table.version != key:  # skipped, as the reader cannot open it
            history[key] = f"skipped: the window sees {seen.table.version if seen.table else 'no version'}"
        elif seen.errors:
            history[key] = seen.errors[0].reason
        else:
            history[key] = {"columns": lumos_columns(seen.schema), "files": seen.stats.file_count}
            history[key] |= {"bytes": seen.stats.total_bytes, "partitions": list(seen.table.partition_spec)}
            history[key]["rows"] = seen.stats.row_count  # the references give none: see ROW_DELETES
    s = latest.stats
    facts = {"version": latest.table.version, "partitions": _partition_columns(latest.table.partition_spec)}
    if not latest.errors:  # a file of the table unread (a manifest gone): its files are not known
        facts.update(files=s.file_count, bytes=s.total_bytes)
    return Observed(lumos_columns(latest.schema), facts=facts, history=history)


def _partition_columns(spec: tuple[str, ...]) -> list[str]:
    """`bucket[4](id)` → `id`: the source columns, as the references name partitioning."""
    return [re.sub(r"^\w+(\[\d+\])?\((.+)\)$", r"\2", term) for term in spec]


# ------------------------------------------------------------------ the comparison

REFERENCES: dict[str, Callable[[str], Observed]] = {
    "parquet": parquet_reference,
    "orc": orc_reference,
    "avro": avro_reference,
    "csv": csv_reference,
    "json": json_reference,
}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:160]


def differences(lumos: Observed, reference: Observed) -> list[str]:
    """Each way the two differ, one line each; none when they agree."""
    if reference.error is not None or lumos.error is not None:
        if reference.error is not None and lumos.error is not None:
            return []
        return [f"lumos refuses: {lumos.error}"[:200] if lumos.error else f"reference refuses: {reference.error}"]
    out = _column_differences(lumos.columns, reference.columns)
    for key in sorted(set(lumos.facts) & set(reference.facts)):
        if lumos.facts[key] != reference.facts[key]:
            out.append(f"{key}: lumos {lumos.facts[key]}, reference {reference.facts[key]}")
    for version in sorted(set(lumos.history) | set(reference.history), key=lambda v: (len(v), v)):
        mine, theirs = lumos.history.get(version), reference.history.get(version)
        if mine is None or theirs is None:
            out.append(f"version {version}: only {'lumos' if theirs is None else 'the reference'} reads it")
        elif isinstance(mine, str) or isinstance(theirs, str):
            if not (isinstance(mine, str) and isinstance(theirs, str)):
                out.append(f"version {version}: {'lumos' if isinstance(mine, str) else 'the reference'} refuses it")
        else:
            out += [f"version {version} {d}" for d in _column_differences(mine["columns"], theirs["columns"])]
            for key in sorted(set(mine) & set(theirs) - {"columns"}):
                if mine[key] != theirs[key]:
                    out.append(f"version {version} {key}: lumos {mine[key]}, reference {theirs[key]}")
    return out


def _column_differences(mine: Columns, theirs: Columns) -> list[str]:
    out = []
    for path in [*mine, *(p for p in theirs if p not in mine)]:
        a, b = mine.get(path), theirs.get(path)
        if a is None or b is None:
            out.append(f"{path}: only in {'lumos' if b is None else 'the reference'}")
            continue
        for attr in ("type", "nullable", "field_id", "doc"):
            if getattr(a, attr) != getattr(b, attr):
                out.append(f"{path} {attr}: lumos {getattr(a, attr)}, reference {getattr(b, attr)}")
    if list(mine) != [p for p in theirs if p in mine] and set(mine) == set(theirs):
        out.append("field order differs")
    return out


def _reference(entry: dict, path: Path, lumos: Observed) -> Observed:
    try:
        if entry["format"] == "delta":
            return delta_reference(str(path), list(lumos.history))
        if entry["format"] == "iceberg":
            return iceberg_reference(str(path))
        return REFERENCES[entry["format"]](str(path))
    except Exception as exc:  # the reference cannot read it: Lumos must refuse it too
        return Observed(error=_first_line(exc))


def observe(entry: dict, tmp: Path) -> tuple[Observed, Observed]:
    path = CORPUS / entry["path"]
    lumos = lumos_table(path, entry["format"], tmp) if entry["format"] in TABLE_FORMATS else lumos_file(str(path))
    return lumos, _reference(entry, path, lumos)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["path"] for e in ENTRIES])
def test_lumos_reads_the_corpus_as_the_reference_does(entry, testdata, tmp_path):
    # a missing file is refused by both sides alike: it must fail here, not pass as agreement
    assert (CORPUS / entry["path"]).exists(), f"not in {CORPUS}: its source is in {MANIFEST_NAME}"
    lumos, reference = observe(entry, tmp_path)
    if lumos.error is not None:  # refused: in a sentence, never a traceback
        assert len(lumos.error) > 10 and "Traceback" not in lumos.error, lumos.error
    assert differences(lumos, reference) == entry.get("known", {}).get("differences", [])


def _first_column(columns: Columns, **change: Any) -> None:
    path = next(iter(columns))
    columns[path] = replace(columns[path], **change)


#: one thing read differently from the reference, as a broken Lumos would (on a Delta table with field
#: ids, a partition column and two versions)
MISREADINGS: dict[str, Callable[[Observed], None]] = {
    "a type": lambda o: _first_column(o.columns, type="binary"),
    "nullability": lambda o: _first_column(o.columns, nullable=False),
    "a field id": lambda o: _first_column(o.columns, field_id=99),
    "a comment": lambda o: _first_column(o.columns, doc="a comment the table does not have"),
    "a column left out": lambda o: o.columns.pop(next(iter(o.columns))),
    "the version": lambda o: o.facts.update(version="0"),
    "the partition columns": lambda o: o.facts.update(partitions=[]),
    "the live files": lambda o: o.facts.update(files=o.facts["files"] + 1),
    "the bytes": lambda o: o.facts.update(bytes=o.facts["bytes"] - 1),
    "an old version's schema": lambda o: _first_column(o.history["0"]["columns"], type="string"),
    "an old version left out": lambda o: o.history.pop("0"),
    "an old version refused": lambda o: o.history.update({"0": "cannot read version 0"}),
    "the table refused": lambda o: o.__setattr__("error", "cannot read the delta table"),
}


@pytest.mark.parametrize("misreading", MISREADINGS)
def test_a_lumos_that_read_one_thing_differently_would_fail(misreading, testdata, tmp_path):
    lumos, reference = observe({"path": "delta-golden/data-reader-timestamp_ntz-id-mode", "format": "delta"}, tmp_path)
    assert differences(lumos, reference) == [] and set(lumos.history) == {"0", "1"}
    MISREADINGS[misreading](lumos)
    assert differences(lumos, reference)


def test_the_corpus_is_at_least_100_files_and_tables_other_engines_wrote(testdata):
    missing = [e["path"] for e in ENTRIES if not (CORPUS / e["path"]).exists()]
    assert not missing, f"not in {CORPUS}: {missing[:5]}"
    assert len({e["path"] for e in ENTRIES}) == len(ENTRIES) >= 100
    sources = MANIFEST["sources"]
    assert all({"repo", "path", "commit", "licence"} <= set(s) for s in sources.values())
    for e in ENTRIES:  # each names its writer and the commit it was copied at (its own, or its source's)
        source = sources[e["path"].split("/")[0]]
        assert e["writer"] and re.fullmatch(r"[0-9a-f]{40}", e.get("commit") or source["commit"] or ""), e


#: the corpus tables whose deletion vectors (Delta) or delete files (Iceberg) remove rows their data files
#: still hold, and the rows of their current version; None where the table's metadata does not tell how many
#: (equality deletes; a v3 deletion vector, which names its data file only where pyiceberg does not read)
ROW_DELETES: dict[str, int | None] = {
    "delta-golden/dv-partitioned-with-checkpoint": 35,
    "delta-golden/dv-with-columnmapping": 35,
    "delta-golden/log-replay-dv-key-cases": 47,
    "delta-rs/cdf-table-with-cdc-and-dvs": 5,
    "delta-rs/table-with-dv-small": 8,
    "delta-rs/table_with_deletion_logs": 98,
    "duckdb-iceberg/equality_deletes/warehouse/mydb/mytable": None,
    "duckdb-iceberg/equality_deletes/warehouse/mydb/mytable_partitioned": None,
    "duckdb-iceberg/legacy_bare_deletion_vector/warehouse/default/legacy_bare_deletion_vector": None,
}


def reference_rows(path: Path, fmt: str, version: str) -> int | str:
    """The rows the reference reads at `version`, or why it cannot: delta-rs' own scan (DataFusion; its
    pyarrow dataset refuses deletion vectors), pyiceberg's `scan(snapshot_id=…)`."""
    try:
        if fmt == "delta":
            return (
                pa.RecordBatchReader.from_stream(DeltaTable(str(path), version=int(version)).scan()).read_all().num_rows
            )
        table = _iceberg_table(str(path))
        return table.scan(snapshot_id=int(version)).to_arrow().num_rows
    except Exception as exc:
        return _first_line(exc)


def _deletes_rows(path: Path, fmt: str) -> bool:
    """Whether a table's current version has deletion vectors (Delta) or delete files (Iceberg's summary)."""
    try:
        if fmt == "delta":
            return pa.RecordBatchReader.from_stream(DeltaTable(str(path)).deletion_vectors()).read_all().num_rows > 0
        current = _iceberg_table(str(path)).metadata.current_snapshot()
    except Exception:  # refused by the reference: not a table whose rows it counts
        return False
    return bool(current and int(current.summary.additional_properties.get("total-delete-files", 0)))


@pytest.mark.parametrize("path", ROW_DELETES)
def test_rows_that_deletes_remove_are_not_counted(path, testdata, tmp_path):
    fmt = next(e["format"] for e in ENTRIES if e["path"] == path)
    lumos = lumos_table(CORPUS / path, fmt, tmp_path)
    rows = {version: state["rows"] for version, state in lumos.history.items() if isinstance(state, dict)}
    assert rows[lumos.facts["version"]] == ROW_DELETES[path]
    for version, counted in rows.items():
        reference = reference_rows(CORPUS / path, fmt, version)
        # what the reference cannot count Lumos does not guess (pyiceberg reads no equality deletes, nor that vector)
        assert counted == (reference if isinstance(reference, int) else None), (version, reference)
    if fmt == "delta":  # the vectors delete rows the files' statistics still count
        assert DeltaTable(str(CORPUS / path)).count() > ROW_DELETES[path]


def test_the_row_count_cases_are_every_corpus_table_with_deletes(testdata):
    tables = [e for e in ENTRIES if e["format"] in TABLE_FORMATS and "known" not in e]
    assert {e["path"] for e in tables if _deletes_rows(CORPUS / e["path"], e["format"])} == set(ROW_DELETES)


def test_every_known_disagreement_says_why():
    for e in ENTRIES:
        if "known" in e:
            assert e["known"]["differences"] and len(e["known"]["why"]) > 40, e["path"]


def corpus_counts() -> dict[str, tuple[int, int]]:
    """Format → (entries, entries on which Lumos and the reference agree)."""
    total = Counter(e["format"] for e in ENTRIES)
    agree = Counter(e["format"] for e in ENTRIES if not e.get("known"))
    return {fmt: (total[fmt], agree[fmt]) for fmt in total}


def test_the_docs_give_the_corpus_counts():
    """docs/conformance.md's Corpus table says what the manifest holds."""
    text = (Path(__file__).parents[1] / "docs" / "conformance.md").read_text()
    rows = dict(re.findall(r"^\| (\w+) \| (\d+ \| \d+) \|", text, re.M))
    assert {fmt: tuple(map(int, row.split(" | "))) for fmt, row in rows.items()} == corpus_counts()
