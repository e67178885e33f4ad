"""How long the code location takes to load with N datasets.

    .venv/bin/python -m benchmarks.load_definitions [N ...]     (default: 1000 5000)

For each N: a registry of N datasets (20 domains, half of them declared with two
upstreams each) in a temporary store, then, in a fresh process each, the time to import
and build the definitions and resolve the asset graph, and the wall time of
`dagster definitions validate`. Prints a markdown table.
"""

import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from lumos_dagster.floor.model import DatasetRecord
from lumos_dagster.store import SnapshotStore

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
MEASURE = """
import sys, time
t0 = time.perf_counter()
from lumos_dagster.floor.config import load_config
from lumos_dagster.definitions import build_definitions
t1 = time.perf_counter()
defs = build_definitions(load_config(sys.argv[1]))
t2 = time.perf_counter()
graph = defs.resolve_asset_graph()
t3 = time.perf_counter()
datasets = [k for k in graph.get_all_asset_keys() if not k.path[0].startswith("lumos_")]  # not the reports
assert len(datasets) == int(sys.argv[2]), len(datasets)
print(t1 - t0, t2 - t1, t3 - t2)
"""


def make_project(folder: Path, n: int) -> Path:
    rng = random.Random(n)
    records = [
        DatasetRecord(
            f"d{i % 20}/ds_{i}",
            "file",
            "lake",
            f"d{i % 20}/ds_{i}",
            "parquet",
            f"d{i % 20}",
            ("dt",),
            "dt",
            "%Y-%m-%d",
            10,
            10_000,
        )
        for i in range(n)
    ]
    store = SnapshotStore(f"sqlite:///{folder}/store.db")
    store.upsert_datasets(records)
    store.close()
    declarations = [
        {"name": r.name, "upstream": [records[j].name for j in rng.sample(range(i), min(i, 2))]}
        for i, r in enumerate(records)
        if i % 2
    ]
    config = {
        "sources": [{"name": "lake", "root": "lake"}],
        "datasets": declarations,
        "store": {"path": "store.db"},
        "catalog": {"path": "catalog.db"},
        "partitions": {"start": "2026-01-01"},
    }
    path = folder / "lumos.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def measure(n: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        config = make_project(Path(tmp), n)
        out = subprocess.run(
            [sys.executable, "-c", MEASURE, str(config), str(n)], capture_output=True, text=True, cwd=ROOT, check=True
        )
        imported, built, graph = (float(x) for x in out.stdout.split())
        env = {**os.environ, "LUMOS_CONFIG": str(config), "DAGSTER_HOME": tmp}
        start = time.perf_counter()
        subprocess.run(
            [BIN / "dagster", "definitions", "validate", "-m", "lumos_dagster.definitions"],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
        )
        validate = time.perf_counter() - start
    return {"n": n, "import": imported, "build": built, "graph": graph, "validate": validate}


def main(sizes: list[int]) -> None:
    print(
        "| datasets | import (s) | build definitions (s) | resolve asset graph (s) | total in-process (s) |"
        " `dagster definitions validate` (s) |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        r = measure(n)
        total = r["import"] + r["build"] + r["graph"]
        print(
            f"| {n:,} | {r['import']:.2f} | {r['build']:.2f} | {r['graph']:.2f} | {total:.2f} | {r['validate']:.2f} |"
        )


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1000, 5000])
