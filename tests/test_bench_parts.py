"""The benchmark's parts on a tiny lake: generator, floor scan, measurement, DataHub baseline."""

import json
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchmarks.datahub_baseline import DATAHUB, datahub_datasets, run_datahub, write_recipe
from benchmarks.floor import floor_scan
from benchmarks.lake import FORMATS, generate_lake
from benchmarks.measure import machine, run_measured

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench") / "lake"
    return root, generate_lake(root, datasets=10, files=3, partitions=2)


def fmt(name: str) -> str:
    return FORMATS[int(name.rsplit("_", 1)[1]) % len(FORMATS)]


def test_lake_layout_and_truth(lake):
    root, truth = lake
    assert json.loads((root / "_truth.json").read_text()) == truth
    assert sorted(truth) == sorted(f"d{i % 10}/ds_{i}" for i in range(10))
    for i in range(10):
        files = sorted(p.relative_to(root).as_posix() for p in (root / f"d{i}/ds_{i}").rglob("*.*"))
        ext = FORMATS[i % 5]
        # ceil(3 / 2) = 2 files in the first partition, the last one in the second
        assert files == [
            f"d{i}/ds_{i}/dt=2026-11-01/part-0.{ext}",
            f"d{i}/ds_{i}/dt=2026-11-01/part-1.{ext}",
            f"d{i}/ds_{i}/dt=2026-11-02/part-2.{ext}",
        ]
    for name, paths in truth.items():
        top = [p for p in paths if "." not in p]
        assert 5 <= len(top) <= 12
        nested = [p for p in paths if "." in p]
        assert bool(nested) == (fmt(name) != "csv"), name
    # the nesting is real in the files, not only in the truth
    types = pq.read_schema(next((root / "d0/ds_0").rglob("*.parquet"))).types
    assert any(pa.types.is_struct(t) for t in types) and any(pa.types.is_list(t) for t in types)


def test_generation_is_seeded(tmp_path):
    assert generate_lake(tmp_path / "a", 5, 1, 1, seed=7) == generate_lake(tmp_path / "b", 5, 1, 1, seed=7)
    assert generate_lake(tmp_path / "c", 5, 1, 1, seed=8) != generate_lake(tmp_path / "d", 5, 1, 1, seed=7)


def test_floor_scan_matches_truth(lake):
    root, truth = lake
    assert floor_scan(root) == truth


def test_run_measured_sees_memory_and_time():
    m = run_measured([sys.executable, "-c", "x = bytearray(200_000_000); import time; time.sleep(0.5); print('ok')"])
    assert m.returncode == 0 and m.stdout.strip() == "ok"
    assert m.peak_mb > 150
    assert m.wall_s >= 0.5


def test_run_measured_counts_children():
    grandchild = "x = bytearray(200_000_000); import time; time.sleep(0.5)"
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {grandchild!r}])"
    assert run_measured([sys.executable, "-c", child]).peak_mb > 150


def test_run_measured_timeout_kills():
    m = run_measured([sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)
    assert m.returncode != 0 and m.wall_s < 10


def test_machine():
    info = machine()
    assert info["cores"] >= 1 and info["memory_gib"] > 0 and info["pyarrow"]


def test_recipe_refuses_a_hidden_root(tmp_path):
    with pytest.raises(ValueError, match="skips paths"):
        write_recipe(tmp_path / "_lake", tmp_path / "out.json", tmp_path / "recipe.yml")


def test_datahub_baseline(lake, tmp_path):
    if not DATAHUB.exists():  # evidence that did not run is a failure, never a skip
        pytest.fail(f"{DATAHUB} is missing: `make datahub-venv` installs DataHub's s3 source beside Lumos")
    root, truth = lake
    result, out = run_datahub(root, tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    found = datahub_datasets(out, root)
    # the s3 source has no ORC reader: ORC datasets are not emitted at all
    assert sorted(found) == sorted(name for name in truth if fmt(name) != "orc")
    for name, paths in found.items():
        if fmt(name) == "parquet":
            # its Parquet inferrer lists top-level columns only: no struct or list<struct> children
            assert paths == [p for p in truth[name] if "." not in p], name
        else:
            assert paths == truth[name], name
