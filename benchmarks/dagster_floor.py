"""Dagster's floor under a Lumos run: what Dagster alone costs to record the events Lumos records.

    .venv/bin/python -m benchmarks.dagster_floor [N ...]      (default: 1000)

For each N, N daily-partitioned assets (partitions from 2026-11-01, like Lumos') in one subsettable
multi_asset with two asset checks each (`files_readable`, not blocking; `schema_compatible`,
blocking), taken the way the Lumos benchmark takes its datasets: `dagster asset materialize
--select '*' --partition 2026-11-02` on a fresh copy of the instance Lumos ships (dagster.yaml: its
event log, console at INFO). The op does no Lumos work: it yields, per asset, one
`AssetMaterialization` and two `AssetCheckEvaluation`s exactly as assets/datasets.py and
assets/checks.py do (events, not outputs), on the same Dagster path (resources/tuning/speedups.py,
the in-process executor, the collector paused while the definitions are built and skipped at exit).

Variants: the events with empty metadata; with metadata of Lumos' size (a 15-row column schema and
what assets/metadata.py attaches for a file of the benchmark lake: ~6 KB a materialization, ~1.5
KB a check evaluation, serialized); the same without asset checks; and the fixed costs: `import
dagster` alone, and `dagster asset list` (CLI start and the code location's load, no run).
"""

# no `from __future__ import annotations`: Dagster reads the op's context annotation
import functools
import os
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from unittest import mock

import dagster as dg

from benchmarks.measure import run_measured
from lumos_dagster.resources.tuning.dagster_private import DATA_VERSION_IS_USER_PROVIDED_TAG, DATA_VERSION_TAG

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PARTITION = "2026-11-02"
MODULE = "dagster_floor_defs"
READABLE, COMPATIBLE = "files_readable", "schema_compatible"
FORMATS = ("parquet", "orc", "avro", "csv", "jsonl")
#: (path, type) as assets/metadata.py flattens a nested schema: a struct's and a list of structs' children
COLUMNS = (
    ("bool_0", "boolean"),
    ("int_1", "int64"),
    ("timestamp_2", "timestamp(us, tz=UTC)"),
    ("string_3", "string"),
    ("struct_4", "struct<float_0: float64, string_1: string>"),
    ("struct_4.float_0", "float64"),
    ("struct_4.string_1", "string"),
    ("date_5", "date"),
    ("float_6", "float64"),
    ("list_struct_7", "array<struct<string_0: string, float_1: float64, bool_2: boolean>>"),
    ("list_struct_7.string_0", "string"),
    ("list_struct_7.float_1", "float64"),
    ("list_struct_7.bool_2", "boolean"),
    ("int_8", "int64"),
    ("string_9", "string"),
)
#: name → (what the row says, the module's build arguments: metadata, checks; None: no run)
VARIANTS = {
    "empty": ("events with empty metadata", (False, True)),
    "metadata": ("events with metadata of Lumos' size", (True, True)),
    "no_checks": ("metadata of Lumos' size, no asset checks", (True, False)),
    "load": ("`dagster asset list`: CLI start and code location load, no run", None),
    "import": ('`python -c "import dagster"`', None),
}


def _spec(i: int, key: dg.AssetKey) -> dg.AssetSpec:
    """What assets/datasets.py `_asset_spec` defines for a dataset of the benchmark lake."""
    name, fmt = "/".join(key.path), FORMATS[i % len(FORMATS)]
    return dg.AssetSpec(
        key=key,
        description=f"{fmt} at /lake/{name}",
        group_name=key.path[0],
        kinds={fmt, "file"},
        metadata={
            "dagster/io_manager_key": "lumos_io_manager",
            "lumos/urn": f"urn:li:dataset:(urn:li:dataPlatform:file,{name},PROD)",
            "lumos/name": name,
            "lumos/source": "lake",
            "lumos/location": dg.MetadataValue.path(f"/lake/{name}"),
        },
        skippable=True,
    )


def _metadata(i: int, fingerprint: str) -> dict:
    """What assets/metadata.py `snapshot_metadata` attaches for one file of the benchmark lake."""
    schema = dg.TableSchema(
        columns=[
            dg.TableColumn(name=path, type=kind, constraints=dg.TableColumnConstraints(nullable=True), tags=None)
            for path, kind in COLUMNS
        ]
    )
    return {
        "dagster/column_schema": dg.MetadataValue.table_schema(schema),
        "lumos/version": dg.MetadataValue.text("1.0.0"),
        "lumos/change_class": dg.MetadataValue.text("new"),
        "lumos/fingerprint": dg.MetadataValue.text(fingerprint),
        "lumos/files": dg.MetadataValue.int(1),
        "lumos/bytes": dg.MetadataValue.int(4_000 + i),
        "lumos/fields": dg.MetadataValue.int(len(COLUMNS)),
        "dagster/partition_row_count": dg.MetadataValue.int(20),
        "lumos/last_modified": dg.MetadataValue.timestamp(1_795_706_265.67 + i),
        "lumos/cost_direct": dg.MetadataValue.float(0.0),
        "lumos/cost_inherited": dg.MetadataValue.float(0.0),
        "lumos/cost_total": dg.MetadataValue.float(0.0),
        "lumos/cost_basis": dg.MetadataValue.text("2026-11, USD, list prices, lineage_weighted"),
    }


