"""JSON Schema documents as Lumos schemas: what a schema registry's JSON-Schema subjects hold.

An object's `properties` are its fields, `required` ones not nullable; `$ref`s to `#/definitions`
or `#/$defs` are followed (a recursive one becomes `unknown`); `oneOf`/`anyOf` and type lists are
unions, a `null` branch making the field nullable. JSON has one kind of number: integers are int64
and numbers float64 unless Kafka Connect's `connect.type` says the width (`int32`, `float32`…),
as its JSON converter writes it. String formats give dates, times, timestamps and UUIDs.
"""

from __future__ import annotations

from typing import Any

from lumos_dagster.floor.datatypes import (
    NO_DEFAULT,
    Array,
    DataType,
    Enum,
    Field,
    FieldBudget,
    Map,
    Primitive,
    Schema,
    Struct,
    Time,
    Timestamp,
    UnionType,
)
from lumos_dagster.floor.storable import storable_json

_SIMPLE = {"integer": "int64", "number": "float64", "boolean": "boolean", "null": "null"}
_FORMATS: dict[str, DataType] = {
    "date-time": Timestamp("us", "UTC"),
    "date": Primitive("date"),
    "time": Time("us"),
    "uuid": Primitive("uuid"),
    "duration": Primitive("interval"),
}
_CONNECT = {
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
    "float32": "float32", "float64": "float64", "bytes": "binary", "boolean": "boolean", "string": "string",
}  # fmt: skip
NULL = Primitive("null")


class _Converter:
    """Each `$ref` is expanded at each use, so the budget stops a schema that reuses one without limit."""

    def __init__(self, root: dict, budget: FieldBudget) -> None:
        self.root = root
        self.expanding: set[str] = set()
        self.budget = budget

    def _resolve(self, ref: str) -> Any:
        if not ref.startswith("#"):
            return None  # another document's: not fetched
        node: Any = self.root
        for part in ref.lstrip("#").strip("/").split("/"):
            if not part:
                continue
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return node

    def type_of(self, schema: Any) -> tuple[DataType, bool]:
        """The type a (sub)schema describes, and whether it admits null. Each type it builds is spent
        from the budget, a `$ref`'s target at each use."""
        if schema is True or schema == {} or not isinstance(schema, dict):
            self.budget.spend()
            return Primitive("json"), True  # anything at all
        if "$ref" in schema:
            ref = schema["$ref"]
            target = self._resolve(ref)
            if target is None or ref in self.expanding:
                self.budget.spend()
                return Primitive("unknown"), False
            self.expanding.add(ref)
            try:
                return self.type_of(target)
            finally:
                self.expanding.discard(ref)
        self.budget.spend()
        for combinator in ("oneOf", "anyOf"):
            if combinator in schema:
                return self._union([self.type_of(b) for b in schema[combinator]])
        if "allOf" in schema:  # the merged object of its parts
            merged: dict = {"type": "object", "properties": {}, "required": []}
            for part in schema["allOf"]:
                part = self._resolve(part["$ref"]) if "$ref" in part else part
                merged["properties"].update((part or {}).get("properties", {}))
                merged["required"] += (part or {}).get("required", [])
            return self.type_of(merged)
        if "enum" in schema and all(isinstance(s, str) for s in schema["enum"]):
            self.budget.spend(len(schema["enum"]))
            return Enum(tuple(schema["enum"]), schema.get("title")), False
        kind = schema.get("type")
        if kind is None:
            kind = "object" if "properties" in schema else ("array" if "items" in schema else None)
        if isinstance(kind, list):
            return self._union([self.type_of({**schema, "type": k}) for k in kind])
        if kind == "object":
            props = schema.get("properties")
            extra = schema.get("additionalProperties")
            if not props and isinstance(extra, dict):
                value, nullable = self.type_of(extra)
                return Map(Primitive("string"), value, nullable), False
            required = set(schema.get("required", ()))
            return Struct(tuple(self.field(n, s, n in required) for n, s in (props or {}).items())), False
        if kind == "array":
            items = schema.get("items", {})
            element, nullable = self.type_of(items if isinstance(items, dict) else {})
            return Array(element, nullable), False
        connect = schema.get("connect.type")
        if kind in ("integer", "number") and connect in _CONNECT:
            return Primitive(_CONNECT[connect]), False
        if kind == "string":
            if schema.get("contentEncoding") == "base64" or connect == "bytes":
                return Primitive("binary"), False
            fmt = schema.get("format")  # a broken schema's may be a list, which no dict lookup takes
            return _FORMATS.get(fmt if isinstance(fmt, str) else "", Primitive("string")), False
        if kind in _SIMPLE:
            return Primitive(_SIMPLE[kind]), kind == "null"
        return Primitive("unknown"), False

    def _union(self, branches: list[tuple[DataType, bool]]) -> tuple[DataType, bool]:
        nullable = any(n for _, n in branches)
        types = list(dict.fromkeys(t for t, _ in branches if t != NULL))
        if not types:
            return NULL, True
        return (types[0] if len(types) == 1 else UnionType(tuple(types))), nullable

    def field(self, name: str, schema: Any, required: bool) -> Field:
        dtype, nullable = self.type_of(schema)
        spec = schema if isinstance(schema, dict) else {}
        return Field(
            name=name,
            type=dtype,
            nullable=nullable or not required,
            default=spec.get("default", NO_DEFAULT),
            description=spec.get("description"),
            native_type=_native(spec),
        )


def _native(schema: dict) -> str | None:
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    kind = schema.get("type")
    if kind is None:
        return None
    text = "|".join(kind) if isinstance(kind, list) else str(kind)
    detail = schema.get("connect.type") or schema.get("format")
    return f"{text}({detail})" if detail else text


def from_json_schema(schema: dict | str) -> Schema:
    """Canonical schema of a JSON Schema document (parsed, or its text); SchemaTooLarge past
    MAX_FIELDS fields and nested types (`FieldBudget`)."""
    doc = storable_json(schema) if isinstance(schema, str) else schema
    dtype, _ = _Converter(doc, FieldBudget()).type_of(doc)
    if isinstance(dtype, Struct):
        return Schema(dtype.fields)
    return Schema((Field(name="value", type=dtype, nullable=False, native_type=_native(doc)),))
