import json
from dataclasses import replace
from datetime import datetime, timezone
from importlib.resources import files

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from lumos_dagster.floor.datatypes import (
    NO_DEFAULT,
    PRIMITIVE_KINDS,
    Array,
    Decimal,
    Enum,
    Field,
    Fixed,
    Map,
    Primitive,
    Schema,
    Struct,
    Time,
    Timestamp,
    UnionType,
    type_str,
    type_to_json,
)
from lumos_dagster.floor.model import (
    AssertionResult,
    ColumnMapping,
    ColumnProfile,
    ConflictVariant,
    Cost,
    DatasetRef,
    FileError,
    JobRef,
    LineageEdge,
    OperationalStats,
    Owner,
    PartialRead,
    Profile,
    Quality,
    SchemaChange,
    SchemaConflict,
    Snapshot,
)
from lumos_dagster.floor.snapshot_json import snapshot_dumps, snapshot_from_json, snapshot_loads, snapshot_to_json
from tests.conftest import examples

SCHEMA = json.loads(files("lumos_dagster").joinpath("snapshot.schema.json").read_text())
names = st.text("abcdefgh_xyz", min_size=1, max_size=8)
texts = st.none() | st.text(max_size=20)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
    max_leaves=5,
)
units = st.sampled_from(["s", "ms", "us", "ns"])
aliases = st.lists(names, max_size=2).map(tuple)  # of named types as of fields: Avro's
leaf_types = st.one_of(
    st.sampled_from(sorted(PRIMITIVE_KINDS)).map(Primitive),
    st.builds(Decimal, st.integers(1, 38), st.integers(0, 10)),
    st.builds(Timestamp, units, st.none() | st.sampled_from(["UTC", "Europe/Paris"])),
    st.builds(Time, units),
    st.builds(Fixed, st.integers(0, 64), st.none() | names, aliases),
    st.builds(Enum, st.lists(names, min_size=1, max_size=4).map(tuple), st.none() | names, st.none() | names, aliases),
)


def fields_of(types):
    return st.builds(
        Field,
        name=names,
        type=types,
        nullable=st.booleans(),
        default=st.just(NO_DEFAULT) | json_values,
        description=texts,
        native_type=texts,
        field_id=st.none() | st.integers(0, 1000),
        aliases=aliases,
        is_key=st.booleans(),
        terms=st.lists(names, max_size=2).map(tuple),
    )


