import gzip
import json
from decimal import Decimal as D

import fastavro
import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from lumos_dagster.floor.datatypes import (
    NO_DEFAULT,
    Array,
    Decimal,
    Enum,
    Fixed,
    Map,
    Primitive,
    Time,
    Timestamp,
    UnionType,
    type_str,
)
from lumos_dagster.floor.errors import SchemaReadError
from lumos_dagster.formats import format_of, read_file_result, read_file_schema, sniff_format

NESTED = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("price", pa.decimal128(12, 3)),
        pa.field("at", pa.timestamp("us", tz="UTC")),
        pa.field("local_at", pa.timestamp("ms")),
        pa.field("day", pa.date32()),
        pa.field("clock", pa.time64("us")),
        pa.field("raw", pa.binary()),
        pa.field("digest", pa.binary(16)),
        pa.field("small", pa.int8()),
        pa.field("unsigned", pa.uint32()),
        pa.field("ratio", pa.float32()),
        pa.field(
            "address", pa.struct([pa.field("city", pa.string()), pa.field("geo", pa.struct([("lat", pa.float64())]))])
        ),
        pa.field("items", pa.list_(pa.struct([("sku", pa.string()), ("qty", pa.int32())]))),
        pa.field("attrs", pa.map_(pa.string(), pa.int64())),
        pa.field("matrix", pa.list_(pa.list_(pa.float64()))),
        pa.field("label", pa.dictionary(pa.int32(), pa.string())),
    ]
)
EXPECTED_NESTED = {
    "id": "int64",
    "price": "decimal(12,3)",
    "at": "timestamp(us, tz=UTC)",
    "local_at": "timestamp(ms)",
    "day": "date",
    "clock": "time(us)",
    "raw": "binary",
    "digest": "fixed(16)",
    "small": "int8",
    "unsigned": "uint32",
    "ratio": "float32",
    "address": "struct<city: string, geo: struct<lat: float64>>",
    "items": "array<struct<sku: string, qty: int32>>",
    "attrs": "map<string, int64>",
    "matrix": "array<array<float64>>",
    "label": "string",
}


def _types(schema):
    return {f.name: type_str(f.type) for f in schema.fields}


def test_parquet_nested_types_rows_and_native_types(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(NESTED.empty_table(), path)
    fs = read_file_schema(str(path))
    assert _types(fs.schema) == EXPECTED_NESTED
    assert fs.row_count == 0
    by_name = {f.name: f for f in fs.schema.fields}
    assert by_name["id"].nullable is False and by_name["price"].nullable is True
    assert by_name["at"].native_type.startswith("INT64 Timestamp(isAdjustedToUTC=true")
    flat = [p for p, _ in fs.schema.flatten()]
    assert ["address", "address.city", "address.geo", "address.geo.lat", "items", "items.sku", "items.qty"] == [
        p for p in flat if p.startswith(("address", "items"))
    ]


def test_parquet_field_ids_and_row_counts(tmp_path):
    schema = pa.schema([pa.field("a", pa.int32(), metadata={"PARQUET:field_id": "7"})])
    path = tmp_path / "ids.parquet"
    pq.write_table(pa.table({"a": list(range(1234))}, schema=schema), path, row_group_size=500)
    fs = read_file_schema(str(path))
    assert fs.schema.fields[0].field_id == 7
    assert fs.row_count == 1234


def test_orc(tmp_path):
    path = tmp_path / "t.orc"
    table = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "tags": pa.array([["a"], []], pa.list_(pa.string())),
            "amount": pa.array([D("1.50"), None], pa.decimal128(10, 2)),
        }
    )
    orc.write_table(table, path)
    fs = read_file_schema(str(path))
    assert _types(fs.schema) == {"id": "int64", "tags": "array<string>", "amount": "decimal(10,2)"}
    assert fs.row_count == 2


