"""Avro as its specification and its reference readers read it: schemas written as other writers spell
them (the Avro C library writes `{"type": "null"}`), non-record files, damaged files, and Apache Avro's
own compatibility cases (tests/cases/avro_compatibility.yaml) judged by `lumos diff --policy backward`.

fastavro writes every file here and judges what a reader reads from it."""

import io
import json
import os

import fastavro
import pytest
from click.testing import CliRunner

from lumos_dagster.cli import main
from lumos_dagster.floor.datatypes import Fixed, Primitive, Schema, UnionType
from lumos_dagster.floor.model import FileError
from lumos_dagster.formats import read_file_result, read_file_schema
from lumos_dagster.formats.avro import from_avro_schema, read_avsc
from lumos_dagster.formats.merge import merge_schemas
from lumos_dagster.run.contents import file_contents
from lumos_dagster.schema.diff import diff_schemas
from lumos_dagster.schema.proposed import ProposalError, parse_proposal
from lumos_dagster.sources.discovery import DatasetFile, FileEntry
from tests.cases import load_cases


def record(*fields) -> dict:
    return {"type": "record", "name": "Row", "fields": [{"name": f"f{i}", "type": t} for i, t in enumerate(fields)]}


def write(path, schema, rows, **options) -> str:
    with open(path, "wb") as fh:
        fastavro.writer(fh, fastavro.parse_schema(schema), rows, **options)
    return str(path)


def fastavro_rows(path) -> list:
    with open(path, "rb") as fh:
        return list(fastavro.reader(fh))


# ------------------------------------------------------------------ a primitive written as an object

#: the plain spelling, the object spelling some writers use (the Avro C library, Debezium), and a value
SPELLINGS = [
    (["null", "int"], [{"type": "null"}, "int"], None),
    (["null", "int"], [{"type": "null"}, {"type": "int"}], None),
    (["int", "null"], ["int", {"type": "null"}], None),
    (["null", "string"], [{"type": "null"}, {"type": "string", "avro.java.string": "String"}], None),
    (["null", "int", "string"], [{"type": "null"}, "int", {"type": "string"}], "x"),
    ({"type": "array", "items": ["null", "long"]}, {"type": "array", "items": [{"type": "null"}, "long"]}, [None, 1]),
    (
        {"type": "map", "values": ["null", "double"]},
        {"type": "map", "values": [{"type": "null"}, "double"]},
        {"k": None},
    ),
    ("long", {"type": "long", "connect.name": "ignored"}, 5),
    ("int", {"type": "int", "logicalType": "no-such-logical-type"}, 7),  # an unknown logical type is ignored
]


@pytest.mark.parametrize("plain,spelled,value", SPELLINGS, ids=lambda s: json.dumps(s))
def test_a_primitive_written_as_an_object_is_that_primitive(tmp_path, plain, spelled, value):
    a, b = from_avro_schema(record(plain)), from_avro_schema(record(spelled))
    assert [(f.type, f.nullable) for f in a.fields] == [(f.type, f.nullable) for f in b.fields]
    assert diff_schemas(a, b) == [] and diff_schemas(b, a) == []
    # in files: the same schema read, and fastavro reads the same values from both
    rows = [{"f0": value}]
    p, s = write(tmp_path / "p.avro", record(plain), rows), write(tmp_path / "s.avro", record(spelled), rows)
    assert fastavro_rows(p) == fastavro_rows(s) == rows
    assert diff_schemas(read_file_schema(p).schema, read_file_schema(s).schema) == []
    assert read_file_schema(s).schema.fields[0].nullable == (a.fields[0].nullable)


def test_a_nullable_int_with_null_as_an_object_is_a_nullable_int():
    (f,) = from_avro_schema(record([{"type": "null"}, "int"])).fields
    assert (f.type, f.nullable) == (Primitive("int32"), True)  # not union<null,int32> not null


# ------------------------------------------------------------------ a file whose schema is not a record


