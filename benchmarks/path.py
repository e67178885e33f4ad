"""The path one snapshot takes: which of the project's modules run, from discovery to the DataHub Lite
write, in how many packages and processes.

    .venv/bin/python -m benchmarks.path

A one-dataset lake: `lumos discover`, then a Dagster materialization of its partition (in process,
as `dagster asset materialize` runs it), with a profiler recording every function call into the
project's own files — in this process, its threads, and the processes it forks (the schema
readers, the delivery worker). A module counts when one of its functions runs (being imported is
not crossing it). Calls from one package into another are counted by direction: a package that
calls into another which also calls back into it is a back-and-forth (callbacks a caller hands
down, such as the run's `Services`, count too).
"""

from __future__ import annotations

import json
import multiprocessing.util
import os
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("lumos_dagster", "assets", "resources", "sensors", "spark")
_seen: set[str] = set()
_calls: set[tuple[str, str]] = set()  # (calling package, called package)
_dump_dir = tempfile.mkdtemp(prefix="lumos-path-")


def _module(filename: str) -> str | None:
    try:
        rel = Path(filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    return str(rel) if rel.parts[0] in PACKAGES and rel.suffix == ".py" else None


def _package(module: str) -> str:
    """`lumos_dagster/run/record.py` → run; a module at the core's root is its own (`model`,
    `definitions`); the Dagster wiring by folder (assets, sensors…)."""
    parts = module.split("/")
    return parts[1].removesuffix(".py") if parts[0] == "lumos_dagster" else parts[0]


def _profile(frame, event, arg):
    if event == "call":
        module = _module(frame.f_code.co_filename)
        if module is not None and frame.f_code.co_name != "<module>":
            _seen.add(module)
            caller = frame.f_back
            while caller is not None and _module(caller.f_code.co_filename) is None:
                caller = caller.f_back  # through Dagster's or a library's frames to the project's caller
            if caller is not None and caller.f_code.co_name != "<module>":
                a, b = _package(_module(caller.f_code.co_filename) or ""), _package(module)
                if a != b:
                    _calls.add((a, b))


def _dump() -> None:
    Path(_dump_dir, f"{os.getpid()}.json").write_text(json.dumps({"seen": sorted(_seen), "calls": sorted(_calls)}))


def _in_child(_) -> None:
    """A forked process keeps this one's profiler; it writes what it saw when it ends."""
    _seen.clear()
    _calls.clear()
    sys.setprofile(_profile)
    threading.setprofile(_profile)
    multiprocessing.util.Finalize(None, _dump, exitpriority=100)


def main() -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    import yaml
    from click.testing import CliRunner
    from dagster import DagsterInstance

    work = Path(tempfile.mkdtemp(prefix="lumos-path-lake-"))
    (work / "lake" / "sales" / "orders" / "dt=2026-11-25").mkdir(parents=True)
    pq.write_table(pa.table({"id": [1, 2]}), work / "lake" / "sales" / "orders" / "dt=2026-11-25" / "p.parquet")
    config = {"sources": [{"name": "lake", "root": "lake"}], "store": {"path": "store.db"},
              "catalog": {"path": "lite.db"}, "partitions": {"start": "2026-11-20"}}  # fmt: skip
    (work / "lumos.yaml").write_text(yaml.safe_dump(config))
    os.environ["LUMOS_CONFIG"] = str(work / "lumos.yaml")
    multiprocessing.util.register_after_fork(_in_child, _in_child)
    sys.setprofile(_profile)
    threading.setprofile(_profile)
    from lumos_dagster.cli import main as lumos
    from lumos_dagster.definitions import build_definitions
    from lumos_dagster.floor.config import load_config

    assert CliRunner().invoke(lumos, ["discover"]).exit_code == 0
    job = build_definitions(load_config(str(work / "lumos.yaml"))).resolve_implicit_global_asset_job_def()
    assert job.execute_in_process(partition_key="2026-11-25", instance=DagsterInstance.ephemeral()).success
    sys.setprofile(None)
    threading.setprofile(None)
    processes = {"this process": set(_seen)}
    calls = set(_calls)
    for dump in Path(_dump_dir).glob("*.json"):
        found = json.loads(dump.read_text())
        processes[f"pid {dump.stem}"] = set(found["seen"])
        calls |= {tuple(c) for c in found["calls"]}
    crossed = set().union(*processes.values())
    packages = {_package(m) for m in crossed}
    busy = [p for p, mods in processes.items() if mods]
    both_ways = sorted({tuple(sorted(c)) for c in calls if (c[1], c[0]) in calls})
    print(
        f"{len(crossed)} modules in {len(packages)} packages, {len(busy)} processes; "
        f"{len(calls)} package-to-package call directions, {len(both_ways)} pairs called both ways"
    )
    for a, b in both_ways:
        print(f"  both ways: {a} <-> {b}")
    for module in sorted(crossed):
        print(f"  {module}  ({', '.join(p for p, mods in processes.items() if module in mods)})")


if __name__ == "__main__":
    main()
