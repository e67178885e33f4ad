"""Delta Lake tables: a folder with a `_delta_log/` is one dataset, described by its log alone.

Tables are written with `deltalake` (delta-rs) and evolved through it where it can. Where
delta-rs cannot evolve a table (type widening, renaming or dropping a column under column
mapping), the test commits the change itself as the Delta protocol defines it: a JSON commit
in `_delta_log/` with a `metaData` action carrying the new `schemaString` (and a `protocol`
action for a new table feature). Those are real Delta logs, as Spark writes them, that a
reader must handle. Each version's commit time is set on its commit file, as Delta readers
take it (`os.utime`): version N is committed on day N.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog, open_lite
from lumos_dagster.floor.config import parse_config
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.lineage.catalogue import resolve_datasets
from lumos_dagster.schema.diff import (
    FIELD_ADDED,
    FIELD_MOVED,
    FIELD_REMOVED,
    FIELD_RENAMED,
    NULLABILITY_RELAXED,
    TYPE_CHANGED,
    TYPE_PROMOTED,
)
from lumos_dagster.sources import build_sources, discover
from lumos_dagster.sources.discovery import FileEntry, group_files
from lumos_dagster.table_formats import claim
from tests.lake import run_in_process

DAY0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
COLUMN_MAPPING = {"delta.columnMapping.mode": "name", "delta.minReaderVersion": "2", "delta.minWriterVersion": "5"}


def log_path(table: Path, version: int) -> Path:
    return table / "_delta_log" / f"{version:020d}.json"


def commit(table: Path, *actions: dict) -> int:
    """Commit the next version by hand, as the Delta protocol defines a commit."""
    version = DeltaTable(str(table)).version() + 1
    operation = {"commitInfo": {"timestamp": 0, "operation": "CHANGE COLUMN", "engineInfo": "lumos-tests"}}
    with open(log_path(table, version), "x") as fh:
        fh.writelines(json.dumps(a) + "\n" for a in (operation, *actions))
    return version


def metadata(table: Path) -> tuple[dict, dict]:
    """The table's current `metaData` action and its schema."""
    for version in range(DeltaTable(str(table)).version(), -1, -1):
        for line in log_path(table, version).read_text().splitlines():
            action = json.loads(line)
            if "metaData" in action:
                return action["metaData"], json.loads(action["metaData"]["schemaString"])
    raise AssertionError("no metaData")


def change_schema(table: Path, schema: dict, protocol: dict | None = None, **configuration: str) -> int:
    meta, _ = metadata(table)
    meta = {**meta, "schemaString": json.dumps(schema), "configuration": {**meta["configuration"], **configuration}}
    return commit(table, *([{"protocol": protocol}] if protocol else []), {"metaData": meta})


def date_versions(table: Path) -> None:
    """Version N was committed at noon on day N (the modification time of its commit and checkpoint files)."""
    for path in (table / "_delta_log").iterdir():
        if path.name[:20].isdigit():
            at = (DAY0 + timedelta(days=int(path.name[:20]), hours=12)).timestamp()
            os.utime(path, (at, at))


def days(count: int) -> list[tuple[str, datetime, datetime]]:
    return [(str((DAY0 + timedelta(days=i)).date()), DAY0 + timedelta(days=i), DAY0 + timedelta(days=i + 1))
            for i in range(count)]  # fmt: skip


def backfill(root: Path, partitions):
    """One run of the core pipeline over `partitions` (a backfill), reading files in process."""
    config = parse_config({"sources": [{"root": str(root), "name": "lake"}]})
    sources = build_sources(config)
    report = ScanReport()
    catalogue = resolve_datasets(config, discover(sources, report).records, {"lake": str(root)})
    return run_in_process(config, catalogue, sources, partitions)


def history(run, name: str) -> list[tuple]:
    """Per partition: (table version, commit time, Lumos version, the (path, kind) changes that made
    that version, when it is new that day; a day without changes carries its version over)."""
    out, before = [], None
    for _, s in sorted(run.snapshots[name].items()):
        table = s.table
        changes = sorted((c.path, c.kind) for c in s.changes) if s.version != before else []
        out.append((table.version if table else None, table.committed_at if table else None, s.version, changes))
        before = s.version
    return out


