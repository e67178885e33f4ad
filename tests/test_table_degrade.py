"""Tables whose metadata reads but some of whose files do not: Lumos gives what the metadata knows
(schema, partition spec, version) and fails files_readable naming the file, rather than failing the
dataset without a schema. A historical version the reader cannot open at all is skipped with a warning
while the newest reads.

Iceberg tables are written by pyiceberg into a lake folder, then lose a manifest list or a manifest.
The Delta tables are the conformance corpus' `dv-with-columnmapping` (Spark with deletion vectors and
column mapping), copied and then damaged as a vacuum or a broken writer leaves them.
"""

from __future__ import annotations

import os
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import ManifestContent

from lumos_dagster.floor.config import parse_config
from lumos_dagster.floor.model import READABLE_CHECK
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.lineage.catalogue import resolve_datasets
from lumos_dagster.sources import build_sources, discover
from tests.conftest import TESTDATA
from tests.lake import run_in_process

DV_TABLE = TESTDATA / "corpus" / "delta-golden" / "dv-with-columnmapping"
DAY0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _run(root: Path, partitions):
    config = parse_config({"sources": [{"root": str(root), "name": "lake"}]})
    sources = build_sources(config)
    catalogue = resolve_datasets(config, discover(sources, ScanReport()).records, {"lake": str(root)})
    return run_in_process(config, catalogue, sources, partitions)


def _readable_check(run, name: str):
    return next(c for c in run.judgements[name].checks if c.name == READABLE_CHECK)


# ------------------------------------------------------------------ Iceberg: manifests gone


@pytest.fixture
def iceberg_lake(tmp_path):
    """A partitioned table of two appends written by pyiceberg into `lake/sales/orders`."""
    root = tmp_path / "lake"
    root.mkdir()
    catalog = SqlCatalog("lumos_tests", uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=f"file://{root}")
    catalog.create_namespace("sales")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("region", pa.string())])
    table = catalog.create_table("sales.orders", schema=schema)
    with table.update_spec() as spec:
        spec.add_identity("region")
    table.append(pa.table({"id": [1, 2], "region": ["eu", "us"]}, schema=schema))
    table.append(pa.table({"id": [3], "region": ["eu"]}, schema=schema))
    yield root, table
    catalog.engine.dispose()


def _manifest_list(table) -> str:
    return table.current_snapshot().manifest_list


def _data_manifest(table) -> str:
    manifests = table.current_snapshot().manifests(table.io)
    return next(m.manifest_path for m in manifests if m.content == ManifestContent.DATA)


@pytest.mark.parametrize(
    "lose, what",
    [
        (_manifest_list, "the manifest list of snapshot"),  # the current snapshot's manifest list gone
        (_data_manifest, "a manifest"),  # one of the data manifests it lists gone
    ],
)
def test_an_iceberg_table_without_its_manifests_keeps_its_schema_spec_and_version(iceberg_lake, lose, what):
    root, table = iceberg_lake
    lost = lose(table).removeprefix("file://")
    Path(lost).unlink()
    run = _run(root, [(None, None, None)])
    snap = run.snapshots["sales/orders"][None]
    # what pyiceberg reads from the metadata file alone
    assert [(f.name, f.nullable) for f in snap.schema.fields] == [("id", False), ("region", True)]
    assert snap.table.version == str(table.current_snapshot().snapshot_id)
    assert snap.table.partition_spec == ("region",)
    assert snap.stats.row_count == 3 and snap.stats.partition_values == {}  # the summary's totals, no values
    ((path, reason),) = [(e.path, e.reason) for e in snap.errors]
    assert path == str(root / "sales" / "orders")
    assert reason.startswith(f"version {snap.table.version}: {what}") and reason.endswith(f"{lost}, is missing")
    check = _readable_check(run, "sales/orders")
    assert not check.passed and run.report.datasets_failed == 0


def test_an_iceberg_table_with_its_manifests_passes_files_readable(iceberg_lake):
    root, table = iceberg_lake
    run = _run(root, [(None, None, None)])
    snap = run.snapshots["sales/orders"][None]
    assert snap.errors == () and snap.stats.partition_values == {"region": ["eu", "us"]}
    assert _readable_check(run, "sales/orders").passed


# ------------------------------------------------------------------ Delta: deletion vectors and column mapping