@pytest.mark.parametrize(
    "schema,values,nullable",
    [
        (["null", "string"], ["a", None], True),
        ([{"type": "null"}, "string"], ["a", None], True),
        (["string", "null"], ["a", None], True),
        ("long", [1, 2], False),
        ({"type": "long"}, [1], False),
        ("null", [None], True),
        (["int", "string"], [1, "x"], False),
        ({"type": "array", "items": "int"}, [[1]], False),
    ],
    ids=json.dumps,
)
def test_a_file_whose_schema_is_not_a_record_is_one_field_named_value(tmp_path, schema, values, nullable):
    """A non-record Avro file is one column, `value`, of the writer schema's type; it is nullable
    exactly when that schema admits null (a union with null, or null itself)."""
    path = write(tmp_path / "v.avro", schema, values)
    assert fastavro_rows(path) == values  # fastavro reads what was written, nulls included
    (f,) = read_file_schema(path).schema.fields
    assert (f.name, f.nullable) == ("value", nullable)
    assert (f.name, f.nullable) == ("value", any(v is None for v in values))
    avsc = tmp_path / "v.avsc"
    avsc.write_text(json.dumps(schema))
    assert read_avsc(str(avsc)).fields == read_file_schema(path).schema.fields


def test_the_empty_union_admits_no_value_not_even_null():
    (f,) = from_avro_schema(record([])).fields
    assert (f.type, f.nullable) == (UnionType(()), False)
    (top,) = from_avro_schema([]).fields
    assert (top.type, top.nullable) == (UnionType(()), False)


# ------------------------------------------------------------------ Apache Avro's compatibility cases

TABLE = load_cases("avro_compatibility.yaml")
SCHEMAS, CASES = TABLE["schemas"], TABLE["cases"]

#: the cases that differ only by a record's or a fixed's name, once not in the canonical model: each is
#: incompatible for Avro, and for Lumos a TYPE_CHANGED at a path (schemas not wrapped), naming both names
#: where the renamed type is the field's own (a union's branch is shown within its union)
RENAMES = {
    ("UNION_INT_RECORD1", "UNION_INT_RECORD2"): ("value", None),
    ("EMPTY_RECORD2", "EMPTY_RECORD1"): ("", ("record Record1", "record Record2")),
    ("FIXED_4_BYTES", "FIXED_4_ANOTHER_NAME"): ("value", ("fixed AnotherName", "fixed Fixed")),
}


def wrapped(schema) -> dict:
    """`schema` as the one field of a record: Avro resolves such records as it resolves their fields."""
    return {"type": "record", "name": "Wrapper", "fields": [{"name": "value", "type": schema}]}


def lumos_backward(tmp_path, reader, writer) -> bool:
    """`lumos diff WRITER READER --policy backward`: exit 0 when the new (reader) schema reads the old data."""
    (tmp_path / "writer.avsc").write_text(json.dumps(writer))
    (tmp_path / "reader.avsc").write_text(json.dumps(reader))
    result = CliRunner().invoke(main, ["diff", "writer.avsc", "reader.avsc", "--policy", "backward"])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code == 0


def test_the_transcribed_schemas_are_valid_avro():
    for schema in SCHEMAS.values():
        fastavro.parse_schema(schema)  # a slip in the transcription raises


@pytest.mark.parametrize("wrap", [False, True], ids=["top level", "as a record field"])
def test_lumos_diff_agrees_with_every_avro_compatibility_case(tmp_path, monkeypatch, wrap):
    monkeypatch.chdir(tmp_path)  # no lumos.yaml: the policy given is the one applied
    monkeypatch.delenv("LUMOS_CONFIG", raising=False)
    agree, disagree = 0, []
    for reader, writer, compatible, source in CASES:
        r, w = SCHEMAS[reader], SCHEMAS[writer]
        if lumos_backward(tmp_path, wrapped(r) if wrap else r, wrapped(w) if wrap else w) == compatible:
            agree += 1
        else:
            disagree.append(f"reader {reader}, writer {writer}: Avro says {compatible} ({source})")
    assert len(CASES) == 140 and agree == 140, "\n".join(disagree)


@pytest.mark.parametrize("wrap", [False, True], ids=["top level", "as a record field"])
def test_a_record_or_fixed_renamed_is_a_type_change_naming_both(tmp_path, wrap):
    """The pairs that differ only by a name: Avro refuses them, the diff says which names differ."""
    by_pair = {(r, w): ok for r, w, ok, _ in CASES}
    for (reader, writer), (path, names) in RENAMES.items():
        assert by_pair[reader, writer] is False  # incompatible for Avro only because the names differ
        r, w = SCHEMAS[reader], SCHEMAS[writer]
        if wrap:
            r, w, path = wrapped(r), wrapped(w), path or "value"
        (tmp_path / "w.avsc").write_text(json.dumps(w))
        (tmp_path / "r.avsc").write_text(json.dumps(r))
        (change,) = diff_schemas(read_avsc(str(tmp_path / "w.avsc")), read_avsc(str(tmp_path / "r.avsc")))
        assert (change.path, change.kind, change.backward, change.forward) == (path, "TYPE_CHANGED", False, False)
        if names:
            assert (change.old, change.new) == names


