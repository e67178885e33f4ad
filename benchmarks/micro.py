"""Micro-benchmarks of Lumos' hot paths, each against its target.

    .venv/bin/python -m benchmarks.micro [--large]

* `diff_throughput` — `diff_schemas` over pairs of 100-field schemas (target ≤ 1 s for 10,000 pairs);
* `cost_rollup` — `cost.attribute` on a random lineage DAG, per attribution method (target ≤ 5 s for
  100,000 nodes × 300,000 edges);
* `catalog_write_rate` — snapshots into a DataHub Lite file through Lumos (`DataHubLiteCatalog.emit`,
  batched) against a raw loop of DataHub Lite's own `write` over the same, precomputed, MCPs (no target);
* `delivery_cost` — Lumos time per dataset to record snapshots and deliver them into DataHub Lite:
  `store.put` + `deliver` (fingerprint, aspects, Lite write, outbox bookkeeping) on a SQLite store, new
  content and the same content again, at 1,000 and 10,000 datasets (target < 1 ms a dataset, and
  10,000 no dearer than 1.3× 1,000 a dataset); and one `put` + `deliver` per dataset, as the IO manager
  calls them for one output at a time;
* `backfill_overhead` — per dataset-partition overhead of one single-run Dagster backfill of D datasets
  × P daily partitions, Spark warm (target ≤ 20 ms).

Every function returns result rows: dicts with `benchmark`, `size` (a dict of the sizes), `value`,
`unit`, `target` (text, or None), `met` (True/False against the target at the target's size, None at
other sizes or without a target), and optionally `note` (text) and `detail` (the raw measurements).

The command line prints them as a markdown table: the default sizes are the targets' (catalog 500,
delivery 1,000 and 10,000, backfill 20 × 10); `--large` runs the catalog at 5,000 datasets, the
per-output delivery at 10,000 too and the backfill at 100 × 30.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import tempfile
import time
from dataclasses import replace
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

from lumos_dagster.floor.datatypes import (
    Array,
    Decimal,
    Field,
    Primitive,
    Schema,
    Struct,
    Timestamp,
    schema_from_json,
    schema_to_json,
)
from lumos_dagster.floor.model import ColumnMapping, DatasetRef, LineageEdge, OperationalStats, Owner, Snapshot

Row = dict[str, Any]

DIFF_TARGET = (10_000, 100)  # pairs, fields
DIFF_TARGET_SECONDS = 1.0
COST_TARGET = (100_000, 300_000)  # nodes, edges
COST_TARGET_SECONDS = 5.0
BACKFILL_TARGET = (20, 10)  # datasets, partitions
BACKFILL_TARGET_MS = 20.0
DELIVERY_SIZES = (1_000, 10_000)  # datasets
DELIVERY_TARGET_MS = 1.0  # per dataset: store.put + deliver into DataHub Lite
DELIVERY_FLAT = 1.3  # the largest size's cost per dataset, at most this × the smallest's


def _row(
    benchmark: str, size: dict, value: float, unit: str, target: str | None, met: bool | None, note=None, detail=None
) -> Row:
    row = {"benchmark": benchmark, "size": size, "value": value, "unit": unit, "target": target, "met": met}
    if note:
        row["note"] = note
    if detail:
        row["detail"] = detail
    return row


def _best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Best wall time of `repeat` calls, and the last call's result."""
    best, out = math.inf, None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


# --------------------------------------------------------------- 1. schema diff

_KINDS = ["int32", "int64", "float32", "float64", "string", "string", "string", "boolean", "date", "binary"]
_PROMOTIONS = {"int8": "int16", "int16": "int32", "int32": "int64", "float32": "float64", "int64": "float64"}


