"""Lumos' tuning of Dagster is opt-in, with one switch (resources/tuning): a code location loaded
on Dagster's stock instance leaves Dagster as it is, and does not even import the tuning; on an
instance whose dagster.yaml names a tuned event log, the process that builds it is patched.

Each case is a fresh process, as a code server or a run worker is: the test process itself is
patched or not as `--dagster-instance` says (tests/conftest.py)."""

import json
import os
import subprocess
import sys
from importlib.metadata import version

import pytest

from tests.conftest import ROOT, instance_yaml
from tests.test_definitions import make_project

pytestmark = [pytest.mark.tuning, pytest.mark.dagster]

#: what Dagster's code server, run worker and `dagster asset materialize` do: the instance first
#: (its event log built), then the code location; `load-first` does it the other way round
PROBE = """
import json, sys
from dagster import AssetsDefinition, DagsterInstance

def state():
    import dagster._core.definitions.decorators.decorator_assets_definition_builder as builder
    import dagster._core.definitions.output as output_module
    import dagster._core.types.dagster_type as types
    return {
        "resolve_dagster_type": types.resolve_dagster_type.__qualname__,
        "output resolve_dagster_type": output_module.resolve_dagster_type.__qualname__,
        "check specs": builder._validate_check_specs_target_relevant_asset_keys.__qualname__,
        "asset_and_check_keys": AssetsDefinition.__dict__["asset_and_check_keys"].fget.__qualname__,
        # the tuned event log and the patches (the corner's list of private names, dagster_private.py, aside)
        "tuning imported": any(f"lumos_dagster.resources.tuning.{m}" in sys.modules for m in ("event_log", "speedups")),
    }

def load():
    from lumos_dagster.definitions import defs
    return len(defs().resolve_asset_graph().get_all_asset_keys())

out = {}
if sys.argv[1] == "load-first":
    out["assets"], out["at load"] = load(), state()
with DagsterInstance.get() as instance:
    out["event log"] = type(instance.event_log_storage).__name__
    if sys.argv[1] == "instance-first":
        out["assets"], out["at load"] = load(), state()
    out["after"] = state()
print(json.dumps(out))
"""

DAGSTERS_OWN = {
    "resolve_dagster_type": "resolve_dagster_type",
    "output resolve_dagster_type": "resolve_dagster_type",
    "check specs": "_validate_check_specs_target_relevant_asset_keys",
    "asset_and_check_keys": "AssetsDefinition.asset_and_check_keys",
}
LUMOS = {
    "resolve_dagster_type": "lumos.resolve_dagster_type",
    "output resolve_dagster_type": "lumos.resolve_dagster_type",
    "check specs": "lumos._validate_check_specs_target_relevant_asset_keys",
    "asset_and_check_keys": "lumos.asset_and_check_keys",
}


def _probe(tmp_path, instance: str, order: str = "instance-first") -> dict:
    config = make_project(tmp_path, ["raw/orders", "raw/customers"], lineage={"raw/orders": ["raw/customers"]})
    home = tmp_path / "dagster"
    home.mkdir()
    (home / "dagster.yaml").write_text(instance_yaml(instance))
    env = {**os.environ, "DAGSTER_HOME": str(home), "LUMOS_CONFIG": config, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", PROBE, order], capture_output=True, text=True, cwd=ROOT, env=env,
                         timeout=180)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["assets"] >= 2
    return result


def test_a_code_location_loaded_on_dagsters_stock_instance_leaves_dagster_unpatched(tmp_path):
    result = _probe(tmp_path, "stock")
    assert result["event log"] == "SqliteEventLogStorage"
    for moment in ("at load", "after"):
        state = result[moment]
        assert not state.pop("tuning imported"), moment  # the tuning is not even imported
        assert state == DAGSTERS_OWN, moment


def test_the_tuned_instance_patches_the_process_that_builds_it(tmp_path):
    result = _probe(tmp_path, "tuned")
    assert result["event log"] == "LumosSqliteEventLogStorage"
    for moment in ("at load", "after"):
        state = result[moment]
        assert state.pop("tuning imported"), moment
        assert state == LUMOS, moment


def test_definitions_built_before_the_instance_are_built_unpatched_even_on_the_tuned_one(tmp_path):
    """A script or a test that loads the code location first; Dagster's own processes never do."""
    result = _probe(tmp_path, "tuned", order="load-first")
    load = result["at load"]
    assert not load.pop("tuning imported") and load == DAGSTERS_OWN
    after = result["after"]
    assert after.pop("tuning imported") and after == LUMOS


def test_applying_and_reverting_restores_dagsters_own_functions():
    import dagster._core.definitions.output as output_module
    import dagster._core.types.dagster_type as types
    from dagster import AssetsDefinition

    from lumos_dagster.resources.tuning import speedups

    speedups.revert()  # in case this process runs as on the tuned instance
    own = (types.resolve_dagster_type, output_module.resolve_dagster_type)
    own_property = AssetsDefinition.__dict__["asset_and_check_keys"]
    assert not speedups.applied()
    speedups.apply()
    assert speedups.applied() and types.resolve_dagster_type is not own[0]
    speedups.revert()
    assert not speedups.applied()
    assert (types.resolve_dagster_type, output_module.resolve_dagster_type) == own
    assert AssetsDefinition.__dict__["asset_and_check_keys"] is own_property


def test_the_instances_the_suite_runs_on():
    stock, tuned = instance_yaml("stock"), instance_yaml("tuned")
    assert "\nevent_log_storage" not in stock and "python_log_level: INFO" in stock  # commented out only
    assert "module: lumos_dagster.resources.tuning" in tuned and "class: LumosSqliteEventLogStorage" in tuned


def test_private_dagster_imports_are_only_in_the_tuning_corner_and_each_is_in_its_list():
    """`dagster._…` only under resources/tuning/, every such module named in dagster_private.PRIVATE
    (with the Dagster version it was checked against), and no name of the list left unused there."""
    import re

    from lumos_dagster.resources.tuning.dagster_private import CHECKED_AGAINST, PRIVATE

    found: dict[str, set[str]] = {}
    for folder in ("lumos_dagster", "assets", "resources", "sensors", "spark"):
        for path in (ROOT / folder).rglob("*.py"):
            for module in re.findall(r"^\s*(?:from|import) (dagster\._[\w.]+)", path.read_text(), re.MULTILINE):
                found.setdefault(module, set()).add(str(path.resolve().relative_to(ROOT)))
    outside = {m: files for m, files in found.items() if any(not f.startswith("resources/tuning/") for f in files)}
    assert outside == {}
    assert set(found) == set(PRIVATE)
    assert CHECKED_AGAINST == f"dagster {version('dagster')}"