def stats(run, name: str) -> list[tuple]:
    """Per partition: (live files, rows, partition values)."""
    return [(s.stats.file_count, s.stats.row_count, s.stats.partition_values)
            for _, s in sorted(run.snapshots[name].items())]  # fmt: skip


def noon(day: int) -> datetime:
    return DAY0 + timedelta(days=day, hours=12)


# ------------------------------------------------------------------ discovery


@pytest.mark.parametrize(
    "paths, tables, rest",
    [
        # the log proves the folder; every file under it (data, partitions, checkpoints) is the table's
        (["s/o/_delta_log/00000000000000000000.json", "s/o/region=eu/p.parquet", "s/o/p.parquet", "s/x.csv"],
         {"s/o": ["s/o/_delta_log/00000000000000000000.json", "s/o/region=eu/p.parquet", "s/o/p.parquet"]},
         ["s/x.csv"]),
        # a folder that merely looks like a table is not one
        (["s/o/delta_log/0.json", "s/o/p.parquet"], {}, ["s/o/delta_log/0.json", "s/o/p.parquet"]),
        # a table inside a table's folder belongs to the outer one
        (["a/_delta_log/0.json", "a/b/_delta_log/0.json", "a/b/p.parquet"],
         {"a": ["a/_delta_log/0.json", "a/b/_delta_log/0.json", "a/b/p.parquet"]}, []),
        # two tables side by side
        (["t1/_delta_log/0.json", "t2/_delta_log/0.json", "t2/x.parquet"],
         {"t1": ["t1/_delta_log/0.json"], "t2": ["t2/_delta_log/0.json", "t2/x.parquet"]}, []),
    ],
)  # fmt: skip
def test_claim_gives_each_table_folder_all_its_files(paths, tables, rest):
    found, others = claim([(p, p) for p in paths])
    assert {root: files for root, (_, files) in found.items()} == tables
    assert all(fmt.type == "delta" for fmt, _ in found.values())
    assert others == rest


def test_a_table_at_the_source_root_is_skipped_with_a_reason():
    grouping = group_files(
        [FileEntry("_delta_log/00000000000000000000.json", 10, 0.0), FileEntry("p.parquet", 10, 0.0)]
    )
    assert grouping.datasets == {}
    assert {reason for _, reason in grouping.skipped} == {
        "the source root is a delta table: point the source at the folder holding it"
    }


def test_a_delta_folder_is_one_dataset_on_the_delta_lake_platform(tmp_path):
    table = tmp_path / "sales" / "orders"
    data = pa.table({"id": [1, 2, 3], "region": ["eu", "us", "eu"]})
    write_deltalake(str(table), data, partition_by=["region"])
    write_deltalake(str(table), data, mode="append")
    pa.parquet.write_table(pa.table({"x": [1]}), tmp_path / "sales" / "returns.parquet")
    records = {r.name: r for r in discover(build_sources(parse_config({"sources": [{"root": str(tmp_path)}]})),
                                           ScanReport()).records}  # fmt: skip
    assert set(records) == {"sales/orders", "sales"}  # no dataset per partition folder, none for the log
    orders = records["sales/orders"]
    assert (orders.platform, orders.format, orders.location, orders.domain) == (
        "delta-lake",
        "delta",
        "sales/orders",
        "sales",
    )
    assert orders.file_count == 4 + 2  # the data files and the two commits: a new commit is a change to watch
    assert records["sales"].platform == "file"


# ------------------------------------------------------------------ evolution