@pytest.fixture
def dv_table(tmp_path, testdata):
    """The corpus' table (versions 0-15, a checkpoint at 10), its version N committed at noon on day N."""
    table = tmp_path / "lake" / "dv"
    shutil.copytree(DV_TABLE, table)
    _date(table)
    return table


def _date(table: Path) -> None:
    for f in (table / "_delta_log").iterdir():
        if f.name[:20].isdigit():
            at = (DAY0 + timedelta(days=int(f.name[:20]), hours=12)).timestamp()
            os.utime(f, (at, at))


def _days(count: int):
    return [(f"d{i:02d}", DAY0 + timedelta(days=i), DAY0 + timedelta(days=i + 1)) for i in range(count)]


def _columns(table: Path, version: int) -> list[str]:
    return [f.name for f in DeltaTable(str(table), version=version).schema().fields]


def test_a_delta_version_the_kernel_refuses_is_skipped_while_the_newest_reads(dv_table):
    # a commit before the checkpoint that delta-rs' kernel refuses: versions 5-9 replay it, 10-15 do not
    (dv_table / "_delta_log" / f"{5:020d}.json").write_text('{"add": {"path": 12}}\n')
    _date(dv_table)
    refused = []
    for v in range(16):
        try:
            DeltaTable(str(dv_table), version=v)
        except Exception as exc:  # noqa: BLE001 - the reference's own refusal
            refused.append(v)
            assert "Kernel error" in str(exc)
    assert refused == [5, 6, 7, 8, 9]
    run = _run(dv_table.parent, _days(16))
    snaps = [s for _, s in sorted(run.snapshots["dv"].items())]
    # days 5-9 see version 4, the last one that opens before them; every day has the schema
    assert [s.table.version for s in snaps] == [str(v) for v in (0, 1, 2, 3, 4, 4, 4, 4, 4, 4, *range(10, 16))]
    assert all(s.errors == () and [f.name for f in s.schema.fields] == _columns(dv_table, 15) for s in snaps)
    assert snaps[-1].stats.row_count == 35 and run.report.datasets_failed == 0
    assert [w.split(" of the ")[0] for w in run.warnings] == [f"{dv_table}: skipped version {v}" for v in refused]
    assert all("Kernel error" in w and w.endswith("the newest version, 15, reads") for w in run.warnings)


def test_a_delta_version_whose_deletion_vector_is_gone_keeps_its_schema(dv_table):
    # a deletion vector of version 15 vacuumed: the log still gives their schema, files and bytes
    lost = next(dv_table.glob("deletion_vector_db3372bc-*.bin"))
    lost.unlink()
    run = _run(dv_table.parent, [(None, None, None)])
    snap = run.snapshots["dv"][None]
    reference = DeltaTable(str(dv_table))
    assert snap.table.version == "15" and [f.name for f in snap.schema.fields] == _columns(dv_table, 15)
    assert snap.stats.file_count == len(reference.file_uris()) and snap.stats.row_count is None
    ((_, reason),) = [(e.path, e.reason) for e in snap.errors]
    assert reason.startswith("version 15: its deletion vectors cannot be read: ") and lost.name in reason
    assert not _readable_check(run, "dv").passed and run.report.datasets_failed == 0


def test_a_version_delta_rs_cannot_move_to_is_loaded_afresh(tmp_path, monkeypatch):
    """delta-rs may refuse to move a loaded table to another version where loading that version afresh
    reads (the reference loads each version afresh): Lumos loads it afresh then, rather than refusing it."""
    from deltalake import write_deltalake

    table = tmp_path / "lake" / "events"
    for v in range(3):
        write_deltalake(str(table), pa.table({"id": [v], **{f"c{i}": [i] for i in range(v)}}), mode="append",
                        schema_mode="merge")  # fmt: skip

    def refuse(self, version):
        raise Exception("Generic delta kernel error: Kernel error: moving is refused")

    _date(table)
    monkeypatch.setattr(DeltaTable, "load_as_version", refuse)
    run = _run(tmp_path / "lake", _days(3))
    assert run.warnings == [] and run.report.failures == []
    snaps = [s for _, s in sorted(run.snapshots["events"].items())]
    assert [(s.table.version, [f.name for f in s.schema.fields]) for s in snaps] == [
        (str(v), _columns(table, v)) for v in range(3)
    ]
