"""The code location: lumos.yaml + registry → assets whose graph is the lineage graph."""

import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml
from dagster import AssetKey, BackfillPolicy

from lumos_dagster.definitions import build_definitions
from lumos_dagster.floor.config import load_config
from lumos_dagster.floor.errors import ConfigError
from tests.lake import partitioned_lake, register

pytestmark = pytest.mark.dagster

ROOT = Path(__file__).resolve().parents[1]
LINEAGE = {
    "raw/orders": [],
    "raw/users": [],
    "clean/orders": ["raw/orders"],
    "marts/revenue": ["clean/orders", "raw/users"],
    "marts/kpis": ["marts/revenue", "clean/orders"],
}

REPORTS = {AssetKey("lumos_cost_report"), AssetKey("lumos_overview")}


def make_project(tmp_path, datasets, lineage=LINEAGE, extra=None) -> str:
    for name in datasets:
        partitioned_lake(tmp_path / "lake", name, days=1, files_per_day=1)
    config = {
        "sources": [{"name": "lake", "root": "lake"}],
        "datasets": [
            {"name": n, "upstream": ups, "owners": ["ann@example.com", "group:data-eng"], "tags": ["core"]}
            for n, ups in lineage.items()
        ]
        + (extra or []),
        "catalog": {"path": "catalog.db"},
        "store": {"path": "store.db"},
        "partitions": {"start": "2026-01-01"},
    }
    path = tmp_path / "lumos.yaml"
    path.write_text(yaml.safe_dump(config))
    cfg = load_config(str(path))
    register(cfg)
    return str(path)


def key(name: str) -> AssetKey:
    return AssetKey(name.split("/"))


def test_the_asset_graph_is_the_declared_lineage(tmp_path):
    defs = build_definitions(load_config(make_project(tmp_path, LINEAGE)))
    graph = defs.resolve_asset_graph()
    for name, ups in LINEAGE.items():
        assert graph.get(key(name)).parent_keys == {key(u) for u in ups}, name
    assert graph.get_all_asset_keys() == {key(n) for n in LINEAGE} | REPORTS
    for report in REPORTS:  # they read the store: no fan-in from every dataset burying the lineage
        assert graph.get(report).parent_keys == set()
        assert graph.get(report).backfill_policy == BackfillPolicy.single_run()


def test_dataset_assets_carry_their_groups_kinds_owners_checks_and_partitions(tmp_path):
    defs = build_definitions(load_config(make_project(tmp_path, LINEAGE)))
    graph = defs.resolve_asset_graph()
    node = graph.get(key("clean/orders"))
    assert node.group_name == "clean"  # no domain declared: the folder
    assert node.kinds == {"parquet", "file"}
    assert node.owners == ["ann@example.com", "team:data-eng"]  # spelled as in lumos.yaml and the catalogs
    assert node.metadata["lumos/urn"] == "urn:lumos:dataset:file:clean/orders"
    assert {c.name for c in node.check_keys} == {"files_readable", "schema_compatible"}
    assert "/lake" not in (node.description or "")  # nobody described it: not "parquet at /abs/path"
    assert node.metadata["lumos/location"].path.endswith("/lake/clean/orders")  # where it lives, as such
    assert node.backfill_policy == BackfillPolicy.single_run()
    partitions = node.partitions_def
    today = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    assert partitions.get_first_partition_key() == "2026-01-01"
    assert partitions.get_last_partition_key() == today  # today's snapshot can be taken today
    assert len(defs.resolve_all_job_defs()) >= 1
    schedule = defs.resolve_schedule_def("lumos_daily_snapshots_schedule")
    assert schedule.cron_schedule == "0 0 * * *"


def test_datasets_with_another_cadence_get_their_own_partitions(tmp_path):
    lineage = {"raw/orders": [], "raw/users": []}
    path = make_project(tmp_path, lineage, lineage, extra=[{"name": "raw/clicks", "cadence": "hourly"}])
    partitioned_lake(tmp_path / "lake", "raw/clicks", days=1)
    defs = build_definitions(load_config(path))
    graph = defs.resolve_asset_graph()
    assert graph.get(key("raw/clicks")).partitions_def.cron_schedule == "0 * * * *"
    assert graph.get(key("raw/orders")).partitions_def.cron_schedule == "0 0 * * *"


def test_an_upstream_nobody_has_is_shown_not_invented(tmp_path):
    lineage = {"raw/orders": ["ext/partner_api"], "raw/users": []}
    defs = build_definitions(load_config(make_project(tmp_path, ["raw/orders", "raw/users"], lineage)))
    graph = defs.resolve_asset_graph()
    missing = graph.get(key("ext/partner_api"))
    assert not missing.is_materializable and missing.group_name == "missing"
    assert key("ext/partner_api") in graph.get(key("raw/orders")).parent_keys


def test_a_lineage_cycle_is_a_config_error_naming_the_cycle(tmp_path):
    lineage = {"raw/orders": ["raw/users"], "raw/users": ["raw/orders"]}
    # found when lumos.yaml loads (`lumos discover`), before the code location does
    with pytest.raises(ConfigError, match=r"lumos.yaml: invalid .*\n  datasets\[0\].upstream: lineage has a cycle"):
        make_project(tmp_path, ["raw/orders", "raw/users"], lineage)


def test_odd_names_get_distinct_valid_keys(tmp_path):
    names = ["raw/a-b", "raw/a_b", "raw/v1.2"]
    defs = build_definitions(load_config(make_project(tmp_path, names, {})))
    keys = defs.resolve_asset_graph().get_all_asset_keys() - REPORTS
    assert len(keys) == 3 and AssetKey(["raw", "v1_2"]) in keys
    assert all(part.replace("_", "").isalnum() for k in keys for part in k.path)


@pytest.mark.parametrize("home", [True, False], ids=["DAGSTER_HOME", "no DAGSTER_HOME"])
def test_the_module_loads_from_lumos_config_and_validates_with_dagsters_cli(tmp_path, home):
    """From the clone, with or without DAGSTER_HOME: without it Dagster takes the repository's
    dagster.yaml for a temporary instance (the README's commands used to end in KeyError: 'DAGSTER_HOME')."""
    path = make_project(tmp_path, LINEAGE)
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"} | {"LUMOS_CONFIG": path}
    if home:
        env["DAGSTER_HOME"] = str(tmp_path / "dagster")
        os.makedirs(env["DAGSTER_HOME"])
    out = subprocess.run(
        [
            os.path.join(os.path.dirname(sys.executable), "dagster"),
            "definitions",
            "validate",
            "-m",
            "lumos_dagster.definitions",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Validation successful" in out.stdout + out.stderr


def test_the_repository_workspace_points_at_the_code_location():
    workspace = yaml.safe_load((ROOT / "workspace.yaml").read_text())
    assert workspace["load_from"][0]["python_module"] == {
        "module_name": "lumos_dagster.definitions",
        "working_directory": ".",
    }