def test_a_table_evolved_by_delta_rs_reports_each_change_at_its_version_and_commit_time(tmp_path):
    """Add a column (schema merge), remove files (delete), relax a NOT NULL, overwrite with a new
    schema, then widen a type (typeWidening, committed by hand): one run over the 6 days rebuilds
    the history, each day seeing the version committed on it."""
    table = tmp_path / "sales" / "orders"
    first = pa.schema([pa.field("id", pa.int64(), nullable=False), ("region", pa.string()), ("amount", pa.int32())])
    write_deltalake(str(table), pa.table({"id": [1, 2, 3], "region": ["eu", "us", "eu"], "amount": [5, 6, 7]},
                                         schema=first), partition_by=["region"])  # fmt: skip
    added = first.append(pa.field("coupon", pa.string()))
    write_deltalake(str(table), pa.table({"id": [4], "region": ["us"], "amount": [8], "coupon": ["c"]}, schema=added),
                    mode="append", schema_mode="merge")  # fmt: skip
    DeltaTable(str(table)).delete("region = 'eu'")  # v2: remove actions for both eu files
    DeltaTable(str(table)).alter.drop_column_not_null("id")  # v3
    new = pa.table({"id": ["a", "b"], "region": ["eu", "eu"], "qty": pa.array([1, 2], pa.int32())})
    write_deltalake(str(table), new, mode="overwrite", schema_mode="overwrite", partition_by=["region"])  # v4
    _, schema = metadata(table)
    qty = next(f for f in schema["fields"] if f["name"] == "qty")
    qty["type"], qty["metadata"] = "long", {"delta.typeChanges": [{"fromType": "integer", "toType": "long"}]}
    widening = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["typeWidening"],
                "writerFeatures": ["typeWidening"]}  # fmt: skip
    change_schema(table, schema, widening, **{"delta.enableTypeWidening": "true"})  # v5
    date_versions(table)

    run = backfill(tmp_path, days(6))
    assert history(run, "sales/orders") == [
        ("0", noon(0), "1.0.0", []),
        # delta-rs' merge puts the partition column last: the log says it moved, and so does Lumos
        ("1", noon(1), "1.1.0", [("coupon", FIELD_ADDED), ("region", FIELD_MOVED)]),
        ("2", noon(2), "1.1.0", []),
        ("3", noon(3), "2.0.0", [("id", NULLABILITY_RELAXED)]),
        ("4", noon(4), "3.0.0", [("amount", FIELD_REMOVED), ("coupon", FIELD_REMOVED), ("id", TYPE_CHANGED),
                                 ("qty", FIELD_ADDED)]),
        ("5", noon(5), "4.0.0", [("qty", TYPE_PROMOTED)]),
    ]  # fmt: skip
    assert stats(run, "sales/orders") == [
        (2, 3, {"region": ["eu", "us"]}),
        (3, 4, {"region": ["eu", "us"]}),
        (2, 2, {"region": ["us"]}),  # the delete removed both eu files: their rows are gone
        (2, 2, {"region": ["us"]}),
        (1, 2, {"region": ["eu"]}),  # the overwrite removed every earlier file
        (1, 2, {"region": ["eu"]}),
    ]
    assert run.report.files_read == 0  # everything came from the log


