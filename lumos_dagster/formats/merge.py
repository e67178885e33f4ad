"""Merging the schemas of a dataset's files into the dataset's schema.

Fields are united by name, in first-seen order; a field missing from some files is
nullable. Where files disagree on a type, the type is widened when a safe promotion
exists (int32→int64, float32→float64, int→float64, decimal widening, a finer
timestamp unit) and otherwise the type most files use wins. Either way the
disagreement is reported as a `SchemaConflict` naming the files. A record's or a fixed's
name (Avro) is kept where every file gives the same one; where they differ the merged
type has none, which matches any name: no conflict. Its aliases are those every file gives.
A column no value typed in a file (`model.UNTYPED`: a header-only CSV) takes the type the other
files give it.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from lumos_dagster.floor.datatypes import (
    NO_DEFAULT,
    Array,
    DataType,
    Decimal,
    Field,
    Fixed,
    Map,
    Primitive,
    Schema,
    Struct,
    Timestamp,
    type_str,
    untyped,
)
from lumos_dagster.floor.model import ConflictVariant, SchemaConflict

MAX_CONFLICT_FILES = 5
_SIGNED = ("int8", "int16", "int32", "int64")
_UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
_FLOATS = ("float16", "float32", "float64")
_UNITS = ("s", "ms", "us", "ns")


def widen(a: DataType, b: DataType) -> DataType | None:
    """The narrowest type both values fit in, or None when there is none."""
    if a == b:
        return a
    if a == Primitive("null"):
        return b
    if b == Primitive("null"):
        return a
    if isinstance(a, Primitive) and isinstance(b, Primitive):
        for family in (_SIGNED, _UNSIGNED, _FLOATS):
            if a.kind in family and b.kind in family:
                return Primitive(max(a.kind, b.kind, key=family.index))
        numeric = _SIGNED + _UNSIGNED + _FLOATS
        if a.kind in numeric and b.kind in numeric:
            if a.kind in _FLOATS or b.kind in _FLOATS:
                return Primitive("float64")
            # signed and unsigned: int64 holds every unsigned type but uint64
            return Primitive("int64") if "uint64" not in (a.kind, b.kind) else None
        return None
    if isinstance(a, Decimal) and isinstance(b, Decimal):
        scale = max(a.scale, b.scale)
        integer = max(a.precision - a.scale, b.precision - b.scale)
        return Decimal(integer + scale, scale) if integer + scale <= 38 else None
    if isinstance(a, Timestamp) and isinstance(b, Timestamp) and a.tz == b.tz:
        return Timestamp(max(a.unit, b.unit, key=_UNITS.index), a.tz)
    return None


class _Merger:
    def __init__(self) -> None:
        self.conflicts: list[SchemaConflict] = []

    def fields(self, prefix: str, per_file: Sequence[tuple[str, Sequence[Field]]]) -> tuple[Field, ...]:
        order: list[str] = []
        found: dict[str, list[tuple[str, Field]]] = {}
        for path, fields in per_file:
            for f in fields:
                if f.name not in found:
                    order.append(f.name)
                    found[f.name] = []
                found[f.name].append((path, f))
        return tuple(self.field(prefix, found[name], len(per_file)) for name in order)

    def field(self, prefix: str, variants: list[tuple[str, Field]], file_count: int) -> Field:
        # a file whose column no value typed (a header-only CSV) has it as the other files type it
        typed = [(p, f) for p, f in variants if not untyped(f)] or variants
        first = typed[0][1]
        fields = [f for _, f in typed]
        dtype = self.type(f"{prefix}{first.name}", [(p, f.type) for p, f in typed])
        same = lambda attr: all(getattr(f, attr) == getattr(first, attr) for f in fields)  # noqa: E731
        return Field(
            name=first.name,
            type=dtype,
            nullable=len(variants) < file_count or any(f.nullable for _, f in variants),
            default=first.default if same("default") else NO_DEFAULT,
            description=next((f.description for f in fields if f.description), None),
            native_type=first.native_type if same("native_type") else None,
            field_id=first.field_id if same("field_id") else None,
            aliases=first.aliases if same("aliases") else (),
            is_key=first.is_key if same("is_key") else False,
            terms=first.terms if same("terms") else (),
        )

    def type(self, path: str, variants: list[tuple[str, DataType]]) -> DataType:
        types = [t for _, t in variants]
        first = types[0]
        if all(t == first for t in types):
            return first
        structs = [(p, t) for p, t in variants if isinstance(t, Struct)]
        if len(structs) == len(variants):
            fields = self.fields(path + ".", [(p, t.fields) for p, t in structs])
            return Struct(fields, *_common_name([t for _, t in structs]))
        fixed = [t for t in types if isinstance(t, Fixed)]
        if len(fixed) == len(types) and len({t.size for t in fixed}) == 1:  # alike but for their names
            return Fixed(fixed[0].size, *_common_name(fixed))
        arrays = [(p, t) for p, t in variants if isinstance(t, Array)]
        if len(arrays) == len(variants):
            element = self.type(path, [(p, t.element) for p, t in arrays])
            return Array(element, any(t.element_nullable for _, t in arrays))
        maps = [(p, t) for p, t in variants if isinstance(t, Map)]
        if len(maps) == len(variants):
            key = self.type(path, [(p, t.key) for p, t in maps])
            value = self.type(path, [(p, t.value) for p, t in maps])
            return Map(key, value, any(t.value_nullable for _, t in maps))
        widened: DataType | None = first
        for t in types[1:]:
            widened = widen(widened, t) if widened is not None else None
        real = [(p, t) for p, t in variants if t != Primitive("null")]
        if widened is not None:
            if len({t for _, t in real}) > 1:  # an all-null column is not a disagreement
                self._report(path, real, f"widened to {type_str(widened)}")
            return widened
        counts = Counter(t for t in types)
        winner = max(counts, key=lambda t: (counts[t], -types.index(t)))
        self._report(
            path,
            variants,
            f"incompatible types; kept {type_str(winner)} (used by {counts[winner]} of {len(types)} files)",
        )
        return winner

    def _report(self, path: str, variants: list[tuple[str, DataType]], resolution: str) -> None:
        by_type: dict[str, list[str]] = {}
        for file, t in variants:
            by_type.setdefault(type_str(t), []).append(file)
        self.conflicts.append(
            SchemaConflict(
                path=path,
                variants=tuple(
                    ConflictVariant(t, tuple(files[:MAX_CONFLICT_FILES]), len(files)) for t, files in by_type.items()
                ),
                resolution=resolution,
            )
        )


def _common_name(named: Sequence[Struct | Fixed | Schema]) -> tuple[str | None, tuple[str, ...]]:
    """The name all give (else none) and the aliases all give."""
    names = {t.name for t in named}
    aliases = tuple(a for first in named[:1] for a in first.aliases if all(a in t.aliases for t in named))
    return names.pop() if len(names) == 1 else None, aliases


def merge_schemas(files: Sequence[tuple[str, Schema]]) -> tuple[Schema, tuple[SchemaConflict, ...]]:
    """Merge (file path, schema) pairs, given in a stable order, into one schema."""
    first = files[0][1] if files else None
    if first is not None and all(schema == first for _, schema in files[1:]):
        # the common case, a partition's files written alike: merging gives that schema back, unless
        # a top-level name is used twice (the merge unites them, with conflicts that count files) or
        # a description is empty (the merge says none)
        names = {f.name for f in first.fields}
        if len(names) == len(first.fields) and all(f.description != "" for f in first.fields):
            return first, ()
        merged, conflicts = _merge(files[:1])
        if not conflicts:
            return merged, conflicts
    return _merge(files)


def _merge(files: Sequence[tuple[str, Schema]]) -> tuple[Schema, tuple[SchemaConflict, ...]]:
    merger = _Merger()
    fields = merger.fields("", [(path, schema.fields) for path, schema in files])
    return Schema(fields, *_common_name([schema for _, schema in files])), tuple(merger.conflicts)