def _evaluations(key: dg.AssetKey, metadata: bool):
    """assets/checks.py `evaluation` for a readable, compatible dataset (only the gate is blocking)."""
    for name, severity, description, extra in (
        (READABLE, dg.AssetCheckSeverity.WARN, "every file was read", {}),
        (COMPATIBLE, dg.AssetCheckSeverity.ERROR, "compatible under FULL", {"lumos/breaking": dg.MetadataValue.int(0)}),
    ):
        yield dg.AssetCheckEvaluation(
            asset_key=key,
            check_name=name,
            passed=True,
            severity=severity,
            description=description,
            metadata=extra if metadata else {},
            blocking=name == COMPATIBLE,
        )


def _assets(n: int, metadata: bool, checks: bool) -> dg.AssetsDefinition:
    keys = [dg.AssetKey([f"d{i % 10}", f"ds_{i}"]) for i in range(n)]
    check_specs = [
        dg.AssetCheckSpec(name, asset=key, blocking=name == COMPATIBLE, description=name)
        for key in (keys if checks else ())
        for name in (READABLE, COMPATIBLE)
    ]
    partitions = dg.DailyPartitionsDefinition(start_date=datetime(2026, 11, 1), timezone="UTC", end_offset=1)

    @dg.multi_asset(
        name="lumos_daily_datasets",
        specs=[_spec(i, key) for i, key in enumerate(keys)],
        check_specs=check_specs,
        can_subset=True,
        partitions_def=partitions,
        backfill_policy=dg.BackfillPolicy.single_run(),
        description="Snapshots of daily datasets: schema, version, lineage, cost and quality.",
    )
    def _snapshots(context: dg.AssetExecutionContext):
        selected = [(i, key) for i, key in enumerate(keys) if key in context.selected_asset_keys]
        for i, key in selected:
            fingerprint = f"{i:016x}"
            md = _metadata(i, fingerprint) if metadata else {}
            tags = {DATA_VERSION_TAG: fingerprint, DATA_VERSION_IS_USER_PROVIDED_TAG: "true"}
            for pk in context.partition_keys:
                yield dg.AssetMaterialization(asset_key=key, partition=pk, metadata=md, tags=tags)
            if checks:
                yield from _evaluations(key, metadata)

    return _snapshots


@functools.cache  # Dagster's CLI loads a code location several times a command, as Lumos' does
def build(n: int, metadata: bool, checks: bool) -> dg.Definitions:
    """The generated module's definitions, built as lumos_dagster/definitions.py builds Lumos'."""
    from lumos_dagster.floor.collector import paused

    with paused():
        definitions = dg.Definitions(
            assets=[_assets(n, metadata, checks)],
            executor=dg.in_process_executor,
            resources={"lumos_io_manager": dg.mem_io_manager},
        )
        definitions.resolve_asset_graph()
    return definitions


def _write_module(folder: Path, n: int, metadata: bool, checks: bool) -> None:
    (folder / f"{MODULE}.py").write_text(
        "import dagster as dg\n\n"
        "from benchmarks.dagster_floor import build\n"
        "from lumos_dagster.floor.collector import skip_final_collection\n\n"
        "skip_final_collection()\n\n\n"
        "@dg.definitions\n"
        "def defs() -> dg.Definitions:\n"
        f"    return build({n}, metadata={metadata}, checks={checks})\n"
    )


def _recorded(home: Path, started: float, wall_s: float) -> dict:
    """The one run of the instance in `home` (its command started at `started`, epoch seconds, and took
    `wall_s`): its status, seconds before its start, from its start to its end and after, events recorded."""
    Kind = dg.DagsterEventType
    kinds = (Kind.ASSET_MATERIALIZATION, Kind.ASSET_CHECK_EVALUATION)
    # the shipped event log finds its folder from DAGSTER_HOME
    with mock.patch.dict(os.environ, {"DAGSTER_HOME": str(home)}), dg.DagsterInstance.from_config(str(home)) as i:
        (run,) = i.get_runs()
        logs = i.all_logs(run.run_id, of_type={*kinds, Kind.RUN_START, Kind.RUN_SUCCESS})
    at = {e.dagster_event_type: e.timestamp for e in logs}
    start_s, end_s = at[Kind.RUN_START] - started, started + wall_s - at.get(Kind.RUN_SUCCESS, started + wall_s)
    events = [e.dagster_event for e in logs if e.dagster_event_type in kinds]
    return {
        "status": run.status.value,
        "start_s": start_s,
        "run_s": wall_s - start_s - end_s,
        "end_s": end_s,
        "materializations": sorted(
            (e.asset_key.to_user_string(), e.partition) for e in events if e.is_step_materialization
        ),
        "checks": sum(e.event_type == Kind.ASSET_CHECK_EVALUATION for e in events),
    }