def test_renames_under_column_mapping_are_renames_by_column_id(tmp_path):
    """Column mapping (`delta.columnMapping.mode = name`): rename, drop and add columns, committed
    as Delta does (delta-rs writes column-mapped tables but cannot alter them). Renaming a column
    to the name of a dropped one is still a rename: the id says which column it is."""
    table = tmp_path / "crm" / "customers"
    data = pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"], "note": ["x", "y"]})
    write_deltalake(str(table), data, configuration=COLUMN_MAPPING)
    meta, schema = metadata(table)
    ids = {f["name"]: f["metadata"]["delta.columnMapping.id"] for f in schema["fields"]}
    name = next(f for f in schema["fields"] if f["name"] == "name")
    name["name"] = "customer"
    change_schema(table, schema)  # v1: rename name → customer
    schema["fields"] = [f for f in schema["fields"] if f["name"] != "note"]
    change_schema(table, schema)  # v2: drop note
    new_id = int(meta["configuration"]["delta.columnMapping.maxColumnId"]) + 1
    schema["fields"].append({"name": "email", "type": "string", "nullable": True, "metadata": {
        "delta.columnMapping.id": new_id, "delta.columnMapping.physicalName": f"col-{new_id}"}})  # fmt: skip
    change_schema(table, schema, **{"delta.columnMapping.maxColumnId": str(new_id)})  # v3: add email
    name["name"] = "note"
    change_schema(table, schema)  # v4: rename customer → note, the dropped column's name
    date_versions(table)

    run = backfill(tmp_path, days(5))
    assert history(run, "crm/customers") == [
        ("0", noon(0), "1.0.0", []),
        ("1", noon(1), "1.1.0", [("customer", FIELD_RENAMED)]),
        ("2", noon(2), "2.0.0", [("note", FIELD_REMOVED)]),
        ("3", noon(3), "2.1.0", [("email", FIELD_ADDED)]),
        ("4", noon(4), "2.2.0", [("note", FIELD_RENAMED)]),
    ]
    last = run.snapshots["crm/customers"][days(5)[-1][0]]
    assert [(f.name, f.field_id) for f in last.schema.fields] == [("id", ids["id"]), ("note", ids["name"]),
                                                                  ("email", new_id)]  # fmt: skip
    renamed = next(c for c in last.changes if c.kind == FIELD_RENAMED)
    assert (renamed.old, renamed.new, renamed.backward, renamed.forward) == ("customer", "note", True, True)
    assert last.schema.fields[0].native_type == "long"  # Delta's own type names


def test_removed_and_stray_files_are_never_read(tmp_path):
    """Files the log removed are left on disk (no vacuum) and then corrupted; a Parquet file no
    commit added, with a column of its own, sits in the folder. None of them is read."""
    table = tmp_path / "sales" / "orders"
    write_deltalake(str(table), pa.table({"id": [1, 2, 3, 4], "region": ["eu", "us", "eu", "us"]}),
                    partition_by=["region"])  # fmt: skip
    before = {str(p) for p in table.rglob("*.parquet")}
    DeltaTable(str(table)).delete("region = 'eu'")
    removed = before - set(DeltaTable(str(table)).file_uris())
    assert len(removed) == 1 and all(os.path.exists(p) for p in removed)
    for path in removed:
        Path(path).write_bytes(b"PAR1 not parquet any more")
    pa.parquet.write_table(pa.table({"id": [9], "stray": ["x"]}), table / "region=us" / "stray.parquet")
    date_versions(table)

    run = backfill(tmp_path, days(2))
    snap = run.snapshots["sales/orders"][days(2)[-1][0]]
    assert [f.name for f in snap.schema.fields] == ["id", "region"]
    assert (snap.stats.file_count, snap.stats.row_count, snap.errors) == (1, 2, ())
    assert run.report.files_read == 0 and run.report.failures == []


def test_a_table_that_cannot_be_read_is_one_line_naming_it(tmp_path):
    table = tmp_path / "sales" / "orders"
    write_deltalake(str(table), pa.table({"id": [1]}))
    log_path(table, 0).write_text("{not json\n")
    run = backfill(tmp_path, days(1))
    (error,) = run.snapshots["sales/orders"][days(1)[0][0]].errors
    assert error.path == str(table)
    assert error.reason.startswith("cannot read the delta table: ") and "\n" not in error.reason


def test_a_backfill_of_20_versions_rebuilds_the_schema_history_in_one_run(tmp_path):
    """20 versions on 20 days, every other one adding a column: one run over the 20 days gives
    each day its version, with a new Lumos version exactly on the days the schema changed."""
    table = tmp_path / "events"
    write_deltalake(str(table), pa.table({"id": [0]}))
    columns = {"id": [0]}
    for v in range(1, 20):
        if v % 2:
            columns[f"c{v}"] = [v]
        write_deltalake(str(table), pa.table(columns), mode="append", schema_mode="merge")
    date_versions(table)
    run = backfill(tmp_path, [("2026-02-28", DAY0 - timedelta(days=1), DAY0)] + days(20))
    got = history(run, "events")
    assert got[0] == (None, None, None, [])  # the day before the first commit sees no table
    assert [(v, at) for v, at, _, _ in got[1:]] == [(str(d), noon(d)) for d in range(20)]
    assert [version for _, _, version, _ in got[1:]] == [f"1.{(d + 1) // 2}.0" for d in range(20)]
    assert [changes for _, _, _, changes in got[1:] if changes] == [[(f"c{v}", FIELD_ADDED)] for v in range(1, 20, 2)]


