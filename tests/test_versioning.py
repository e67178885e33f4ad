from datetime import datetime, timezone

import pytest

from lumos_dagster.model import NO_DEFAULT, DatasetRef, Field, Owner, Primitive, Schema, Snapshot, Struct
from lumos_dagster.versioning import next_version

ID = Field("id", Primitive("int64"), nullable=False)
NAME = Field("name", Primitive("string"))


def snap(*fields, description=None, owners=(), version=None) -> Snapshot:
    return Snapshot(
        DatasetRef("file", "d", "/d"),
        "2026-01-01",
        datetime(2026, 1, 1, tzinfo=timezone.utc),
        schema=Schema(tuple(fields)),
        description=description,
        owners=owners,
        version=version,
    )


CASES = [
    ("first readable snapshot", None, snap(ID), "1.0.0"),
    ("first snapshot unreadable: no version yet", None, snap(), None),
    ("nothing changed", snap(ID, version="1.2.3"), snap(ID), "1.2.3"),
    ("nullable field added", snap(ID, version="1.2.3"), snap(ID, NAME), "1.3.0"),
    (
        "defaulted required field added",
        snap(ID, version="1.2.3"),
        snap(ID, Field("n", Primitive("int32"), nullable=False, default=0)),
        "1.3.0",
    ),
    (
        "required field added",
        snap(ID, version="1.2.3"),
        snap(ID, Field("n", Primitive("int32"), nullable=False)),
        "2.0.0",
    ),
    ("field removed", snap(ID, NAME, version="1.2.3"), snap(ID), "2.0.0"),
    ("type changed", snap(ID, version="1.2.3"), snap(Field("id", Primitive("string"), nullable=False)), "2.0.0"),
    (
        "nullable made required",
        snap(NAME, version="1.2.3"),
        snap(Field("name", Primitive("string"), nullable=False)),
        "2.0.0",
    ),
    (
        "nested nullable field added",
        snap(Field("u", Struct((ID,))), version="1.0.0"),
        snap(Field("u", Struct((ID, NAME)))),
        "1.1.0",
    ),
    (
        "nested field removed",
        snap(Field("u", Struct((ID, NAME))), version="1.0.0"),
        snap(Field("u", Struct((ID,)))),
        "2.0.0",
    ),
    ("description changed", snap(ID, version="1.2.3"), snap(ID, description="now documented"), "1.2.4"),
    (
        "field description changed",
        snap(ID, version="1.2.3"),
        snap(Field("id", Primitive("int64"), nullable=False, description="key")),
        "1.2.4",
    ),
    ("owners changed", snap(ID, version="1.2.3"), snap(ID, owners=(Owner("ann"),)), "1.2.4"),
    ("unreadable after readable keeps the version", snap(ID, version="3.1.0"), snap(), "3.1.0"),
]


@pytest.mark.parametrize("title,previous,current,expected", CASES, ids=[c[0] for c in CASES])
def test_next_version(title, previous, current, expected):
    assert next_version(previous, current) == expected


def test_a_changed_default_is_a_compatible_schema_change():
    before = snap(Field("n", Primitive("int32"), default=1), version="1.0.0")
    assert next_version(before, snap(Field("n", Primitive("int32"), default=2))) == "1.1.0"
    assert next_version(before, snap(Field("n", Primitive("int32"), default=NO_DEFAULT))) == "1.1.0"
