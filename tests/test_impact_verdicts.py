"""Impact verdicts: each consumer of a breaking change is BREAKING, COMPATIBLE or POSSIBLY BREAKING,
following column lineage where code gives it."""

import json
from datetime import UTC, datetime

import pytest
import yaml
from click.testing import CliRunner

from lumos_dagster.cli import main
from lumos_dagster.floor.config import load_config, parse_config
from lumos_dagster.floor.datatypes import Field, Primitive, Schema
from lumos_dagster.floor.model import (
    BREAKING,
    NON_BREAKING,
    ColumnMapping,
    DatasetRecord,
    DatasetRef,
    JobRef,
    SchemaChange,
    Snapshot,
)
from lumos_dagster.lineage.catalogue import resolve_datasets
from lumos_dagster.lineage.resolve import CodeDoc, CodeEdge, refresh_code
from lumos_dagster.lineage.verdicts import (
    COMPATIBLE,
    NO_ACTION,
    POSSIBLY_BREAKING,
    UNREACHED,
    Reach,
    combine,
    consumer_verdicts,
    edge_reach,
    root_reach,
)
from lumos_dagster.schema.versioning import assess
from lumos_dagster.store import SnapshotStore


def change(path: str, kind: str = "FIELD_REMOVED", severity: str = BREAKING) -> SchemaChange:
    return SchemaChange(path, kind, "string", None, True, False, severity)


T0 = datetime(2026, 11, 21, tzinfo=UTC)
ALL = frozenset({"FIELD_REMOVED status"})
STATUS = Reach(BREAKING, {"status": ALL})
UNKNOWN = Reach(POSSIBLY_BREAKING, None, blind=("a",))
M = ColumnMapping

# (parent reach, the edge's column mappings, verdict, reached columns (None: unknown))
EDGE_CASES = [
    pytest.param(STATUS, [M("state", "status")], BREAKING, {"state"}, id="reads the dropped column"),
    pytest.param(STATUS, [M("id", "id"), M("total", "amount")], COMPATIBLE, set(), id="reads other columns only"),
    pytest.param(STATUS, [], POSSIBLY_BREAKING, None, id="no column lineage"),
    pytest.param(UNREACHED, [], COMPATIBLE, set(), id="parent not reached: nothing to pass on"),
    pytest.param(UNKNOWN, [M("x", "id")], POSSIBLY_BREAKING, {"x"}, id="parent unknown: any column may be hit"),
    pytest.param(UNKNOWN, [], POSSIBLY_BREAKING, None, id="unknown twice"),
    pytest.param(Reach(BREAKING, {"addr": ALL}), [M("city", "addr.city")], BREAKING, {"city"}, id="nested under"),
    pytest.param(Reach(BREAKING, {"addr.city": ALL}), [M("a", "addr")], BREAKING, {"a"}, id="a struct holding it"),
    pytest.param(Reach(BREAKING, {"addr": ALL}), [M("a", "address")], COMPATIBLE, set(), id="a prefix is no nesting"),
    pytest.param(Reach(BREAKING, {"tags": ALL}), [M("t", "tags[]")], BREAKING, {"t"}, id="array elements"),
    pytest.param(Reach(BREAKING, {"": ALL}), [M("x", "id")], BREAKING, {"x"}, id="a dataset-level change"),
]


@pytest.mark.parametrize("parent, columns, verdict, reached", EDGE_CASES)
def test_the_verdict_through_one_edge(parent, columns, verdict, reached):
    r = edge_reach(parent, "a", columns, ALL)
    assert r.verdict == verdict
    assert (None if r.columns is None else set(r.columns)) == reached


def test_root_counts_breaking_changes_only_and_combine_takes_the_worst():
    assert root_reach([change("note", "FIELD_ADDED", NON_BREAKING)]) == UNREACHED
    assert root_reach([change("status"), change("status", "TYPE_CHANGED")]).columns == {
        "status": {"FIELD_REMOVED status", "TYPE_CHANGED status"}
    }
    both = combine([edge_reach(STATUS, "a", [M("s", "status")], ALL), UNKNOWN, UNREACHED])
    assert (both.verdict, both.columns, both.blind) == (BREAKING, None, ("a",))
    assert combine([UNREACHED, UNREACHED]) == UNREACHED


def _catalogue(lineage: dict[str, list[tuple[str, list[tuple[str, str]]]]], declared: dict[str, list[str]]):
    """lineage: dataset → [(upstream, [(column, upstream column)])] read from code; declared:
    dataset → upstreams declared in lumos.yaml (no column lineage)."""
    names = sorted(set(lineage) | set(declared) | {u for es in lineage.values() for u, _ in es})
    config = parse_config({"datasets": [{"name": n, "upstream": declared.get(n, [])} for n in names]})
    job = JobRef("sql", "jobs", "x.sql")
    code = {
        n: CodeDoc(edges=tuple(CodeEdge(u, job, tuple(M(d, s) for d, s in cols)) for u, cols in edges))
        for n, edges in lineage.items()
    }
    return resolve_datasets(config, [], {}, code)