def test_datahub_gets_the_delta_lake_platform_partition_keys_and_table_version(tmp_path):
    table = tmp_path / "sales" / "orders"
    write_deltalake(str(table), pa.table({"id": [1, 2], "region": ["eu", "us"]}), partition_by=["region"])
    write_deltalake(str(table), pa.table({"id": [3], "region": ["eu"]}), mode="append")
    run = backfill(tmp_path, [(None, None, None)])
    catalog = DataHubLiteCatalog(str(tmp_path / "lite.db"))
    catalog.emit(list(run.snapshots["sales/orders"].values()))
    catalog.close()
    lite = open_lite(str(tmp_path / "lite.db"), read_only=True)
    try:  # named as DataHub's delta-lake source names it: the table's path
        urn = f"urn:li:dataset:(urn:li:dataPlatform:delta-lake,{str(table).lstrip('/')},PROD)"
        aspects = lite.get(urn, None)
    finally:
        lite.close()
    props = aspects["datasetProperties"]["customProperties"]  # the version where that source puts it
    assert (props["version"], props["number_of_files"], props["lumos.format"]) == ("1", "3", "delta")
    assert aspects["datasetProfile"]["rowCount"] == 3
    fields = {
        f["fieldPath"].rsplit(".", 1)[-1]: f.get("isPartitioningKey") for f in aspects["schemaMetadata"]["fields"]
    }
    assert fields == {"id": None, "region": True}


# ------------------------------------------------------------------ logs the reference reads only in part
#
# delta-rs (`deltalake`) is the judge: Lumos gives a window the schema delta-rs reads at the window's
# version, and fails exactly the windows whose version delta-rs cannot read.


def reference(table: Path, version: int) -> list[tuple[str, bool]] | None:
    """The (name, nullable) columns delta-rs reads at `version`, None when it cannot read it."""
    try:
        return [(f.name, f.nullable) for f in DeltaTable(str(table), version=version).schema().fields]
    except Exception:  # noqa: BLE001 - any failure of the reference is "cannot read"
        return None


def seen(run, name: str) -> list[tuple]:
    """Per partition: (table version, its (name, nullable) columns, its errors as (path, reason))."""
    return [(s.table.version if s.table else None, [(f.name, f.nullable) for f in s.schema.fields],
             [(e.path, e.reason) for e in s.errors]) for _, s in sorted(run.snapshots[name].items())]  # fmt: skip


def write_versions(table: Path, count: int, checkpoint_at: int) -> None:
    """Versions 0 … count-1 written by delta-rs, version v adding a column `cv`; a checkpoint at one."""
    columns = {"id": [0]}
    write_deltalake(str(table), pa.table(columns))
    for v in range(1, count):
        columns[f"c{v}"] = [v]
        write_deltalake(str(table), pa.table(columns), mode="append", schema_mode="merge")
        if v == checkpoint_at:
            DeltaTable(str(table)).create_checkpoint()


