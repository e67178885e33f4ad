"""Avro: the writer schema from the container header (fastavro), the row count from
block headers — blocks are skipped with seeks, never decoded. On remote storage the row
count is left out: each block header would cost a request. A block header or sync marker that is
wrong or missing (a file cut short, garbage appended) leaves the header's schema standing: the file
is read as damaged, as Avro readers read its header and fail on its data."""

from __future__ import annotations

from typing import Any, BinaryIO, cast

import fastavro
import pyarrow.fs as pafs
from fastavro.read import HEADER_SCHEMA, MAGIC

from lumos_dagster.floor.datatypes import (
    NO_DEFAULT,
    Array,
    DataType,
    Decimal,
    Enum,
    Field,
    FieldBudget,
    Fixed,
    Map,
    Primitive,
    Schema,
    Struct,
    Time,
    Timestamp,
    UnionType,
)
from lumos_dagster.floor.limits import MAX_FIELDS
from lumos_dagster.floor.storable import storable_json
from lumos_dagster.formats.base import FileSchema, open_random

_PRIMITIVES = {
    "null": "null",
    "boolean": "boolean",
    "int": "int32",
    "long": "int64",
    "float": "float32",
    "double": "float64",
    "bytes": "binary",
    "string": "string",
}
_TIMESTAMPS = {
    "timestamp-millis": ("ms", "UTC"),
    "timestamp-micros": ("us", "UTC"),
    "timestamp-nanos": ("ns", "UTC"),
    "local-timestamp-millis": ("ms", None),
    "local-timestamp-micros": ("us", None),
    "local-timestamp-nanos": ("ns", None),
}
_LOGICAL = {"decimal", "uuid", "date", "time-millis", "time-micros", "duration", *_TIMESTAMPS}


def _bare(schema: Any) -> Any:
    """A primitive written as an object, `{"type": "null"}` (as the Avro C library writes it), is that
    primitive: its other attributes (properties, a logical type Lumos does not know) leave its type alone."""
    if isinstance(schema, dict) and schema.get("type") in _PRIMITIVES and schema.get("logicalType") not in _LOGICAL:
        return schema["type"]
    return schema


class _Converter:
    """Walks an Avro schema, resolving named-type references; recursion becomes `unknown`. Each use
    of a named type expands it again, so the budget stops a schema that reuses one without limit."""

    def __init__(self, budget: FieldBudget) -> None:
        self.named: dict[str, Any] = {}
        self.expanding: set[str] = set()
        self.budget = budget

    def _full_name(self, schema: dict, namespace: str | None) -> str:
        name = schema["name"]
        ns = schema.get("namespace", namespace)
        return name if "." in name or not ns else f"{ns}.{name}"

    def type_of(self, schema: Any, namespace: str | None = None) -> tuple[DataType, bool]:
        """Canonical type of an Avro schema, and whether it admits null. Each type it builds is spent
        from the budget: a named type at each use, a nullable union of one type as that type."""
        schema = _bare(schema)
        if isinstance(schema, list):
            branches = [b for b in map(_bare, schema) if b != "null"]
            nullable = len(branches) < len(schema)
            self.budget.spend(max(0, len(schema) - 2))  # the branches beyond a null and one type
            if len(branches) == 1:
                return self.type_of(branches[0], namespace)[0], nullable
            if not branches and nullable:
                return Primitive("null"), True
            # the empty union holds no value, not even null: any reader reads what it wrote (nothing)
            return UnionType(tuple(self.type_of(b, namespace)[0] for b in branches)), nullable
        if isinstance(schema, str):
            if schema in _PRIMITIVES:
                self.budget.spend()
                return Primitive(_PRIMITIVES[schema]), schema == "null"
            full = schema if "." in schema or not namespace else f"{namespace}.{schema}"
            if full not in self.named:
                full = schema  # a name in no namespace
            target = self.named.get(full)
            if target is None or full in self.expanding:
                self.budget.spend()
                return Primitive("unknown"), False
            # a named type: its conversion spends; it is read in its own namespace, not the one naming it
            return self.type_of(target, full.rsplit(".", 1)[0] if "." in full else None)
        self.budget.spend()
        t = schema["type"]
        logical = schema.get("logicalType")
        if logical == "decimal":
            return Decimal(int(schema["precision"]), int(schema.get("scale", 0))), False
        if logical == "uuid":
            return Primitive("uuid"), False
        if logical == "date":
            return Primitive("date"), False
        if logical in ("time-millis", "time-micros"):
            return Time("ms" if logical == "time-millis" else "us"), False
        if logical in _TIMESTAMPS:
            unit, tz = _TIMESTAMPS[logical]
            return Timestamp(unit, tz), False
        if logical == "duration":
            return Primitive("interval"), False
        if t in ("record", "error", "enum", "fixed"):
            full = self._full_name(schema, namespace)
            self.named[full] = schema
            ns = full.rsplit(".", 1)[0] if "." in full else None
            # the spec: an alias without a dot is in the namespace of the name it is an alias for
            aliases = tuple(a if "." in a or not ns else f"{ns}.{a}" for a in schema.get("aliases", ()))
            if t == "enum":
                self.budget.spend(len(schema["symbols"]))
                return Enum(tuple(schema["symbols"]), full, schema.get("default"), aliases), False
            if t == "fixed":
                return Fixed(int(schema["size"]), full, aliases), False
            self.expanding.add(full)
            try:
                return Struct(tuple(self.field(f, ns) for f in schema["fields"]), full, aliases), False
            finally:
                self.expanding.discard(full)
        if t == "array":
            element, nullable = self.type_of(schema["items"], namespace)
            return Array(element, nullable), False
        if t == "map":
            value, nullable = self.type_of(schema["values"], namespace)
            return Map(Primitive("string"), value, nullable), False
        return self.type_of(t, namespace)  # {"type": "Name"} or {"type": {...}}: the schema it names

    def field(self, f: dict, namespace: str | None) -> Field:
        dtype, nullable = self.type_of(f["type"], namespace)
        return Field(
            name=f["name"],
            type=dtype,
            nullable=nullable,
            default=f.get("default", NO_DEFAULT),
            description=f.get("doc"),
            native_type=_native(f["type"]),
            field_id=f.get("field-id"),
            aliases=tuple(f.get("aliases", ())),
        )


