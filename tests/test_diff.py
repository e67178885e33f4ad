from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lumos_dagster.floor.datatypes import Field, Fixed, Primitive, Schema, Struct, schema_from_json
from lumos_dagster.floor.model import BREAKING, INFORMATIONAL, POLICIES
from lumos_dagster.schema.diff import diff_schemas, diff_snapshots
from lumos_dagster.schema.versioning import assess, judge
from tests.cases import load_cases
from tests.conftest import examples
from tests.test_versioning import snap

CASES = load_cases("diff.yaml")


def _diff(case):
    return diff_schemas(schema_from_json(case["old"]), schema_from_json(case["new"]))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["title"])
def test_rule(case):
    got = [[c.path, c.kind, c.backward, c.forward] for c in _diff(case)]
    assert got == case["changes"]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c["title"])
def test_rule_under_every_policy(case, policy):
    breaking = any(c.severity == BREAKING for c in judge(_diff(case), policy))
    assert breaking == (policy.removesuffix("_TRANSITIVE") in case["breaks"])


def test_old_and_new_values_are_readable():
    (change,) = _diff(next(c for c in CASES if c["title"] == "int widened to long"))
    assert (change.old, change.new) == ("int32", "int64")
    (removed,) = _diff(next(c for c in CASES if c["title"].startswith("field removed (old")))
    assert removed.old == "string" and removed.new is None


def test_dataset_level_changes_are_informational():
    from lumos_dagster.floor.model import DatasetRef, LineageEdge, Owner

    old = snap(tags=("a",))
    new = snap(
        description="now documented",
        owners=(Owner("ann"),),
        tags=("a", "b"),
        domain="sales",
        upstream=(LineageEdge(DatasetRef("file", "raw/x", "/x")),),
    )
    kinds = {c.kind: c for c in judge(diff_snapshots(old, new), "FULL")}
    assert set(kinds) == {
        "DATASET_DESCRIPTION_CHANGED",
        "TAGS_CHANGED",
        "OWNERS_CHANGED",
        "DOMAIN_CHANGED",
        "LINEAGE_CHANGED",
    }
    assert all(c.severity == INFORMATIONAL for c in kinds.values())
    assert kinds["TAGS_CHANGED"].new == "a, b"


def test_datasets_appearing_and_disappearing():
    (added,) = judge(diff_snapshots(None, snap()), "FULL")
    (removed,) = judge(diff_snapshots(snap(), None), "FULL")
    assert (added.kind, added.severity) == ("DATASET_ADDED", INFORMATIONAL)
    assert (removed.kind, removed.severity) == ("DATASET_REMOVED", BREAKING)
    assert judge(diff_snapshots(snap(), None), "NONE")[0].severity != BREAKING


#: the Avro 1.11 specification's "Schema Resolution" rules (and its Aliases section), each of which
#: has at least one row tagged `avro:` in tests/cases/diff.yaml
AVRO_RULES = {
    "match.primitive": "both schemas have same primitive type (else no match)",
    "match.container": "both are arrays / both are maps (an array never matches a map)",
    "match.record": "both schemas are records (a record never matches a primitive)",
    "match.enum_name": "both schemas are enums whose (unqualified) names match",
    "match.record_name": "both schemas are records whose (unqualified) names match",
    "match.fixed": "both schemas are fixed whose sizes and (unqualified) names match",
    "match.named_alias": "a reader record's, enum's or fixed's aliases match the writer's full name (Aliases)",
    "promote.int_long": "int is promotable to long",
    "promote.int_float": "int is promotable to float",
    "promote.int_double": "int is promotable to double",
    "promote.long_float": "long is promotable to float",
    "promote.long_double": "long is promotable to double",
    "promote.float_double": "float is promotable to double",
    "promote.string_bytes": "string is promotable to bytes",
    "promote.bytes_string": "bytes is promotable to string",
    "promote.none": "no other promotion (a narrowing is an error)",
    "record.order": "the ordering of fields may be different: fields are matched by name",
    "record.recursive": "schemas for fields with the same name in both records are resolved recursively",
    "record.writer_field_ignored": "a writer field the reader lacks is ignored",
    "record.reader_default": "a reader field with a default the writer lacks takes the default",
    "record.reader_no_default": "a reader field without a default the writer lacks is an error",
    "record.alias": "a reader field's aliases match the writer's field (Aliases)",
    "enum.symbol_missing": "a writer symbol not in the reader's enum is an error",
    "enum.symbol_missing_default": "... unless the reader's enum has a default",
    "array.items": "arrays resolve their item schemas",
    "map.values": "maps resolve their value schemas",
    "union.both": "both unions: each writer branch resolves to a reader branch",
    "union.both_promoted": "both unions: a writer branch may resolve through a promotion",
    "union.reader_only": "reader's a union, writer's not: a matching reader branch resolves it",
    "union.reader_only_no_match": "reader's a union, writer's not: no branch matches, an error",
    "union.writer_only": "writer's a union, reader's not: every writer branch must resolve",
    "union.writer_only_branch_fails": "writer's a union, reader's not: a branch that does not resolve is an error",
    "union.empty": "the empty union writes nothing: readable by anything",
}


