"""Arrow types → canonical types. Parquet, ORC, CSV and JSON all arrive through Arrow."""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable

import pyarrow as pa
import pyarrow.types as pat

from lumos_dagster.floor.datatypes import (
    Array,
    DataType,
    Decimal,
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

_SIMPLE: list[tuple[Callable[[pa.DataType], bool], str]] = [
    (pat.is_null, "null"),
    (pat.is_boolean, "boolean"),
    (pat.is_int8, "int8"),
    (pat.is_int16, "int16"),
    (pat.is_int32, "int32"),
    (pat.is_int64, "int64"),
    (pat.is_uint8, "uint8"),
    (pat.is_uint16, "uint16"),
    (pat.is_uint32, "uint32"),
    (pat.is_uint64, "uint64"),
    (pat.is_float16, "float16"),
    (pat.is_float32, "float32"),
    (pat.is_float64, "float64"),
    (pat.is_date, "date"),
    (pat.is_duration, "interval"),
    (pat.is_interval, "interval"),
]


def _is_string(t: pa.DataType) -> bool:
    return pat.is_string(t) or pat.is_large_string(t) or getattr(pat, "is_string_view", lambda _: False)(t)


def _is_binary(t: pa.DataType) -> bool:
    return pat.is_binary(t) or pat.is_large_binary(t) or getattr(pat, "is_binary_view", lambda _: False)(t)


def _is_list(t: pa.DataType) -> bool:
    return (
        pat.is_list(t)
        or pat.is_large_list(t)
        or pat.is_fixed_size_list(t)
        or getattr(pat, "is_list_view", lambda _: False)(t)
        or getattr(pat, "is_large_list_view", lambda _: False)(t)
    )


NativeLookup = Callable[[str], "str | None"]


def from_arrow_type(t: pa.DataType, path: str = "", native: NativeLookup | None = None) -> DataType:
    if pat.is_dictionary(t):
        return from_arrow_type(t.value_type, path, native)
    if isinstance(t, pa.BaseExtensionType):  # Arrow's own (`arrow.uuid`, `arrow.json`) and Python-defined ones
        if t.extension_name == "arrow.uuid":
            return Primitive("uuid")
        if t.extension_name == "arrow.json":
            return Primitive("json")
        return from_arrow_type(t.storage_type, path, native)
    for test, kind in _SIMPLE:
        if test(t):
            return Primitive(kind)
    if _is_string(t):
        return Primitive("string")
    if _is_binary(t):
        return Primitive("binary")
    if pat.is_fixed_size_binary(t):
        return Fixed(t.byte_width)
    if pat.is_decimal(t):
        return Decimal(t.precision, t.scale)
    if pat.is_timestamp(t):
        return Timestamp(t.unit, t.tz)
    if pat.is_time(t):
        return Time(t.unit)
    if pat.is_struct(t):
        return Struct(tuple(from_arrow_field(t.field(i), path, native) for i in range(t.num_fields)))
    if pat.is_map(t):
        return Map(
            from_arrow_type(t.key_type, path, native),
            from_arrow_type(t.item_type, path, native),
            t.item_field.nullable,
        )
    if _is_list(t):
        return Array(from_arrow_type(t.value_type, path, native), t.value_field.nullable)
    if pat.is_union(t):
        return UnionType(tuple(from_arrow_type(t.field(i).type, path, native) for i in range(t.num_fields)))
    return Primitive("unknown")


def from_arrow_field(f: pa.Field, prefix: str = "", native: NativeLookup | None = None) -> Field:
    path = f"{prefix}{f.name}"
    meta = f.metadata or {}
    # Parquet's field id, or the one Delta column mapping gives a column: either proves a rename
    field_id = meta.get(b"PARQUET:field_id") or meta.get(b"delta.columnMapping.id")
    description = meta.get(b"description") or meta.get(b"comment")
    return Field(
        name=f.name,
        type=from_arrow_type(f.type, path + ".", native),
        nullable=f.nullable,
        description=description.decode() if description else None,
        native_type=(native(path) if native else None) or str(f.type),
        field_id=int(field_id) if field_id else None,
    )


def from_arrow_schema(schema: pa.Schema, native: NativeLookup | None = None) -> Schema:
    return Schema(tuple(from_arrow_field(f, "", native) for f in schema))


#: schemas converted lately, by their Arrow IPC bytes and the format's own spelling (`spelling`):
#: the files of a dataset mostly share one schema, and converting it was 40 % of a footer read
_CONVERTED: OrderedDict[tuple[bytes, str], Schema] = OrderedDict()
CACHED_SCHEMAS = 1024


def converted_schema(
    schema: pa.Schema, spelling: str = "", natives: Callable[[], NativeLookup | None] = lambda: None
) -> Schema:
    """`from_arrow_schema(schema, natives())`, computed once per distinct schema. The key is
    the schema's IPC form, which holds every name, type, nullability and metadata at every level,
    with `spelling`, which must hold whatever else `natives()` depends on (Parquet's own schema)."""
    key = (schema.serialize().to_pybytes(), spelling)
    found = _CONVERTED.get(key)
    if found is not None:
        _CONVERTED.move_to_end(key)
        return found
    found = _CONVERTED[key] = from_arrow_schema(schema, natives())
    if len(_CONVERTED) > CACHED_SCHEMAS:
        _CONVERTED.popitem(last=False)
    return found