# ------------------------------------------------------------------ names of records and fixed

NAMED = {
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [
        {"name": "addr", "type": {"type": "record", "name": "Address", "fields": [{"name": "zip", "type": "string"}]}},
        {"name": "line", "type": {"type": "record", "name": "Line", "namespace": "crypto",
                                  "fields": [{"name": "h", "type": {"type": "fixed", "name": "Md5", "size": 16}}]}},
        {"name": "digest", "type": "crypto.Md5"},  # named from shop, defined in crypto
        {"name": "previous", "type": ["null", "Address"], "default": None},
    ],
}  # fmt: skip


def test_every_way_into_lumos_keeps_the_full_names_of_records_and_fixed(tmp_path):
    path = write(tmp_path / "o.avro", NAMED, [])
    (tmp_path / "o.avsc").write_text(json.dumps(NAMED))
    schema = read_file_schema(path).schema
    addr, line, digest, previous = (f.type for f in schema.fields)
    assert (schema.name, addr.name, line.name, digest.name, previous.name) == (
        "shop.Order", "shop.Address", "crypto.Line", "crypto.Md5", "shop.Address"
    )  # fmt: skip
    assert line.fields[0].type == digest  # a reference is read in its type's own namespace
    assert read_avsc(str(tmp_path / "o.avsc")) == parse_proposal("avro", NAMED)
    # the same names and types (the fingerprint leaves out native types, which fastavro spells anew)
    assert (
        read_avsc(str(tmp_path / "o.avsc")).fingerprint() == schema.fingerprint() != Schema(schema.fields).fingerprint()
    )
    printed = CliRunner().invoke(main, ["schema", path])  # `lumos schema` prints the top-level name too
    assert json.loads(printed.stdout)["name"] == "shop.Order"
    assert parse_proposal("lumos", printed.stdout) == schema
    with pytest.raises(ProposalError, match="name must be a string"):
        parse_proposal("lumos", {**json.loads(printed.stdout), "name": 5})


# ------------------------------------------------------------------ aliases of named types

#: `shop.Order` and its fixed `shop.Md5` renamed to `shop.Sale` and `crypto.Hash`, each with its old name
#: as an alias: `Order` written without a dot is in `shop`, Sale's namespace; `Sha` in `crypto`
ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [{"name": "h", "type": {"type": "fixed", "name": "Md5", "size": 2}}],
}
SALE = {"type": "record", "name": "Sale", "namespace": "shop", "aliases": ["Order"],
        "fields": [{"name": "h", "type": {"type": "fixed", "name": "Hash", "namespace": "crypto", "size": 2,
                                          "aliases": ["shop.Md5", "Sha"]}}]}  # fmt: skip


def fastavro_reads(path, reader) -> bool:
    with open(path, "rb") as fh:
        try:
            return bool(list(fastavro.reader(fh, reader_schema=reader)))
        except fastavro.read.SchemaResolutionError:
            return False


