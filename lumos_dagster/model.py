"""The canonical, portable metadata model.

Every source maps into these types and every catalog adapter maps out of them, so
metadata can leave any catalog. Pure Python: no Dagster, no Spark, no DataHub.

A `Snapshot` serializes to a JSON document (`SNAPSHOT_FORMAT`), described by
`snapshot.schema.json` next to this module; `from_json(to_json(x)) == x` exactly.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from fnmatch import fnmatchcase
from typing import Any, Callable, Iterator, Sequence, Union

from lumos_dagster.limits import MAX_FIELD_NAME, MAX_FIELDS

SNAPSHOT_FORMAT = "lumos.snapshot/1"

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


# ---------------------------------------------------------------- text that no store keeps

#: characters that no text column keeps: NUL (PostgreSQL refuses it), and a lone UTF-16 surrogate,
#: which JSON's `\ud800` escape gives Python (a valid pair is one character) and no UTF-8 encoder
#: takes: a database's, an HTTP response's, a terminal's
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
#: how they are spelt in JSON text, where they can only be escapes (a false match costs a check)
_ESCAPED = re.compile(r"\\u(?:0000|d[89a-f])", re.IGNORECASE)
NUL, SURROGATE = "a NUL character", "a lone UTF-16 surrogate"


def unstorable(text: str) -> str | None:
    """What `text` holds that no store keeps (NUL, SURROGATE), or None."""
    found = _UNSTORABLE.search(text)
    return None if found is None else NUL if found.group() == "\x00" else SURROGATE


def unstorable_strings(doc: Any) -> Iterator[str]:
    """`where: holds what` (or `where: a key holds what`) for each string of a parsed JSON document
    that `unstorable` finds, where being its path (`datasets[0].snapshot.description`, `$` the top).
    Iterative: a document may nest deeper than Python recurses."""
    try:  # most documents hold none: the JSON encoder (in C) says so many times faster than the walk
        text = json.dumps(doc, ensure_ascii=False, default=str)
        if "\\u0000" not in text and _UNSTORABLE.search(text) is None:  # the encoder escapes NUL
            return
    except (RecursionError, ValueError):  # too deep for the encoder, or a circular reference
        pass
    stack: list[tuple[Any, str]] = [(doc, "")]
    while stack:
        node, where = stack.pop()
        if isinstance(node, str):
            if what := unstorable(node):
                yield f"{where or '$'}: holds {what}"
        elif isinstance(node, dict):
            inner = []
            for key, value in node.items():
                if what := unstorable(key):
                    yield f"{where or '$'}: a key holds {what}"
                else:
                    inner.append((value, f"{where}.{key}" if where else key))
            stack.extend(reversed(inner))  # in document order
        elif isinstance(node, list):
            stack.extend((value, f"{where}[{i}]") for i, value in reversed(list(enumerate(node))))


def _storable(doc: Any) -> Any:
    if isinstance(doc, str):
        return _UNSTORABLE.sub("\ufffd", doc)
    if isinstance(doc, dict):
        return {_storable(k): _storable(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_storable(v) for v in doc]
    return doc


def storable_json(text: str | bytes) -> Any:
    """The parsed JSON of a file's schema (UTF-8), with what `unstorable` finds replaced by U+FFFD: a file
    is read as it is, but a doc or name no store can keep must not make its dataset unreadable later."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    doc = json.loads(text)
    return _storable(doc) if _ESCAPED.search(text) else doc


class _NoDefault:
    """Marks a field without a default (distinct from a default of null)."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_DEFAULT"

    def __reduce__(self):
        return (_NoDefault, ())


NO_DEFAULT: Any = _NoDefault()


# ---------------------------------------------------------------- types


@dataclass(frozen=True, slots=True)
class Primitive:
    kind: str

    def __post_init__(self):
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


# ------------------------------------------------------------ dataset level

OWNER_KINDS = ("user", "group")
OWNERSHIP_TYPES = ("DATAOWNER", "TECHNICAL_OWNER", "BUSINESS_OWNER", "DATA_STEWARD", "NONE")


def dataset_urn(platform: str, name: str) -> str:
    """Lumos' own stable identity of a dataset: platform + name."""
    return f"urn:lumos:dataset:{platform}:{name}"