AVRO_SCHEMA = {
    "type": "record",
    "name": "Node",
    "namespace": "test.lumos",
    "fields": [
        {"name": "id", "type": "long", "doc": "the id", "aliases": ["ident"]},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "t", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["A", "B"], "default": "B"}},
        {"name": "hash", "type": {"type": "fixed", "name": "MD5", "size": 16}},
        {"name": "maybe", "type": ["null", "string"], "default": None},
        {"name": "either", "type": ["int", "string"]},
        {"name": "either_or_null", "type": ["null", "int", "string"], "default": None},
        {"name": "scores", "type": {"type": "map", "values": ["null", "double"]}},
        {"name": "children", "type": {"type": "array", "items": "Node"}, "default": []},
        {"name": "again", "type": ["null", "Status"], "default": None},
    ],
}


def test_avro_types_defaults_docs_and_recursion(tmp_path):
    path = tmp_path / "t.avro"
    record = {
        "id": 1,
        "amount": D("1.25"),
        "at": 0,
        "local": 0,
        "day": 0,
        "t": 0,
        "uid": "00000000-0000-0000-0000-000000000000",
        "status": "A",
        "hash": b"0" * 16,
        "maybe": None,
        "either": 3,
        "either_or_null": None,
        "scores": {"x": None},
        "children": [],
        "again": None,
    }
    with open(path, "wb") as fh:
        fastavro.writer(fh, fastavro.parse_schema(AVRO_SCHEMA), [record] * 3, codec="deflate", sync_interval=10)
    fs = read_file_schema(str(path))
    f = {x.name: x for x in fs.schema.fields}
    assert fs.row_count == 3
    assert f["id"].type == Primitive("int64") and f["id"].description == "the id" and f["id"].aliases == ("ident",)
    assert f["id"].default is NO_DEFAULT and f["id"].nullable is False
    assert f["amount"].type == Decimal(9, 2)
    assert f["at"].type == Timestamp("us", "UTC") and f["local"].type == Timestamp("ms", None)
    assert f["day"].type == Primitive("date") and f["t"].type == Time("ms") and f["uid"].type == Primitive("uuid")
    assert f["status"].type == Enum(("A", "B"), "test.lumos.Status", default="B")
    assert f["hash"].type == Fixed(16, "test.lumos.MD5")  # full names, as enums keep theirs
    assert fs.schema.name == "test.lumos.Node"
    assert f["maybe"].nullable and f["maybe"].default is None and f["maybe"].type == Primitive("string")
    assert f["either"].type == UnionType((Primitive("int32"), Primitive("string"))) and not f["either"].nullable
    assert f["either_or_null"].nullable and isinstance(f["either_or_null"].type, UnionType)
    assert f["scores"].type == Map(Primitive("string"), Primitive("float64"), True)
    # a recursive reference is not expanded (it would never end): its type is unknown, its native type says why
    assert f["children"].type == Array(Primitive("unknown"), False)
    assert f["children"].native_type == "array<test.lumos.Node>" and f["children"].default == []
    assert f["again"].type == Enum(("A", "B"), "test.lumos.Status", default="B") and f["again"].nullable


def test_csv_tsv_gzip_and_json(tmp_path):
    (tmp_path / "a.csv").write_text("id,name,price,when\n1,x,1.5,2026-01-01\n2,y,2.0,2026-01-02\n")
    (tmp_path / "a.tsv").write_text("id\tname\n1\tx\n")
    with gzip.open(tmp_path / "b.csv.gz", "wt") as fh:
        fh.write("id,flag\n1,true\n")
    (tmp_path / "c.jsonl").write_text(json.dumps({"id": 1, "user": {"name": "a", "tags": ["x"]}}) + "\n")
    (tmp_path / "d.json").write_text(json.dumps([{"id": 1, "v": 1.5}, {"id": 2, "v": None, "w": "z"}]))
    assert _types(read_file_schema(str(tmp_path / "a.csv")).schema) == {
        "id": "int64",
        "name": "string",
        "price": "float64",
        "when": "date",
    }
    assert _types(read_file_schema(str(tmp_path / "a.tsv")).schema) == {"id": "int64", "name": "string"}
    assert _types(read_file_schema(str(tmp_path / "b.csv.gz")).schema) == {"id": "int64", "flag": "boolean"}
    assert _types(read_file_schema(str(tmp_path / "c.jsonl")).schema) == {
        "id": "int64",
        "user": "struct<name: string, tags: array<string>>",
    }
    assert _types(read_file_schema(str(tmp_path / "d.json")).schema) == {"id": "int64", "v": "float64", "w": "string"}