@pytest.mark.parametrize(
    "missing, truncated, lacking",
    [
        ((1,), None, 1),  # version 1's commit cleaned up, the later ones before the checkpoint left behind
        ((0, 1, 2), 3, 0),  # a leftover commit before the checkpoint, itself truncated
    ],
)
def test_a_backfill_over_a_log_with_unreadable_old_versions_skips_them_with_a_warning(
    tmp_path, missing, truncated, lacking
):
    table = tmp_path / "events"
    write_versions(table, 7, checkpoint_at=5)
    for v in missing:
        log_path(table, v).unlink()
    if truncated is not None:
        log_path(table, truncated).write_text('{"commitInfo": {')
    date_versions(table)
    # each day sees the last version whose commit the log still lists (version 1's date is gone with its file)
    listed = [v for v in range(7) if v not in missing]
    readable = {v: reference(table, v) for v in listed}
    assert [v for v, columns in readable.items() if columns is not None] == ([0, 5, 6] if 0 in listed else [5, 6])
    # a version delta-rs cannot open is skipped while the newest reads: its days see the readable one before
    expected_versions = [max((v for v in listed if v <= d and readable[v] is not None), default=None)
                         for d in range(7)]  # fmt: skip

    run = backfill(tmp_path, days(7))
    got = seen(run, "events")
    assert [v for v, _, _ in got] == [None if v is None else str(v) for v in expected_versions]
    for v, (_, columns, errors) in zip(expected_versions, got, strict=True):
        assert (columns, errors) == (([], []) if v is None else (readable[v], []))
    assert run.report.datasets_failed == 0
    reason = f"_delta_log/{lacking:020d}.json, which it is replayed from, is missing"
    skipped = [v for v in listed if readable[v] is None]
    assert run.warnings == [
        f"{table}: skipped version {v} of the delta table, which cannot be read (cannot read version {v} of the "
        f"delta table: {reason}); the newest version, 6, reads"
        for v in skipped
    ]


@pytest.mark.parametrize(
    "first",
    [
        {"metaData": {"schemaString": ""}},  # Delta Live Tables' set-up commit: no schema yet
        {},  # a protocol-only version 0
    ],
)
def test_a_version_0_without_a_schema_is_skipped_with_a_warning(tmp_path, first):
    """Version 0 as Delta Live Tables writes it, before the pipeline has a schema; versions 1 and 2
    carry the schema and the data. delta-rs reads 1 and 2 and refuses 0: Lumos skips 0, saying so."""
    table = tmp_path / "dlt" / "orders"
    write_deltalake(str(table), pa.table({"id": [1], "region": ["eu"]}))
    write_deltalake(str(table), pa.table({"id": [2], "region": ["us"]}), mode="append")
    actions = [json.loads(line) for line in log_path(table, 0).read_text().splitlines()]
    kept = [a for a in actions if "commitInfo" in a or "protocol" in a]
    meta = next(a["metaData"] for a in actions if "metaData" in a)
    setup = kept + ([{"metaData": {**meta, **first["metaData"]}}] if first else [])
    log_path(table, 1).rename(log_path(table, 2))
    log_path(table, 1).write_text("".join(json.dumps(a) + "\n" for a in actions if a not in kept))
    log_path(table, 0).write_text("".join(json.dumps(a) + "\n" for a in setup))
    date_versions(table)
    assert [reference(table, v) is None for v in range(3)] == [True, False, False]

    run = backfill(tmp_path, days(3))
    got = seen(run, "dlt/orders")
    # version 0 is skipped, as the newest reads: its day sees no table yet, like a day before the first commit
    assert got == [(None, [], []), ("1", reference(table, 1), []), ("2", reference(table, 2), [])]
    (warning,) = run.warnings
    assert warning.startswith(f"{table}: skipped version 0 of the delta table, which cannot be read (cannot read "
                              "version 0 of the delta table: _delta_log/00000000000000000000.json: ")  # fmt: skip
    assert warning.endswith("; the newest version, 2, reads") and "\n" not in warning


