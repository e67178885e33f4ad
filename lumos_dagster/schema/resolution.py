"""Avro schema resolution on canonical types: may data written as `writer` be read as `reader`?

The Avro 1.11 specification's "Schema Resolution" section, rule by rule:

* types must *match*: both arrays, both maps, enums whose names match, fixed of one size and
  matching names, records whose names match (a name matches by its unqualified part, or the
  writer's full name is one of the reader's aliases), either a union, or the writer's type
  promotes to the reader's (int→long→float→double, string↔bytes: `compat.promotable`, which adds
  the Iceberg and Delta widenings);
* records: fields pair by name (or a reader alias, or a field id); a writer field the reader
  lacks is ignored; a reader field the writer lacks needs a default (strictly: unions, where
  this applies, come from Avro; a top-level added nullable field is the diff's own rule);
* enums: a writer symbol the reader lacks needs the reader's enum default;
* arrays and maps resolve their items and values (and a nullable item needs a nullable reader);
* a writer union resolves when every branch it may have written does (so the empty union, which
  writes nothing, is readable by anything); a reader union needs a branch the writer's type
  resolves to.

Names and aliases come from Avro (records, enums, fixed); a type from a format without names
(Parquet, ORC, Iceberg) has none and matches any name. Only the reader's aliases count, as the
spec's Aliases section rewrites the writer's schema with them. A reader union's branch is one
that resolves, as Apache Avro's own compatibility checker takes it, rather than only the first of
the writer's name. Pure functions;
tests/cases/diff.yaml has a row per rule.
"""

from __future__ import annotations

from typing import Sequence

from lumos_dagster.floor.datatypes import Array, DataType, Enum, Field, Fixed, Map, Struct, UnionType
from lumos_dagster.schema.compat import promotable

NamedType = Struct | Enum | Fixed


def same_name(a: str | None, b: str | None) -> bool:
    """Avro compares named types by unqualified name (`com.x.Status` is `org.y.Status`); a type
    a source gave no name matches any."""
    return a is None or b is None or a.rsplit(".", 1)[-1] == b.rsplit(".", 1)[-1]


def reads_name(writer: NamedType, reader: NamedType) -> bool:
    """Whether a reader of the named type `reader` takes `writer`'s name for its own: the same
    unqualified name, or the writer's full name among the reader's aliases (full names, as Apache
    Avro's compatibility checker compares them). The writer's aliases do not count."""
    return same_name(writer.name, reader.name) or writer.name in reader.aliases


def resolves(writer: DataType, reader: DataType) -> bool:
    """True when every value written as `writer` reads as `reader`."""
    if writer == reader:
        return True
    if isinstance(writer, UnionType):
        return all(resolves(b, reader) for b in writer.branches)
    if isinstance(reader, UnionType):
        # Avro takes the first branch that matches (by name, for named types); as Apache Avro's
        # compatibility checker, any branch that resolves will do
        return any(resolves(writer, b) for b in reader.branches)
    if isinstance(writer, Struct) and isinstance(reader, Struct):
        return reads_name(writer, reader) and fields_resolve(writer.fields, reader.fields)
    if isinstance(writer, Fixed) and isinstance(reader, Fixed):
        return writer.size == reader.size and reads_name(writer, reader)
    if isinstance(writer, Enum) and isinstance(reader, Enum):
        known = set(writer.symbols) <= set(reader.symbols)
        return reads_name(writer, reader) and (known or reader.default is not None)
    if isinstance(writer, Array) and isinstance(reader, Array):
        nulls = reader.element_nullable or not writer.element_nullable
        return nulls and resolves(writer.element, reader.element)
    if isinstance(writer, Map) and isinstance(reader, Map):
        nulls = reader.value_nullable or not writer.value_nullable
        return nulls and resolves(writer.key, reader.key) and resolves(writer.value, reader.value)
    if isinstance(writer, (Struct, Enum, Array, Map, Fixed)) or isinstance(reader, (Struct, Enum, Array, Map, Fixed)):
        return False  # a container or named type against anything else never matches
    return promotable(writer, reader)


def _writer_field(r: Field, by_name: dict[str, Field], by_id: dict[int, Field]) -> Field | None:
    for name in (r.name, *r.aliases):  # reader aliases name the writer's field (Avro)
        if name in by_name:
            return by_name[name]
    return by_id.get(r.field_id) if r.field_id is not None else None  # Iceberg resolves by id


def fields_resolve(writer: Sequence[Field], reader: Sequence[Field]) -> bool:
    by_name = {f.name: f for f in writer}
    by_id = {f.field_id: f for f in writer if f.field_id is not None}
    for r in reader:
        w = _writer_field(r, by_name, by_id)
        if w is None:
            if not r.has_default:
                return False
        elif (w.nullable and not r.nullable) or not resolves(w.type, r.type):
            return False
    return True
