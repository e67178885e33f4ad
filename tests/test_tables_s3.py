"""Delta and Iceberg table folders on S3 (moto's standalone server on 127.0.0.1): found by an `s3`
source's discovery and snapshotted as on local disk, judged by what delta-rs and pyiceberg read
from the same S3 location. Lumos holds no credential: its readers find the keys in the environment
(the AWS chain), as the source's files do; only the test's own writers are given them."""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from click.testing import CliRunner

from lumos_dagster.cli import main
from lumos_dagster.floor.config import load_config
from lumos_dagster.floor.datatypes import type_str
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.lineage.catalogue import resolve_datasets
from lumos_dagster.sources import build_sources, discover
from tests.conftest import S3_TEST_CREDENTIALS
from tests.emulators import s3_emulator
from tests.lake import run_in_process

pytestmark = [pytest.mark.servers]

BUCKET = "tables"
DELTA = f"s3://{BUCKET}/lake/sales/orders"
ICEBERG = f"s3://{BUCKET}/lake/web/events"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    for key, value in S3_TEST_CREDENTIALS.items():
        os.environ.setdefault(key, value)
    server, url, client = s3_emulator(BUCKET)
    yield {"url": url, "client": client, "tmp": tmp_path_factory.mktemp("tables-s3")}
    server.stop()


def delta_options(url: str) -> dict[str, str]:
    """The test writer's and reference reader's delta-rs options (Lumos is given no keys)."""
    return {"AWS_ENDPOINT_URL": url, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": S3_TEST_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            "AWS_SECRET_ACCESS_KEY": S3_TEST_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}  # fmt: skip


def write_delta(url: str) -> None:
    """Version 0: id, day (the partition column); version 1 (a second later, so its commit's
    LastModified differs): appended with a new column, `amount`."""
    from deltalake import write_deltalake

    first = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "day": ["2026-11-24"] * 3})
    write_deltalake(DELTA, first, partition_by=["day"], storage_options=delta_options(url))
    time.sleep(1.1)
    second = pa.table({"id": pa.array([4, 5], pa.int64()), "day": ["2026-11-25"] * 2, "amount": [1.5, 2.5]})
    write_deltalake(DELTA, second, mode="append", schema_mode="merge", storage_options=delta_options(url))


def iceberg_catalog(warehouse: str, db: Path, **properties):
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog("s3test", uri=f"sqlite:///{db}", warehouse=warehouse, **properties)


def iceberg_properties(url: str) -> dict[str, str]:
    return {"s3.endpoint": url, "s3.region": "us-east-1", "s3.access-key-id": S3_TEST_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            "s3.secret-access-key": S3_TEST_CREDENTIALS["AWS_SECRET_ACCESS_KEY"]}  # fmt: skip


def write_iceberg(catalog, identifier: str, location: str | None = None):
    """Two appends with a column added between them (each commit at least 20 ms after the one before)."""
    from pyiceberg.types import StringType

    if ("web",) not in catalog.list_namespaces():
        catalog.create_namespace("web")
    first = pa.table({"id": pa.array([1, 2], pa.int64()), "path": ["/a", "/b"]})
    table = catalog.create_table(identifier, schema=first.schema, **({"location": location} if location else {}))
    table.append(first)
    time.sleep(0.02)
    with table.update_schema() as update:
        update.add_column("session", StringType())
    time.sleep(0.02)
    table.append(pa.table({"id": pa.array([3], pa.int64()), "path": ["/c"], "session": ["s"]}))
    return catalog.load_table(identifier)


def upload(client, folder: Path, prefix: str) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            client.put_object(
                Bucket=BUCKET, Key=f"{prefix}/{path.relative_to(folder).as_posix()}", Body=path.read_bytes()
            )


def fields(schema) -> list[tuple[str, str, bool]]:
    return [(f.name, type_str(f.type), f.nullable) for f in schema.fields]


