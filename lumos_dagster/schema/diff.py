"""The diff engine: every difference between two schemas or two snapshots, each with
its verdict in both directions.

* backward — a reader with the NEW schema reads data written with the OLD one;
* forward  — a reader with the OLD schema reads data written with the NEW one.

The verdicts follow Avro schema resolution (reader fields need a default; enums and
unions must cover what the writer may send; aliases rename fields; records, enums and
fixed match by unqualified name or the reader's aliases), Iceberg (field ids rename; optional→required is unsafe)
and Delta type widening (`lumos_dagster.schema.compat`); a column no value typed (`model.UNTYPED`)
that gets a type is promoted both ways: nobody read it as a type. Pure functions;
docs/compatibility.md has the table.
"""

from __future__ import annotations

import bisect
import json
from typing import Any, Sequence

from lumos_dagster.floor.datatypes import (
    NO_DEFAULT,
    TYPE_CLASSES,
    Array,
    DataType,
    Decimal,
    Enum,
    Field,
    Fixed,
    Map,
    Struct,
    UnionType,
    type_str,
    untyped,
)
from lumos_dagster.floor.datatypes import Schema as SchemaModel
from lumos_dagster.floor.model import SchemaChange, Snapshot
from lumos_dagster.schema.compat import promotable
from lumos_dagster.schema.resolution import reads_name, resolves, same_name

# kinds
FIELD_ADDED = "FIELD_ADDED"
FIELD_REMOVED = "FIELD_REMOVED"
FIELD_RENAMED = "FIELD_RENAMED"
FIELD_MOVED = "FIELD_MOVED"
TYPE_PROMOTED = "TYPE_PROMOTED"
TYPE_NARROWED = "TYPE_NARROWED"
TYPE_CHANGED = "TYPE_CHANGED"
DECIMAL_WIDENED = "DECIMAL_WIDENED"
DECIMAL_NARROWED = "DECIMAL_NARROWED"
DECIMAL_CHANGED = "DECIMAL_CHANGED"
NULLABILITY_TIGHTENED = "NULLABILITY_TIGHTENED"
NULLABILITY_RELAXED = "NULLABILITY_RELAXED"
DEFAULT_ADDED = "DEFAULT_ADDED"
DEFAULT_CHANGED = "DEFAULT_CHANGED"
DEFAULT_REMOVED = "DEFAULT_REMOVED"
ENUM_SYMBOLS_ADDED = "ENUM_SYMBOLS_ADDED"
ENUM_SYMBOLS_REMOVED = "ENUM_SYMBOLS_REMOVED"
UNION_BRANCHES_ADDED = "UNION_BRANCHES_ADDED"
UNION_BRANCHES_REMOVED = "UNION_BRANCHES_REMOVED"
PRIMARY_KEY_CHANGED = "PRIMARY_KEY_CHANGED"
DESCRIPTION_CHANGED = "DESCRIPTION_CHANGED"
DATASET_DESCRIPTION_CHANGED = "DATASET_DESCRIPTION_CHANGED"
GLOSSARY_CHANGED = "GLOSSARY_CHANGED"
TAGS_CHANGED = "TAGS_CHANGED"
OWNERS_CHANGED = "OWNERS_CHANGED"
DOMAIN_CHANGED = "DOMAIN_CHANGED"
LINEAGE_CHANGED = "LINEAGE_CHANGED"
DATASET_ADDED = "DATASET_ADDED"
DATASET_REMOVED = "DATASET_REMOVED"

#: changes that touch documentation and governance only: never breaking, a patch at most
METADATA_KINDS = frozenset(
    {
        DESCRIPTION_CHANGED,
        DATASET_DESCRIPTION_CHANGED,
        GLOSSARY_CHANGED,
        TAGS_CHANGED,
        OWNERS_CHANGED,
        DOMAIN_CHANGED,
        LINEAGE_CHANGED,
        DATASET_ADDED,
    }
)


def _change(path: str, kind: str, old: Any, new: Any, backward: bool, forward: bool) -> SchemaChange:
    return SchemaChange(path, kind, _render(old), _render(new), backward, forward)


def _render(value: Any) -> str | None:
    if value is None or value is NO_DEFAULT:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, Field):
        return f"{type_str(value.type)}{'' if value.nullable else ' not null'}"
    if isinstance(value, TYPE_CLASSES):
        return type_str(value)
    return json.dumps(value, sort_keys=True, default=str)