def test_every_avro_resolution_rule_has_a_row():
    tagged = {rule for case in CASES for rule in case.get("avro", ())}
    assert tagged - AVRO_RULES.keys() == set(), "a row names a rule not in AVRO_RULES"
    assert AVRO_RULES.keys() - tagged == set(), "rules with no row in tests/cases/diff.yaml"


def _renames_pairwise(removed, added):
    """The rename rule as it was written first, comparing every pair: the oracle for `_renames`."""
    added, out = list(added), []
    for o in removed:
        n = next((a for a in added if (o.field_id is not None and o.field_id == a.field_id)
                  or o.name in a.aliases or a.name in o.aliases), None)  # fmt: skip
        if n is not None:
            added.remove(n)
            out.append((o, n))
    return out


_rename_fields = st.builds(
    Field,
    name=st.sampled_from("abcdef"),
    type=st.just(Primitive("int64")),
    field_id=st.none() | st.integers(1, 4),
    aliases=st.lists(st.sampled_from("abcdef"), max_size=2).map(tuple),
)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(_rename_fields, max_size=6), st.lists(_rename_fields, max_size=6))
def test_renames_found_through_indexes_are_the_pairwise_rules(removed, added):
    from lumos_dagster.schema.diff import _renames

    assert [(id(o), id(n)) for o, n in _renames(removed, added)] == [
        (id(o), id(n)) for o, n in _renames_pairwise(removed, added)
    ]


def test_names_a_stored_avro_snapshot_lacks_are_no_change():
    """Avro snapshots stored before record and fixed names were kept have none: the next capture,
    named, reports nothing and keeps the version (an unnamed type matches any name)."""

    def schema(record=None, fixed=None, top=None):
        zip_code = Field("zip", Primitive("string"), nullable=False)
        return Schema((Field("addr", Struct((zip_code,), record)), Field("h", Fixed(16, fixed))), top)

    bare, named = schema(), schema("shop.Address", "shop.Md5", "shop.Order")
    assert diff_schemas(bare, named) == [] and diff_schemas(named, bare) == []
    stored = replace(snap(version="1.4.0"), schema=bare)
    assert assess(stored, replace(snap(), schema=named)).version == "1.4.0"
    assert assess(stored, replace(snap(), schema=schema("shop.Address", "shop.Sha", "shop.Order"))).version == "1.4.0"
    renamed = assess(
        replace(stored, schema=named), replace(snap(), schema=schema("shop.Place", "shop.Md5", "shop.Order"))
    )
    assert renamed.version == "2.0.0" and [(c.path, c.old, c.new) for c in renamed.changes] == [
        ("addr", "record shop.Address", "record shop.Place")
    ]


def test_aliases_without_a_rename_are_no_change():
    """Aliases a stored Avro snapshot lacks (kept since) change its fingerprint, not its version:
    a name matched as before is read as before. A rename an alias proves is a change."""
    zip_code = Field("zip", Primitive("string"), nullable=False)
    bare = Schema((Field("addr", Struct((zip_code,), "shop.Address")),), "shop.Order")
    aliased = Schema((Field("addr", Struct((zip_code,), "shop.Address", ("shop.Place",))),), "shop.Order", ("a.B",))
    assert bare.fingerprint() != aliased.fingerprint()
    assert diff_schemas(bare, aliased) == [] and diff_schemas(aliased, bare) == []
    assert assess(replace(snap(version="1.4.0"), schema=bare), replace(snap(), schema=aliased)).version == "1.4.0"
    renamed = replace(aliased, name="shop.Sale", aliases=("shop.Order",))
    change = assess(replace(snap(version="1.4.0"), schema=bare), replace(snap(), schema=renamed), "BACKWARD")
    assert change.version == "1.5.0" and [(c.path, c.kind, c.backward, c.forward) for c in change.changes] == [
        ("", "TYPE_CHANGED", True, False)
    ]