def test_verdicts_pass_down_column_by_column():
    catalogue = _catalogue(
        {
            "clean/orders": [("raw/orders", [("id", "id"), ("status", "status")])],
            "clean/amounts": [("raw/orders", [("id", "id"), ("amount", "amount")])],
            "marts/status": [("clean/orders", [("n", "status")])],
            "marts/ids": [("clean/orders", [("id", "id")])],
            "marts/deep": [("marts/blind", [("x", "x")])],
        },
        {"marts/blind": ["raw/orders"]},  # declared only: no column lineage
    )
    got = {v.name: v for v in consumer_verdicts(catalogue, "raw/orders", [change("status")])}
    assert {n: v.label for n, v in got.items()} == {
        "clean/orders": BREAKING,
        "clean/amounts": COMPATIBLE,
        "marts/blind": "POSSIBLY BREAKING (no column lineage)",
        "marts/status": BREAKING,
        "marts/ids": COMPATIBLE,
        "marts/deep": "POSSIBLY BREAKING (no column lineage)",
    }
    assert got["marts/status"].reads == ("n ← clean/orders.status",)
    assert got["marts/status"].recommendation == "update marts/status.n ← clean/orders.status before releasing"
    assert got["marts/status"].reached_by == ("FIELD_REMOVED status",)
    assert (got["marts/ids"].reached_by, got["marts/ids"].recommendation) == ((), NO_ACTION)
    assert got["marts/blind"].recommendation == (
        "check marts/blind (reads raw/orders with no column lineage) before releasing"
    )
    assert got["marts/deep"].recommendation == (
        "check marts/deep.x ← marts/blind.x before releasing (column lineage above it is unknown)"
    )
    assert sorted(v.name for v in consumer_verdicts(catalogue, "raw/orders", [change("status")], 1)) == [
        "clean/amounts",
        "clean/orders",
        "marts/blind",
    ]
    # nothing breaking: every consumer is compatible
    assert {v.verdict for v in consumer_verdicts(catalogue, "raw/orders", [])} == {COMPATIBLE}


def test_lumos_impact_gives_each_consumer_a_verdict_from_sql_lineage(tmp_path):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "clean.sql").write_text(
        "INSERT INTO clean.orders SELECT id, status FROM raw.orders;\n"
        "INSERT INTO clean.amounts SELECT id, amount FROM raw.orders;\n"
    )
    names = ["raw/orders", "clean/orders", "clean/amounts"]
    path = tmp_path / "lumos.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "sources": [{"name": "lake", "root": "lake"}],
                "store": {"path": "store.db"},
                "lineage": {"sql": [{"path": "jobs"}]},
                "datasets": [{"name": "clean/orders", "owners": ["group:analytics"]}],
            }
        )
    )
    config = load_config(str(path))
    store = SnapshotStore(config.store_url)
    store.upsert_datasets([DatasetRecord(n, "file", "lake", n, "parquet") for n in names])
    ref = DatasetRef("file", "raw/orders", "/lake/raw/orders", "parquet")
    int64, string = Primitive("int64"), Primitive("string")
    v1 = Schema((Field("id", int64, False), Field("status", string, False), Field("amount", int64, False)))
    first = assess(None, Snapshot(ref, "2026-11-21", T0, schema=v1))
    store.put([first])
    refresh_code(store, config)  # what `lumos discover` does: the SQL's column lineage, kept in the store
    v2 = Schema((v1.fields[0], v1.fields[2]))
    store.put([assess(first, Snapshot(ref, "2026-11-22", T0, schema=v2))])
    store.close()

    result = CliRunner().invoke(main, ["impact", "raw/orders", "-c", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [(d["name"], d["verdict"], d["reached_by"], d["recommendation"]) for d in doc["downstream"]] == [
        ("clean/amounts", COMPATIBLE, [], NO_ACTION),
        ("clean/orders", BREAKING, ["FIELD_REMOVED status"],
         "update clean/orders.status ← raw/orders.status before releasing"),
    ]  # fmt: skip
    text = CliRunner().invoke(main, ["impact", "raw/orders", "-c", str(path)]).stdout
    assert "└ clean/orders  BREAKING  (depth 1, via raw/orders; analytics)" in text
    assert "└ clean/amounts  COMPATIBLE" in text and "no action" in text