@dataclass(frozen=True)
class DatasetRef:
    platform: str
    name: str
    location: str
    format: str | None = None
    instance: str | None = None  # the platform instance its source names (DataHub's `platform_instance`)

    @property
    def urn(self) -> str:
        return dataset_urn(self.platform, self.name)


@dataclass(frozen=True)
class DatasetRecord:
    """A dataset in the registry: what discovery found, enough to rebuild its asset."""

    name: str
    platform: str
    source: str
    location: str
    format: str | None
    domain: str | None = None
    partition_keys: tuple[str, ...] = ()
    time_partition_key: str | None = None
    time_format: str | None = None
    file_count: int = 0
    total_bytes: int = 0
    upstream: tuple[str, ...] = ()  # lineage the source itself knows (a view's tables)
    first_partition: str | None = None  # the earliest time partition's date (ISO): where partitions start

    @property
    def urn(self) -> str:
        return dataset_urn(self.platform, self.name)

    def info(self) -> dict:
        keys = ("partition_keys", "time_partition_key", "time_format", "file_count", "total_bytes", "upstream",
                "first_partition")  # fmt: skip
        out = {k: v for k, v in asdict(self).items() if k in keys}
        out["partition_keys"] = list(self.partition_keys)
        out["upstream"] = list(self.upstream)
        return out


@dataclass(frozen=True)
class Owner:
    id: str
    kind: str = "user"
    type: str = "DATAOWNER"


@dataclass(frozen=True)
class ColumnMapping:
    """A column of the snapshot's dataset computed from a column of the edge's upstream."""

    downstream: str
    upstream: str


@dataclass(frozen=True)
class JobRef:
    """The code behind a lineage edge: a SQL file, a dbt model."""

    orchestrator: str  # sql | dbt
    flow: str  # the folder or dbt project it belongs to
    name: str  # the file path or the dbt unique_id


@dataclass(frozen=True)
class LineageEdge:
    """`upstream` feeds the snapshot's dataset, column by column when `columns` says how."""

    upstream: DatasetRef
    columns: tuple[ColumnMapping, ...] = ()
    job: JobRef | None = None


@dataclass(frozen=True)
class AssertionResult:
    """A data-quality check on the dataset, as a test tool (dbt, Great Expectations) reported it."""

    name: str
    status: str  # pass | fail | warn | error | skipped
    dimension: str  # completeness | uniqueness | validity | accuracy | consistency | freshness
    column: str | None = None
    source: str = ""
    message: str | None = None
    observed_at: str | None = None


@dataclass(frozen=True)
class Quality:
    score: float | None  # 0..1 (see lumos_dagster.governance.quality.quality_score)
    freshness: str  # fresh | stale | unknown (against the dataset's SLA)
    age_hours: float | None
    assertions: tuple[AssertionResult, ...] = ()


@dataclass(frozen=True)
class ColumnProfile:
    path: str
    null_fraction: float | None
    distinct: int | None  # an estimate (HyperLogLog)
    min: str | None = None
    max: str | None = None


@dataclass(frozen=True)
class PartialRead:
    """What a profile read of its partition when `profile.max_bytes` stopped it short: the files (in path
    order) that fit within the cap, of all the partition's readable files."""

    files_read: int
    files: int
    bytes_read: int
    bytes: int

    def __str__(self) -> str:
        return f"{self.files_read} of {self.files} files ({self.bytes_read:,} of {self.bytes:,} bytes)"


@dataclass(frozen=True)
class Profile:
    """Measured on a partition's data (Spark, or the database's own SQL), from a sample when
    `sample_fraction` < 1, from its first files only when `partial` says so: then `row_count` counts
    what was read, not the partition."""

    row_count: int
    sample_fraction: float
    columns: tuple[ColumnProfile, ...] = ()
    partial: PartialRead | None = None

    @property
    def whole(self) -> bool:
        """Whether `row_count` is the partition's: all of its rows were read."""
        return self.sample_fraction >= 1 and self.partial is None

    @property
    def completeness(self) -> float | None:
        known = [c.null_fraction for c in self.columns if c.null_fraction is not None]
        return 1 - sum(known) / len(known) if known else None


@dataclass
class OperationalStats:
    file_count: int = 0
    total_bytes: int = 0
    row_count: int | None = None
    last_modified: datetime | None = None
    partition_values: dict[str, list[str]] = field(default_factory=dict)
    # usage counters a database keeps (scans, rows inserted…), for staleness: "not modified and not queried"
    usage: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FileError:
    path: str
    reason: str