def _sub(path: str, suffix: str) -> str:
    return f"{path}{suffix}"


class _Differ:
    def __init__(self) -> None:
        self.out: list[SchemaChange] = []

    def add(self, path: str, kind: str, old: Any, new: Any, backward: bool, forward: bool) -> None:
        self.out.append(_change(path, kind, old, new, backward, forward))

    # ------------------------------------------------------------ fields

    def fields(self, prefix: str, old: Sequence[Field], new: Sequence[Field]) -> None:
        # one pass over the old fields; most pairs are identical and cost one comparison
        new_by = {f.name: (i, f) for i, f in enumerate(new)}
        pairs, removed, positions = [], [], []
        for o in old:
            hit = new_by.get(o.name)
            if hit is None:
                removed.append(o)
            else:
                positions.append(hit[0])
                pairs.append((o, hit[1]))
        added = []
        if len(pairs) != len(new):
            old_names = {f.name for f in old}
            added = [f for f in new if f.name not in old_names]
        renames = _renames(removed, added)
        renamed = bool(renames)
        if renamed:
            taken = {id(n) for _, n in renames}
            gone = {id(o) for o, _ in renames}
            removed = [o for o in removed if id(o) not in gone]
            added = [a for a in added if id(a) not in taken]
        for o, n in renames:
            pairs.append((o, n))
            by_id = o.field_id is not None and o.field_id == n.field_id
            # an id-resolving reader (Iceberg, Parquet ids) follows a rename both ways; an
            # Avro reader only when its own schema names the other side as an alias
            self.add(
                prefix + n.name,
                FIELD_RENAMED,
                o.name,
                n.name,
                by_id or o.name in n.aliases,
                by_id or n.name in o.aliases,
            )
        for f in removed:
            # old readers still expect the field: only a default lets them read new data
            self.add(prefix + f.name, FIELD_REMOVED, f, None, True, f.has_default)
        for f in added:
            # new readers meet old data without the field: it must be nullable or defaulted
            self.add(prefix + f.name, FIELD_ADDED, None, f, f.nullable or f.has_default, True)
        for o, n in pairs:
            if o is not n and o != n:  # an equal field has nothing to report
                self.field(prefix + n.name, o, n)
        if renamed or any(a > b for a, b in zip(positions, positions[1:], strict=False)):  # something moved
            self.moves(prefix, old, new, pairs)

    def moves(self, prefix: str, old: Sequence[Field], new: Sequence[Field], pairs: list) -> None:
        """Fields whose relative order changed: those outside the longest run kept in order.
        Readers resolve fields by name (or id), so a move breaks nobody."""
        old_pos = {f.name: i for i, f in enumerate(old)}
        new_pos = {f.name: i for i, f in enumerate(new)}
        common = sorted(pairs, key=lambda p: old_pos[p[0].name])
        keep = _longest_increasing([new_pos[n.name] for _, n in common])
        for i, (o, n) in enumerate(common):
            if i not in keep:
                self.add(prefix + n.name, FIELD_MOVED, str(old_pos[o.name]), str(new_pos[n.name]), True, True)

    def field(self, path: str, old: Field, new: Field) -> None:
        if untyped(old) and not untyped(new):  # no value had typed it: no reader relied on a type
            self.add(path, TYPE_PROMOTED, old, new, True, True)
        else:
            self.type(path, old.type, new.type)
        self.nullability(path, old.nullable, new.nullable)
        if old.has_default != new.has_default or (old.has_default and old.default != new.default):
            kind = DEFAULT_ADDED if not old.has_default else DEFAULT_REMOVED if not new.has_default else DEFAULT_CHANGED
            # a default is read only when the writer lacks the field, and both sides have it
            self.add(path, kind, old.default, new.default, True, True)
        if old.is_key != new.is_key:  # uniqueness, not readability: nobody's reads break
            key = {True: "key", False: None}
            self.add(path, PRIMARY_KEY_CHANGED, key[old.is_key], key[new.is_key], True, True)
        if (old.description or None) != (new.description or None):
            self.add(path, DESCRIPTION_CHANGED, old.description, new.description, True, True)
        if sorted(old.terms) != sorted(new.terms):
            self.add(path, GLOSSARY_CHANGED, ", ".join(sorted(old.terms)), ", ".join(sorted(new.terms)), True, True)

    def nullability(self, path: str, old: bool, new: bool) -> None:
        if old and not new:  # old data may hold nulls the new reader refuses
            self.add(path, NULLABILITY_TIGHTENED, "nullable", "required", False, True)
        elif new and not old:  # new data may hold nulls the old reader refuses
            self.add(path, NULLABILITY_RELAXED, "required", "nullable", True, False)

    # ------------------------------------------------------------- types

    def type(self, path: str, old: DataType, new: DataType) -> None:
        if old == new:
            return
        if (renamed := _renamed(old, new)) is not None:
            self.add(path, TYPE_CHANGED, *renamed)
            if not any(renamed[2:]):
                return  # Avro reads nothing of a type another name writes, whatever else changed
        if isinstance(old, Struct) and isinstance(new, Struct):
            self.fields(path + ".", old.fields, new.fields)
        elif isinstance(old, Array) and isinstance(new, Array):
            self.type(_inner(path, old.element, new.element, "[]"), old.element, new.element)
            self.nullability(_sub(path, "[]"), old.element_nullable, new.element_nullable)
        elif isinstance(old, Map) and isinstance(new, Map):
            self.type(_sub(path, "{key}"), old.key, new.key)
            self.type(_inner(path, old.value, new.value, "{}"), old.value, new.value)
            self.nullability(_sub(path, "{}"), old.value_nullable, new.value_nullable)
        elif isinstance(old, Enum) and isinstance(new, Enum):
            added = [s for s in new.symbols if s not in old.symbols]
            removed = [s for s in old.symbols if s not in new.symbols]
            # a reader meeting a symbol it does not know takes its enum's default, when it has one
            if added:  # an old reader meets symbols it does not know
                self.add(path, ENUM_SYMBOLS_ADDED, None, ", ".join(added), True, old.default is not None)
            if removed:  # a new reader meets old data with symbols it dropped
                self.add(path, ENUM_SYMBOLS_REMOVED, ", ".join(removed), None, new.default is not None, True)
        elif isinstance(old, Fixed) and isinstance(new, Fixed) and old.size == new.size:
            return  # names Avro matches (another namespace, or one side unnamed): nothing changed
        elif isinstance(old, UnionType) or isinstance(new, UnionType):
            self.union(path, old, new)
        else:
            backward, forward = promotable(old, new), promotable(new, old)
            if isinstance(old, Decimal) and isinstance(new, Decimal):
                kinds = (DECIMAL_WIDENED, DECIMAL_NARROWED, DECIMAL_CHANGED)
            else:
                kinds = (TYPE_PROMOTED, TYPE_NARROWED, TYPE_CHANGED)
            kind = kinds[0] if backward and not forward else kinds[1] if forward and not backward else kinds[2]
            self.add(path, kind, old, new, backward, forward)

    def union(self, path: str, old: DataType, new: DataType) -> None:
        old_b = list(old.branches) if isinstance(old, UnionType) else [old]
        new_b = list(new.branches) if isinstance(new, UnionType) else [new]
        added = [b for b in new_b if b not in old_b]
        removed = [b for b in old_b if b not in new_b]
        if not added and not removed:  # branches reordered: each value still finds its branch
            return
        # Avro: a writer union is readable when each of its branches resolves to the reader's
        # type, promotions included (an int branch reads as a reader's long)
        backward, forward = resolves(old, new), resolves(new, old)
        if added and removed:  # branches replaced: judged as a type change is
            kind = (
                TYPE_PROMOTED
                if backward and not forward
                else TYPE_NARROWED
                if forward and not backward
                else TYPE_CHANGED
            )
        else:
            kind = UNION_BRANCHES_ADDED if added else UNION_BRANCHES_REMOVED
        self.add(path, kind, old, new, backward, forward)


