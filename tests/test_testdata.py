"""Every real-world file in ../shared/testdata: a schema or a readable error, never a
crash or a hang (pytest-timeout fails a test that hangs)."""

import os

import fastavro
import pytest
from avro.datafile import DataFileReader  # Apache Avro's own reader, independent of fastavro
from avro.io import DatumReader

from lumos_dagster.floor.datatypes import type_str
from lumos_dagster.formats import read_file_result, sniff_format
from tests.conftest import TESTDATA

FILES = sorted(
    os.path.join(d, f)
    for sub in ("parquet-testing/data", "parquet-testing/bad_data", "avro/data")
    for d, _, names in os.walk(TESTDATA / sub)
    for f in names
    if not f.endswith((".md", ".txt", ".py", ".yaml"))
)


def _id(path: str) -> str:
    return os.path.relpath(path, TESTDATA)


def test_the_test_data_is_there(testdata):
    assert len(FILES) > 100


@pytest.mark.timeout(30)
@pytest.mark.parametrize("path", FILES, ids=_id)
def test_every_file_gives_a_schema_or_a_reason(path):
    result = read_file_result((path, sniff_format(path)))
    assert result.path == path
    if result.error is None:
        assert result.schema is not None and result.schema.fields
        assert all(type_str(f.type) for _, f in result.schema.flatten())
    else:
        assert result.schema is None
        assert len(result.error) > 10 and "Traceback" not in result.error


def _read(rel: str):
    return read_file_result((str(TESTDATA / rel), None))


@pytest.mark.parametrize(
    "rel,reason",
    [
        ("parquet-testing/data/uniform_encryption.parquet.encrypted", "encrypted Parquet footer"),
        ("parquet-testing/data/encrypt_columns_and_footer.parquet.encrypted", "encrypted Parquet footer"),
        ("parquet-testing/bad_data/PARQUET-1481.parquet", "Invalid physical column type"),
        ("parquet-testing/data/incorrect_map_schema.parquet", "Map keys must be annotated as required"),
    ],
)
def test_known_bad_files_say_why(rel, reason):
    result = _read(rel)
    assert result.error is not None and reason in result.error


def test_known_good_parquet_files():
    nested = _read("parquet-testing/data/nested_structs.rust.parquet")
    assert type_str(nested.schema.fields[0].type).startswith("struct<min: int64, max: int64")
    assert not nested.schema.fields[0].nullable
    plain = _read("parquet-testing/data/alltypes_plain.parquet")
    assert plain.row_count == 8
    assert {f.name: type_str(f.type) for f in plain.schema.fields}["timestamp_col"] == "timestamp(ns)"
    maps = _read("parquet-testing/data/nested_maps.snappy.parquet")
    assert type_str(maps.schema.fields[0].type) == "map<string, map<int32, boolean>>"
    plaintext_footer = _read("parquet-testing/data/encrypt_columns_plaintext_footer.parquet.encrypted")
    assert plaintext_footer.error is None  # the footer is readable even if the columns are not


@pytest.mark.parametrize("rel", [f for f in FILES if f.endswith(".avro")], ids=_id)
def test_avro_row_counts_from_block_headers_match_a_full_decode(rel):
    result = read_file_result((rel, "avro"))
    with open(rel, "rb") as fh:
        try:
            decoded = sum(1 for _ in fastavro.reader(fh))
        except UnicodeDecodeError:  # fastavro refuses binary header metadata; Apache Avro's reader does not
            fh.seek(0)
            decoded = sum(1 for _ in DataFileReader(fh, DatumReader()))
    assert result.error is None and result.row_count == decoded


def test_avro_with_binary_header_metadata():
    result = _read("avro/data/syncInMeta.avro")
    assert result.error is None
    assert [f.name for f in result.schema.fields] == ["ID", "First", "Last", "Phone", "Age"]
    assert result.row_count > 0