def run_variant(n: int, variant: str, folder: Path, instance_yaml: str | None = None) -> dict:
    """One variant's row: wall seconds and, for a run, what its instance recorded (the instance Lumos
    ships, or the one `instance_yaml` is the dagster.yaml of)."""
    label, build_args = VARIANTS[variant]
    home, module = folder / "home", folder / "module"
    home.mkdir()
    module.mkdir()
    (home / "dagster.yaml").write_text(instance_yaml or (ROOT / "dagster.yaml").read_text())
    _write_module(module, n, *(build_args or (True, True)))
    env = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": os.pathsep.join([str(module), str(ROOT)])}
    if variant == "import":
        cmd = [sys.executable, "-c", "import dagster"]
    elif variant == "load":
        cmd = [str(BIN / "dagster"), "asset", "list", "-m", MODULE, "--select", "*"]
    else:
        cmd = [str(BIN / "dagster"), "asset", "materialize", "-m", MODULE, "--select", "*", "--partition", PARTITION]
    started = time.time()
    measured = run_measured(cmd, cwd=str(ROOT), env=env)
    if measured.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{measured.stderr[-3000:]}")
    row = {"datasets": n, "variant": variant, "label": label, "wall_s": measured.wall_s}
    return {**row, **_recorded(home, started, measured.wall_s)} if build_args else row


def paired(lake: Path, datasets: int, partitions: int, truth: dict, pairs: int, log) -> list[tuple[float, float]]:
    """(Lumos' whole run, Dagster's floor) in wall seconds, `pairs` times in turn (A B A B …), each on a
    fresh work folder and instance: a ratio taken pair by pair holds while the machine's speed drifts,
    as one run of each does not."""
    from benchmarks import scan

    out = []
    for _ in range(pairs):
        with tempfile.TemporaryDirectory(prefix="lumos-pair-") as folder:
            lumos = scan.run_lumos(lake, Path(folder) / "lumos", partitions, truth)["wall_s"]
        with tempfile.TemporaryDirectory(prefix="lumos-dagster-floor-") as folder:
            floor = run_variant(datasets, "metadata", Path(folder))["wall_s"]
        out.append((lumos, floor))
        log(f"pair {len(out)}/{pairs}: Lumos {lumos:.2f} s, Dagster's floor {floor:.2f} s")
    return out


def measure(sizes: list[int], variants=tuple(VARIANTS), log=lambda text: print(text, file=sys.stderr, flush=True)):
    rows = []
    for n in sizes:
        for variant in variants:
            with tempfile.TemporaryDirectory(prefix="lumos-dagster-floor-") as folder:
                rows.append(run_variant(n, variant, Path(folder)))
            log(f"dagster floor {n} {variant}: {rows[-1]['wall_s']:.1f} s")
    return rows


def render(rows: list[dict]) -> list[str]:
    lines = [
        "### Dagster's floor: recording what Lumos records, with no Lumos work",
        "",
        "| assets | variant | wall (s) | to the run's start (s) | run (s) | after its end (s) | events recorded "
        "| ms per asset (wall) |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        phases = " | ".join(f"{r[p]:.2f}" if p in r else "–" for p in ("start_s", "run_s", "end_s"))
        events = f"{len(r['materializations']):,} + {r['checks']:,} checks" if "checks" in r else "–"
        per = "–" if r["variant"] == "import" else f"{r['wall_s'] / r['datasets'] * 1000:.2f}"
        lines.append(f"| {r['datasets']:,} | {r['label']} | {r['wall_s']:.2f} | {phases} | {events} | {per} |")
    return lines + [
        "",
        "One `dagster asset materialize --select '*'` of one partition on a fresh copy of the shipped "
        "instance (dagster.yaml), per asset one materialization and two check evaluations yielded as events "
        "the way assets/datasets.py yields them (benchmarks/dagster_floor.py). To the run's start: interpreter "
        "start, code location load and run creation (with its planned events) up to RUN_START; run: to "
        "RUN_SUCCESS; after its end: the event log's last writes and the interpreter's exit.",
    ]


if __name__ == "__main__":
    print("\n".join(render(measure([int(a) for a in sys.argv[1:]] or [1_000]))))