def test_a_large_json_array_is_sampled_not_loaded(tmp_path):
    records = [{"id": i, "payload": "x" * 200} for i in range(20_000)]  # ~4.5 MB, beyond one block
    (tmp_path / "big.json").write_text(json.dumps(records))
    assert _types(read_file_schema(str(tmp_path / "big.json")).schema) == {"id": "int64", "payload": "string"}


@pytest.mark.parametrize(
    "name,content,reason",
    [
        ("empty.parquet", b"", "empty file (0 bytes)"),
        ("truncated.parquet", b"PAR1garbage-without-footer", "no PAR1 footer"),
        ("junk.avro", b"not avro at all", "cannot read avro"),
        ("junk.orc", b"ORC but not really", "cannot read orc"),
        ("bad.json", b'{"a": 1}\n{"a": [1, {"b": }\n', "cannot read json"),
        ("ragged.csv", b"id,name\n1,x,extra\n", "cannot read csv"),
        ("notes.txt", b"hello", "unrecognised format"),
    ],
)
def test_unreadable_files_give_a_reason_naming_the_file(tmp_path, name, content, reason):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(SchemaReadError) as err:
        read_file_schema(str(path))
    assert err.value.path == str(path)
    assert reason in err.value.reason
    assert str(err.value).startswith(str(path))
    assert read_file_result((str(path), None)).error == err.value.reason


def test_a_missing_file_is_a_file_error_not_a_crash(tmp_path):
    assert "file not found" in read_file_result((str(tmp_path / "gone.parquet"), "parquet")).error


@pytest.mark.parametrize(
    "path,fmt",
    [
        ("a/part-0.snappy.parquet", "parquet"),
        ("x.CSV", "csv"),
        ("x.csv.gz", "csv"),
        ("x.ndjson", "json"),
        ("x.jsonl.zst", "json"),
        ("x.orc", "orc"),
        ("x.avro", "avro"),
        ("x.parquet.crc", None),
        ("README", None),
    ],
)
def test_format_from_the_name(path, fmt):
    assert format_of(path) == fmt


def test_format_from_magic_bytes_when_the_name_says_nothing(tmp_path):
    p = tmp_path / "part-00000"
    pq.write_table(pa.table({"a": [1]}), p)
    assert sniff_format(str(p)) == "parquet"
    assert read_file_schema(str(p)).row_count == 1


TORN = [
    # (file, text, the fields it gives): a file cut off while being written keeps its types
    ("torn.csv", "id,flag\n1,true\n2,fa", [("id", "int64"), ("flag", "boolean")]),
    ("no-line-end.csv", "id,flag\n1,true\n2,false", [("id", "int64"), ("flag", "boolean")]),
    ("only-a-torn-row.csv", "id,flag\n1,tr", [("id", "int64"), ("flag", "string")]),  # nothing whole to go by
    ("torn.json", '{"a": 1, "b": true}\n{"a": 2, "b": fa', [("a", "int64"), ("b", "boolean")]),
    ("quoted.csv", 'id,note\n1,"a"\n2,"two\nlines"', [("id", "int64"), ("note", "string")]),
]


@pytest.mark.parametrize("name,text,fields", TORN, ids=[t[0] for t in TORN])
def test_a_text_file_cut_off_while_being_written_keeps_the_types_of_its_whole_lines(tmp_path, name, text, fields):
    path = tmp_path / name
    path.write_text(text)
    result = read_file_result((str(path), None))
    assert result.error is None
    assert [(f.name, type_str(f.type)) for f in result.schema.fields] == fields