def test_a_log_of_only_a_checkpoint_is_one_dataset_at_its_version(tmp_path):
    """The commits before a checkpoint cleaned up, the checkpoint the only file left besides
    `_last_checkpoint`: delta-rs reads the table at the checkpoint's version, and so does Lumos
    (the checkpoint's modification time dates it)."""
    table = tmp_path / "sales" / "orders"
    write_deltalake(str(table), pa.table({"id": [1], "region": ["eu"]}), partition_by=["region"])
    write_deltalake(str(table), pa.table({"id": [2], "region": ["us"], "qty": [1.5]}), mode="append",
                    schema_mode="merge")  # fmt: skip
    write_deltalake(str(table), pa.table({"id": [3], "region": ["us"], "qty": [2.5]}), mode="append")
    DeltaTable(str(table)).create_checkpoint()
    for v in range(3):
        log_path(table, v).unlink()
    assert sorted(p.name for p in (table / "_delta_log").iterdir()) == [
        "00000000000000000002.checkpoint.parquet",
        "_last_checkpoint",
    ]
    date_versions(table)
    ref = DeltaTable(str(table))
    assert (ref.version(), ref.metadata().partition_columns) == (2, ["region"])

    run = backfill(tmp_path, days(3))
    got = seen(run, "sales/orders")
    assert got == [(None, [], []), (None, [], []), ("2", reference(table, 2), [])]
    snap = run.snapshots["sales/orders"][days(3)[-1][0]]
    assert (snap.table.committed_at, snap.table.partition_spec) == (noon(2), ("region",))
    assert (snap.stats.file_count, snap.stats.row_count, snap.stats.partition_values) == (
        3,
        3,
        {"region": ["eu", "us"]},
    )
    assert run.report.failures == [] and run.report.files_read == 0


@pytest.mark.parametrize("history_refused", [False, True])
def test_in_commit_timestamps_choose_each_windows_version(tmp_path, monkeypatch, history_refused):
    """In-commit timestamps (table feature `inCommitTimestamp`), enabled at version 2: from there a
    version's time is its `commitInfo.inCommitTimestamp`, not its file's modification time;
    versions before keep their files' times (Delta's PROTOCOL.md, "In-Commit Timestamps").
    delta-rs can neither enable the feature nor time-travel by it, so the protocol is the judge
    here; delta-rs reads the timestamps (`history()`) and the schemas. The files' times disagree
    with the timestamps: version 2's file is dated day 10, version 3's day 5."""
    table = tmp_path / "events"
    write_deltalake(str(table), pa.table({"id": [1]}))
    write_deltalake(str(table), pa.table({"id": [2]}), mode="append")
    meta, schema = metadata(table)
    enabled = {"delta.enableInCommitTimestamps": "true", "delta.inCommitTimestampEnablementVersion": "2",
               "delta.inCommitTimestampEnablementTimestamp": str(int(noon(2).timestamp() * 1000))}  # fmt: skip
    feature = {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["inCommitTimestamp"]}
    schema["fields"].append({"name": "note", "type": "string", "nullable": True, "metadata": {}})
    for version, day, actions in [
        (2, 2, [{"protocol": feature}, {"metaData": {**meta, "configuration": enabled}}]),
        (3, 3, [{"metaData": {**meta, "configuration": enabled, "schemaString": json.dumps(schema)}}]),
    ]:
        ict = int(noon(day).timestamp() * 1000)
        info = {"commitInfo": {"inCommitTimestamp": ict, "timestamp": ict, "operation": "SET TBLPROPERTIES"}}
        log_path(table, version).write_text("".join(json.dumps(a) + "\n" for a in [info, *actions]))
    date_versions(table)
    for version, day in [(2, 10), (3, 5)]:
        at = noon(day).timestamp()
        os.utime(log_path(table, version), (at, at))
    assert [h.get("inCommitTimestamp") for h in DeltaTable(str(table)).history()] == [
        int(noon(3).timestamp() * 1000), int(noon(2).timestamp() * 1000), None, None]  # fmt: skip

    if history_refused:  # delta-rs' kernel refusing an old commit: the commits' own first lines give the times

        def refuse(self, limit=None):
            raise Exception("Generic delta kernel error: Kernel error: history is refused")

        monkeypatch.setattr(DeltaTable, "history", refuse)
    run = backfill(tmp_path, days(5))
    assert [(v, at) for v, at, _, _ in history(run, "events")] == [
        ("0", noon(0)), ("1", noon(1)), ("2", noon(2)), ("3", noon(3)), ("3", noon(3))]  # fmt: skip
    assert [columns for _, columns, _ in seen(run, "events")] == [reference(table, v) for v in (0, 1, 2, 3, 3)]