def _random_type(rng: random.Random, nested: bool):
    r = rng.random()
    if nested and r < 0.10:  # a struct of 3–8 fields, one level deep
        return Struct(tuple(_random_field(rng, f"s{j}", nested=False) for j in range(rng.randint(3, 8))))
    if r < 0.15:
        return Array(Primitive(rng.choice(["string", "int64"])))
    if r < 0.20:
        return Decimal(rng.choice([10, 18, 38]), 2)
    if r < 0.25:
        return Timestamp("us", "UTC")
    return Primitive(rng.choice(_KINDS))


def _random_field(rng: random.Random, name: str, nested: bool = True) -> Field:
    return Field(
        name=name,
        type=_random_type(rng, nested),
        nullable=rng.random() < 0.8,
        description=f"the {name} column" if rng.random() < 0.5 else None,
        native_type=None,
    )


def random_schema(rng: random.Random, fields: int = 100) -> Schema:
    """`fields` top-level fields; about one in ten a struct, some arrays, decimals and timestamps."""
    return Schema(tuple(_random_field(rng, f"col_{i:03d}") for i in range(fields)))


def _edit_fields(rng: random.Random, fields: list[Field], serial: int) -> None:
    """One random edit of `fields`, in place."""
    i = rng.randrange(len(fields))
    f = fields[i]
    kind = rng.choice(["add", "remove", "promote", "nullability", "description", "nested"])
    if kind == "add":
        fields.insert(rng.randrange(len(fields) + 1), Field(f"added_{serial}", Primitive("string"), nullable=True))
    elif kind == "remove" and len(fields) > 1:
        del fields[i]
    elif kind == "promote" and isinstance(f.type, Primitive):
        fields[i] = replace(f, type=Primitive(_PROMOTIONS.get(f.type.kind, "string")))
    elif kind == "nullability":
        fields[i] = replace(f, nullable=not f.nullable)
    elif kind == "nested" and isinstance(f.type, Struct):
        inner = list(f.type.fields)
        _edit_fields(rng, inner, serial)
        fields[i] = replace(f, type=Struct(tuple(inner)))
    else:  # description (and the edits that did not apply to this field)
        fields[i] = replace(f, description=f"reworded {serial}")


def diff_pairs(pairs: int, fields: int = 100, seed: int = 7) -> list[tuple[Schema, Schema]]:
    """(old, new) schemas; new is a separate copy of old (as read back from the store) with 2–5 edits."""
    rng = random.Random(seed)
    out = []
    for _ in range(pairs):
        old = random_schema(rng, fields)
        new_fields = list(schema_from_json(schema_to_json(old)).fields)  # distinct objects, equal values
        edits = rng.randint(2, 5)
        for serial in range(edits):
            _edit_fields(rng, new_fields, serial)
        while tuple(new_fields) == old.fields:  # two edits cancelled out (a toggle twice…): one more
            edits += 1
            _edit_fields(rng, new_fields, edits)
        out.append((old, Schema(tuple(new_fields))))
    return out


def diff_throughput(pairs: int = 10_000, fields: int = 100, repeat: int = 3) -> list[Row]:
    from lumos_dagster.schema.diff import diff_schemas

    data = diff_pairs(pairs, fields)

    def run() -> int:
        return sum(len(diff_schemas(old, new)) for old, new in data)

    seconds, changes = _best(run, repeat)
    at_target = (pairs, fields) == DIFF_TARGET
    return [
        _row(
            "diff_throughput",
            {"pairs": pairs, "fields": fields},
            seconds,
            "s",
            "≤ 1 s for 10,000 × 100",
            seconds <= DIFF_TARGET_SECONDS if at_target else None,
            f"{changes:,} changes found; {seconds / pairs * 1e6:.0f} µs/pair; best of {repeat}",
        )
    ]


# ---------------------------------------------------------------- 2. cost rollup


