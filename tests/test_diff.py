import pytest

from lumos_dagster.model import BREAKING, INFORMATIONAL, schema_from_json
from lumos_dagster.schema.diff import diff_schemas, diff_snapshots
from lumos_dagster.schema.versioning import POLICIES, judge
from tests.cases import load_cases
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
    from lumos_dagster.model import DatasetRef, LineageEdge, Owner

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
