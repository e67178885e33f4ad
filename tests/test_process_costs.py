"""What a process pays besides its work: the collector's policy (lumos_dagster.floor.collector), the
Dagster functions replaced for code-location scale (resources/tuning/speedups.py), and what loading
the code location imports."""

import gc
import inspect
import os
import subprocess
import sys
import typing

import pytest
from dagster import (
    AssetCheckKey,
    AssetCheckSpec,
    AssetKey,
    AssetsDefinition,
    AssetSpec,
    DagsterInvalidDefinitionError,
    Nothing,
    multi_asset,
)
from dagster._core.types.dagster_type import Any as AnyType
from dagster._core.types.dagster_type import DagsterType, Int

from lumos_dagster.floor.collector import paused
from lumos_dagster.resources.tuning import speedups as dagster_speedups
from tests.test_definitions import LINEAGE, ROOT, make_project

pytestmark = pytest.mark.dagster


def _run(code: str, **env: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, **env}, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_command_freezes_everything_at_exit_so_the_last_collection_walks_nothing():
    # atexit runs handlers last-registered first: this one, registered before, sees the freeze
    code = (
        "import atexit, gc\n"
        "atexit.register(lambda: print('frozen at exit:', gc.get_freeze_count()))\n"
        "from lumos_dagster.floor.collector import skip_final_collection\n"
        "skip_final_collection()\n"
        "print('frozen before:', gc.get_freeze_count())\n"
    )
    before, at_exit = _run(code).splitlines()
    assert before == "frozen before: 0"
    assert int(at_exit.split(": ")[1]) > 1_000  # everything the interpreter holds


def test_the_lumos_command_and_the_tuned_event_log_register_it_and_the_code_location_does_not(tmp_path):
    """Loading the code location changes nothing process-wide (a code server of Dagster's stock instance
    keeps Python's collector as it is); the opt-in tuning does, and Lumos' own command."""
    path = make_project(tmp_path, ["raw/orders"], lineage={"raw/orders": []})
    lumos = "from lumos_dagster.cli import main\ntry:\n    main(['discover', '--help'])\nexcept SystemExit:\n    pass"
    tuned = (
        "from lumos_dagster.resources.tuning import LumosSqliteEventLogStorage\n"
        f"LumosSqliteEventLogStorage({str(tmp_path / 'ev')!r})"
    )
    for trigger, frozen in ((lumos, "True"), (tuned, "True"), ("import lumos_dagster.definitions", "False")):
        code = f"import atexit, gc\natexit.register(lambda: print(gc.get_freeze_count() > 0))\n{trigger}\n"
        assert _run(code, LUMOS_CONFIG=path).splitlines()[-1] == frozen, trigger


def test_the_collector_is_paused_inside_and_restored_after_even_on_error():
    assert gc.isenabled()
    with pytest.raises(ValueError):
        with paused():
            assert not gc.isenabled()
            raise ValueError
    assert gc.isenabled()
    gc.disable()
    try:
        with paused():
            pass
        assert not gc.isenabled()  # it was off: it stays off
    finally:
        gc.enable()


def test_loading_the_code_location_imports_neither_pyspark_nor_datahub(tmp_path):
    path = make_project(tmp_path, list(LINEAGE))
    code = (
        "import sys\n"
        "from lumos_dagster.definitions import defs\n"
        "graph = defs().resolve_asset_graph()\n"
        "print(len(list(graph.get_all_asset_keys())))\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pyspark', 'dagster_pyspark', 'datahub'}))\n"
    )
    keys, heavy = _run(code, LUMOS_CONFIG=path).splitlines()
    assert int(keys) >= len(LINEAGE) and heavy == "[]"


class Custom(DagsterType):
    def __init__(self):
        super().__init__(type_check_fn=lambda _, value: True, key="Custom")


@pytest.mark.parametrize(
    "given",
    [None, AnyType, Nothing, Int, Custom(), int, str, float, bool, dict, list, typing.Optional[int], typing.List[str]],
)
def test_resolving_a_type_gives_what_dagsters_own_function_gives(given):
    dagster_speedups.apply()
    import dagster._core.definitions.output as output_module
    import dagster._core.types.dagster_type as types

    replaced = output_module.resolve_dagster_type
    assert replaced.__qualname__ == "lumos.resolve_dagster_type"  # applied where outputs resolve theirs
    original = replaced.__wrapped__
    assert types.resolve_dagster_type is replaced and original.__qualname__ == "resolve_dagster_type"
    ours, theirs = replaced(given), original(given)
    assert type(ours) is type(theirs) and ours.key == theirs.key and ours.display_name == theirs.display_name


def test_applying_twice_wraps_once():
    dagster_speedups.apply()
    dagster_speedups.apply()
    import dagster._core.types.dagster_type as types

    assert types.resolve_dagster_type.__wrapped__.__qualname__ == "resolve_dagster_type"


def test_a_check_on_an_asset_outside_the_multi_asset_is_still_refused():
    dagster_speedups.apply()
    with pytest.raises(DagsterInvalidDefinitionError, match="Invalid asset key"):

        @multi_asset(specs=[AssetSpec("a"), AssetSpec("b")], check_specs=[AssetCheckSpec("c", asset="elsewhere")])
        def _bad():
            pass

    @multi_asset(specs=[AssetSpec("a"), AssetSpec("b")], check_specs=[AssetCheckSpec("c", asset="b")])
    def good():
        pass

    assert {k.asset_key for k in good.check_keys} == {AssetKey("b")}


def test_asset_and_check_keys_are_dagsters_frozen_once_per_definition():
    dagster_speedups.apply()

    @multi_asset(
        specs=[AssetSpec("a"), AssetSpec("b"), AssetSpec("c")],
        check_specs=[AssetCheckSpec("a_ok", asset="a"), AssetCheckSpec("b_ok", asset="b")],
        can_subset=True,
    )
    def full():
        pass

    # the full definition is read first: a cache shared between instances would then answer the subset
    whole = full.asset_and_check_keys
    subset = full.subset_for(
        selected_asset_keys={AssetKey("a")}, selected_asset_check_keys={AssetCheckKey(AssetKey("a"), "a_ok")}
    )
    part = subset.asset_and_check_keys
    for d, keys in ((full, whole), (subset, part)):
        assert keys == set(d.keys) | set(d.check_keys)  # what Dagster's own property builds
        assert isinstance(keys, frozenset) and d.asset_and_check_keys is keys  # built once, unchangeable
    assert part == {AssetKey("a"), AssetCheckKey(AssetKey("a"), "a_ok")} and part != whole
    assert len(whole) == 5


def test_applying_twice_caches_the_keys_through_one_wrapper():
    dagster_speedups.apply()
    dagster_speedups.apply()
    getter = AssetsDefinition.__dict__["asset_and_check_keys"].fget
    assert getter.__qualname__ == "lumos.asset_and_check_keys"
    # the property the wrapper calls is Dagster's own, not a first wrapper
    wrapped = inspect.getclosurevars(getter).nonlocals["original"].fget
    assert wrapped.__qualname__ == "AssetsDefinition.asset_and_check_keys"