def random_dag(nodes: int, edges: int, seed: int = 11) -> dict:
    """name → `cost.Node`; `edges` distinct edges, each from a lower index to a higher one (acyclic).
    A third of the nodes with upstreams declare lineage weights; the others fall back to bytes."""
    from lumos_dagster.cost.attribution import Node

    if edges > nodes * (nodes - 1) // 2:
        raise ValueError(f"a DAG of {nodes} nodes has at most {nodes * (nodes - 1) // 2} edges")
    rng = random.Random(seed)
    seen: set[tuple[int, int]] = set()
    while len(seen) < edges:
        a, b = rng.randrange(nodes), rng.randrange(nodes)
        if a != b:
            seen.add((a, b) if a < b else (b, a))
    upstream: list[list[int]] = [[] for _ in range(nodes)]
    for a, b in sorted(seen):
        upstream[b].append(a)
    out = {}
    for i in range(nodes):
        ups = tuple(f"d{u}" for u in upstream[i])
        out[f"d{i}"] = Node(
            name=f"d{i}",
            storage=rng.uniform(0, 100),
            compute=rng.uniform(0, 500) if ups else 0.0,
            upstream=ups,
            bytes=rng.randrange(1, 10**12),
            last_modified=rng.uniform(1.7e9, 1.8e9),
            weights={u: rng.uniform(0.1, 1.0) for u in ups} if ups and rng.random() < 1 / 3 else None,
        )
    return out


def conservation_error(nodes: dict, rollup: dict) -> float:
    """|Σ totals of the datasets nobody consumes − Σ direct costs| / Σ direct costs (cost.py: conserved)."""
    consumed = {u for node in nodes.values() for u in node.upstream}
    direct = sum(node.direct for node in nodes.values())
    sinks = sum(rollup[name].total for name in nodes if name not in consumed)
    return abs(sinks - direct) / direct if direct else abs(sinks)


def cost_rollup(nodes: int = 100_000, edges: int = 300_000, repeat: int = 1) -> list[Row]:
    from lumos_dagster.cost.attribution import METHODS, attribute

    dag = random_dag(nodes, edges)
    at_target = (nodes, edges) == COST_TARGET
    rows = []
    for method in METHODS:
        seconds, rollup = _best(lambda m=method: attribute(dag, m), repeat)
        error = conservation_error(dag, rollup)
        if error > 1e-9:
            raise AssertionError(f"cost is not conserved under {method}: relative error {error:.2e}")
        rows.append(
            _row(
                f"cost_rollup/{method}",
                {"nodes": nodes, "edges": edges},
                seconds,
                "s",
                "≤ 5 s",
                seconds <= COST_TARGET_SECONDS if at_target else None,
                f"conserved (Σ sinks = Σ direct, rel. error {error:.1e}); best of {repeat}",
            )
        )
    return rows


# ---------------------------------------------------------- 3. catalog write rate


def catalog_snapshots(datasets: int, fields: int = 20, seed: int = 3) -> list[Snapshot]:
    """Realistic snapshots: ~20 fields (a struct among them), a lineage edge with column mappings to
    the previous dataset, two owners, two tags, a description, a version and stats; 10 per folder."""
    rng = random.Random(seed)
    modified = datetime(2026, 11, 25, 6, 0, tzinfo=timezone.utc)
    refs = [
        DatasetRef("file", f"domain_{i // 10:03d}/ds_{i:05d}", f"/lake/domain_{i // 10:03d}/ds_{i:05d}", "parquet")
        for i in range(datasets)
    ]
    out = []
    for i, ref in enumerate(refs):
        schema = Schema(
            (Field("id", Primitive("int64"), nullable=False, is_key=True, description="primary key"),)
            + tuple(_random_field(rng, f"col_{j:02d}") for j in range(fields - 1))
        )
        upstream = ()
        if i:
            columns = tuple(ColumnMapping(f.name, f.name) for f in schema.fields[:3])
            upstream = (LineageEdge(refs[i - 1], columns),)
        out.append(
            Snapshot(
                dataset=ref,
                partition_key="2026-11-25",
                captured_at=modified,
                schema=schema,
                stats=OperationalStats(
                    file_count=4,
                    total_bytes=rng.randrange(10**6, 10**9),
                    row_count=rng.randrange(10**3, 10**7),
                    last_modified=modified,
                    partition_values={"dt": ["2026-11-25"]},
                ),
                description=f"Dataset {i}: what it holds, in a sentence or two.",
                owners=(Owner(f"owner{i % 7}@example.com"), Owner(f"team-{i % 5}", "group", "TECHNICAL_OWNER")),
                tags=("bench", f"tier{i % 3}"),
                upstream=upstream,
                version="1.0.0",
                change_class="new",
                policy="BACKWARD",
            )
        )
    return out


