"""The CI examples: the workflow and the Jenkinsfile run examples/ci/schema-gate.sh, and
so does this test, on a real lake, with real Dagster and Spark."""

import json
import os
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest
import yaml

from lumos_dagster.cli.demo_lake import build_demo_lake
from tests.lake import demo_config
from tests.test_gate import PK, drop_from_todays_orders

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
CI = ROOT / "examples" / "ci"
SCRIPT = "examples/ci/schema-gate.sh"


def test_both_examples_run_the_same_script():
    workflow = yaml.safe_load((CI / "github-actions.yml").read_text())
    runs = [s.get("run", "") for s in workflow["jobs"]["schema-gate"]["steps"]]
    assert any(SCRIPT in r for r in runs)
    assert SCRIPT in (CI / "Jenkinsfile").read_text()
    # both select what the change touches (tests/test_changed.py tests the command)
    assert any("lumos changed" in r for r in runs) and "lumos changed" in (CI / "Jenkinsfile").read_text()


def test_the_gate_script_passes_a_compatible_change_and_fails_a_breaking_one(tmp_path):
    # the lake and the partition are pinned: the change below rewrites that day's orders
    build_demo_lake(str(tmp_path / "lake"), today=date.fromisoformat(PK))
    config = demo_config()
    config["sources"][0]["root"] = "lake"
    config["store"], config["catalog"]["path"] = {"path": "store.db"}, "catalog.db"
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "dagster").mkdir()
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "LUMOS_CONFIG": str(tmp_path / "lumos.yaml"),
        "DAGSTER_HOME": str(tmp_path / "dagster"),
        "LUMOS_SELECT": "key:raw/orders+",  # raw/orders and its consumers
        "LUMOS_PARTITION": PK,
        "LUMOS_REPORT": str(tmp_path / "report.md"),
    }

    def gate(**extra):
        return subprocess.run(
            ["bash", SCRIPT], cwd=ROOT, env={**env, **extra}, capture_output=True, text=True, timeout=600
        )

    first = gate()
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-3000:]
    assert "✅ compatible" in first.stdout
    untouched = gate(LUMOS_SELECT="")  # `lumos changed` found no dataset in the change
    assert untouched.returncode == 0 and "nothing to snapshot" in untouched.stdout

    drop_from_todays_orders(tmp_path / "lake", "status")
    old = tmp_path / "old.avsc"
    new = tmp_path / "new.avsc"
    old.write_text(json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}))
    new.write_text(json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}]}))
    second = gate(LUMOS_DIFF_PAIRS=f"{old}:{new}")
    assert second.returncode == 1, second.stdout[-2000:] + second.stderr[-3000:]
    report = (tmp_path / "report.md").read_text()
    assert "#### `raw/orders` 1.0.0 → 2.0.0 (major) — BREAKING under FULL" in report
    assert "| BREAKING | FIELD_REMOVED | `status` |" in report
    assert "`clean/orders` (depth 1" in report
    assert "| BREAKING | TYPE_PROMOTED | `a` | int32 → int64 |" in report  # the .avsc pair