def _native(schema: Any) -> str:
    schema = _bare(schema)
    if isinstance(schema, list):
        return "union[" + ",".join(_native(b) for b in schema) + "]"
    if isinstance(schema, str):
        return schema
    t = schema["type"]
    if "logicalType" in schema:
        return f"{_native(t)}({schema['logicalType']})"
    if t in ("record", "error", "enum", "fixed"):
        return f"{t} {schema['name']}"
    if t == "array":
        return f"array<{_native(schema['items'])}>"
    if t == "map":
        return f"map<{_native(schema['values'])}>"
    return _native(t)


def from_avro_schema(schema: Any, max_fields: int = MAX_FIELDS) -> Schema:
    """Canonical schema of an Avro schema (a parsed .avsc or a file's writer schema); SchemaTooLarge past
    `max_fields` fields and nested types (`FieldBudget`). A record's fields are the schema's, as Spark reads
    them (also of a record-or-null union: a null row has no column to mark), and its full name the
    schema's; any other schema (`"long"`, `["null", "string"]`) is one field named `value`, nullable when
    the schema admits null. Records, enums and fixed keep their full names and aliases (full names): Avro
    resolution matches them."""
    budget = FieldBudget(max_fields)
    budget.left += 1  # the top-level record is no field
    conv = _Converter(budget)
    dtype, nullable = conv.type_of(schema)
    if isinstance(dtype, Struct):
        return Schema(dtype.fields, dtype.name, dtype.aliases)
    return Schema((Field(name="value", type=dtype, nullable=nullable, native_type=_native(schema)),))


def _read_long(fh: BinaryIO) -> int | None:
    shift = result = 0
    while True:
        b = fh.read(1)
        if not b:
            return None
        byte = b[0]
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1)
        shift += 7


class _DamagedData(ValueError):
    """The data after a readable header is corrupt or cut short."""


def _count_records(fh: BinaryIO, sync: bytes) -> int:
    """Sum of block record counts, seeking over each block's data."""
    total = blocks = 0
    while True:
        start = fh.tell()
        count = _read_long(fh)
        if count is None:
            return total
        blocks += 1
        size = _read_long(fh)
        if size is None or count < 0 or size < 0:
            raise _DamagedData(f"block {blocks} at byte {start}: its header is cut short or corrupt")
        fh.seek(size, 1)
        if fh.read(16) != sync:
            raise _DamagedData(f"block {blocks} at byte {start}: no sync marker after it (corrupt or cut short)")
        total += count


def read_avro(path: str, fs: pafs.FileSystem | None = None) -> FileSchema:
    with open_random(path, fs) as fh:
        # The header is itself an Avro record; decoding it with fastavro's own header
        # schema keeps metadata values as bytes (fastavro.reader insists they are UTF-8,
        # which the spec does not promise: see avro/data/syncInMeta.avro).
        # HEADER_SCHEMA is a record, so what is read is a dict
        header = cast(dict[str, Any], fastavro.schemaless_reader(fh, HEADER_SCHEMA))
        if header["magic"] != MAGIC:
            raise ValueError(f"not an Avro object container file (magic {header['magic']!r})")
        schema = from_avro_schema(storable_json(header["meta"]["avro.schema"]))
        if fs is not None:
            return FileSchema(schema)
        try:
            return FileSchema(schema, _count_records(fh, header["sync"]))
        except _DamagedData as exc:  # Avro readers read the header, and its blocks up to there
            return FileSchema(schema, damaged=f"{exc}; the writer schema in its header is kept")


def read_avsc(path: str) -> Schema:
    """A schema file (.avsc): the schema itself, no data."""
    with open(path, "rb") as fh:
        return from_avro_schema(storable_json(fh.read()))