def _raw_mcps(snapshots: list[Snapshot]) -> list:
    """The aspects the file ends with, built up front as MCPs DataHub Lite's own `write` takes (it takes
    no patch: Lumos' patches applied)."""
    from datahub.emitter.mcp import MetadataChangeProposalWrapper

    from lumos_dagster.catalog.datahub import snapshot_proposals
    from lumos_dagster.catalog.patch_apply import state_of

    state = state_of(p for s in snapshots for p in snapshot_proposals(s))
    return [MetadataChangeProposalWrapper(entityUrn=urn, aspect=aspect) for (urn, _), aspect in state.items()]


def catalog_write_rate(datasets: int = 500, repeat: int = 1) -> list[Row]:
    from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog, open_lite

    snapshots = catalog_snapshots(datasets)
    lumos_times, raw_times, sent = [], [], 0
    with tempfile.TemporaryDirectory(prefix="lumos-bench-lite-") as tmp:
        for r in range(repeat):
            path = os.path.join(tmp, f"lumos-{r}.db")
            start = time.perf_counter()
            catalog = DataHubLiteCatalog(path)
            try:
                sent = catalog.emit(snapshots)
            finally:
                catalog.close()  # the raw loop's close reindexes; the batched writer kept the index as it went
            lumos_times.append(time.perf_counter() - start)

            mcps = _raw_mcps(snapshots)  # fresh objects: DataHub Lite's write stamps systemMetadata on them
            path = os.path.join(tmp, f"raw-{r}.db")
            start = time.perf_counter()
            lite = open_lite(path)
            try:
                for mcp in mcps:
                    lite.write(mcp)
            finally:
                lite.close()
            raw_times.append(time.perf_counter() - start)
    if sent != len(mcps):
        raise AssertionError(f"Lumos sent {sent} MCPs, the raw loop {len(mcps)}")
    lumos, raw = datasets / min(lumos_times), datasets / min(raw_times)
    size = {"datasets": datasets}
    note = f"{sent:,} MCPs ({sent / datasets:.1f}/dataset), fresh file, close included; best of {repeat}"
    detail = {"mcps": sent, "lumos_seconds": min(lumos_times), "raw_seconds": min(raw_times)}
    return [
        _row("catalog_write_rate/lumos", size, lumos, "datasets/s", None, None, "emit + close; " + note, detail),
        _row("catalog_write_rate/raw", size, raw, "datasets/s", None, None, "write per MCP + close; " + note, detail),
        _row(
            "catalog_write_rate/ratio",
            size,
            lumos / raw,
            "lumos/raw",
            None,
            None,
            "Lumos builds the aspects inside the timing, the raw loop gets them prebuilt",
            detail,
        ),
    ]


# ------------------------------------------------------------ 4. delivery cost