types = st.recursive(
    leaf_types,
    lambda inner: st.one_of(
        st.builds(Array, inner, st.booleans()),
        st.builds(Map, leaf_types, inner, st.booleans()),
        st.builds(UnionType, st.lists(inner, min_size=2, max_size=3).map(tuple)),
        st.builds(Struct, st.lists(fields_of(inner), max_size=3).map(tuple), st.none() | names, aliases),
    ),
    max_leaves=6,
)
schemas = st.builds(Schema, st.lists(fields_of(types), max_size=5).map(tuple), st.none() | names, aliases)
moments = st.datetimes(min_value=datetime(2000, 1, 1), timezones=st.just(timezone.utc))
refs = st.builds(DatasetRef, st.sampled_from(["file", "s3"]), names, names, st.none() | st.sampled_from(["csv", "orc"]))
snapshots = st.builds(
    Snapshot,
    dataset=refs,
    partition_key=st.none() | st.just("2026-11-25"),
    captured_at=moments,
    schema=schemas,
    stats=st.builds(
        OperationalStats,
        file_count=st.integers(0, 10**6),
        total_bytes=st.integers(0, 10**12),
        row_count=st.none() | st.integers(0, 10**9),
        last_modified=st.none() | moments,
        partition_values=st.dictionaries(names, st.lists(names, max_size=3), max_size=2),
        usage=st.dictionaries(names, st.none() | st.integers(0, 10**9) | names, max_size=3),
    ),
    description=texts,
    domain=st.none() | names,
    owners=st.lists(
        st.builds(Owner, names, st.sampled_from(["user", "group"]), st.sampled_from(["DATAOWNER", "NONE"])), max_size=2
    ).map(tuple),
    tags=st.lists(names, max_size=3).map(tuple),
    upstream=st.lists(
        st.builds(
            LineageEdge,
            refs,
            st.lists(st.builds(ColumnMapping, names, names), max_size=2).map(tuple),
            st.none() | st.builds(JobRef, st.sampled_from(["sql", "dbt"]), names, names),
        ),
        max_size=2,
    ).map(tuple),
    terms=st.lists(names, max_size=2).map(tuple),
    sla=st.none() | st.sampled_from(["6h", "2d"]),
    quality=st.none()
    | st.builds(
        Quality,
        st.none() | st.floats(0, 1),
        st.sampled_from(["fresh", "stale", "unknown"]),
        st.none() | st.floats(0, 1e4),
        st.lists(
            st.builds(
                AssertionResult,
                names,
                st.sampled_from(["pass", "fail", "warn"]),
                st.sampled_from(["completeness", "validity"]),
                st.none() | names,
                st.sampled_from(["dbt", "great_expectations"]),
                texts,
                st.none() | st.just("2026-11-25T00:00:00+00:00"),
            ),
            max_size=2,
        ).map(tuple),
    ),
    profile=st.none()
    | st.builds(
        Profile,
        st.integers(0, 10**9),
        st.floats(0.01, 1),
        st.lists(
            st.builds(
                ColumnProfile, names, st.none() | st.floats(0, 1), st.none() | st.integers(0, 10**6), texts, texts
            ),
            max_size=2,
        ).map(tuple),
        st.none() | st.builds(PartialRead, *[st.integers(0, 10**12)] * 4),
    ),
    version=st.none() | st.just("1.2.3"),
    previous_version=st.none() | st.just("1.1.0"),
    change_class=st.none() | st.sampled_from(["new", "major", "minor", "patch"]),
    policy=st.none() | st.sampled_from(["FULL", "BACKWARD_TRANSITIVE"]),
    removed=st.booleans(),
    cost=st.none()
    | st.builds(
        Cost,
        st.just("2026-11"),
        st.floats(0, 1e6),
        st.floats(0, 1e6),
        st.floats(0, 1e6),
        st.sampled_from(["equal_split", "last_touch"]),
        st.sampled_from(["list", "bill"]),
    ),
    changes=st.lists(
        st.builds(
            SchemaChange,
            names,
            st.sampled_from(["FIELD_ADDED", "TYPE_PROMOTED"]),
            st.none() | names,
            st.none() | names,
            st.booleans(),
            st.booleans(),
            st.sampled_from(["BREAKING", "NON_BREAKING", "INFORMATIONAL"]),
            st.none() | st.just("1.0.0"),
        ),
        max_size=2,
    ).map(tuple),
    errors=st.lists(st.builds(FileError, names, st.text(max_size=10)), max_size=2).map(tuple),
    conflicts=st.lists(
        st.builds(
            SchemaConflict,
            names,
            st.lists(
                st.builds(ConflictVariant, names, st.lists(names, max_size=2).map(tuple), st.integers(1, 9)),
                min_size=1,
                max_size=2,
            ).map(tuple),
            st.text(max_size=10),
        ),
        max_size=1,
    ).map(tuple),
)


@settings(max_examples=examples(150), deadline=None)
@given(snapshots)
def test_round_trip_is_exact_and_the_document_matches_its_json_schema(snapshot):
    document = snapshot_to_json(snapshot)
    jsonschema.validate(document, SCHEMA)
    text = snapshot_dumps(snapshot)
    assert snapshot_loads(text) == snapshot
    assert snapshot_dumps(snapshot_loads(text)) == text  # export → import → export is identical


def test_null_default_is_not_the_same_as_no_default():
    with_null = Field("a", Primitive("string"), default=None)
    without = Field("a", Primitive("string"))
    assert with_null.has_default and not without.has_default
    assert Schema((with_null,)).fingerprint() != Schema((without,)).fingerprint()


def test_fingerprint_ignores_descriptions_and_native_spellings():
    a = Schema((Field("id", Primitive("int64"), description="the id", native_type="INT64"),))
    b = Schema((Field("id", Primitive("int64"), description="renamed doc", native_type="long"),))
    c = Schema((Field("id", Primitive("int32")),))
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()


def _avro_like(name: str | None = None, record: str | None = None, fixed: str | None = None) -> Schema:
    return Schema(
        (
            Field("id", Primitive("int64"), nullable=False),
            Field("addr", Struct((Field("zip", Primitive("string")),), record)),
            Field("h", Fixed(16, fixed)),
            Field("s", Enum(("A", "B"), "Status")),
        ),
        name,
    )


def test_a_schema_without_record_or_fixed_names_keeps_its_document_and_fingerprint():
    """Names are written only when present: documents and fingerprints of schemas from formats without
    names (every one but Avro) are what they were before names were kept (the hash was taken then)."""
    schema = _avro_like()
    assert schema.fingerprint() == "07f6175a8549f561"
    doc = snapshot_to_json(Snapshot(DatasetRef("file", "a", "/a"), None, datetime(2026, 1, 1), schema=schema))
    assert "schema_name" not in doc
    assert doc["schema"][1]["type"] == {
        "kind": "struct",
        "fields": [{"name": "zip", "type": "string", "nullable": True}],
    }
    assert doc["schema"][2]["type"] == {"kind": "fixed", "size": 16}


