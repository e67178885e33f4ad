"""Semantic version of a dataset's snapshot relative to the one before it.

breaking schema change → major; fields only added (nullable or defaulted) → minor;
metadata only (descriptions, owners, tags, domain, lineage) → patch; nothing → same.
A snapshot that could not be read at all keeps the previous version: a failed read is
not a schema change.
"""

from __future__ import annotations

from lumos_dagster.model import Array, DataType, Map, Schema, Snapshot, Struct

FIRST_VERSION = "1.0.0"


def _bump(version: str, part: int) -> str:
    numbers = [int(x) for x in version.split(".")]
    numbers[part] += 1
    return ".".join(str(n) if i <= part else "0" for i, n in enumerate(numbers))


def _only_additions(old: Schema, new: Schema) -> bool:
    old_fields, new_fields = dict(old.flatten()), dict(new.flatten())
    for path, f in old_fields.items():
        g = new_fields.get(path)
        if g is None or g.nullable != f.nullable or _skeleton(g.type) != _skeleton(f.type):
            return False
    return all(g.nullable or g.has_default for path, g in new_fields.items() if path not in old_fields)


def _skeleton(t: DataType) -> object:
    """A type with its structs' fields left out (nested fields are compared by path)."""
    if isinstance(t, Struct):
        return "struct"
    if isinstance(t, Array):
        return ("array", _skeleton(t.element), t.element_nullable)
    if isinstance(t, Map):
        return ("map", t.key, _skeleton(t.value), t.value_nullable)
    return t


def _metadata(s: Snapshot) -> tuple:
    return (
        s.description,
        s.domain,
        s.owners,
        s.tags,
        s.upstream,
        tuple((p, f.description) for p, f in s.schema.flatten()),
    )


def next_version(previous: Snapshot | None, current: Snapshot) -> str | None:
    if previous is None or previous.version is None:
        return FIRST_VERSION if current.readable else None
    if not current.readable:
        return previous.version
    if previous.fingerprint != current.fingerprint:
        return _bump(previous.version, 1 if _only_additions(previous.schema, current.schema) else 0)
    if _metadata(previous) != _metadata(current):
        return _bump(previous.version, 2)
    return previous.version