@dataclass(frozen=True)
class ConflictVariant:
    type: str
    files: tuple[str, ...]  # a sample, at most MAX_CONFLICT_FILES
    file_count: int


@dataclass(frozen=True)
class SchemaConflict:
    path: str
    variants: tuple[ConflictVariant, ...]
    resolution: str


BREAKING, NON_BREAKING, INFORMATIONAL = "BREAKING", "NON_BREAKING", "INFORMATIONAL"
#: a dataset's first version, and the compatibility policies its later ones are judged under
#: (lumos_dagster.schema.versioning applies them)
FIRST_VERSION = "1.0.0"
DEFAULT_POLICY = "FULL"
BASE_POLICIES = ("NONE", "BACKWARD", "FORWARD", "FULL")
POLICIES = BASE_POLICIES + tuple(f"{p}_TRANSITIVE" for p in BASE_POLICIES[1:])


class DirectCost:
    """What a dataset costs of itself a month: storage + compute (of every type with those fields)."""

    storage: float
    compute: float

    @property
    def direct(self) -> float:
        return self.storage + self.compute


class RolledUpCost(DirectCost):
    """…and in all, with what it inherits from its upstreams."""

    inherited: float

    @property
    def total(self) -> float:
        return self.direct + self.inherited


@dataclass(frozen=True)
class Cost(RolledUpCost):
    """Monthly cost of a dataset, as its snapshot records it."""

    period: str  # the month, YYYY-MM
    storage: float
    compute: float
    inherited: float
    method: str  # how upstream cost was attributed (lumos_dagster.cost.attribution.METHODS)
    basis: str = "list"  # list prices | bill (FOCUS export) | mixed
    currency: str = "USD"


@dataclass(frozen=True)
class SchemaChange:
    """One difference between two snapshots of a dataset.

    `backward`: a reader with the new schema can read data written with the old one.
    `forward`: a reader with the old schema can read data written with the new one.
    `severity` is what the dataset's compatibility policy makes of the two.
    """

    path: str  # flat field path (`a.b`, `tags[]`, `attrs{}`); '' for the dataset itself
    kind: str
    old: str | None
    new: str | None
    backward: bool
    forward: bool
    severity: str = NON_BREAKING
    against: str | None = None  # the earlier version compared with, when not the previous one


CHANGE_KEYS = ("path", "kind", "old", "new", "backward", "forward", "severity", "against")


def change_to_json(c: SchemaChange, keys: Sequence[str] = CHANGE_KEYS) -> dict:
    """A change as JSON (the snapshot document, reports, the CLI), with `keys` only when a view
    shows fewer."""
    return {k: getattr(c, k) for k in keys}


@dataclass(frozen=True)
class Commit:
    """One commit of a table format's history: a Delta version, an Iceberg snapshot."""

    version: str
    committed_at: datetime
    operation: str  # the format's own word: WRITE, MERGE, DELETE (Delta); append, overwrite (Iceberg)
    metrics: tuple[tuple[str, str], ...] = ()  # what the format records of it (rows added, files removed…)


@dataclass(frozen=True)
class TableVersion:
    """The commit of a table format (Iceberg, Delta) that a snapshot saw, and the table's layout then."""

    format: str  # iceberg | delta
    version: str  # the format's own: an Iceberg snapshot id, a Delta version number
    committed_at: datetime | None
    partition_spec: tuple[str, ...] = ()  # `region`, `day(ts)`: transform(column), identity bare
    sort_order: tuple[str, ...] = ()  # `ts DESC NULLS LAST`
    commits: tuple[Commit, ...] = ()  # the table's commits in the snapshot's window, oldest first


#: Lumos' checks, by name (lumos_dagster.governance.checks judges them)
READABLE_CHECK = "files_readable"
COMPATIBLE_CHECK = "schema_compatible"
COMPLETE_CHECK = "metadata_complete"
QUALITY_CHECK = "data_quality"


@dataclass(frozen=True)
class CheckResult:
    """One of Lumos' checks (files readable, schema compatible, metadata complete, data quality) as
    judged when the store kept the snapshot: what catalogs show as the check's result."""

    name: str
    passed: bool
    severity: str  # ERROR | WARN
    description: str
    affected: tuple[str, ...] = ()  # the datasets downstream of a breaking change (impact)