def test_record_and_fixed_names_are_in_the_document_and_the_fingerprint():
    named = _avro_like("shop.Order", "shop.Address", "shop.Md5")
    doc = snapshot_to_json(Snapshot(DatasetRef("file", "a", "/a"), None, datetime(2026, 1, 1), schema=named))
    assert doc["schema_name"] == "shop.Order"
    assert (doc["schema"][1]["type"]["name"], doc["schema"][2]["type"]["name"]) == ("shop.Address", "shop.Md5")
    assert snapshot_from_json(doc).schema == named
    prints = {s.fingerprint() for s in (_avro_like(), named, _avro_like("shop.Sale", "shop.Address", "shop.Md5"),
                                        _avro_like("shop.Order", "shop.Place", "shop.Md5"),
                                        _avro_like("shop.Order", "shop.Address", "shop.Sha"))}  # fmt: skip
    assert len(prints) == 5  # each name is part of what readers depend on


def test_aliases_of_named_types_are_in_the_document_and_the_fingerprint():
    """Aliases are written only when there are some, as names are: a named schema without aliases keeps
    the document and the fingerprint it had before aliases were kept (the hash was taken then); each
    alias, of the top-level record, a record, a fixed or an enum, is part of what readers depend on."""
    named = _avro_like("shop.Order", "shop.Address", "shop.Md5")
    assert named.fingerprint() == "38a92c3fc0448c32"
    doc = snapshot_to_json(Snapshot(DatasetRef("file", "a", "/a"), None, datetime(2026, 1, 1), schema=named))
    assert "aliases" not in json.dumps(doc) and doc["schema"][3]["type"] == {
        "kind": "enum",
        "symbols": ["A", "B"],
        "name": "Status",
    }

    def aliased(i: int) -> Schema:  # the named type of field i given an alias
        fields = list(named.fields)
        fields[i] = replace(fields[i], type=replace(fields[i].type, aliases=("shop.Old",)))
        return replace(named, fields=tuple(fields))

    variants = [replace(named, aliases=("shop.Sale",)), aliased(1), aliased(2), aliased(3)]
    for schema in variants:
        doc = snapshot_to_json(Snapshot(DatasetRef("file", "a", "/a"), None, datetime(2026, 1, 1), schema=schema))
        jsonschema.validate(doc, SCHEMA)
        assert snapshot_from_json(doc).schema == schema
    assert snapshot_to_json(Snapshot(DatasetRef("file", "a", "/a"), None, datetime(2026, 1, 1), schema=variants[0]))[
        "schema_aliases"
    ] == ["shop.Sale"]
    assert type_to_json(variants[2].fields[2].type) == {"kind": "fixed", "size": 16, "name": "shop.Md5",
                                                         "aliases": ["shop.Old"]}  # fmt: skip
    assert len({s.fingerprint() for s in (named, *variants)}) == 5


def test_flatten_walks_through_arrays_and_maps():
    item = Struct((Field("sku", Primitive("string")),))
    schema = Schema(
        (
            Field("items", Array(item)),
            Field("attrs", Map(Primitive("string"), Struct((Field("v", Primitive("int32")),)))),
            Field("id", Primitive("int64")),
        )
    )
    assert [p for p, _ in schema.flatten()] == ["items", "items.sku", "attrs", "attrs.v", "id"]


def test_type_strings_are_readable():
    t = Map(Primitive("string"), Array(Decimal(10, 2)))
    assert type_str(t) == "map<string, array<decimal(10,2)>>"
    assert type_str(Timestamp("us", "UTC")) == "timestamp(us, tz=UTC)"
    assert type_str(Timestamp("ms")) == "timestamp(ms)"


def test_old_or_foreign_documents_are_refused_with_the_reason():
    doc = snapshot_to_json(Snapshot(DatasetRef("file", "a", "/a"), None, datetime(2026, 1, 1, tzinfo=timezone.utc)))
    doc["format_version"] = "lumos.snapshot/0"
    try:
        snapshot_from_json(doc)
    except ValueError as exc:
        assert "lumos.snapshot/0" in str(exc) and "lumos.snapshot/1" in str(exc)
    else:
        raise AssertionError("an unknown format version was accepted")
