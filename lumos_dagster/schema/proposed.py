"""A proposed schema, as a pull request or a data contract gives it, in the canonical model.

Four spellings: an Avro record schema, a JSON Schema object, Spark DDL
(`id BIGINT NOT NULL, tags ARRAY<STRING>, …`, as `StructType.toDDL()` prints it) and Lumos' own
JSON (a snapshot document, `{"fields": […]}` or a list of fields, as `lumos schema` prints them).
Everything wrong with the input is a `ProposalError` saying where; nothing here reads files.
"""

from __future__ import annotations

import json
import re
from typing import Any

from lumos_dagster.errors import LumosError
from lumos_dagster.model import (
    MAX_NESTING,
    NO_DEFAULT,
    Array,
    Decimal,
    Enum,
    Field,
    Map,
    Primitive,
    Schema,
    Struct,
    Timestamp,
    schema_from_json,
    snapshot_from_json,
)

FORMATS = ("avro", "json-schema", "spark-ddl", "lumos")


class ProposalError(LumosError):
    """A proposed schema that cannot be read."""


def parse_proposal(fmt: str, text: str | dict | list) -> Schema:
    """The canonical schema of `text` (a string, or already-parsed JSON) in `fmt` (one of FORMATS)."""
    if fmt not in FORMATS:
        raise ProposalError(f"unknown schema format {fmt!r}: one of {', '.join(FORMATS)}")
    try:
        if fmt == "spark-ddl":
            if not isinstance(text, str):
                raise ProposalError("spark-ddl: the schema must be a string of DDL")
            schema = _Ddl(text).parse()
        else:
            doc = json.loads(text) if isinstance(text, str) else text
            schema = {"avro": _avro, "json-schema": _json_schema, "lumos": _lumos}[fmt](doc)
    except ProposalError:
        raise
    except RecursionError:
        raise ProposalError(f"{fmt}: nested deeper than {MAX_NESTING} levels") from None
    except json.JSONDecodeError as exc:
        raise ProposalError(f"{fmt}: not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ProposalError(f"{fmt}: not a valid schema: {type(exc).__name__}: {exc}") from None
    if not schema.fields:
        raise ProposalError(f"{fmt}: the schema has no fields")
    _depth(schema.fields, 1)
    return schema


def _depth(fields: tuple[Field, ...], level: int) -> None:
    if level > MAX_NESTING:
        raise ProposalError(f"nested deeper than {MAX_NESTING} levels")
    for f in fields:
        t = f.type
        while isinstance(t, (Array, Map)):
            t = t.element if isinstance(t, Array) else t.value
            level += 1
        if isinstance(t, Struct):
            _depth(t.fields, level + 1)


# ------------------------------------------------------------------ Avro, Lumos


def _avro(doc: Any) -> Schema:
    from lumos_dagster.formats.avro import from_avro_schema

    if not isinstance(doc, dict) or doc.get("type") != "record":
        raise ProposalError('avro: expected a record schema ({"type": "record", "name": …, "fields": […]})')
    return from_avro_schema(doc)


def _lumos(doc: Any) -> Schema:
    if isinstance(doc, dict) and "format_version" in doc:
        return snapshot_from_json(doc).schema
    if isinstance(doc, dict) and "fields" in doc:
        doc = doc["fields"]
    if not isinstance(doc, list):
        raise ProposalError('lumos: expected a snapshot document, {"fields": […]} or a list of fields')
    return schema_from_json(doc)


# ------------------------------------------------------------------ JSON Schema

_JSON_FORMATS = {
    "date": Primitive("date"),
    "date-time": Timestamp("us", "UTC"),
    "uuid": Primitive("uuid"),
    "byte": Primitive("binary"),
    "binary": Primitive("binary"),
}
_JSON_PRIMITIVES = {"string": "string", "integer": "int64", "number": "float64", "boolean": "boolean"}


def _json_schema(doc: Any) -> Schema:
    if not isinstance(doc, dict) or not isinstance(doc.get("properties"), dict):
        raise ProposalError('json-schema: expected an object schema with "properties"')
    return Schema(_json_fields(doc, "", 1))


def _json_fields(doc: dict, where: str, level: int) -> tuple[Field, ...]:
    if level > MAX_NESTING:
        raise ProposalError(f"json-schema: nested deeper than {MAX_NESTING} levels")
    required = set(doc.get("required") or ())
    out = []
    for name, prop in doc["properties"].items():
        if not isinstance(prop, dict):
            raise ProposalError(f"json-schema: {where}{name}: a property must be a schema object")
        dtype, nullable = _json_type(prop, f"{where}{name}", level)
        out.append(
            Field(
                name,
                dtype,
                nullable=nullable or name not in required,
                default=prop.get("default", NO_DEFAULT),
                description=prop.get("description"),
                native_type=json.dumps(prop.get("type")) if "type" in prop else None,
            )
        )
    return tuple(out)


def _json_type(prop: dict, where: str, level: int):
    """(canonical type, nullable) of one JSON Schema property."""
    kinds = prop.get("type")
    kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
    nullable = "null" in kinds
    kinds = [k for k in kinds if k != "null"]
    if "enum" in prop and all(isinstance(v, str) for v in prop["enum"] if v is not None):
        return Enum(tuple(v for v in prop["enum"] if v is not None)), nullable or None in prop["enum"]
    if not kinds:
        raise ProposalError(f"json-schema: {where}: no type (anyOf/oneOf/$ref are not supported)")
    if len(kinds) > 1:
        raise ProposalError(f"json-schema: {where}: several types {kinds}: one type (and null) per field")
    kind = kinds[0]
    if kind == "string" and prop.get("format") in _JSON_FORMATS:
        return _JSON_FORMATS[prop["format"]], nullable
    if kind in _JSON_PRIMITIVES:
        return Primitive(_JSON_PRIMITIVES[kind]), nullable
    if kind == "array":
        items = prop.get("items")
        if not isinstance(items, dict):
            raise ProposalError(f"json-schema: {where}: an array needs one `items` schema")
        element, element_nullable = _json_type(items, f"{where}[]", level + 1)
        return Array(element, element_nullable), nullable
    if kind == "object":
        if isinstance(prop.get("properties"), dict):
            return Struct(_json_fields(prop, f"{where}.", level + 1)), nullable
        values = prop.get("additionalProperties")
        if isinstance(values, dict):
            value, value_nullable = _json_type(values, f"{where}{{}}", level + 1)
            return Map(Primitive("string"), value, value_nullable), nullable
        return Primitive("json"), nullable
    raise ProposalError(f"json-schema: {where}: unknown type {kind!r}")


# ------------------------------------------------------------------ Spark DDL

_TOKEN = re.compile(r"\s*(?:(`(?:[^`]|``)*`)|('(?:[^'\\]|\\.)*')|(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(.))", re.S)
_SPARK_PRIMITIVES = {
    "boolean": Primitive("boolean"),
    "tinyint": Primitive("int8"),
    "byte": Primitive("int8"),
    "smallint": Primitive("int16"),
    "short": Primitive("int16"),
    "int": Primitive("int32"),
    "integer": Primitive("int32"),
    "bigint": Primitive("int64"),
    "long": Primitive("int64"),
    "float": Primitive("float32"),
    "real": Primitive("float32"),
    "double": Primitive("float64"),
    "string": Primitive("string"),
    "binary": Primitive("binary"),
    "date": Primitive("date"),
    "timestamp": Timestamp("us", "UTC"),  # an instant, shown in the session's zone
    "timestamp_ltz": Timestamp("us", "UTC"),
    "timestamp_ntz": Timestamp("us", None),
    "void": Primitive("null"),
    "variant": Primitive("json"),
}


class _Ddl:
    """A recursive descent over `name TYPE [NOT NULL] [COMMENT '…'], …`."""

    def __init__(self, text: str):
        self.tokens: list[str] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                break
            if m.group(0).strip():
                self.tokens.append(m.group(0).strip())
            pos = m.end()
        self.at = 0
        self.depth = 0

    def _peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def _next(self, what: str) -> str:
        tok = self._peek()
        if tok is None:
            raise ProposalError(f"spark-ddl: unexpected end, expected {what}")
        self.at += 1
        return tok

    def _expect(self, token: str) -> None:
        got = self._next(repr(token))
        if got.lower() != token.lower():
            raise ProposalError(f"spark-ddl: expected {token!r} at token {self.at}, found {got!r}")

    def _name(self) -> str:
        tok = self._next("a field name")
        if tok.startswith("`"):
            return tok[1:-1].replace("``", "`")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", tok):
            raise ProposalError(f"spark-ddl: expected a field name at token {self.at}, found {tok!r}")
        return tok

    def parse(self) -> Schema:
        fields = self._fields(end=None)
        if self._peek() is not None:
            raise ProposalError(f"spark-ddl: unexpected {self._peek()!r} at token {self.at + 1}")
        return Schema(fields)

    def _fields(self, end: str | None) -> tuple[Field, ...]:
        fields = []
        while True:
            name = self._name()
            if end is not None and self._peek() == ":":  # STRUCT<a: INT>
                self.at += 1
            native_start = self.at
            dtype = self._type()
            native = " ".join(self.tokens[native_start : self.at])
            nullable, description = True, None
            while (word := self._peek()) is not None and word.lower() in ("not", "comment"):
                if self._next("NOT or COMMENT").lower() == "not":
                    self._expect("null")
                    nullable = False
                else:
                    text = self._next("a quoted comment")
                    if not text.startswith("'"):
                        raise ProposalError(f"spark-ddl: COMMENT needs a quoted string, found {text!r}")
                    description = re.sub(r"\\(.)", r"\1", text[1:-1])
            fields.append(Field(name, dtype, nullable=nullable, description=description, native_type=native))
            if self._peek() != ",":
                break
            self.at += 1
        if end is not None:
            self._expect(end)
        names = [f.name for f in fields]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ProposalError(f"spark-ddl: repeated field name(s): {', '.join(dupes)}")
        return tuple(fields)

    def _type(self):
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise ProposalError(f"spark-ddl: nested deeper than {MAX_NESTING} levels")
        try:
            word = self._next("a type").lower()
            if word in ("decimal", "dec", "numeric"):
                precision, scale = 10, 0
                if self._peek() == "(":
                    self.at += 1
                    precision = int(self._next("a precision"))
                    if self._peek() == ",":
                        self.at += 1
                        scale = int(self._next("a scale"))
                    self._expect(")")
                return Decimal(precision, scale)
            if word in ("varchar", "char"):
                self._expect("(")
                int(self._next("a length"))
                self._expect(")")
                return Primitive("string")
            if word == "array":
                self._expect("<")
                element = self._type()
                self._expect(">")
                return Array(element, True)
            if word == "map":
                self._expect("<")
                key = self._type()
                self._expect(",")
                value = self._type()
                self._expect(">")
                return Map(key, value, True)
            if word == "struct":
                self._expect("<")
                if self._peek() == ">":
                    raise ProposalError("spark-ddl: an empty STRUCT<>")
                return Struct(self._fields(end=">"))
            if word in _SPARK_PRIMITIVES:
                return _SPARK_PRIMITIVES[word]
            raise ProposalError(f"spark-ddl: unknown type {word!r} at token {self.at}")
        except ValueError as exc:
            raise ProposalError(f"spark-ddl: {exc}") from None
        finally:
            self.depth -= 1
