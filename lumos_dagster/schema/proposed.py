"""A proposed schema, as a pull request or a data contract gives it, in the canonical model.

Four spellings: an Avro record schema, a JSON Schema object, Spark DDL
(`id BIGINT NOT NULL, tags ARRAY<STRING>, …`, as `StructType.toDDL()` prints it) and Lumos' own
JSON (a snapshot document, `{"fields": […]}` or a list of fields, as `lumos schema` prints them).
Everything wrong with the input is a `ProposalError` saying where; nothing here reads files.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

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
    SchemaTooLarge,
    Struct,
    Timestamp,
    UnionType,
    schema_from_json,
)
from lumos_dagster.floor.errors import LumosError
from lumos_dagster.floor.limits import MAX_FIELDS, MAX_NESTING
from lumos_dagster.floor.snapshot_json import snapshot_from_json
from lumos_dagster.floor.storable import unstorable, unstorable_strings

FORMATS = ("avro", "json-schema", "spark-ddl", "lumos")


class ProposalError(LumosError):
    """A proposed schema that cannot be read."""


class ProposalTooLarge(ProposalError):
    """A proposed schema past its budget of fields (`max_fields`)."""


def parse_proposal(fmt: str, text: str | dict | list, max_fields: int = MAX_FIELDS) -> Schema:
    """The canonical schema of `text` (a string, or already-parsed JSON) in `fmt` (one of FORMATS), of
    at most `max_fields` fields and nested types (`FieldBudget`: a flat schema counts its fields)."""
    if fmt not in FORMATS:
        raise ProposalError(f"unknown schema format {fmt!r}: one of {', '.join(FORMATS)}")
    try:
        if fmt == "spark-ddl":
            if not isinstance(text, str):
                raise ProposalError("spark-ddl: the schema must be a string of DDL")
            if what := unstorable(text):
                raise ProposalError(f"spark-ddl: the schema text holds {what}, which Lumos cannot keep")
            schema = _Ddl(text, FieldBudget(max_fields)).parse()
        else:
            doc = json.loads(text) if isinstance(text, str) else text
            if problem := next(unstorable_strings(doc), None):
                raise ProposalError(f"{fmt}: {problem}, which Lumos cannot keep")
            if fmt == "avro":
                schema = _avro(doc, max_fields)
            elif fmt == "json-schema":
                schema = _json_schema(doc, FieldBudget(max_fields))
            else:  # counted below: Lumos JSON spells out each field, so a large one is a large request
                schema = _lumos(doc)
        _check_tree(fmt, schema.fields, FieldBudget(max_fields))
    except ProposalError:
        raise
    except SchemaTooLarge as exc:
        raise ProposalTooLarge(f"{fmt}: the proposed schema {exc}") from None
    except RecursionError:
        raise ProposalError(f"{fmt}: nested deeper than {MAX_NESTING} levels") from None
    except json.JSONDecodeError as exc:
        raise ProposalError(f"{fmt}: not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ProposalError(f"{fmt}: not a valid schema: {type(exc).__name__}: {exc}") from None
    if not schema.fields:
        raise ProposalError(f"{fmt}: the schema has no fields")
    return schema


def _check_tree(fmt: str, fields: tuple[Field, ...], budget: FieldBudget) -> None:
    """What every format's schema must be: each struct's field names once, names of named types strings,
    at most MAX_NESTING levels deep, within `budget` (a node each type, a node each enum symbol).
    Iterative, as it bounds depth."""
    stack: list[tuple[str, tuple[Field, ...] | DataType, int]] = [("fields", fields, 0)]
    while stack:
        where, node, depth = stack.pop()
        if depth > MAX_NESTING:
            raise ProposalError(f"{fmt}: nested deeper than {MAX_NESTING} levels")
        inner: tuple[DataType, ...] = ()
        if isinstance(node, tuple):  # a struct's fields
            repeated = [name for name, times in Counter(f.name for f in node).items() if times > 1]
            if repeated:
                raise ProposalError(f"{fmt}: {where}: the field name {repeated[0]!r} is repeated")
            top = depth == 0
            stack.extend((f.name if top else f"{where}.{f.name}", f.type, depth + 1) for f in node)
            continue
        budget.spend(1 + len(node.symbols) if isinstance(node, Enum) else 1)
        if isinstance(node, (Struct, Enum, Fixed)) and not isinstance(node.name, (str, type(None))):
            raise ProposalError(f"{fmt}: {where}: a type's name must be a string")  # Lumos JSON spells it
        if isinstance(node, (Struct, Enum, Fixed)) and not all(isinstance(a, str) for a in node.aliases):
            raise ProposalError(f"{fmt}: {where}: a type's aliases must be strings")
        if isinstance(node, Struct):
            stack.append((where, node.fields, depth))
        elif isinstance(node, Array):
            inner = (node.element,)
        elif isinstance(node, Map):
            inner = (node.key, node.value)
        elif isinstance(node, UnionType):
            inner = node.branches
        stack.extend((where, t, depth + 1) for t in inner)


# ------------------------------------------------------------------ Avro, Lumos


def _avro(doc: Any, max_fields: int) -> Schema:
    import fastavro.schema

    from lumos_dagster.formats.avro import from_avro_schema

    if not isinstance(doc, dict) or doc.get("type") != "record":
        raise ProposalError('avro: expected a record schema ({"type": "record", "name": …, "fields": […]})')
    try:  # Avro's own rules: known type names, defaults of their type, names defined once…
        fastavro.schema.parse_schema(doc)
    except fastavro.schema.UnknownType as exc:
        raise ProposalError(f"avro: not a valid Avro schema: unknown type {exc.name!r}") from None
    except fastavro.schema.SchemaParseException as exc:
        raise ProposalError(f"avro: not a valid Avro schema: {' '.join(str(exc).split())[:300]}") from None
    return from_avro_schema(doc, max_fields)


def _lumos(doc: Any) -> Schema:
    if isinstance(doc, dict) and "format_version" in doc:
        return snapshot_from_json(doc).schema
    name, aliases = None, []
    if isinstance(doc, dict) and "fields" in doc:
        # as `lumos schema` prints it, with an Avro record's name and aliases
        doc, name, aliases = doc["fields"], doc.get("name"), doc.get("aliases", [])
    if not isinstance(doc, list):
        raise ProposalError('lumos: expected a snapshot document, {"fields": […]} or a list of fields')
    if name is not None and not isinstance(name, str):
        raise ProposalError("lumos: the schema's name must be a string")
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise ProposalError("lumos: the schema's aliases must be a list of strings")
    return schema_from_json(doc, name, aliases)


# ------------------------------------------------------------------ JSON Schema

_JSON_FORMATS = {
    "date": Primitive("date"),
    "date-time": Timestamp("us", "UTC"),
    "uuid": Primitive("uuid"),
    "byte": Primitive("binary"),
    "binary": Primitive("binary"),
}
_JSON_PRIMITIVES = {"string": "string", "integer": "int64", "number": "float64", "boolean": "boolean"}


def _json_schema(doc: Any, budget: FieldBudget) -> Schema:
    if not isinstance(doc, dict) or not isinstance(doc.get("properties"), dict):
        raise ProposalError('json-schema: expected an object schema with "properties"')
    return Schema(_json_fields(doc, "", 1, budget))


def _json_fields(doc: dict, where: str, level: int, budget: FieldBudget) -> tuple[Field, ...]:
    if level > MAX_NESTING:
        raise ProposalError(f"json-schema: nested deeper than {MAX_NESTING} levels")
    required = set(doc.get("required") or ())
    out = []
    for name, prop in doc["properties"].items():
        if not isinstance(prop, dict):
            raise ProposalError(f"json-schema: {where}{name}: a property must be a schema object")
        dtype, nullable = _json_type(prop, f"{where}{name}", level, budget)
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


def _json_type(prop: dict, where: str, level: int, budget: FieldBudget):
    """(canonical type, nullable) of one JSON Schema property."""
    budget.spend()
    kinds = prop.get("type")
    kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
    nullable = "null" in kinds
    kinds = [k for k in kinds if k != "null"]
    if "enum" in prop and all(isinstance(v, str) for v in prop["enum"] if v is not None):
        budget.spend(len(prop["enum"]))
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
        element, element_nullable = _json_type(items, f"{where}[]", level + 1, budget)
        return Array(element, element_nullable), nullable
    if kind == "object":
        if isinstance(prop.get("properties"), dict):
            return Struct(_json_fields(prop, f"{where}.", level + 1, budget)), nullable
        values = prop.get("additionalProperties")
        if isinstance(values, dict):
            value, value_nullable = _json_type(values, f"{where}{{}}", level + 1, budget)
            return Map(Primitive("string"), value, value_nullable), nullable
        return Primitive("json"), nullable
    raise ProposalError(f"json-schema: {where}: unknown type {kind!r}")


# ------------------------------------------------------------------ Spark DDL

_TOKEN = re.compile(r"\s*(?:(`(?:[^`]|``)*`)|('(?:[^'\\]|\\.)*')|(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(.))", re.S)
_SPARK_PRIMITIVES: dict[str, DataType] = {
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
    "variant": Primitive("variant"),
}


class _Ddl:
    """A recursive descent over `name TYPE [NOT NULL] [COMMENT '…'], …`, spending `budget` on each type."""

    def __init__(self, text: str, budget: FieldBudget):
        self.budget = budget
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
        return tuple(fields)  # a name given twice is refused with every format's (`_check_tree`)

    def _type(self) -> DataType:
        self.budget.spend()
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
        except SchemaTooLarge:
            raise  # the budget's own error, which parse_proposal tells from a bad schema
        except ValueError as exc:
            raise ProposalError(f"spark-ddl: {exc}") from None
        finally:
            self.depth -= 1