def test_a_rename_the_readers_aliases_prove_is_read_as_avro_reads_it(tmp_path, monkeypatch):
    """Aliases are kept as full names, resolved in their type's namespace as the spec says; a reader
    whose aliases name the writer's types reads its data (fastavro, `lumos diff --policy backward`),
    while the writer's own aliases are not read: the other way round breaks."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LUMOS_CONFIG", raising=False)
    (tmp_path / "sale.avsc").write_text(json.dumps(SALE))
    sale = read_avsc(str(tmp_path / "sale.avsc"))
    assert (sale.name, sale.aliases) == ("shop.Sale", ("shop.Order",))
    assert sale.fields[0].type == Fixed(2, "crypto.Hash", ("shop.Md5", "crypto.Sha"))
    in_file = read_file_schema(write(tmp_path / "empty.avro", SALE, [])).schema  # files keep them too
    assert (in_file.aliases, in_file.fields[0].type) == (sale.aliases, sale.fields[0].type)
    assert merge_schemas([("a.avro", in_file), ("b.avro", in_file)])[0].aliases == ("shop.Order",)  # a dataset's
    printed = CliRunner().invoke(main, ["schema", str(tmp_path / "empty.avro")]).stdout  # and `lumos schema`
    assert json.loads(printed)["aliases"] == ["shop.Order"] and parse_proposal("lumos", printed) == in_file
    with pytest.raises(ProposalError, match="aliases must be a list of strings"):
        parse_proposal("lumos", {**json.loads(printed), "aliases": "shop.Order"})
    old_data = write(tmp_path / "order.avro", ORDER, [{"h": b"ab"}])
    new_data = write(tmp_path / "sale.avro", SALE, [{"h": b"ab"}])
    assert fastavro_reads(old_data, SALE) and not fastavro_reads(new_data, ORDER)
    assert lumos_backward(tmp_path, reader=SALE, writer=ORDER)
    assert not lumos_backward(tmp_path, reader=ORDER, writer=SALE)
    changes = diff_schemas(from_avro_schema(ORDER), sale)
    assert [(c.path, c.kind, c.old, c.new, c.backward, c.forward) for c in changes] == [
        ("", "TYPE_CHANGED", "record shop.Order", "record shop.Sale", True, False),
        ("h", "TYPE_CHANGED", "fixed shop.Md5", "fixed crypto.Hash", True, False),
    ]


# ------------------------------------------------------------------ a damaged file with a readable header

SCHEMA = record("long", ["null", "string"])


def intact(tmp_path) -> bytes:
    rows = [{"f0": i, "f1": None if i % 3 else f"row {i}"} for i in range(200)]
    return open(write(tmp_path / "intact.avro", SCHEMA, rows, sync_interval=256), "rb").read()


def damaged_files(tmp_path) -> dict[str, bytes]:
    data = intact(tmp_path)
    sync = data[-16:]  # a file ends with a sync marker; the header holds it first, the first block ends with it
    first_block_end = data.index(sync, data.index(sync) + 16)
    return {
        "truncated.avro": data[:-40],  # cut inside the last block
        "garbage.avro": data + b"trailing garbage that is no Avro block",
        "corrupt.avro": data[:first_block_end] + bytes(16) + data[first_block_end + 16 :],  # a sync marker zeroed
    }


def test_fastavro_reads_the_header_of_each_damaged_file_and_fails_on_its_data(tmp_path):
    for name, data in damaged_files(tmp_path).items():
        reader = fastavro.reader(io.BytesIO(data))  # the header reads
        assert reader.writer_schema["fields"][0]["name"] == "f0", name
        with pytest.raises(Exception):  # noqa: B017 - fastavro raises several kinds, each a refusal of the data
            list(reader)


def test_a_damaged_file_keeps_its_header_schema_and_is_marked_damaged(tmp_path):
    good = read_file_schema(write(tmp_path / "good.avro", SCHEMA, [{"f0": 1, "f1": None}]))
    for name, data in damaged_files(tmp_path).items():
        path = tmp_path / name
        path.write_bytes(data)
        result = read_file_result((str(path), None))
        assert result.error is None, (name, result.error)
        assert result.schema == good.schema, name
        assert result.row_count is None  # the blocks cannot all be counted
        assert result.warning.startswith("damaged: block ") and "\n" not in result.warning, (name, result.warning)


def test_a_damaged_file_is_reported_by_name_with_its_schema_kept(tmp_path):
    (tmp_path / "ok.avro").write_bytes(intact(tmp_path))
    (tmp_path / "bad.avro").write_bytes(damaged_files(tmp_path)["truncated.avro"])
    paths = [str(tmp_path / "ok.avro"), str(tmp_path / "bad.avro")]
    files = [(p, DatasetFile(FileEntry(os.path.basename(p), os.path.getsize(p), 0.0))) for p in paths]
    contents = file_contents(files, {p: read_file_result((p, None)) for p in paths})
    assert contents.schema == read_file_schema(paths[0]).schema
    (err,) = contents.errors
    assert isinstance(err, FileError) and err.path == paths[1] and err.reason.startswith("damaged")
    assert contents.stats.row_count is None  # one file's rows are unknown: no partial total

    result = CliRunner().invoke(main, ["schema", paths[1]])  # `lumos schema`: the schema, and a warning
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["fields"][0]["name"] == "f0"
    assert f"{paths[1]}: damaged" in result.stderr


def test_a_file_whose_header_is_cut_is_still_refused(tmp_path):
    path = tmp_path / "cut.avro"
    path.write_bytes(intact(tmp_path)[:30])
    with pytest.raises(Exception):  # noqa: B017 - the reference refuses it too
        fastavro.reader(io.BytesIO(path.read_bytes()))
    result = read_file_result((str(path), None))
    assert result.schema is None and result.error.startswith("cannot read avro")
