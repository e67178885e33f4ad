"""`lumos diff`, `gate`, `impact`, `history`, `evolution`, `release`: exit codes and output shapes."""

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest
import yaml
from click.testing import CliRunner

from lumos_dagster.cli import main
from lumos_dagster.floor.config import load_config
from lumos_dagster.floor.datatypes import Field, Primitive, Schema
from lumos_dagster.floor.model import DatasetRecord, DatasetRef, LineageEdge, Snapshot
from lumos_dagster.floor.snapshot_json import snapshot_dumps
from lumos_dagster.schema.versioning import assess
from lumos_dagster.store import SnapshotStore
from tests.conftest import TESTDATA
from tests.lake import write_parquet

WEATHER = TESTDATA / "avro" / "schemas" / "weather.avsc"


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def avsc(path, fields):
    path.write_text(json.dumps({"type": "record", "name": "W", "fields": fields}))
    return path


def test_diff_of_avro_schema_files_breaking_under_full(tmp_path):
    old = json.loads(WEATHER.read_text())
    new = {**old, "fields": [f for f in old["fields"] if f["name"] != "temp"]}
    (tmp_path / "new.avsc").write_text(json.dumps(new))
    result = invoke("diff", WEATHER, tmp_path / "new.avsc", "--format", "json", "-c", tmp_path / "none.yaml")
    assert result.exit_code == 2  # an explicit --config that does not exist is bad input
    result = invoke("diff", WEATHER, tmp_path / "new.avsc", "--format", "json")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert doc["compatible"] == {"backward": True, "forward": False}
    assert doc["breaking"] == 1
    (ds,) = doc["datasets"]
    assert ds["policy"] == "FULL" and ds["change_class"] == "major"
    assert ds["changes"] == [
        {
            "path": "temp",
            "kind": "FIELD_REMOVED",
            "old": "int32 not null",
            "new": None,
            "backward": True,
            "forward": False,
            "severity": "BREAKING",
            "accepted": None,
            "against": None,
        }
    ]


def test_the_policy_decides_the_exit_code(tmp_path):
    old = avsc(tmp_path / "old.avsc", [{"name": "a", "type": "int"}, {"name": "b", "type": "string"}])
    new = avsc(tmp_path / "new.avsc", [{"name": "a", "type": "long"}])
    assert invoke("diff", old, new).exit_code == 1
    assert invoke("diff", old, new, "--policy", "backward").exit_code == 0  # widening and removal: new readers cope
    assert invoke("diff", old, new, "--policy", "forward").exit_code == 1
    assert invoke("diff", old, new, "--policy", "none").exit_code == 0
    assert invoke("diff", old, old).exit_code == 0


def test_diff_of_data_files_and_the_markdown_comment(tmp_path):
    a = write_parquet(tmp_path / "a.parquet", pa.table({"id": [1], "name": ["x"]}))
    b = write_parquet(tmp_path / "b.parquet", pa.table({"id": ["1"], "name": ["x"], "email": ["e"]}))
    result = invoke("diff", a, b, "--format", "markdown")
    assert result.exit_code == 1
    assert "### Lumos schema check: ❌ 1 breaking change" in result.stdout
    assert "This change alters 1 schema, 1 breaking, affecting 0 downstream datasets." in result.stdout
    assert "| BREAKING | TYPE_CHANGED | `id` | int64 → string | ❌ | ❌ |" in result.stdout
    assert "| NON_BREAKING | FIELD_ADDED | `email` |" in result.stdout


def test_bad_inputs_exit_with_2_and_say_why(tmp_path):
    (tmp_path / "junk.parquet").write_bytes(b"nope")
    (tmp_path / "bad.avsc").write_text("{not json")
    for args, message in [
        ((tmp_path / "missing.avsc", WEATHER), "no such file, and not DATASET@VERSION"),
        ((tmp_path / "junk.parquet", WEATHER), "junk.parquet: cannot read parquet"),
        ((tmp_path / "bad.avsc", WEATHER), "bad.avsc: not a valid Avro schema"),
    ]:
        result = invoke("diff", *args)
        assert result.exit_code == 2 and message in result.stderr, result.output


