"""A schema's field paths as DataHub's own source for the dataset's platform and format writes them.

Field-level docs, tags, terms and column lineage are keyed by `fieldPath`, so Lumos writes the paths
DataHub's source writes for the same table, built where DataHub has a converter by that converter:

* Avro files and Kafka subjects: `schema_util.avro_schema_to_mce_fields` over the schema as Avro
  (`[version=2.0].[type=Order].[type=long].order_id`, the record's short name), as DataHub's `s3`
  source reads an Avro file's schema and its `kafka` source a subject's;
* Delta tables: DataHub's `delta-lake` source's conversion, each column through
  `delta_type_to_hive_type` and `get_schema_fields_for_hive_column` (v2 paths; its quirk of a map
  column as `[type=null]` included);
* Iceberg tables: Avro as DataHub's `iceberg` source builds it (records `__struct_…`, nullability as
  `_nullable`, decimals fixed, maps as arrays of key/value records);
* everything else (Parquet, ORC, CSV, JSON lines, SQL tables, collections): simple paths, the top-level
  column names DataHub's inferrers and SQL sources give, and below them the nested fields in the dotted
  style its JSON inferrer uses (`customer.address.city`), which DataHub's Parquet inferrer leaves out;
  BigQuery's and Databricks' STRUCT and ARRAY columns through the Hive converter, as their sources do.

Each path carries Lumos' own type, description, terms and key, matched by the flat path
DataHub's `get_simple_field_path_from_v2_field_path` gives back.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator, Sequence

import avro.errors
import avro.schema
from datahub.ingestion.extractor.schema_util import avro_schema_to_mce_fields
from datahub.metadata.schema_classes import SchemaFieldClass
from datahub.utilities.delta import delta_type_to_hive_type
from datahub.utilities.hive_schema_to_avro import get_schema_fields_for_hive_column
from datahub.utilities.urns.field_paths import get_simple_field_path_from_v2_field_path

from lumos_dagster.floor.datatypes import (
    Array,
    DataType,
    Decimal,
    Enum,
    Field,
    Fixed,
    Map,
    Primitive,
    Schema,
    Struct,
    Time,
    Timestamp,
    UnionType,
)

#: how DataHub's source for a dataset builds its field paths
AVRO, HIVE, ICEBERG, SIMPLE = "avro", "hive", "iceberg", "simple"
_HIVE_COLUMNS = frozenset({"bigquery", "databricks"})  # their STRUCT/ARRAY columns: the Hive converter

_AVRO_INT = {"int8": "int", "int16": "int", "int32": "int", "uint8": "int", "uint16": "int", "int64": "long",
             "uint32": "long", "uint64": "long", "float16": "float", "float32": "float", "float64": "double",
             "boolean": "boolean", "string": "string", "binary": "bytes", "null": "null"}  # fmt: skip
_DELTA = {"int8": "byte", "int16": "short", "int32": "integer", "int64": "long", "uint8": "short",
          "uint16": "integer", "uint32": "long", "uint64": "decimal(20,0)", "float16": "float", "float32": "float",
          "float64": "double", "boolean": "boolean", "string": "string", "binary": "binary", "date": "date",
          "variant": "variant"}  # fmt: skip


def style(platform: str, fmt: str | None) -> str:
    if platform == "delta-lake":
        return HIVE
    if platform == "iceberg":
        return ICEBERG
    if platform == "kafka" or fmt == "avro":
        return AVRO
    return SIMPLE


def field_paths(schema: Schema, platform: str, fmt: str | None) -> list[tuple[str, Field | None]]:
    """(DataHub's fieldPath, the Lumos field it is) for every field DataHub's source gives, then those
    Lumos adds in the same style; None where DataHub names a path Lumos has no field for (an Iceberg
    map's key and value)."""
    kind = style(platform, fmt)
    flat = schema.flatten()
    try:
        if kind in (AVRO, ICEBERG):
            paths = [f.fieldPath for f in _avro_fields(_avro_record(schema, iceberg=kind == ICEBERG))]
        elif kind == HIVE:  # the delta-lake source sorts them
            paths = sorted(p for f in schema.fields for p in _hive_paths(f))
        else:
            paths = list(_simple_paths(schema, hive=platform in _HIVE_COLUMNS))
    except (avro.errors.AvroException, ValueError):
        # a schema Avro cannot state (a union of two arrays, say): DataHub's source would not read it
        # either; simple paths name every field all the same
        paths = list(_simple_paths(schema, hive=False))
    by_flat = dict(flat)
    out, seen = [], set()
    for path in paths:
        if path not in seen:  # DataHub refuses a schema naming one path twice
            seen.add(path)
            out.append((path, by_flat.get(get_simple_field_path_from_v2_field_path(path))))
    return out


def partition_paths(pairs: Sequence[tuple[str, Field | None]], keys: Sequence[str]) -> set[str]:
    """The field paths of the top-level fields named in `keys` (a table's partition columns)."""
    return {p for p, _ in pairs if "." not in get_simple_field_path_from_v2_field_path(p) and _leaf(p) in keys}


def _leaf(path: str) -> str:
    return get_simple_field_path_from_v2_field_path(path)


# ---------------------------------------------------------------- simple


def _simple_paths(schema: Schema, hive: bool) -> Iterator[str]:
    nested: dict[str, list[str]] = {}  # top-level name → its flat descendants
    for path, _ in schema.flatten():
        top = path.split(".", 1)[0]
        if path != top:
            nested.setdefault(top, []).append(path)
    for f in schema.fields:
        if hive and isinstance(f.type, (Struct, Array)):
            yield from _hive_paths(f)
            continue
        yield f.name
        yield from nested.get(f.name, ())


# ---------------------------------------------------------------- Hive (Delta)


def _hive_paths(f: Field) -> list[str]:
    hive_type = delta_type_to_hive_type(_delta_type(f.type))
    with warnings.catch_warnings():  # DataHub's converter writes timestamps as Avro ints, which Avro warns of
        warnings.simplefilter("ignore", avro.errors.IgnoredLogicalType)
        return [sf.fieldPath for sf in get_schema_fields_for_hive_column(f.name, hive_type)]


def _delta_type(t: DataType):
    """The type as Delta's log writes it (what DataHub's delta-lake source converts)."""
    if isinstance(t, Struct):
        return {"type": "struct", "fields": [{"name": f.name, "type": _delta_type(f.type), "nullable": f.nullable,
                                              "metadata": {}} for f in t.fields]}  # fmt: skip
    if isinstance(t, Array):
        return {"type": "array", "elementType": _delta_type(t.element), "containsNull": t.element_nullable}
    if isinstance(t, Map):
        return {"type": "map", "keyType": _delta_type(t.key), "valueType": _delta_type(t.value),
                "valueContainsNull": t.value_nullable}  # fmt: skip
    if isinstance(t, Decimal):
        return f"decimal({t.precision},{t.scale})"
    if isinstance(t, Timestamp):
        return "timestamp" if t.tz else "timestamp_ntz"
    if isinstance(t, Primitive):
        return _DELTA.get(t.kind, "string")
    if isinstance(t, Fixed):
        return "binary"
    return "string"  # enum, time, union: Delta has none


# ---------------------------------------------------------------- Avro


def _avro_fields(record: dict) -> list[SchemaFieldClass]:
    parsed = avro.schema.parse(json.dumps(record), validate_names=False)
    return avro_schema_to_mce_fields(parsed, swallow_exceptions=False)


class _Names:
    """Avro defines a named type once; later uses name it."""

    def __init__(self, iceberg: bool):
        self.iceberg = iceberg
        self.defined: set[str] = set()
        self.anonymous = 0

    def fresh(self, prefix: str) -> str:
        self.anonymous += 1
        return f"{prefix}{self.anonymous}"

    def named(self, name: str | None, prefix: str, make) -> dict | str:
        if name is None or self.iceberg:
            return make(self.fresh(prefix))
        if name in self.defined:
            return name
        self.defined.add(name)
        return make(name)


def _avro_record(schema: Schema, iceberg: bool) -> dict:
    names = _Names(iceberg)
    top = names.named(schema.name, "__struct_", lambda n: {"type": "record", "name": n, "fields": []})
    assert isinstance(top, dict)
    top["fields"] = [_avro_field(f, names) for f in schema.fields]
    return top


def _avro_field(f: Field, names: _Names) -> dict:
    inner = _avro_type(f.type, names, f.native_type)
    if names.iceberg:
        return {"name": f.name, "type": _nullable(inner, f.nullable)}
    if not f.nullable or inner == "null":
        return {"name": f.name, "type": inner}
    branches = inner if isinstance(inner, list) else [inner]  # a union holds no union: one level
    return {"name": f.name, "type": branches if "null" in branches else ["null", *branches]}


def _nullable(t, nullable: bool):
    """Iceberg's way: nullability as a `_nullable` attribute of the type, not a union (Iceberg has none)."""
    if isinstance(t, list):
        return t
    return {**(t if isinstance(t, dict) else {"type": t}), "_nullable": nullable}


def _avro_type(t: DataType, names: _Names, native: str | None = None):
    if isinstance(t, Struct):
        return names.named(t.name, "__struct_", lambda n: {"type": "record", "name": n, "fields": [
            _avro_field(f, names) for f in t.fields]})  # fmt: skip
    if isinstance(t, Array):
        item = _avro_type(t.element, names)
        if names.iceberg:
            return {"type": "array", "items": _nullable(item, t.element_nullable)}
        return {"type": "array", "items": item}
    if isinstance(t, Map):
        value = _avro_type(t.value, names)
        if names.iceberg:
            entry = {"type": "record", "name": names.fresh("__map_entry_"), "fields": [
                {"name": "key", "type": _nullable(_avro_type(t.key, names), False)},
                {"name": "value", "type": _nullable(value, t.value_nullable)}]}  # fmt: skip
            return {"type": "array", "items": entry}
        return {"type": "map", "values": value}
    if isinstance(t, UnionType):
        return [_avro_type(b, names) for b in t.branches]
    if isinstance(t, Enum):
        return names.named(t.name, "__enum_", lambda n: {"type": "enum", "name": n, "symbols": list(t.symbols)})
    if isinstance(t, Fixed):
        return names.named(t.name, "__fixed_", lambda n: {"type": "fixed", "name": n, "size": t.size})
    if isinstance(t, Decimal):
        logical = {"logicalType": "decimal", "precision": t.precision, "scale": t.scale}
        if names.iceberg or (native or "").startswith("fixed"):
            size = max(1, (t.precision * 3322 // 1000 + 8) // 8)  # bytes that hold `precision` digits
            return {"type": "fixed", "name": names.fresh("__decimal_"), "size": size, **logical}
        return {"type": "bytes", **logical}
    if isinstance(t, Timestamp):
        return {"type": "long", "logicalType": "timestamp-millis" if t.unit in ("s", "ms") else "timestamp-micros"}
    if isinstance(t, Time):
        return {"type": "long", "logicalType": "time-micros"}
    if t.kind == "date":
        return {"type": "int", "logicalType": "date"}
    return _AVRO_INT.get(t.kind, "string")  # uuid, json, variant, interval, unknown: text
