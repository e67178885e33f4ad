"""The `lumos` command line, and the demo path `make demo` runs, end to end."""

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from click.testing import CliRunner

from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog
from lumos_dagster.cli import main
from lumos_dagster.floor.datatypes import Field, Primitive, Schema
from lumos_dagster.floor.model import DatasetRef, Snapshot
from tests.lake import demo_config, partitioned_lake, write_parquet

pytestmark = pytest.mark.dagster

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def test_schema_prints_the_canonical_schema_as_json(tmp_path):
    path = write_parquet(tmp_path / "a.parquet", pa.table({"id": [1, 2], "tags": [["x"], []]}))
    result = CliRunner().invoke(main, ["schema", path])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["format"] == "parquet" and doc["row_count"] == 2
    assert [f["name"] for f in doc["fields"]] == ["id", "tags"]
    assert doc["fields"][1]["type"] == {"kind": "array", "element": "string", "element_nullable": True}


def test_schema_of_a_delta_folder_is_its_latest_version_and_a_plain_folder_is_refused(tmp_path):
    """`lumos schema` refused a Delta folder ("is a directory"): a table folder is read as a run reads it."""
    import deltalake

    table = tmp_path / "orders"
    deltalake.write_deltalake(str(table), pa.table({"id": [1, 2]}))
    deltalake.write_deltalake(str(table), pa.table({"id": [3], "status": ["new"]}), mode="append",
                              schema_mode="merge")  # fmt: skip
    (tmp_path / "plain").mkdir()
    result = CliRunner().invoke(main, ["schema", str(table)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["format"] == "delta" and doc["row_count"] == 3
    assert [f["name"] for f in doc["fields"]] == [f.name for f in deltalake.DeltaTable(str(table)).schema().fields]
    refused = CliRunner().invoke(main, ["schema", str(tmp_path / "plain")])
    assert refused.exit_code == 1 and "no table (Delta, Iceberg) keeps its log there" in refused.stderr


def test_schema_flat_and_errors_name_the_file(tmp_path):
    good = write_parquet(tmp_path / "a.parquet", pa.table({"u": [{"name": "x"}]}))
    bad = tmp_path / "b.parquet"
    bad.write_bytes(b"nope")
    result = CliRunner().invoke(main, ["schema", "--flat", good, str(bad)])
    assert result.exit_code == 1
    assert "u.name: string" in result.stdout
    assert f"Error: {bad}: " in result.stderr


def test_discover_records_datasets_and_reports(tmp_path):
    partitioned_lake(tmp_path / "lake", "sales/orders", days=2)
    (tmp_path / "lake" / "notes.txt").write_text("hello")
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump({"sources": [{"root": "lake"}], "store": {"path": "s.db"}}))
    result = CliRunner().invoke(main, ["discover", "-c", str(tmp_path / "lumos.yaml")])
    assert result.exit_code == 0, result.output
    assert "sales/orders" in result.stdout and "partitioned by dt" in result.stdout
    assert "skipped      1  unrecognised format" in result.stdout
    assert "scanning local" in result.stderr


def test_discover_says_which_datasets_are_new_or_removed_and_that_the_ui_needs_a_reload(tmp_path):
    import shutil

    partitioned_lake(tmp_path / "lake", "sales/orders", days=1)
    partitioned_lake(tmp_path / "lake", "sales/returns", days=1)
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump({"sources": [{"root": "lake"}], "store": {"path": "s.db"},
                                                         "catalog": {"path": "lite.db"}}))  # fmt: skip

    def discover():
        result = CliRunner().invoke(main, ["discover", "-c", str(tmp_path / "lumos.yaml")])
        assert result.exit_code == 0, result.output
        return {line.split()[0]: line for line in result.stdout.splitlines() if line.startswith("  ")}, result.stdout

    lines, out = discover()
    assert lines["sales/orders"].endswith("(new)") and lines["sales/returns"].endswith("(new)")
    assert '2 new, 0 removed: a running `dagster dev` shows the change after "Reload definitions"' in out
    lines, out = discover()  # nothing changed
    assert not lines["sales/orders"].endswith("(new)") and "no dataset new or removed" in out
    shutil.rmtree(tmp_path / "lake" / "sales" / "returns")
    partitioned_lake(tmp_path / "lake", "crm/contacts", days=1)
    lines, out = discover()
    assert lines["crm/contacts"].endswith("(new)") and not lines["sales/orders"].endswith("(new)")
    assert "removed (soft-deleted in the catalogs)" in lines["sales/returns"]
    assert "1 new, 1 removed" in out