#: the named types, as Avro calls them
_AVRO_NAMED = {Struct: "record", Enum: "enum", Fixed: "fixed"}


def _renamed(old: DataType, new: DataType) -> tuple[str, str, bool, bool] | None:
    """(`record com.shop.A`, `record com.shop.B`, backward, forward) when both are one named type
    (record, enum, fixed) under unqualified names that differ; an unnamed type (from a format without
    names) matches any. A rename reads where the reader's aliases hold the writer's full name."""
    named = (Struct, Enum, Fixed)
    if isinstance(old, named) and isinstance(new, named) and type(old) is type(new):
        if not same_name(old.name, new.name):
            kind = _AVRO_NAMED[type(old)]
            return f"{kind} {old.name}", f"{kind} {new.name}", reads_name(old, new), reads_name(new, old)
    return None


def _inner(path: str, old: DataType, new: DataType, suffix: str) -> str:
    """Struct elements keep the container's path (`items.sku`), as flat paths do; other
    element changes are reported on `items[]` / `attrs{}`."""
    return path if isinstance(old, Struct) and isinstance(new, Struct) else _sub(path, suffix)


def _renames(removed: Sequence[Field], added: Sequence[Field]) -> list[tuple[Field, Field]]:
    """(old, new) renames, only where field ids or aliases prove them: each removed field, in order,
    takes the first added field not yet taken that has its field id, lists its name as an alias, or
    is named by one of its aliases. Found through indexes of the added fields, not by comparing every
    pair: a schema of 10,000 fields against another took seconds."""
    if not removed or not added:
        return []
    order = {id(a): i for i, a in enumerate(added)}
    by_id: dict[int, list[Field]] = {}
    by_alias: dict[str, list[Field]] = {}
    by_name: dict[str, list[Field]] = {}
    for a in added:
        if a.field_id is not None:
            by_id.setdefault(a.field_id, []).append(a)
        for alias in a.aliases:
            by_alias.setdefault(alias, []).append(a)
        by_name.setdefault(a.name, []).append(a)
    taken: set[int] = set()
    out = []
    for o in removed:
        candidates = [
            *(by_id.get(o.field_id, ()) if o.field_id is not None else ()),
            *by_alias.get(o.name, ()),
            *(a for alias in o.aliases for a in by_name.get(alias, ())),
        ]
        free = [a for a in candidates if id(a) not in taken]
        if free:
            n = min(free, key=lambda a: order[id(a)])
            taken.add(id(n))
            out.append((o, n))
    return out


