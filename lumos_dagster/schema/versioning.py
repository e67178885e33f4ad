"""Compatibility policies and the semantic version of each snapshot.

A policy turns each change's two verdicts into a severity:

| policy   | a change is BREAKING when it is not… |
|----------|--------------------------------------|
| NONE     | (never)                              |
| BACKWARD | backward compatible                  |
| FORWARD  | forward compatible                   |
| FULL     | both (the default); a removed field always breaks |

FULL is this product's rule, stricter than Avro's: a removed field breaks even when old
readers could fill it in from its default, because a query or job that selects the column
fails whatever the default. `…_TRANSITIVE` applies the same test against every earlier version of the dataset,
not only the previous one. Documentation and governance changes are INFORMATIONAL.

Versions: a BREAKING change → major; any other schema change → minor; metadata only
→ patch; nothing → unchanged. A snapshot's `changes`, `change_class` and
`previous_version` describe how its version came to be, so a capture that finds nothing
new carries them over unchanged (the catalog's view of a version does not flicker from
run to run). A snapshot that could not be read keeps the previous version too: a failed
read is not a schema change, and neither is a column no value typed (a header-only file): it has the
type the previous snapshot gave it (`model.typed_like`).

Versions follow partition time, not arrival: `slot` versions each capture against the capture before
it in partition order, so a late earlier partition is slotted in and the captures after it are
versioned again against their true predecessors.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from lumos_dagster.floor.datatypes import typed_like
from lumos_dagster.floor.model import (
    BREAKING,
    DEFAULT_POLICY,
    FIRST_VERSION,
    INFORMATIONAL,
    NON_BREAKING,
    SchemaChange,
    Snapshot,
)
from lumos_dagster.schema.diff import FIELD_REMOVED, METADATA_KINDS, diff_schemas, diff_snapshots


def severity(change: SchemaChange, policy: str) -> str:
    if change.kind in METADATA_KINDS:
        return INFORMATIONAL
    base = policy.removesuffix("_TRANSITIVE")
    ok = {
        "NONE": True,
        "BACKWARD": change.backward,
        "FORWARD": change.forward,
        "FULL": change.backward and change.forward and change.kind != FIELD_REMOVED,
    }[base]
    return NON_BREAKING if ok else BREAKING


def judge(changes: Sequence[SchemaChange], policy: str) -> tuple[SchemaChange, ...]:
    return tuple(replace(c, severity=severity(c, policy)) for c in changes)


def change_class(changes: Sequence[SchemaChange]) -> str:
    severities = {c.severity for c in changes}
    if BREAKING in severities:
        return "major"
    if NON_BREAKING in severities:
        return "minor"
    return "patch" if INFORMATIONAL in severities else "none"


def bump(version: str, cls: str) -> str:
    if cls not in ("major", "minor", "patch"):
        return version
    part = ("major", "minor", "patch").index(cls)
    numbers = [int(x) for x in version.split(".")]
    numbers[part] += 1
    return ".".join(str(n) if i <= part else "0" for i, n in enumerate(numbers))


def assess(
    previous: Snapshot | None, current: Snapshot, policy: str = DEFAULT_POLICY, earlier: Sequence[Snapshot] = ()
) -> Snapshot:
    """`current` with its version, changes and change class filled in.

    `earlier`: snapshots of the versions before `previous`, oldest first; the
    transitive policies also check `current` against each of them.
    """
    if previous is None or previous.version is None:
        version = FIRST_VERSION if current.readable else None
        return replace(current, version=version, previous_version=None, changes=(), change_class="new", policy=policy)
    if not current.readable:
        return _same_version(previous, current, policy)
    # a column no value typed (a header-only file) has the type the dataset had: no change
    fields = typed_like(current.schema.fields, previous.schema.fields)
    if fields is not current.schema.fields:
        current = replace(current, schema=replace(current.schema, fields=fields))
    changes = list(judge(diff_snapshots(previous, current), policy))
    if previous.removed:  # it came back: say so, rather than carry its removal over
        changes = list(judge(diff_snapshots(None, current), policy)) + changes
    if policy.endswith("_TRANSITIVE"):
        seen = {(c.path, c.kind) for c in changes}
        for old in earlier:
            for c in judge(diff_schemas(old.schema, current.schema), policy):
                if c.severity == BREAKING and (c.path, c.kind) not in seen:
                    changes.append(replace(c, against=old.version))
                    seen.add((c.path, c.kind))
    cls = change_class(changes)
    if cls == "none":
        return _same_version(previous, current, policy)
    return replace(
        current,
        version=bump(previous.version, cls),
        previous_version=previous.version,
        changes=tuple(changes),
        change_class=cls,
        policy=policy,
    )


def retire(previous: Snapshot | None, tombstone: Snapshot) -> Snapshot:
    """A vanished dataset's last snapshot: a DATASET_REMOVED change, under the policy it last had
    (a major version under every policy but NONE: its readers lose it), so history shows the end."""
    policy = (previous.policy if previous else None) or DEFAULT_POLICY
    changes = judge(diff_snapshots(previous or tombstone, None), policy)
    if previous is None or previous.version is None:
        return replace(tombstone, changes=changes, policy=policy)
    cls = change_class(changes)
    return replace(
        tombstone,
        version=bump(previous.version, cls),
        previous_version=previous.version,
        changes=changes,
        change_class=cls,
        policy=policy,
    )


def _same_version(previous: Snapshot, current: Snapshot, policy: str) -> Snapshot:
    return replace(
        current,
        version=previous.version,
        previous_version=previous.previous_version,
        changes=previous.changes,
        change_class=previous.change_class,
        policy=policy,
    )


def slot(history: Sequence[Snapshot], new: Sequence[Snapshot]) -> tuple[list[Snapshot], dict[int, Snapshot]]:
    """Slot `new` captures of a dataset into its `history` by partition time, and version them.

    `history`: the captures so far, versioned, in partition then capture order (those before the
    first new capture may be only what versioning needs: the latest capture of each version). A new
    capture goes after every capture of its partition or an earlier one, and each capture from the
    first new one on is versioned against the readable capture before it (a tombstone retires it),
    so a later partition's changes are always against its predecessor in partition time.
    Returns the new captures versioned, in their order, and the captures of `history` whose
    version or changes moved, by index.
    """
    order = sorted([(s.partition_key or "", 0, i) for i, s in enumerate(history)]
                   + [(s.partition_key or "", 1, i) for i, s in enumerate(new)])  # fmt: skip
    versioned, moved = list(new), {}
    past: list[Snapshot] = []  # the latest readable capture of each version, the previous last
    started = False
    for _, is_new, i in order:
        s = new[i] if is_new else history[i]
        started = started or bool(is_new)
        if started:
            previous = past[-1] if past else None
            s = retire(previous, s) if s.removed else assess(previous, s, s.policy or DEFAULT_POLICY, past[:-1])
            if is_new:
                versioned[i] = s
            elif _how_versioned(s) != _how_versioned(history[i]):
                moved[i] = s
        if s.readable:
            past = [p for p in past if p.version != s.version] + [s]
    return versioned, moved


def _how_versioned(s: Snapshot) -> tuple:
    return s.version, s.previous_version, s.changes, s.change_class, s.policy
