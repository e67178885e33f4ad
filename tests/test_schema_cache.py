"""The cache of converted schemas (lumos_dagster.formats.arrow.converted_schema): a hit must give
exactly what converting afresh gives, and two schemas that convert differently must never share
an entry."""

from decimal import Decimal as D

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lumos_dagster.floor.datatypes import Schema
from lumos_dagster.formats import arrow, read_file_schema
from lumos_dagster.formats.arrow import converted_schema, from_arrow_schema
from lumos_dagster.formats.parquet import _native_types, read_parquet


@pytest.fixture(autouse=True)
def empty_cache():
    # every test starts from no entries, and leaves none for the others
    arrow._CONVERTED.clear()
    yield
    arrow._CONVERTED.clear()


def _uncached(path) -> Schema:
    """What read_parquet computed before the cache."""
    pf = pq.ParquetFile(path)
    return from_arrow_schema(pf.schema_arrow, _native_types(pf.schema).get)


def _described(schema: Schema) -> list[tuple]:
    return [(f.name, f.type, f.native_type, f.nullable, f.field_id) for f in schema.fields]


DECIMALS = pa.table(
    {
        "price": pa.array([D("1.23"), D("4.56")], pa.decimal128(9, 2)),
        "at": pa.array([1, 2], pa.timestamp("us", tz="UTC")),
        "tags": pa.array([["a"], []], pa.list_(pa.string())),
    }
)


def test_files_with_one_schema_share_one_conversion_equal_to_converting_afresh(tmp_path):
    first, second = tmp_path / "1.parquet", tmp_path / "2.parquet"
    pq.write_table(DECIMALS, first)
    pq.write_table(DECIMALS.slice(1), second)  # other rows, same schema
    a, b = read_file_schema(str(first)).schema, read_file_schema(str(second)).schema
    assert a == _uncached(first) and _described(a) == _described(_uncached(first))
    assert b is a  # the second file's footer is a hit


def test_equal_arrow_schemas_with_other_parquet_types_get_their_own_native_types(tmp_path):
    # the Arrow schemas (the IPC half of the key) are equal; only the physical type differs
    plain, as_int = tmp_path / "plain.parquet", tmp_path / "int.parquet"
    pq.write_table(DECIMALS, plain)
    pq.write_table(DECIMALS, as_int, store_decimal_as_integer=True)
    assert pq.ParquetFile(plain).schema_arrow.equals(pq.ParquetFile(as_int).schema_arrow, check_metadata=True)
    a, b = read_file_schema(str(plain)).schema, read_file_schema(str(as_int)).schema
    assert a.fields[0].native_type.startswith("FIXED_LEN_BYTE_ARRAY")
    assert b.fields[0].native_type.startswith("INT32")
    assert a == _uncached(plain) and b == _uncached(as_int)
    assert len(arrow._CONVERTED) == 2


def _with_child_metadata(field_id: bytes, description: bytes) -> pa.Schema:
    child = pa.field("zip", pa.string(), metadata={b"PARQUET:field_id": field_id, b"description": description})
    return pa.schema([pa.field("address", pa.struct([pa.field("street", pa.string()), child]))])


def test_schemas_differing_only_in_a_nested_fields_metadata_are_not_confused():
    one = converted_schema(_with_child_metadata(b"1", b"postal code"))
    two = converted_schema(_with_child_metadata(b"2", b"the post's code"))
    zip_one, zip_two = one.fields[0].type.fields[1], two.fields[0].type.fields[1]
    assert (zip_one.field_id, zip_one.description) == (1, "postal code")
    assert (zip_two.field_id, zip_two.description) == (2, "the post's code")
    # and each hit gives back its own
    assert converted_schema(_with_child_metadata(b"1", b"postal code")) is one


def test_the_cache_keeps_only_the_latest_schemas(monkeypatch):
    monkeypatch.setattr(arrow, "CACHED_SCHEMAS", 3)
    schemas = [pa.schema([pa.field(f"c{i}", pa.int64())]) for i in range(10)]
    converted = [converted_schema(s) for s in schemas]
    assert len(arrow._CONVERTED) == 3
    # the three kept are the latest, still hits; the first was evicted, so converted anew
    assert all(converted_schema(s) is c for s, c in zip(schemas[-3:], converted[-3:], strict=True))
    again = converted_schema(schemas[0])
    assert again is not converted[0] and again == converted[0]
    assert len(arrow._CONVERTED) == 3
    # the least recently read goes first: kept now are [8], [9], [0]; reading [8] makes [9] the
    # oldest, so [1] evicts [9] and [8] stays (first in, first out would evict [8])
    converted_schema(schemas[8])
    converted_schema(schemas[1])
    assert converted_schema(schemas[8]) is converted[8]


def test_reading_one_file_through_two_parquet_file_objects_hits(tmp_path):
    # the printed Parquet schema starts with the object's address: it must stay out of the key
    path = tmp_path / "one.parquet"
    pq.write_table(DECIMALS, path)
    first, second = read_parquet(str(path)).schema, read_parquet(str(path)).schema
    assert second is first
    assert len(arrow._CONVERTED) == 1
    (_, spelling), *_ = arrow._CONVERTED
    assert "object at" not in spelling and "Decimal(precision=9, scale=2)" in spelling