def _longest_increasing(values: list[int]) -> set[int]:
    """Indexes of one longest strictly increasing subsequence (patience sorting)."""
    tails: list[int] = []
    tail_idx: list[int] = []
    parent = [-1] * len(values)
    for i, v in enumerate(values):
        k = bisect.bisect_left(tails, v)
        if k == len(tails):
            tails.append(v)
            tail_idx.append(i)
        else:
            tails[k] = v
            tail_idx[k] = i
        parent[i] = tail_idx[k - 1] if k else -1
    keep, i = set(), tail_idx[-1] if tail_idx else -1
    while i != -1:
        keep.add(i)
        i = parent[i]
    return keep


def diff_schemas(old: SchemaModel, new: SchemaModel) -> list[SchemaChange]:
    d = _Differ()
    # the top-level record's name, as a nested one's; a rename is reported on the dataset itself
    renamed = _renamed(Struct((), old.name, old.aliases), Struct((), new.name, new.aliases))
    if renamed is not None:
        d.add("", TYPE_CHANGED, *renamed)
    if renamed is None or any(renamed[2:]):
        d.fields("", old.fields, new.fields)
    return d.out


def diff_snapshots(old: Snapshot | None, new: Snapshot | None) -> list[SchemaChange]:
    """Schema changes plus dataset-level ones (description, tags, owners, domain, lineage)."""
    if old is None:
        return [] if new is None else [_change("", DATASET_ADDED, None, new.dataset.name, True, True)]
    if new is None:
        return [_change("", DATASET_REMOVED, old.dataset.name, None, False, False)]
    out = diff_schemas(old.schema, new.schema)
    if (old.description or None) != (new.description or None):
        out.append(_change("", DATASET_DESCRIPTION_CHANGED, old.description, new.description, True, True))
    for kind, before, after in (
        (TAGS_CHANGED, sorted(old.tags), sorted(new.tags)),
        (
            OWNERS_CHANGED,
            sorted(f"{o.kind}:{o.id} ({o.type})" for o in old.owners),
            sorted(f"{o.kind}:{o.id} ({o.type})" for o in new.owners),
        ),
        (LINEAGE_CHANGED, sorted(e.upstream.name for e in old.upstream), sorted(e.upstream.name for e in new.upstream)),
    ):
        if before != after:
            out.append(_change("", kind, ", ".join(before), ", ".join(after), True, True))
    if old.domain != new.domain:
        out.append(_change("", DOMAIN_CHANGED, old.domain, new.domain, True, True))
    return out
