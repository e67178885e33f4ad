import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lumos_dagster.floor.datatypes import Decimal, Field, Primitive, Schema, Timestamp, schema_from_json, schema_to_json
from lumos_dagster.formats.merge import MAX_CONFLICT_FILES, _merge, merge_schemas, widen
from tests.cases import load_cases
from tests.conftest import examples
from tests.test_model import schemas


@pytest.mark.parametrize("case", load_cases("merge.yaml"), ids=lambda c: c["title"])
def test_merge(case):
    files = [(path, schema_from_json(fields)) for path, fields in case["files"].items()]
    merged, conflicts = merge_schemas(files)
    assert schema_to_json(merged) == case["merged"]
    got = {
        c.path: {"resolution": c.resolution, "variants": {v.type: v.file_count for v in c.variants}} for c in conflicts
    }
    assert got == case["conflicts"]
    for c in conflicts:  # the files named are real inputs, each under the type it had
        for v in c.variants:
            assert set(v.files) <= set(case["files"])


def test_conflicts_name_a_sample_of_files_and_count_them_all():
    files = [(f"f{i}", Schema((Field("a", Primitive("int32" if i % 2 else "string")),))) for i in range(40)]
    _, (conflict,) = merge_schemas(files)
    assert {v.type: v.file_count for v in conflict.variants} == {"string": 20, "int32": 20}
    assert all(len(v.files) == MAX_CONFLICT_FILES for v in conflict.variants)


@pytest.mark.parametrize(
    "a,b,expected",
    [
        (Primitive("int8"), Primitive("int64"), Primitive("int64")),
        (Primitive("uint8"), Primitive("uint32"), Primitive("uint32")),
        (Primitive("uint32"), Primitive("int16"), Primitive("int64")),
        (Primitive("uint64"), Primitive("int64"), None),
        (Primitive("float32"), Primitive("int32"), Primitive("float64")),
        (Primitive("string"), Primitive("binary"), None),
        (Decimal(38, 0), Decimal(38, 10), None),
        (Timestamp("ms", "UTC"), Timestamp("ns", "UTC"), Timestamp("ns", "UTC")),
        (Primitive("null"), Decimal(5, 1), Decimal(5, 1)),
    ],
)
def test_widen(a, b, expected):
    assert widen(a, b) == expected
    assert widen(b, a) == expected


@settings(max_examples=examples(200), deadline=None)
@given(schemas, st.integers(1, 4))
def test_files_written_alike_merge_to_what_the_full_merge_gives(schema, copies):
    """merge_schemas skips the merge when every file's schema is the same: the shortcut must give what
    merging would."""
    files = [(f"f{i}.parquet", schema) for i in range(copies)]
    assert merge_schemas(files) == _merge(files)