def _delivery_run(snapshots: list[Snapshot], folder: str, per_output: bool) -> dict[str, float]:
    """Seconds to put + deliver `snapshots` into a fresh SQLite store and DataHub Lite file, then the
    same content again (a re-run where nothing changed); `per_output`: one put + deliver each."""
    from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog
    from lumos_dagster.delivery.outbox import deliver
    from lumos_dagster.store import SnapshotStore

    out: dict[str, float] = {}
    with SnapshotStore(f"sqlite:///{folder}/store.db") as store:
        for run in ("new", "unchanged"):
            catalog = DataHubLiteCatalog(f"{folder}/lite.db")
            counted = 0
            cpu, start = time.process_time(), time.perf_counter()
            try:
                if per_output:
                    for s in snapshots:
                        store.put([s], catalogs=[catalog.name])
                        report = deliver(store, catalog)
                        counted += report.delivered if run == "new" else report.unchanged
                else:
                    store.put(snapshots, catalogs=[catalog.name])
                    put = time.perf_counter()
                    report = deliver(store, catalog)
                    counted = report.delivered if run == "new" else report.unchanged
                    out[f"{run}_put_seconds"] = put - start
            finally:
                catalog.close()
            out[f"{run}_seconds"] = time.perf_counter() - start
            out[f"{run}_cpu_seconds"] = time.process_time() - cpu  # this process only: what a busy machine blurs less
            if counted != len(snapshots) or report.failed:
                raise AssertionError(f"{run}: {counted} of {len(snapshots)} datasets {run}; failed: {report.failed}")
    return out


def delivery_cost(
    sizes: tuple[int, ...] = DELIVERY_SIZES, per_output_sizes: tuple[int, ...] = (1_000,), repeat: int = 1
) -> list[Row]:
    """Lumos time per dataset to record and deliver snapshots into DataHub Lite (SQLite store)."""
    rows: list[Row] = []
    target = f"< {DELIVERY_TARGET_MS:g} ms/dataset"
    at_size: dict[int, float] = {}
    runs = [(n, False) for n in sizes] + [(n, True) for n in per_output_sizes]
    for datasets, per_output in runs:
        snapshots = catalog_snapshots(datasets)
        best: dict[str, float] = {}
        for _ in range(repeat):
            with tempfile.TemporaryDirectory(prefix="lumos-bench-delivery-") as tmp:
                got = _delivery_run(snapshots, tmp, per_output)
            if not best or got["new_seconds"] < best["new_seconds"]:
                best = got
        size = {"datasets": datasets}
        name = "delivery_cost/per_output" if per_output else "delivery_cost"
        for run, what in (("new", "new content"), ("unchanged", "the same content again")):
            ms = best[f"{run}_seconds"] / datasets * 1e3
            how = "one put + deliver per dataset" if per_output else "one put, one deliver"
            cpu = best[f"{run}_cpu_seconds"] / datasets * 1e3
            note = f"{what}: {how}; CPU {cpu:.3f} ms; SQLite store, new Lite file, close included; best of {repeat}"
            if not per_output:
                note += f"; put {best[f'{run}_put_seconds'] / datasets * 1e3:.3f} ms"
            met = ms < DELIVERY_TARGET_MS if datasets in DELIVERY_SIZES and not per_output else None
            rows.append(_row(f"{name}/{run}", size, ms, "ms/dataset", None if per_output else target, met, note, best))
            if not per_output and run == "new":
                at_size[datasets] = ms
    if len(at_size) > 1:
        small, large = min(at_size), max(at_size)
        ratio = at_size[large] / at_size[small]
        rows.append(
            _row(
                "delivery_cost/flatness",
                {"datasets": large},
                ratio,
                f"× the cost at {small:,}",
                f"≤ {DELIVERY_FLAT:g}",
                ratio <= DELIVERY_FLAT if (small, large) == DELIVERY_SIZES else None,
                "new content, per dataset",
            )
        )
    return rows


# ---------------------------------------------------------- 5. backfill overhead


def backfill_start(partitions: int) -> date:
    """The first of `partitions` days that all exist as Dagster partitions now: they end yesterday (UTC)
    (a range reaching past the partitions that exist is silently cut short by Dagster)."""
    return datetime.now(timezone.utc).date() - timedelta(days=partitions)