# ------------------------------------------------------------------ a project in a store

T0 = datetime(2026, 11, 20, tzinfo=UTC)
V1 = Schema((Field("id", Primitive("int64"), nullable=False), Field("status", Primitive("string"), nullable=False)))
V2 = Schema((Field("id", Primitive("int64"), nullable=False),))  # status removed: breaking under FULL


@pytest.fixture
def project(tmp_path):
    config = {
        "sources": [{"name": "lake", "root": "lake"}],
        "store": {"path": "store.db"},
        "datasets": [
            {"name": "raw/orders", "owners": ["ann@example.com"]},
            {"name": "clean/orders", "upstream": ["raw/orders"], "owners": ["group:analytics"]},
            {"name": "marts/revenue", "upstream": ["clean/orders"]},
            {"name": "marts/kpis", "upstream": ["clean/orders"]},
        ],
    }
    path = tmp_path / "lumos.yaml"
    path.write_text(yaml.safe_dump(config))
    store = SnapshotStore(load_config(str(path)).store_url)
    store.upsert_datasets([DatasetRecord(d["name"], "file", "lake", d["name"], "parquet") for d in config["datasets"]])
    previous = None
    for day, schema in (("2026-11-20", V1), ("2026-11-21", V1), ("2026-11-22", V2)):
        snap = Snapshot(
            DatasetRef("file", "raw/orders", "/lake/raw/orders", "parquet"),
            day,
            T0 + timedelta(days=int(day[-2:]) - 20),
            schema=schema,
        )
        previous = assess(previous, snap)
        store.put([previous])
    clean = Snapshot(DatasetRef("file", "clean/orders", "/c", "parquet"), "2026-11-22", T0, schema=V1,
                     upstream=(LineageEdge(previous.dataset),))  # fmt: skip
    store.put([assess(None, clean)])
    store.close()
    return path


def test_diff_between_store_versions_knows_the_dataset_and_its_consumers(project):
    result = invoke("diff", "raw/orders@1.0.0", "raw/orders@latest", "-c", project, "--format", "json")
    assert result.exit_code == 1, result.output
    (ds,) = json.loads(result.stdout)["datasets"]
    assert (ds["name"], ds["old_version"], ds["new_version"]) == ("raw/orders", "1.0.0", "2.0.0")
    assert [(d["name"], d["depth"]) for d in ds["downstream"]] == [
        ("clean/orders", 1),
        ("marts/kpis", 2),
        ("marts/revenue", 2),
    ]
    unknown = invoke("diff", "raw/orders@9.9.9", "raw/orders@latest", "-c", project)
    assert unknown.exit_code == 2 and "known versions: 1.0.0, 2.0.0" in unknown.stderr


def test_diff_finds_a_table_source_version_by_name_or_urn(project):
    store = SnapshotStore(load_config(str(project)).store_url)
    ref = DatasetRef("postgres", "public/customers", "postgresql://db/public.customers", "table")
    store.upsert_datasets([DatasetRecord(ref.name, "postgres", "db", ref.location, "table")])
    first = assess(None, Snapshot(ref, None, T0, schema=V1))
    store.put([first, assess(first, Snapshot(ref, None, T0 + timedelta(days=1), schema=V2))])
    store.close()
    by_name = invoke("diff", "public/customers@1.0.0", "public/customers@latest", "-c", project, "--format", "json")
    (ds,) = json.loads(by_name.stdout)["datasets"]
    assert (by_name.exit_code, ds["old_version"], ds["new_version"]) == (1, "1.0.0", "2.0.0")
    urn = "urn:lumos:dataset:postgres:public/customers"
    assert invoke("diff", f"{urn}@1.0.0", f"{urn}@2.0.0", "-c", project).exit_code == 1


