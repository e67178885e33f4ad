"""How the cost of a snapshot run grows with the estate: N datasets, one partition each.

Each size is a generated lake (benchmarks/lake.py: one file per dataset, Parquet, ORC, Avro, CSV
and JSON lines in turn, nested columns) taken the README's way on the embedded defaults: `lumos
discover`, then one `dagster asset materialize` of every dataset for one partition, into the SQLite
store and DataHub Lite, on the Dagster instance Lumos ships (dagster.yaml).

The run's phases come from its own records: start-up (interpreter, code location, run creation) from
its event log, each step of the snapshot run from the `lumos/step_seconds` tag the op leaves on its
run (step seconds as data), and recording Dagster's events: the rest of the op's time. The cost of a
dataset-partition is (run(N) − run(1)) / (N − 1): what one more dataset adds to a run, its fixed costs left out.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.lake import FIRST_DAY, generate_lake
from benchmarks.measure import run_measured
from benchmarks.scan import BIN, ROOT, lumos_fields, lumos_project
from lumos_dagster.run.snapshot import STEPS

REPEATS = 3
SECONDS_TAG = "lumos/step_seconds"  # assets/snapshots.py: what the op's steps took, JSON


def _phases(dagster_home: Path, started: float) -> dict[str, float]:
    """Seconds per phase of the one run in this instance, from its events (summed over its steps)."""
    os.environ["DAGSTER_HOME"] = str(dagster_home)
    from dagster import DagsterInstance

    with DagsterInstance.get() as instance:
        (run,) = instance.get_runs()
        logs = instance.all_logs(run.run_id)
    steps = json.loads(run.tags[SECONDS_TAG])
    first = {}
    for e in logs:
        if e.is_dagster_event:
            first.setdefault(e.dagster_event.event_type.name, e.timestamp)
    phases = {"start-up": first["RUN_START"] - started, "steps": 0.0}
    begun = None
    for e in logs:
        kind = e.dagster_event.event_type.name if e.is_dagster_event else None
        if kind == "STEP_START":
            begun = e.timestamp
        elif kind in ("STEP_SUCCESS", "STEP_FAILURE") and begun is not None:
            phases["steps"] += e.timestamp - begun
    phases.update(steps)  # a batch's read is what it waited: its files were read while the one before was recorded
    phases["recording"] = phases["steps"] - sum(steps.values())  # Dagster's events
    phases["run"] = first["RUN_SUCCESS"] - first["RUN_START"]
    return phases


def run_size(datasets: int, folder: Path, files: int = 1) -> dict:
    lake, work = folder / "lake", folder / "lumos"
    truth = generate_lake(lake, datasets, files, 1)
    work.mkdir(parents=True)
    config = lumos_project(lake, work)
    home = work / "dagster"
    home.mkdir()
    (home / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text())
    env = {**os.environ, "LUMOS_CONFIG": str(config), "DAGSTER_HOME": str(home)}
    discover = run_measured([str(BIN / "lumos"), "discover"], cwd=str(ROOT), env=env)
    if discover.returncode:
        raise RuntimeError(f"lumos discover failed:\n{discover.stderr[-3000:]}")
    started = time.time()
    cmd = [str(BIN / "dagster"), "asset", "materialize", "-m", "lumos_dagster.definitions",
           "--select", "* and not group:reports", "--partition", str(FIRST_DAY)]  # fmt: skip
    run = run_measured(cmd, cwd=str(ROOT), env=env)
    if run.returncode:
        raise RuntimeError(f"dagster asset materialize failed:\n{run.stderr[-3000:]}")
    found = lumos_fields(config)
    return {
        "datasets": datasets,
        "discover_s": discover.wall_s,
        "materialize_s": run.wall_s,
        "peak_mb": max(discover.peak_mb, run.peak_mb),
        "phases": _phases(home, started),
        "matching": sum(sorted(found.get(n, ())) == fields for n, fields in truth.items()),
    }


def measure(sizes: list[int], log=lambda text: print(text, file=sys.stderr, flush=True)) -> list[dict]:
    """Each size's best of `REPEATS` (fewer above 1,000 datasets: a run then takes long enough to
    drown a second of noise): the fixed cost is ~4 s, its noise ±0.5 s, a tenth of a 100-dataset run."""
    rows = []
    for n in [1, *sizes]:
        tries = []
        for _ in range(REPEATS if n <= 1_000 else 1):
            with tempfile.TemporaryDirectory(prefix="lumos-scale-") as folder:
                tries.append(run_size(n, Path(folder)))
        rows.append(min(tries, key=lambda r: r["materialize_s"]))
        log(f"scale {n}: discover {rows[-1]['discover_s']:.1f} s, materialize {rows[-1]['materialize_s']:.1f} s")
    return rows


def render(rows: list[dict]) -> list[str]:
    base = rows[0]
    phases = ["start-up", *STEPS, "recording", "run"]
    lines = [
        "### Cost per dataset-partition (one partition, one file per dataset)",
        "",
        "| datasets | `lumos discover` (s) | `dagster asset materialize` (s) | "
        + " | ".join(phases)
        + " | peak memory (MB) | fields right | **ms per dataset-partition** |",
        "|---:|---:|---:|" + "---:|" * len(phases) + "---:|---:|---:|",
    ]
    for r in rows[1:]:
        per = (r["materialize_s"] - base["materialize_s"]) / (r["datasets"] - 1) * 1000
        cells = [f"{r['phases'].get(p, 0.0):.2f}" for p in phases]
        lines.append(
            f"| {r['datasets']:,} | {r['discover_s']:.1f} | {r['materialize_s']:.1f} | " + " | ".join(cells)
            + f" | {r['peak_mb']:.0f} | {r['matching']:,} / {r['datasets']:,} | **{per:.1f}** |"
        )  # fmt: skip
    lines += [
        "",
        f"A 1-dataset run takes {base['materialize_s']:.1f} s (`dagster asset materialize`) and "
        f"{base['discover_s']:.1f} s (`lumos discover`): the fixed cost left out of the per-dataset figure. "
        "Phases in seconds: start-up (interpreter, code location load, run creation, from the run's event log), "
        "the snapshot run's steps (its `lumos/step_seconds` tag) and recording Dagster's events, summed over "
        "the run's ops, and the run from its start to its end. Read is the time the run waited for files it read "
        "ahead, while it recorded the batch before.",
        "Targets: ≤ 10 ms per dataset-partition; 10,000 datasets ≤ 1.3× the per-dataset cost of 1,000.",
    ]
    return lines


if __name__ == "__main__":
    print("\n".join(render(measure([int(a) for a in sys.argv[1:]] or [100, 1_000]))))