def test_delta_and_iceberg_tables_on_s3_snapshot_as_delta_rs_and_pyiceberg_read_them(s3):
    from deltalake import DeltaTable

    from lumos_dagster.formats.arrow import from_arrow_schema

    url, tmp = s3["url"], s3["tmp"]
    write_delta(url)
    on_s3 = iceberg_catalog(f"s3://{BUCKET}/warehouse", tmp / "s3.db", **iceberg_properties(url))
    events = write_iceberg(on_s3, "web.events", ICEBERG)
    # written on local disk, then copied into the bucket: its metadata still names file:// paths
    local = iceberg_catalog(f"file://{tmp / 'local'}", tmp / "local.db")
    moved = write_iceberg(local, "web.moved")
    upload(s3["client"], Path(moved.location().removeprefix("file://")), "lake/web/moved")
    config = {"sources": [{"type": "s3", "name": "lake", "bucket": BUCKET, "prefix": "lake/", "endpoint_url": url,
                           "region": "us-east-1"}], "store": {"path": "store.db"}}  # fmt: skip
    (tmp / "lumos.yaml").write_text(yaml.safe_dump(config))

    found = CliRunner().invoke(main, ["discover", "-c", str(tmp / "lumos.yaml")])
    assert found.exit_code == 0, found.output
    assert "sales/orders" in found.output and "web/events" in found.output
    assert S3_TEST_CREDENTIALS["AWS_SECRET_ACCESS_KEY"] not in found.output

    cfg = load_config(str(tmp / "lumos.yaml"))
    sources = build_sources(cfg)
    report = ScanReport()
    records = {r.name: r for r in discover(sources, report).records}
    assert not report.failures
    assert [records[n].format for n in ("sales/orders", "web/events", "web/moved")] == ["delta", "iceberg", "iceberg"]
    catalogue = resolve_datasets(cfg, list(records.values()), {"lake": sources["lake"].root})

    # Delta: one window that ends between its two commits (LastModified), one after all
    delta_log = [o for o in s3["client"].list_objects_v2(Bucket=BUCKET, Prefix="lake/sales/orders/_delta_log/")
                 ["Contents"] if o["Key"].endswith(".json")]  # fmt: skip
    delta_first = min(o["LastModified"] for o in delta_log) + timedelta(milliseconds=500)
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    later = datetime.now(timezone.utc) + timedelta(days=1)
    # Iceberg: one window after each commit after the create (append, schema change, append)
    log = [e.timestamp_ms for e in events.metadata.metadata_log[1:]] + [events.metadata.last_updated_ms]
    ticks = [datetime.fromtimestamp((ms + 1) / 1000, timezone.utc) for ms in log]
    windows = [("a", start, delta_first), ("z", start, later)] + [(f"i{n}", start, t) for n, t in enumerate(ticks)]
    run = run_in_process(cfg, catalogue, sources, windows)
    assert run.failure is None and not run.report.failures, (run.failure, run.report.failures)

    for key, version in (("a", 0), ("z", 1)):
        reference = DeltaTable(DELTA, version=version, storage_options=delta_options(url))
        snap = run.snapshots["sales/orders"][key]
        assert not snap.errors, snap.errors
        assert snap.table.version == str(version) and snap.dataset.location == DELTA
        assert fields(snap.schema) == fields(from_arrow_schema(pa.schema(reference.schema().to_arrow())))
        assert snap.stats.row_count == reference.to_pyarrow_table().num_rows == (3, 5)[version]
        assert snap.stats.file_count == len(reference.file_uris())
        assert snap.table.partition_spec == ("day",)
    assert [f[0] for f in fields(run.snapshots["sales/orders"]["z"].schema)] == ["id", "day", "amount"]

    for name, table in (("web/events", events), ("web/moved", moved)):
        states = [run.snapshots[name][f"i{n}"] for n in range(len(ticks))] if name == "web/events" else []
        states.append(run.snapshots[name]["z"])
        for snap in states:
            assert not snap.errors, snap.errors
            at = table.snapshot_by_id(int(snap.table.version))
            rows = table.scan(snapshot_id=at.snapshot_id).to_arrow()
            assert snap.stats.row_count == rows.num_rows
        # append, schema change (the first append's rows, the new column), append: as pyiceberg's log has them
        if name == "web/events":
            assert [([f[0] for f in fields(s.schema)], s.stats.row_count) for s in states] == [
                (["id", "path"], 2), (["id", "path", "session"], 2), (["id", "path", "session"], 3),
                (["id", "path", "session"], 3)]  # fmt: skip
        last = run.snapshots[name]["z"]
        assert fields(last.schema) == [("id", "int64", True), ("path", "string", True), ("session", "string", True)]
        assert last.table.version == str(table.current_snapshot().snapshot_id)
        assert last.dataset.location == f"s3://{BUCKET}/lake/{name}"
    on_s3.engine.dispose()
    local.engine.dispose()