@dataclass(frozen=True)
class TableTotals:
    """The whole table's figures, for a snapshot of one of its partitions: its files and bytes as the
    run listed them, and where its partitions start."""

    file_count: int
    total_bytes: int
    first_partition: str | None = None  # the earliest partition's key (`2026-11-01`)


@dataclass
class Snapshot:
    """Everything Lumos knows about one dataset at one partition, captured at one time."""

    dataset: DatasetRef
    partition_key: str | None
    captured_at: datetime
    schema: Schema = field(default_factory=Schema)
    stats: OperationalStats = field(default_factory=OperationalStats)
    description: str | None = None
    domain: str | None = None
    owners: tuple[Owner, ...] = ()
    tags: tuple[str, ...] = ()
    upstream: tuple[LineageEdge, ...] = ()
    version: str | None = None
    errors: tuple[FileError, ...] = ()
    conflicts: tuple[SchemaConflict, ...] = ()
    # how `version` came to be: the changes from `previous_version`, judged under `policy`
    previous_version: str | None = None
    changes: tuple[SchemaChange, ...] = ()
    change_class: str | None = None  # new | major | minor | patch
    policy: str | None = None
    # a tombstone: the dataset vanished from its source and is soft-deleted in catalogs
    removed: bool = False
    cost: Cost | None = None
    # governance
    terms: tuple[str, ...] = ()  # glossary terms of the dataset
    sla: str | None = None  # how fresh it must be, e.g. "6h"
    quality: Quality | None = None
    profile: Profile | None = None
    table: TableVersion | None = None  # a table format's commit; None for plain files and databases
    checks: tuple[CheckResult, ...] = ()  # Lumos' checks, as judged when the store kept it
    totals: TableTotals | None = None  # the whole table's, for a partition of it; None: the partition is the table

    @property
    def fingerprint(self) -> str:
        return self.schema.fingerprint()

    @property
    def readable(self) -> bool:
        """At least one file gave a schema (a dataset can be partly unreadable)."""
        return bool(self.schema.fields)


#: dataset name → partition key → snapshot: what the steps of a snapshot run pass on
Snapshots = dict[str, dict["str | None", Snapshot]]


@dataclass(frozen=True)
class Acceptance:
    """A breaking change accepted for one version of a dataset (the API records them in the store)."""

    dataset: str
    version: str
    path: str  # field path or glob; "*" for any
    kind: str | None  # change kind, e.g. FIELD_REMOVED; None for any
    reason: str
    accepted_by: str
    accepted_at: datetime

    def matches(self, dataset: str, version: str | None, change: SchemaChange) -> bool:
        return (
            dataset == self.dataset
            and version == self.version
            and fnmatchcase(change.path, self.path)
            and self.kind in (None, change.kind)
        )


def _dt_to_json(d: datetime | None) -> str | None:
    return None if d is None else d.isoformat()


def _dt_from_json(s: str | None) -> datetime | None:
    return None if s is None else datetime.fromisoformat(s)


def _ref_to_json(r: DatasetRef) -> dict:
    out = {"urn": r.urn, "platform": r.platform, "name": r.name, "location": r.location, "format": r.format}
    if r.instance is not None:  # only when set: the documents of every other dataset stay as they were
        out["instance"] = r.instance
    return out


def _ref_from_json(j: dict) -> DatasetRef:
    return DatasetRef(j["platform"], j["name"], j["location"], j["format"], j.get("instance"))


def _edge_to_json(e: LineageEdge) -> dict:
    return {
        "upstream": _ref_to_json(e.upstream),
        "columns": [{"downstream": c.downstream, "upstream": c.upstream} for c in e.columns],
        "job": None if e.job is None else {"orchestrator": e.job.orchestrator, "flow": e.job.flow, "name": e.job.name},
    }


def _edge_from_json(j: dict) -> LineageEdge:
    job = j.get("job")
    return LineageEdge(
        _ref_from_json(j["upstream"]),
        tuple(ColumnMapping(c["downstream"], c["upstream"]) for c in j.get("columns", ())),
        None if job is None else JobRef(job["orchestrator"], job["flow"], job["name"]),
    )


