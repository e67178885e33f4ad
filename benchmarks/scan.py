"""Lumos, DataHub's own data-lake ingestion, and the physical floor, side by side on one lake.

1. Lumos, end to end as a user runs it: `lumos discover`, then one `dagster asset materialize`
   of every dataset for the newest partition, into the snapshot store and DataHub Lite.
2. DataHub's `s3` source with `platform: file` and local `path_specs`, through `datahub ingest`
   into a file sink (its own environment, same acryl-datahub version: see datahub_baseline.py).
3. The floor: one plain Python process reading every file's schema (benchmarks/floor.py).

For each: wall time, peak memory of the whole process tree, datasets found, datasets whose
fields match the lake's ground truth. Also the unchanged re-scan (what a storage sensor tick
costs when nothing changed) against pure listing.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import date
from pathlib import Path

import yaml

from benchmarks.datahub_baseline import DATAHUB, datahub_datasets, ingest_command, write_recipe
from benchmarks.lake import FIRST_DAY
from benchmarks.measure import Measured, run_measured

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[1]


def _matching(found: dict[str, list[str]], truth: dict[str, list[str]]) -> int:
    return sum(sorted(found.get(name, ())) == fields for name, fields in truth.items())


def _row(tool: str, m: Measured, found: dict[str, list[str]], truth: dict[str, list[str]], note: str = "") -> dict:
    if m.returncode != 0:
        raise RuntimeError(f"{tool} failed ({m.returncode}):\n{m.stderr[-3000:]}")
    return {
        "tool": tool,
        "wall_s": m.wall_s,
        "peak_mb": m.peak_mb,
        "found": len(set(found) & set(truth)),
        "matching": _matching(found, truth),
        "note": note,
    }


def lumos_project(lake: Path, work: Path) -> Path:
    config = {
        "sources": [{"name": "lake", "root": str(lake)}],  # _truth.json is hidden: not a dataset
        "store": {"path": str(work / "store.db")},
        "catalog": {"path": str(work / "catalog.db")},
        "partitions": {"start": str(FIRST_DAY)},
        "spark": {"master": "local[*]"},
    }
    path = work / "lumos.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def lumos_fields(config_path: Path) -> dict[str, list[str]]:
    from lumos_dagster.floor.config import load_config
    from lumos_dagster.store import SnapshotStore

    store = SnapshotStore(load_config(str(config_path)).store_url)
    try:
        out = {}
        for rec in store.datasets():
            snap = store.latest(rec.urn)
            if snap is not None and snap.readable:
                out[rec.name] = sorted(p for p, _ in snap.schema.flatten())
        return out
    finally:
        store.close()


def run_lumos(lake: Path, work: Path, partitions: int, truth: dict, instance_yaml: str | None = None) -> dict:
    """The README's way: `lumos discover`, then one `dagster asset materialize` of every dataset for
    the newest partition (the lake's state now, what DataHub's source reads), on the Dagster
    instance Lumos ships (or the one `instance_yaml` is the dagster.yaml of)."""
    work.mkdir(parents=True, exist_ok=True)
    config = lumos_project(lake, work)
    home = work / "dagster"
    home.mkdir(exist_ok=True)
    (home / "dagster.yaml").write_text(instance_yaml or (ROOT / "dagster.yaml").read_text())
    env = {**os.environ, "LUMOS_CONFIG": str(config), "DAGSTER_HOME": str(home)}
    newest = date.fromordinal(FIRST_DAY.toordinal() + partitions - 1)
    script = (
        f"{BIN}/lumos discover > /dev/null && {BIN}/dagster asset materialize -m lumos_dagster.definitions "
        f"--select '* and not group:reports' --partition {newest}"
    )
    m = run_measured(["bash", "-c", script], cwd=str(ROOT), env=env)
    return _row("Lumos (discover + one Dagster run, store, DataHub Lite)", m, lumos_fields(config), truth)


def run_datahub(lake: Path, work: Path, truth: dict) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    out = work / "datahub-mcps.json"
    recipe = write_recipe(lake, out, work / "recipe.yml")
    cmd, env = ingest_command(recipe)
    m = run_measured(cmd, cwd=str(work), env=env)
    return _row("DataHub `s3` source (`datahub ingest`, file sink)", m, datahub_datasets(out, lake), truth)


def run_floor(lake: Path, truth: dict) -> dict:
    code = "import json, sys\nfrom benchmarks.floor import floor_scan\nprint(json.dumps(floor_scan(sys.argv[1])))"
    m = run_measured([sys.executable, "-c", code, str(lake)], cwd=str(ROOT))
    return _row("floor (one Python process: footers, headers, first rows)", m, json.loads(m.stdout), truth)


def rescan(lake: Path, work: Path) -> dict:
    """An unchanged re-scan (the storage sensor's `look`) against pure listing of the same files."""
    from lumos_dagster.floor.config import load_config
    from lumos_dagster.floor.scan_report import ScanReport
    from lumos_dagster.inventory.watch import look
    from lumos_dagster.sources import build_sources
    from lumos_dagster.sources.local import list_files
    from lumos_dagster.store import SnapshotStore

    config = load_config(str(lumos_project(lake, work)))
    source = build_sources(config)["lake"]
    store = SnapshotStore(config.store_url)
    try:
        first = look(source, store, None, ScanReport())  # the baseline a sensor keeps
        listing, again = [], []
        for _ in range(3):
            start = time.perf_counter()
            files = sum(1 for _ in list_files(str(lake)))
            listing.append(time.perf_counter() - start)
            report = ScanReport()
            start = time.perf_counter()
            seen = look(source, store, first.generation, report, first.state)
            again.append(time.perf_counter() - start)
        assert not seen.changes, seen.changes[:3]
    finally:
        store.close()
    return {
        "files": files,
        "listing_s": min(listing),
        "rescan_s": min(again),
        "files_read": report.files_read,
    }


def datahub_available() -> bool:
    return Path(DATAHUB).exists()