def backfill_lake(root: str | Path, datasets: int, partitions: int, start: date | None = None) -> int:
    """`bench/ds_NNN/dt=YYYY-MM-DD/part-0.parquet`: one small file (8 columns, a struct among them)
    per dataset and day from `start` (default: `backfill_start`). Returns the number of files written."""
    start = start or backfill_start(partitions)
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table(
        {
            "id": pa.array(range(10), pa.int64()),
            "name": pa.array([f"n{i}" for i in range(10)], pa.string()),
            "amount": pa.array([1.5] * 10, pa.float64()),
            "qty": pa.array(range(10), pa.int32()),
            "flag": pa.array([True] * 10, pa.bool_()),
            "at": pa.array([datetime(2026, 11, 1)] * 10, pa.timestamp("us", tz="UTC")),
            "tags": pa.array([["a", "b"]] * 10, pa.list_(pa.string())),
            "user": pa.array([{"name": "a", "age": 1}] * 10, pa.struct([("name", pa.string()), ("age", pa.int32())])),
        }
    )
    for i in range(datasets):
        for d in range(partitions):
            folder = Path(root) / "bench" / f"ds_{i:03d}" / f"dt={start + timedelta(days=d)}"
            folder.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, folder / "part-0.parquet")
    return datasets * partitions


def _project(folder: Path, lake: Path, start: date):
    """A lumos.yaml over `lake` with its own store and catalog in `folder`, the lake discovered."""
    import yaml

    from lumos_dagster.floor.config import load_config
    from lumos_dagster.floor.scan_report import ScanReport
    from lumos_dagster.sources import build_sources, discover
    from lumos_dagster.store import SnapshotStore

    folder.mkdir(parents=True, exist_ok=True)
    config = {
        "sources": [{"name": "lake", "root": str(lake)}],
        "store": {"path": "store.db"},
        "catalog": {"path": "catalog.db"},
        "partitions": {"start": str(start)},
    }
    (folder / "lumos.yaml").write_text(yaml.safe_dump(config))
    cfg = load_config(str(folder / "lumos.yaml"))
    store = SnapshotStore(cfg.store_url)
    try:
        store.upsert_datasets(discover(build_sources(cfg), ScanReport()).records)
    finally:
        store.close()
    return cfg


