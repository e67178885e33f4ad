"""The canonical data types of a schema (`Field`, `Schema` and the types a field can have), the rules
that read them (flattening, limits, typing an untyped field like before) and their JSON form, which a
schema's fingerprint hashes. Pure Python: no Dagster, no Spark, no DataHub."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator, Sequence, Union

from lumos_dagster.floor.limits import MAX_FIELD_NAME, MAX_FIELDS

PRIMITIVE_KINDS = frozenset(
    {
        "null",
        "boolean",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
        "string",
        "binary",
        "date",
        "uuid",
        "json",
        # semi-structured values that carry their own types (Delta's and Spark's `variant`); not JSON text
        "variant",
        "interval",
        # a type the source reported that Lumos has no mapping for; native_type says what
        "unknown",
    }
)
TIME_UNITS = ("s", "ms", "us", "ns")


class SchemaTooLarge(ValueError):
    """A schema that expands past its budget of fields and nested types (`FieldBudget`)."""

    def __init__(self, limit: int):
        super().__init__(
            f"expands to more than {limit:,} fields and nested types (each use of a named type counted), "
            "more than Lumos reads"
        )


class FieldBudget:
    """What is left of MAX_FIELDS (or `limit`) while a schema is converted: a converter spends one for
    each type it builds and one for each enum symbol, and stops at once when none is left."""

    __slots__ = ("limit", "left")

    def __init__(self, limit: int = MAX_FIELDS):
        self.limit = self.left = limit

    def spend(self, count: int = 1) -> None:
        self.left -= count
        if self.left < 0:
            raise SchemaTooLarge(self.limit)


class _NoDefault:
    """Marks a field without a default (distinct from a default of null)."""

    _instance: _NoDefault | None = None

    def __new__(cls) -> _NoDefault:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_DEFAULT"

    def __reduce__(self) -> tuple[type[_NoDefault], tuple[()]]:
        return (_NoDefault, ())


NO_DEFAULT: Any = _NoDefault()


@dataclass(frozen=True, slots=True)
class Primitive:
    kind: str

    def __post_init__(self) -> None:
        if self.kind not in PRIMITIVE_KINDS:
            raise ValueError(f"unknown primitive type {self.kind!r}")


@dataclass(frozen=True, slots=True)
class Decimal:
    precision: int
    scale: int


@dataclass(frozen=True, slots=True)
class Timestamp:
    """`tz` None is a timestamp without time zone (local/naive); else the zone, e.g. UTC."""

    unit: str = "us"
    tz: str | None = None


@dataclass(frozen=True, slots=True)
class Time:
    unit: str = "us"


@dataclass(frozen=True, slots=True)
class Fixed:
    size: int
    name: str | None = None  # Avro's full name; formats without names give none
    aliases: tuple[str, ...] = ()  # Avro's, full names: the names a reader of this type also reads


@dataclass(frozen=True, slots=True)
class Enum:
    symbols: tuple[str, ...]
    name: str | None = None
    default: str | None = None  # Avro: what a reader makes of a symbol it does not know
    aliases: tuple[str, ...] = ()  # Avro's, full names


@dataclass(frozen=True, slots=True)
class Struct:
    fields: tuple["Field", ...]
    name: str | None = None  # an Avro record's full name; formats without names give none
    aliases: tuple[str, ...] = ()  # Avro's, full names


@dataclass(frozen=True, slots=True)
class Array:
    element: "DataType"
    element_nullable: bool = True


@dataclass(frozen=True, slots=True)
class Map:
    key: "DataType"
    value: "DataType"
    value_nullable: bool = True


@dataclass(frozen=True, slots=True)
class UnionType:
    """A union beyond the plain nullable case (that one is `Field.nullable`)."""

    branches: tuple["DataType", ...]


DataType = Union[Primitive, Decimal, Timestamp, Time, Fixed, Enum, Struct, Array, Map, UnionType]
TYPE_CLASSES = (Primitive, Decimal, Timestamp, Time, Fixed, Enum, Struct, Array, Map, UnionType)


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    type: DataType
    nullable: bool = True
    # any JSON value; NO_DEFAULT when the source declares none (Avro tells the two apart)
    default: Any = field(default=NO_DEFAULT, hash=False)
    description: str | None = None
    native_type: str | None = None
    field_id: int | None = None
    aliases: tuple[str, ...] = ()
    is_key: bool = False  # part of the primary key
    terms: tuple[str, ...] = ()  # glossary terms

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT


@dataclass(frozen=True)
class Schema:
    fields: tuple[Field, ...] = ()
    name: str | None = None  # the top-level Avro record's full name; formats without names give none
    aliases: tuple[str, ...] = ()  # its Avro aliases, full names

    def fingerprint(self) -> str:
        """Stable hash of what readers depend on: names, types, nullability, defaults.

        Descriptions, glossary terms and native type spellings are left out: changing them is not a
        schema change for anyone reading the data. A schema without a name or aliases hashes its
        fields alone, as before names were kept; aliases are hashed only when there are some.
        """
        found = self.__dict__.get("_fingerprint")
        if found is None:  # asked many times of one schema along a run; a Schema never changes
            doc: Any = _without(schema_to_json(self), _NOT_STRUCTURE)
            if self.name is not None or self.aliases:
                doc = _named({"fields": doc}, self.name, self.aliases)
            payload = json.dumps(doc, sort_keys=True)
            found = hashlib.sha256(payload.encode()).hexdigest()[:16]
            object.__setattr__(self, "_fingerprint", found)
        return found

    def recorded_with(self, fingerprint: str) -> None:
        """Take `fingerprint` as this schema's: what the store recorded when it stored this schema's
        document, so that what is sent with it says the same hash, and hashing it again is spared."""
        object.__setattr__(self, "_fingerprint", fingerprint)

    def flatten(self) -> list[tuple[str, Field]]:
        """Every field, nested ones included, with its flat `a.b.c` path.

        Arrays and maps are looked through, so `items: array<struct<sku>>` gives
        `items` and `items.sku` (DataHub's simple-path convention).
        """
        return list(_flatten(self.fields, ""))

    def field(self, name: str) -> Field | None:
        return next((f for f in self.fields if f.name == name), None)


_NOT_STRUCTURE = frozenset({"description", "native_type", "terms"})


def _without(value: Any, keys: frozenset[str]) -> Any:
    # loops, not comprehensions: a comprehension is a frame of its own, and deep schemas recurse here
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k not in keys:
                out[k] = _without(v, keys)
        return out
    if isinstance(value, list):
        items = []
        for v in value:
            items.append(_without(v, keys))
        return items
    return value


def _flatten(fields: tuple[Field, ...], prefix: str) -> Iterator[tuple[str, Field]]:
    for f in fields:
        path = f"{prefix}{f.name}"
        yield path, f
        inner = _struct_inside(f.type)
        if inner is not None:
            yield from _flatten(inner.fields, path + ".")


def beyond_limits(schema: Schema) -> str | None:
    """Why `schema` is more than Lumos keeps (`limits`): a field name longer than MAX_FIELD_NAME, or
    more than MAX_FIELDS fields; None when it is within them. The name itself is never quoted."""
    for count, (_, f) in enumerate(_flatten(schema.fields, ""), start=1):
        if count > MAX_FIELDS:
            return f"its schema has more than {MAX_FIELDS:,} fields, more than Lumos keeps"
        if len(f.name) > MAX_FIELD_NAME:
            return (
                f"its field number {count} has a name of {len(f.name):,} characters, longer than the "
                f"{MAX_FIELD_NAME:,} Lumos keeps"
            )
    return None


def map_struct_fields(t: DataType, fn: Callable[[tuple[Field, ...]], tuple[Field, ...]]) -> DataType:
    """`t` with the fields of the struct it holds (directly, or through arrays and maps) replaced by `fn`'s."""
    if isinstance(t, Struct):
        return replace(t, fields=fn(t.fields))
    if isinstance(t, Array):
        return replace(t, element=map_struct_fields(t.element, fn))
    if isinstance(t, Map):
        return replace(t, value=map_struct_fields(t.value, fn))
    return t


#: the type of a column no value gave a type to (a header-only CSV's columns, a JSON key only ever
#: null): `unknown` with no native type, where a type a source reported but Lumos cannot map keeps its
#: native spelling. The merge types it as the partition's other files do, and a snapshot as its
#: dataset's previous one did (`typed_like`): a file with no rows is no schema change.
UNTYPED = Primitive("unknown")


def untyped(f: Field) -> bool:
    return f.type == UNTYPED and f.native_type is None


def typed_like(current: tuple[Field, ...], previous: Sequence[Field]) -> tuple[Field, ...]:
    """`current` with each untyped field (nested ones too) as the same field of `previous` is, when
    that one has a type: its type, nullability and native type. `current` itself when none is."""
    before = {f.name: f for f in previous}
    out, changed = [], False
    for f in current:
        old = before.get(f.name)
        if old is not None and untyped(f) and not untyped(old):
            f, changed = replace(f, type=old.type, nullable=old.nullable, native_type=old.native_type), True
        elif old is not None and (inner := _struct_inside(old.type)) is not None:
            typed = _typed_inside(f.type, inner)
            if typed is not f.type:
                f, changed = replace(f, type=typed), True
        out.append(f)
    return tuple(out) if changed else current


def _typed_inside(t: DataType, previous: Struct) -> DataType:
    """`t` with the fields of the struct it holds typed like `previous`'s (`t` itself when none changes)."""
    if isinstance(t, Struct):
        fields = typed_like(t.fields, previous.fields)
        return t if fields is t.fields else replace(t, fields=fields)
    if isinstance(t, Array):
        element = _typed_inside(t.element, previous)
        return t if element is t.element else replace(t, element=element)
    if isinstance(t, Map):
        value = _typed_inside(t.value, previous)
        return t if value is t.value else replace(t, value=value)
    return t


def _struct_inside(t: DataType) -> Struct | None:
    while isinstance(t, (Array, Map)):
        t = t.element if isinstance(t, Array) else t.value
    return t if isinstance(t, Struct) else None


def type_str(t: DataType) -> str:
    """Human-readable type, e.g. `map<string, array<decimal(10,2)>>`."""
    if isinstance(t, Primitive):
        return t.kind
    if isinstance(t, Decimal):
        return f"decimal({t.precision},{t.scale})"
    if isinstance(t, Timestamp):
        return f"timestamp({t.unit}, tz={t.tz})" if t.tz else f"timestamp({t.unit})"
    if isinstance(t, Time):
        return f"time({t.unit})"
    if isinstance(t, Fixed):
        return f"fixed({t.size})"
    if isinstance(t, Enum):
        return f"enum<{', '.join(t.symbols)}>"
    if isinstance(t, Struct):
        return "struct<" + ", ".join(f"{f.name}: {type_str(f.type)}" for f in t.fields) + ">"
    if isinstance(t, Array):
        return f"array<{type_str(t.element)}>"
    if isinstance(t, Map):
        return f"map<{type_str(t.key)}, {type_str(t.value)}>"
    if isinstance(t, UnionType):
        return "union<" + ", ".join(type_str(b) for b in t.branches) + ">"
    raise TypeError(f"not a canonical type: {t!r}")


# ------------------------------------------------------------ type JSON


def type_to_json(t: DataType) -> Any:
    if isinstance(t, Primitive):
        return t.kind
    if isinstance(t, Decimal):
        return {"kind": "decimal", "precision": t.precision, "scale": t.scale}
    if isinstance(t, Timestamp):
        return {"kind": "timestamp", "unit": t.unit, "tz": t.tz}
    if isinstance(t, Time):
        return {"kind": "time", "unit": t.unit}
    if isinstance(t, Fixed):
        return _named({"kind": "fixed", "size": t.size}, t.name, t.aliases)
    if isinstance(t, Enum):
        # an enum's name is always written, null included, as it was before the others had names
        out = _named({"kind": "enum", "symbols": list(t.symbols), "name": t.name}, None, t.aliases)
        return out if t.default is None else {**out, "default": t.default}
    if isinstance(t, Struct):
        return _named({"kind": "struct", "fields": [field_to_json(f) for f in t.fields]}, t.name, t.aliases)
    if isinstance(t, Array):
        return {"kind": "array", "element": type_to_json(t.element), "element_nullable": t.element_nullable}
    if isinstance(t, Map):
        return {
            "kind": "map",
            "key": type_to_json(t.key),
            "value": type_to_json(t.value),
            "value_nullable": t.value_nullable,
        }
    if isinstance(t, UnionType):
        return {"kind": "union", "branches": [type_to_json(b) for b in t.branches]}
    raise TypeError(f"not a canonical type: {t!r}")


def _named(out: dict, name: str | None, aliases: tuple[str, ...]) -> dict:
    # a name and aliases only when there are some: documents of name-less schemas stay as they were
    named = out if name is None else {**out, "name": name}
    return {**named, "aliases": list(aliases)} if aliases else named


_PRIMITIVES: dict[str, Primitive] = {}


def type_from_json(j: Any) -> DataType:
    if isinstance(j, str):
        # shared instances: equal types are then identical, which makes comparing schemas cheap
        return _PRIMITIVES.get(j) or _PRIMITIVES.setdefault(j, Primitive(j))
    kind = j["kind"]
    if kind == "decimal":
        return Decimal(j["precision"], j["scale"])
    if kind == "timestamp":
        return Timestamp(j["unit"], j["tz"])
    if kind == "time":
        return Time(j["unit"])
    if kind == "fixed":
        return Fixed(j["size"], j.get("name"), tuple(j.get("aliases", ())))
    if kind == "enum":
        return Enum(tuple(j["symbols"]), j["name"], j.get("default"), tuple(j.get("aliases", ())))
    if kind == "struct":
        return Struct(tuple(field_from_json(f) for f in j["fields"]), j.get("name"), tuple(j.get("aliases", ())))
    if kind == "array":
        return Array(type_from_json(j["element"]), j["element_nullable"])
    if kind == "map":
        return Map(type_from_json(j["key"]), type_from_json(j["value"]), j["value_nullable"])
    if kind == "union":
        return UnionType(tuple(type_from_json(b) for b in j["branches"]))
    raise ValueError(f"unknown type kind {kind!r}")


def field_to_json(f: Field) -> dict:
    out: dict[str, Any] = {"name": f.name, "type": type_to_json(f.type), "nullable": f.nullable}
    if f.has_default:
        out["default"] = f.default
    for key in ("description", "native_type", "field_id"):
        value = getattr(f, key)
        if value is not None:
            out[key] = value
    if f.aliases:
        out["aliases"] = list(f.aliases)
    if f.is_key:
        out["is_key"] = True
    if f.terms:
        out["terms"] = list(f.terms)
    return out


def field_from_json(j: dict) -> Field:
    return Field(
        name=j["name"],
        type=type_from_json(j["type"]),
        nullable=j["nullable"],
        default=j.get("default", NO_DEFAULT),
        description=j.get("description"),
        native_type=j.get("native_type"),
        field_id=j.get("field_id"),
        aliases=tuple(j.get("aliases", ())),
        is_key=j.get("is_key", False),
        terms=tuple(j.get("terms", ())),
    )


def schema_to_json(s: Schema) -> list[dict]:
    return [field_to_json(f) for f in s.fields]


def schema_from_json(j: list[dict], name: str | None = None, aliases: Sequence[str] = ()) -> Schema:
    """The fields of `schema_to_json`; `name` and `aliases` are kept beside them (a snapshot's
    `schema_name`, `schema_aliases`)."""
    return Schema(tuple(field_from_json(f) for f in j), name, tuple(aliases))