def test_search_gives_the_datas_age_not_only_the_snapshots(tmp_path):
    """ "freshness <1 h" for files untouched for days read as fresh data: the data's age comes first."""
    import time

    write_parquet(tmp_path / "lake" / "ref" / "countries" / "c.parquet", pa.table({"code": ["FR"]}))
    three_days_ago = time.time() - 3 * 86400
    os.utime(tmp_path / "lake" / "ref" / "countries" / "c.parquet", (three_days_ago, three_days_ago))
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump({"sources": [{"root": "lake"}], "store": {"path": "s.db"},
                                                         "catalog": {"path": "lite.db"}}))  # fmt: skip
    config = ["-c", str(tmp_path / "lumos.yaml")]
    assert CliRunner().invoke(main, ["discover", *config]).exit_code == 0
    assert CliRunner().invoke(main, ["snapshot", *config]).exit_code == 0
    out = CliRunner().invoke(main, ["search", *config, "countries"])
    assert out.exit_code == 0, out.output
    assert "freshness data 3 d old (snapshot <1 h ago)" in out.stdout
    (hit,) = json.loads(CliRunner().invoke(main, ["search", *config, "countries", "--format", "json"]).stdout)
    modified = datetime.fromisoformat(hit["data_modified_at"])
    assert abs(modified.timestamp() - three_days_ago) < 1


def test_discover_fails_when_a_root_is_missing(tmp_path):
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump({"sources": [{"root": "nowhere"}], "store": {"path": "s.db"}}))
    result = CliRunner().invoke(main, ["discover", "-c", str(tmp_path / "lumos.yaml")])
    assert result.exit_code == 1
    assert f"root folder {tmp_path}/nowhere does not exist" in result.stdout


def test_a_bad_config_is_a_clean_error(tmp_path):
    (tmp_path / "lumos.yaml").write_text("sources:\n  - rooot: lake\n")
    result = CliRunner().invoke(main, ["discover", "-c", str(tmp_path / "lumos.yaml")])
    assert result.exit_code == 1
    assert "sources[0].rooot: unknown key (did you mean 'root'?)" in result.output
    assert "Traceback" not in result.output


def test_lite_runs_datahubs_own_cli_on_the_projects_catalog(tmp_path):
    catalog = tmp_path / "catalog.db"
    snapshot = Snapshot(
        DatasetRef("file", "raw/x", "/x", "csv"),
        "2026-11-25",
        datetime.now(timezone.utc),
        schema=Schema((Field("id", Primitive("int64")),)),
        version="1.0.0",
    )
    DataHubLiteCatalog(str(catalog)).emit([snapshot])
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump({"catalog": {"path": "catalog.db"}}))
    out = subprocess.run(
        [
            BIN / "lumos",
            "lite",
            "-c",
            str(tmp_path / "lumos.yaml"),
            "get",
            "--urn",
            "urn:li:dataset:(urn:li:dataPlatform:file,x,PROD)",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["datasetProperties"]["customProperties"]["lumos.version"] == "1.0.0"


def test_lite_before_any_run_says_the_catalog_file_is_not_there_yet(tmp_path):
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump({"catalog": {"path": "catalog.db"}}))
    result = CliRunner().invoke(main, ["lite", "-c", str(tmp_path / "lumos.yaml"), "ls", "/"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"catalog.path {tmp_path / 'catalog.db'}: no DataHub Lite file yet" in result.output


def test_the_demo_path_from_the_makefile(tmp_path):
    """What `make demo` runs: demo lake, discover, `dagster asset materialize`, summary."""
    config = demo_config()
    config["store"], config["catalog"]["path"] = {"path": "store.db"}, "catalog.db"
    config["sources"][0]["root"] = "lake"
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump(config))
    env = {**os.environ, "LUMOS_CONFIG": str(tmp_path / "lumos.yaml"), "DAGSTER_HOME": str(tmp_path / "dagster")}
    os.makedirs(env["DAGSTER_HOME"])
    today = datetime.now(timezone.utc).strftime("%Y-%m-%d")

    def run(*args):
        out = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        return out.stdout

    run(BIN / "lumos", "demo-lake")
    run(BIN / "lumos", "discover")
    run(
        BIN / "dagster",
        "asset",
        "materialize",
        "-m",
        "lumos_dagster.definitions",
        "--select",
        "*",
        "--partition",
        today,
    )
    summary = run(BIN / "lumos", "summary")
    lines = {line.split()[0]: line.split() for line in summary.splitlines() if line and not line.startswith(" ")}
    assert lines["raw/events"][1:4] == [today, "1.0.0", "8"]
    assert "warning: files_readable" in summary and "widened to int64" in summary
    assert "DataHub Lite" in summary and ": 8 datasets" in summary
