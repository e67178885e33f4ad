from dataclasses import replace
from datetime import UTC, datetime

import pytest

from lumos_dagster.floor.datatypes import Field, Primitive, Schema, Struct
from lumos_dagster.floor.model import BREAKING, DatasetRef, Owner, Snapshot
from lumos_dagster.schema.versioning import assess, bump, retire

ID = Field("id", Primitive("int64"), nullable=False)
NAME = Field("name", Primitive("string"))


def snap(*fields, version=None, **changes) -> Snapshot:
    base = Snapshot(
        DatasetRef("file", "d", "/d"),
        "2026-01-01",
        datetime(2026, 1, 1, tzinfo=UTC),
        schema=Schema(tuple(fields)),
        version=version,
    )
    return replace(base, **changes)


CASES = [
    ("first readable snapshot", None, snap(ID), "1.0.0", "new"),
    ("first snapshot unreadable: no version yet", None, snap(), None, "new"),
    ("nullable field added", snap(ID, version="1.2.3"), snap(ID, NAME), "1.3.0", "minor"),
    (
        "required field added",
        snap(ID, version="1.2.3"),
        snap(ID, Field("n", Primitive("int32"), nullable=False)),
        "2.0.0",
        "major",
    ),
    ("field removed", snap(ID, NAME, version="1.2.3"), snap(ID), "2.0.0", "major"),
    (
        "type changed",
        snap(ID, version="1.2.3"),
        snap(Field("id", Primitive("string"), nullable=False)),
        "2.0.0",
        "major",
    ),
    (
        "nullable made required",
        snap(NAME, version="1.2.3"),
        snap(Field("name", Primitive("string"), nullable=False)),
        "2.0.0",
        "major",
    ),
    (
        "nested nullable field added",
        snap(Field("u", Struct((ID,))), version="1.0.0"),
        snap(Field("u", Struct((ID, NAME)))),
        "1.1.0",
        "minor",
    ),
    ("description changed", snap(ID, version="1.2.3"), snap(ID, description="now documented"), "1.2.4", "patch"),
    ("owners changed", snap(ID, version="1.2.3"), snap(ID, owners=(Owner("ann"),)), "1.2.4", "patch"),
]


@pytest.mark.parametrize("title,previous,current,version,cls", CASES, ids=[c[0] for c in CASES])
def test_semver_under_the_default_policy(title, previous, current, version, cls):
    got = assess(previous, current)
    assert (got.version, got.change_class, got.policy) == (version, cls, "FULL")


def test_a_capture_that_finds_nothing_new_keeps_how_its_version_came_to_be():
    v1 = assess(None, snap(ID))
    v2 = assess(v1, snap(ID, NAME))
    again = assess(v2, snap(ID, NAME))
    unreadable = assess(v2, snap())
    assert (v2.version, v2.previous_version, v2.change_class) == ("1.1.0", "1.0.0", "minor")
    for same in (again, unreadable):
        assert (same.version, same.previous_version, same.change_class) == ("1.1.0", "1.0.0", "minor")
        assert same.changes == v2.changes and [c.kind for c in same.changes] == ["FIELD_ADDED"]


def test_a_removed_dataset_ends_on_a_major_version_and_a_return_is_news_not_a_removal():
    v1 = assess(None, snap(ID))
    gone = retire(v1, replace(v1, removed=True))
    assert (gone.version, gone.change_class, [(c.kind, c.severity) for c in gone.changes]) == (
        "2.0.0", "major", [("DATASET_REMOVED", BREAKING)]
    )  # fmt: skip
    back = assess(gone, snap(ID))
    assert (back.version, back.change_class, [c.kind for c in back.changes]) == ("2.0.1", "patch", ["DATASET_ADDED"])
    changed = assess(gone, snap(ID, NAME))  # back with a new field
    assert (changed.version, [c.kind for c in changed.changes]) == ("2.1.0", ["DATASET_ADDED", "FIELD_ADDED"])
    assert retire(None, replace(snap(), removed=True)).version is None  # never versioned: nothing to bump


def test_the_policy_decides_what_is_major():
    before, after = snap(ID, NAME, version="1.0.0"), snap(ID)  # a removal: backward yes, forward no
    assert assess(before, after, "FULL").version == "2.0.0"
    assert assess(before, after, "FORWARD").version == "2.0.0"
    assert assess(before, after, "BACKWARD").version == "1.1.0"
    assert assess(before, after, "NONE").version == "1.1.0"


def test_transitive_policies_check_every_earlier_version():
    v1 = snap(Field("a", Primitive("string")), version="1.0.0")
    v2 = snap(version="1.1.0")  # a removed: a new reader ignores it — backward compatible
    v3 = snap(Field("a", Primitive("int64")))  # a back as another type: fine against v2, not against v1
    plain = assess(v2, v3, "BACKWARD", [v1])
    transitive = assess(v2, v3, "BACKWARD_TRANSITIVE", [v1])
    assert (plain.version, plain.change_class) == ("1.2.0", "minor")
    assert (transitive.version, transitive.change_class) == ("2.0.0", "major")
    (breaking,) = [c for c in transitive.changes if c.severity == BREAKING]
    assert (breaking.path, breaking.kind, breaking.against) == ("a", "TYPE_CHANGED", "1.0.0")


@pytest.mark.parametrize(
    "version,cls,expected",
    [("1.2.3", "major", "2.0.0"), ("1.2.3", "minor", "1.3.0"), ("1.2.3", "patch", "1.2.4"), ("1.2.3", "none", "1.2.3")],
)
def test_bump(version, cls, expected):
    assert bump(version, cls) == expected