def _quality_to_json(q: Quality | None) -> dict | None:
    if q is None:
        return None
    return {
        "score": q.score,
        "freshness": q.freshness,
        "age_hours": q.age_hours,
        "assertions": [
            {
                "name": a.name,
                "status": a.status,
                "dimension": a.dimension,
                "column": a.column,
                "source": a.source,
                "message": a.message,
                "observed_at": a.observed_at,
            }
            for a in q.assertions
        ],  # fmt: skip
    }


def _quality_from_json(j: dict | None) -> Quality | None:
    if j is None:
        return None
    return Quality(
        j["score"],
        j["freshness"],
        j["age_hours"],
        tuple(
            AssertionResult(
                a["name"], a["status"], a["dimension"], a["column"], a["source"], a["message"], a["observed_at"]
            )
            for a in j["assertions"]
        ),  # fmt: skip
    )


def _profile_to_json(p: Profile | None) -> dict | None:
    if p is None:
        return None
    out = {
        "row_count": p.row_count,
        "sample_fraction": p.sample_fraction,
        "columns": [
            {"path": c.path, "null_fraction": c.null_fraction, "distinct": c.distinct, "min": c.min, "max": c.max}
            for c in p.columns
        ],
    }
    if p.partial is not None:  # absent when the whole partition was read: earlier documents are unchanged
        out["partial"] = asdict(p.partial)
    return out


def _profile_from_json(j: dict | None) -> Profile | None:
    if j is None:
        return None
    columns = tuple(
        ColumnProfile(c["path"], c["null_fraction"], c["distinct"], c["min"], c["max"]) for c in j["columns"]
    )
    partial = PartialRead(**j["partial"]) if j.get("partial") else None
    return Profile(j["row_count"], j["sample_fraction"], columns, partial)


def _table_to_json(t: TableVersion | None) -> dict | None:
    if t is None:
        return None
    out: dict[str, Any] = {
        "format": t.format,
        "version": t.version,
        "committed_at": _dt_to_json(t.committed_at),
        "partition_spec": list(t.partition_spec),
        "sort_order": list(t.sort_order),
    }
    if t.commits:  # only when the window held commits: documents of other tables stay as they were
        out["commits"] = [{"version": c.version, "committed_at": _dt_to_json(c.committed_at),
                           "operation": c.operation, "metrics": dict(c.metrics)} for c in t.commits]  # fmt: skip
    return out


def _table_from_json(j: dict | None) -> TableVersion | None:
    if j is None:
        return None
    commits = tuple(
        Commit(c["version"], datetime.fromisoformat(c["committed_at"]), c["operation"], tuple(c["metrics"].items()))
        for c in j.get("commits", ())
    )
    return TableVersion(j["format"], j["version"], _dt_from_json(j["committed_at"]), tuple(j["partition_spec"]),
                        tuple(j["sort_order"]), commits)  # fmt: skip


def snapshot_to_json(s: Snapshot) -> dict:
    out = {
        "format_version": SNAPSHOT_FORMAT,
        "dataset": _ref_to_json(s.dataset),
        "partition_key": s.partition_key,
        "captured_at": _dt_to_json(s.captured_at),
        "version": s.version,
        "fingerprint": s.fingerprint,
        "schema": schema_to_json(s.schema),
        "stats": {
            "file_count": s.stats.file_count,
            "total_bytes": s.stats.total_bytes,
            "row_count": s.stats.row_count,
            "last_modified": _dt_to_json(s.stats.last_modified),
            "partition_values": s.stats.partition_values,
            "usage": s.stats.usage,
        },
        "description": s.description,
        "domain": s.domain,
        "owners": [{"id": o.id, "kind": o.kind, "type": o.type} for o in s.owners],
        "tags": list(s.tags),
        "upstream": [_edge_to_json(e) for e in s.upstream],
        "errors": [{"path": e.path, "reason": e.reason} for e in s.errors],
        "conflicts": [
            {
                "path": c.path,
                "resolution": c.resolution,
                "variants": [{"type": v.type, "files": list(v.files), "file_count": v.file_count} for v in c.variants],
            }
            for c in s.conflicts
        ],
        "changes": [change_to_json(c) for c in s.changes],
        "previous_version": s.previous_version,
        "change_class": s.change_class,
        "policy": s.policy,
        "removed": s.removed,
        "cost": None
        if s.cost is None
        else {
            "period": s.cost.period,
            "currency": s.cost.currency,
            "storage": s.cost.storage,
            "compute": s.cost.compute,
            "inherited": s.cost.inherited,
            "method": s.cost.method,
            "basis": s.cost.basis,
        },
        "terms": list(s.terms),
        "sla": s.sla,
        "quality": _quality_to_json(s.quality),
        "profile": _profile_to_json(s.profile),
    }
    if s.table is not None:  # left out otherwise: documents of files and databases stay as they were
        out["table"] = _table_to_json(s.table)
    if s.checks:  # likewise: only snapshots a run judged
        out["checks"] = [
            {"name": c.name, "passed": c.passed, "severity": c.severity, "description": c.description,
             **({"affected": list(c.affected)} if c.affected else {})}
            for c in s.checks
        ]  # fmt: skip
    if s.totals is not None:  # likewise: only partitions of a larger table
        out["totals"] = {"file_count": s.totals.file_count, "total_bytes": s.totals.total_bytes,
                         "first_partition": s.totals.first_partition}  # fmt: skip
    if s.schema.name is not None:  # likewise: only Avro schemas have one
        out["schema_name"] = s.schema.name
    if s.schema.aliases:
        out["schema_aliases"] = list(s.schema.aliases)
    return out