def spark_session():
    """The process' Spark session, as tests/conftest.py makes it (local[2], workers on this Python);
    Lumos' Spark resource picks it up (getOrCreate)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[2]")
        .appName("lumos-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.python.worker.reuse", "true")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.pyspark.python", sys.executable)
        .getOrCreate()
    )


QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}  # events are still recorded


def _timed_run(cfg, names: list[str], first: date, last: date) -> float:
    """Wall time of one Dagster run of the dataset assets `names` over the partition range."""
    from dagster import AssetKey, DagsterInstance

    from lumos_dagster.definitions import build_definitions

    job = build_definitions(cfg).resolve_implicit_global_asset_job_def()
    instance = DagsterInstance.ephemeral()
    tags = {"dagster/asset_partition_range_start": str(first), "dagster/asset_partition_range_end": str(last)}
    selection = [AssetKey(n.split("/")) for n in names]
    start = time.perf_counter()
    result = job.execute_in_process(run_config=QUIET, instance=instance, tags=tags, asset_selection=selection)
    seconds = time.perf_counter() - start
    materialized = result.asset_materializations_for_node(f"lumos_{cfg.partitions.cadence}_datasets")
    expected = len(names) * ((last - first).days + 1)
    if not result.success or len(materialized) != expected:
        raise AssertionError(f"expected {expected} materializations, got {len(materialized)}")
    return seconds


def backfill_overhead(datasets: int = 20, partitions: int = 10, spark=None, repeat: int = 2) -> list[Row]:
    """(b − a) / (D×P − 1): (a) a run of 1 dataset × 1 partition, (b) one run of D × P (single-run
    backfill), each on a fresh store and catalog; Spark started and warmed by a throw-away run first."""
    spark = spark or spark_session()
    first = backfill_start(partitions)
    last = first + timedelta(days=partitions - 1)
    names = [f"bench/ds_{i:03d}" for i in range(datasets)]
    a_times, b_times = [], []
    with tempfile.TemporaryDirectory(prefix="lumos-bench-backfill-") as tmp:
        lake = Path(tmp) / "lake"
        backfill_lake(lake, datasets, partitions, first)
        # warm-up: JVM, Python workers, imports and Dagster's code paths (a 2 × 2 run in its own project)
        _timed_run(_project(Path(tmp) / "warm", lake, first), names[:2], first, min(last, first + timedelta(1)))
        for r in range(repeat):
            a_times.append(_timed_run(_project(Path(tmp) / f"a{r}", lake, first), names[:1], last, last))
            b_times.append(_timed_run(_project(Path(tmp) / f"b{r}", lake, first), names, first, last))
    a, b = min(a_times), min(b_times)
    cells = datasets * partitions
    per_cell_ms = (b - a) / max(cells - 1, 1) * 1000
    at_target = (datasets, partitions) == BACKFILL_TARGET
    return [
        _row(
            "backfill_overhead",
            {"datasets": datasets, "partitions": partitions},
            per_cell_ms,
            "ms/dataset-partition",
            "≤ 20 ms",
            per_cell_ms <= BACKFILL_TARGET_MS if at_target else None,
            f"(b − a)/(D×P − 1), a = 1×1 run {a:.2f} s, b = {datasets}×{partitions} single run {b:.2f} s; "
            f"Spark session started and warmed beforehand (excluded); fresh store + DataHub Lite per run; "
            f"console log at WARNING; best of {repeat}",
            {"a_seconds": a, "b_seconds": b, "cells": cells},
        )
    ]


# ------------------------------------------------------------------- the CLI


def _size_text(size: dict) -> str:
    return " × ".join(f"{v:,} {k}" for k, v in size.items())


def _value_text(value: float) -> str:
    return f"{value:,.0f}" if value >= 1000 else f"{value:.3g}" if value < 1 else f"{value:,.2f}"


def render(rows: list[Row]) -> str:
    lines = ["| benchmark | size | value | unit | target | met | note |", "|---|---|---:|---|---|:-:|---|"]
    for r in rows:
        met = {True: "yes", False: "**no**", None: "–"}[r["met"]]
        lines.append(
            f"| {r['benchmark']} | {_size_text(r['size'])} | {_value_text(r['value'])} | {r['unit']} "
            f"| {r['target'] or '–'} | {met} | {r.get('note', '')} |"
        )
    return "\n".join(lines)


def run_all(large: bool = False) -> list[Row]:
    """Every micro benchmark: the issue's target sizes; `large` grows the catalog and backfill runs."""
    catalog, backfill = (5_000, (100, 30)) if large else (500, BACKFILL_TARGET)

    def backfill_run() -> list[Row]:
        spark = spark_session()
        try:
            return backfill_overhead(*backfill, spark=spark)
        finally:
            spark.stop()

    runs: list[tuple[str, Callable[[], list[Row]]]] = [
        ("diff_throughput", lambda: diff_throughput(*DIFF_TARGET)),
        ("cost_rollup", lambda: cost_rollup(*COST_TARGET, repeat=2)),
        ("catalog_write_rate", lambda: catalog_write_rate(catalog, repeat=1 if large else 2)),
        ("delivery_cost", lambda: delivery_cost(per_output_sizes=DELIVERY_SIZES if large else DELIVERY_SIZES[:1])),
        ("backfill_overhead", backfill_run),
    ]
    rows: list[Row] = []
    for name, fn in runs:
        start = time.perf_counter()
        rows += fn()
        print(f"{name}: done in {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.micro", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--large", action="store_true", help="catalog 5,000 datasets, per-output delivery 10,000, backfill 100 × 30"
    )
    print(render(run_all(parser.parse_args(argv).large)))


if __name__ == "__main__":
    main()
