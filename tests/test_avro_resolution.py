"""The `avro:` rows of tests/cases/diff.yaml against real Avro readers: data written with one
side's schema, read back with the other's. The verdicts Lumos gives (backward: new reads old;
forward: old reads new) must be what the reader does.

fastavro is the referee: it implements the whole resolution table (string↔bytes, enum
defaults, aliases, unqualified names), which Apache Avro's Python package does not. Where
fastavro departs from the specification, Apache Avro referees (`APACHE_REFEREE`)."""

import io
import json
from itertools import zip_longest

import avro.errors
import avro.io
import avro.schema
import fastavro
import pytest

from lumos_dagster.floor.datatypes import Array, Enum, Field, Fixed, Map, Primitive, Struct, UnionType, schema_from_json
from lumos_dagster.schema.diff import diff_schemas
from lumos_dagster.schema.resolution import resolves
from tests.cases import load_cases

AVRO_ROWS = [c for c in load_cases("diff.yaml") if "avro" in c]
PRIMITIVES = {"int32": "int", "int64": "long", "float32": "float", "float64": "double", "string": "string"}
PRIMITIVES |= {"binary": "bytes", "boolean": "boolean"}
# one value per type, each only its own type holds (so a union writes it through that branch)
VALUES = {"int32": [1], "int64": [2**40], "float32": [1.5], "float64": [1e300], "string": ["x"], "binary": [b"x"]}
VALUES |= {"boolean": [True]}


def _record_name(t: Struct) -> str:  # its own, else the same record on both sides gets the same name
    return t.name or "R_" + t.fields[0].name


def to_avro(t, nullable: bool = False):
    if isinstance(t, Primitive):
        out = PRIMITIVES[t.kind]
    elif isinstance(t, Enum):
        out = {"type": "enum", "name": t.name or "E", "symbols": list(t.symbols), "aliases": list(t.aliases)}
        out |= {"default": t.default} if t.default is not None else {}
    elif isinstance(t, Fixed):
        out = {"type": "fixed", "name": t.name or "F", "size": t.size, "aliases": list(t.aliases)}
    elif isinstance(t, Struct):
        out = {"type": "record", "name": _record_name(t), "fields": [_field(f) for f in t.fields]}
        out |= {"aliases": list(t.aliases)}  # full names: fastavro matches the writer's full name
    elif isinstance(t, Array):
        out = {"type": "array", "items": to_avro(t.element, t.element_nullable)}
    elif isinstance(t, Map):
        assert t.key == Primitive("string"), "Avro map keys are strings"
        out = {"type": "map", "values": to_avro(t.value, t.value_nullable)}
    else:
        assert isinstance(t, UnionType)
        return (["null"] if nullable else []) + [to_avro(b) for b in t.branches]
    return ["null", out] if nullable else out


def _field(f: Field) -> dict:
    out = {"name": f.name, "type": to_avro(f.type, f.nullable), "aliases": list(f.aliases)}
    return out | ({"default": f.default} if f.has_default else {})


def values(t, nullable: bool = False) -> list:
    """Values covering every branch, symbol and field of `t`."""
    extra = [None] if nullable else []
    if isinstance(t, Primitive):
        return VALUES[t.kind] + extra
    if isinstance(t, Enum):
        return list(t.symbols) + extra
    if isinstance(t, Fixed):
        return [b"\0" * t.size] + extra
    if isinstance(t, Struct):
        columns = [values(f.type, f.nullable) for f in t.fields]
        rows = [
            # a shorter column repeats its first value
            {f.name: col[0] if v is None else v for f, v, col in zip(t.fields, r, columns, strict=True)}
            for r in zip_longest(*columns)
        ]
        return rows + extra
    if isinstance(t, Array):
        return [[v] for v in values(t.element, t.element_nullable)] + extra
    if isinstance(t, Map):
        return [{"k": v} for v in values(t.value, t.value_nullable)] + extra
    return [v for b in t.branches for v in values(b)] + extra


#: rows where fastavro departs from the specification, and why
APACHE_REFEREE = {
    "the empty union is readable by anything, and reads nothing": "fastavro lets an empty reader union "
    "read anything; the specification finds no branch that matches",
}


def fastavro_reads(writer: list[Field], reader: list[Field]) -> bool:
    buf = io.BytesIO()
    fastavro.writer(
        buf, fastavro.parse_schema(to_avro(Struct(tuple(writer))) | {"name": "Row"}), values(Struct(tuple(writer)))
    )
    buf.seek(0)
    try:
        list(fastavro.reader(buf, reader_schema=to_avro(Struct(tuple(reader))) | {"name": "Row"}))
        return True
    except fastavro.read.SchemaResolutionError:
        return False


def _parse(fields) -> avro.schema.Schema:
    return avro.schema.parse(json.dumps(to_avro(Struct(tuple(fields))) | {"name": "Row"}))


def apache_reads(writer: list[Field], reader: list[Field]) -> bool:
    """Whether Apache Avro reads every value `writer` may hold with `reader`'s schema."""
    w, r = _parse(writer), _parse(reader)
    buf = io.BytesIO()
    for row in values(Struct(tuple(writer))):
        avro.io.DatumWriter(w).write(row, avro.io.BinaryEncoder(buf))
    end, decoder = buf.tell(), avro.io.BinaryDecoder(io.BytesIO(buf.getvalue()))
    try:
        while decoder.reader.tell() < end:
            avro.io.DatumReader(w, r).read(decoder)
        return True  # Avro resolves per value: a writer with no possible value (the empty union) always reads
    except avro.errors.SchemaResolutionException:
        return False


def avro_reads(case, writer: list[Field], reader: list[Field]) -> bool:
    return (apache_reads if case["title"] in APACHE_REFEREE else fastavro_reads)(writer, reader)


@pytest.mark.parametrize("case", AVRO_ROWS, ids=lambda c: c["title"])
def test_verdicts_are_what_an_avro_reader_does(case):
    old, new = schema_from_json(case["old"]).fields, schema_from_json(case["new"]).fields
    changes = diff_schemas(schema_from_json(case["old"]), schema_from_json(case["new"]))
    backward = all(c.backward for c in changes)
    forward = all(c.forward for c in changes)
    assert (backward, forward) == (avro_reads(case, old, new), avro_reads(case, new, old))


@pytest.mark.parametrize("case", AVRO_ROWS, ids=lambda c: c["title"])
def test_resolves_agrees_on_whole_records(case):
    old, new = schema_from_json(case["old"]).fields, schema_from_json(case["new"]).fields
    assert resolves(Struct(old), Struct(new)) == avro_reads(case, old, new)
    assert resolves(Struct(new), Struct(old)) == avro_reads(case, new, old)