def snapshot_from_json(j: dict) -> Snapshot:
    if j.get("format_version") != SNAPSHOT_FORMAT:
        raise ValueError(
            f"unsupported snapshot format {j.get('format_version')!r}; this Lumos reads {SNAPSHOT_FORMAT!r}"
        )
    st = j["stats"]
    return Snapshot(
        dataset=_ref_from_json(j["dataset"]),
        partition_key=j["partition_key"],
        captured_at=datetime.fromisoformat(j["captured_at"]),  # a string, never null (snapshot.schema.json)
        version=j["version"],
        schema=schema_from_json(j["schema"], j.get("schema_name"), j.get("schema_aliases", ())),
        stats=OperationalStats(
            file_count=st["file_count"],
            total_bytes=st["total_bytes"],
            row_count=st["row_count"],
            last_modified=_dt_from_json(st["last_modified"]),
            partition_values={k: list(v) for k, v in st["partition_values"].items()},
            usage=dict(st["usage"]),
        ),
        description=j["description"],
        domain=j["domain"],
        owners=tuple(Owner(o["id"], o["kind"], o["type"]) for o in j["owners"]),
        tags=tuple(j["tags"]),
        upstream=tuple(_edge_from_json(e) for e in j["upstream"]),
        errors=tuple(FileError(e["path"], e["reason"]) for e in j["errors"]),
        conflicts=tuple(
            SchemaConflict(
                path=c["path"],
                resolution=c["resolution"],
                variants=tuple(ConflictVariant(v["type"], tuple(v["files"]), v["file_count"]) for v in c["variants"]),
            )
            for c in j["conflicts"]
        ),
        changes=tuple(SchemaChange(**{k: c[k] for k in CHANGE_KEYS}) for c in j["changes"]),
        previous_version=j["previous_version"],
        change_class=j["change_class"],
        policy=j["policy"],
        removed=j["removed"],
        cost=None
        if j["cost"] is None
        else Cost(
            period=j["cost"]["period"],
            storage=j["cost"]["storage"],
            compute=j["cost"]["compute"],
            inherited=j["cost"]["inherited"],
            method=j["cost"]["method"],
            basis=j["cost"]["basis"],
            currency=j["cost"]["currency"],
        ),
        # governance fields arrived after format 1 was first written: absent means none
        terms=tuple(j.get("terms", ())),
        sla=j.get("sla"),
        quality=_quality_from_json(j.get("quality")),
        profile=_profile_from_json(j.get("profile")),
        table=_table_from_json(j.get("table")),
        checks=tuple(
            CheckResult(c["name"], c["passed"], c["severity"], c["description"], tuple(c.get("affected", ())))
            for c in j.get("checks", ())
        ),
        totals=TableTotals(**j["totals"]) if j.get("totals") else None,
    )


def snapshot_dumps(s: Snapshot) -> str:
    return json.dumps(snapshot_to_json(s), sort_keys=True, separators=(",", ":"))


def snapshot_loads(text: str) -> Snapshot:
    return snapshot_from_json(json.loads(text))