def test_diff_of_two_snapshot_files(project, tmp_path):
    store = SnapshotStore(load_config(str(project)).store_url)
    history = store.history("urn:lumos:dataset:file:raw/orders")
    store.close()
    (tmp_path / "a.json").write_text(snapshot_dumps(history[0]))
    (tmp_path / "b.json").write_text(snapshot_dumps(replace(history[0], description="documented")))
    result = invoke("diff", tmp_path / "a.json", tmp_path / "b.json", "--format", "json")
    assert result.exit_code == 0
    (ds,) = json.loads(result.stdout)["datasets"]
    assert ds["change_class"] == "patch" and ds["changes"][0]["kind"] == "DATASET_DESCRIPTION_CHANGED"


def test_gate_judges_latest_versions_and_accepts_what_lumos_yaml_accepts(project):
    result = invoke("gate", "-c", project, "--format", "json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert [d["name"] for d in doc["datasets"]] == ["raw/orders"]
    assert doc["downstream_affected"] == ["clean/orders", "marts/kpis", "marts/revenue"]
    assert invoke("gate", "-c", project, "--since", "2030-01-01").exit_code == 0  # nothing that recent
    assert invoke("gate", "-c", project, "--datasets", "clean/orders").exit_code == 0
    assert invoke("gate", "-c", project, "--datasets", "nope").exit_code == 2

    config = yaml.safe_load(project.read_text())
    config["datasets"][0]["accept_major"] = 2
    project.write_text(yaml.safe_dump(config))
    result = invoke("gate", "-c", project, "--format", "markdown")
    assert result.exit_code == 0, result.output
    assert "accepted: expected major bump to 2.x" in result.stdout


def test_impact_and_fan_out(project):
    result = invoke("impact", "raw/orders", "-c", project, "--format", "json")
    doc = json.loads(result.stdout)
    assert doc["version"] == "2.0.0"
    assert doc["breaking_changes"] == [
        {"path": "status", "kind": "FIELD_REMOVED", "old": "string not null", "new": None}
    ]
    clean = doc["downstream"][0]
    assert (clean["name"], clean["owners"], clean["reached_by"]) == (
        "clean/orders",
        ["analytics"],
        ["FIELD_REMOVED status"],
    )
    assert [
        d["name"]
        for d in json.loads(invoke("impact", "raw/orders", "--depth", "1", "-c", project, "--format", "json").stdout)[
            "downstream"
        ]
    ] == ["clean/orders"]
    ranking = json.loads(invoke("impact", "-c", project, "--format", "json").stdout)
    assert ranking[:2] == [{"dataset": "raw/orders", "downstream": 3}, {"dataset": "clean/orders", "downstream": 2}]
    table = invoke("impact", "-c", project).stdout.splitlines()  # a header says what the numbers are
    assert table[1].split() == ["downstream", "dataset"] and table[2].split() == ["3", "raw/orders"]


def test_history_evolution_and_releases(project):
    assert invoke("release", "-c", project).stdout.startswith("S-1: 2 datasets")
    second = invoke("release", "-c", project, "--datasets", "raw/orders")
    assert second.stdout.startswith("S-2: 1 dataset\n") and "raw/orders" in second.stdout
    assert invoke("release", "S-2", "-c", project).exit_code == 1  # releases are immutable
    history = json.loads(invoke("history", "raw/orders", "-c", project, "--format", "json").stdout)
    assert [(h["version"], h["change_class"], h["first_partition"], h["captures"]) for h in history] == [
        ("1.0.0", "new", "2026-11-20", 2),
        ("2.0.0", "major", "2026-11-22", 1),
    ]
    assert history[1]["releases"] == ["S-1", "S-2"] and history[1]["changes"][0]["kind"] == "FIELD_REMOVED"
    evo = json.loads(
        invoke("evolution", "-c", project, "--since", "2026-11-01", "--until", "2026-12-01", "--format", "json").stdout
    )
    orders = next(d for d in evo["datasets"] if d["dataset"] == "raw/orders")
    assert (orders["versions"], orders["changes"], orders["breaking"], orders["per_30_days"]) == (1, 1, 1, 1.0)
