"""Profiles wherever the data is: files on S3 (moto's standalone server on 127.0.0.1) profiled on Spark
local through the source's own file system, the read capped by `profile.max_bytes` (the profile then
says it is partial, and its row count is not the partition's), a corrupt object failing only its
dataset's profile; and a real PostgreSQL table profiled by its own SQL, no Spark. Each profile is read
back from DataHub Lite."""

from __future__ import annotations

import gzip
import io
import os
import uuid
from datetime import datetime, timezone

import fastavro
import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner
from dagster import DagsterInstance

from lumos_dagster.catalog.datahub_lite import open_lite
from lumos_dagster.cli import main
from lumos_dagster.definitions import build_definitions
from lumos_dagster.floor.config import load_config
from lumos_dagster.floor.errors import NotProfiled
from lumos_dagster.floor.model import PartialRead, dataset_urn
from lumos_dagster.formats.rows import conform, record_batches
from lumos_dagster.governance.profiling import within_cap
from lumos_dagster.store import SnapshotStore
from tests.conftest import S3_TEST_CREDENTIALS
from tests.emulators import s3_emulator
from tests.lake import catalog_urn

pytestmark = [pytest.mark.servers]

#: the objects are undated: each run's partition is the day moto stamped them, today (the whole table then,
#: whose profile DataHub Lite keeps; a dated partition's is followed by the table's totals, which it keeps)
TODAY = datetime.now(timezone.utc).date().isoformat()
ROWS = 100
#: moto's servers in one process share their buckets: this module's is its own
BUCKET = "lumos-profiles"
PG = "postgresql://postgres@127.0.0.1:5432/test"


def _parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="snappy")
    return buf.getvalue()


def _orders(part: int) -> pa.Table:
    ids = range(part * ROWS, (part + 1) * ROWS)
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [None if i % 10 == 0 else f"n{i:04d}" for i in ids]})


def _corrupt(data: bytes) -> bytes:
    """The file with its first data page overwritten: its footer (the schema) still reads, its rows do not."""
    return data[:4] + b"\xff" * 200 + data[204:]


@pytest.fixture(scope="module")
def s3_lake():
    for key, value in S3_TEST_CREDENTIALS.items():
        os.environ.setdefault(key, value)
    server, url, client = s3_emulator(BUCKET)
    put = {}
    for part in range(3):
        data = _parquet(_orders(part))
        put[f"sales/orders/part-{part}.parquet"] = data
        put[f"sales/capped/part-{part}.parquet"] = data
    put["sales/corrupt/part-0.parquet"] = _parquet(_orders(0))
    put["sales/corrupt/part-1.parquet"] = _corrupt(_parquet(_orders(1)))  # read by a worker
    events = io.BytesIO()
    schema = {"type": "record", "name": "E", "fields": [{"name": "n", "type": "long"},
                                                        {"name": "kind", "type": ["null", "string"]}]}  # fmt: skip
    fastavro.writer(events, schema, ({"n": i, "kind": None if i % 4 == 0 else "click"} for i in range(40)))
    put["web/events/e.avro"] = events.getvalue()
    for key, data in put.items():
        client.put_object(Bucket=BUCKET, Key=f"warehouse/{key}", Body=data)
    yield {"url": url, "sizes": {k: len(v) for k, v in put.items()}}
    server.stop()


def _dagster_run(tmp_path, config: dict):
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump(config))
    out = CliRunner().invoke(main, ["discover", "-c", str(tmp_path / "lumos.yaml")])
    assert out.exit_code == 0, out.output
    loaded = load_config(str(tmp_path / "lumos.yaml"))
    instance = DagsterInstance.ephemeral()
    job = build_definitions(loaded).resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(partition_key=TODAY, instance=instance, raise_on_error=False)
    logged = [e.user_message for e in instance.all_logs(result.run_id) if not e.is_dagster_event]
    return loaded, result, logged


@pytest.mark.dagster
def test_s3_files_are_profiled_on_spark_capped_and_reach_datahub_lite(tmp_path, spark, s3_lake):
    capped = sum(s3_lake["sizes"][f"sales/capped/part-{i}.parquet"] for i in range(2))
    config = {
        "sources": [
            {
                "type": "s3",
                "name": "lake",
                "bucket": BUCKET,
                "prefix": "warehouse/",
                "endpoint_url": s3_lake["url"],
                "region": "us-east-1",
            }
        ],
        "datasets": [
            {"name": "sales/orders", "profile": True},
            {"name": "sales/capped", "profile": {"max_bytes": capped}},
            {"name": "sales/corrupt", "profile": True},
            {"name": "web/events", "profile": True},
        ],
        "store": {"path": str(tmp_path / "store.db")},
        "catalog": {"path": str(tmp_path / "lite.db")},
        "partitions": {"start": "2026-11-01"},
    }
    loaded, result, logged = _dagster_run(tmp_path, config)
    assert result.success, logged
    said = sorted(m for m in logged if "profil" in m)
    # the corrupt object fails its own dataset's profile, naming it; the cap is said; nothing else
    assert len(said) == 2, said
    assert said[0].startswith(f"sales/capped: profile is partial: read 2 of 3 files ({capped:,} of "), said
    corrupt = f"sales/corrupt: not profiled: cannot read {BUCKET}/warehouse/sales/corrupt/part-1.parquet: "
    assert said[1].startswith(corrupt) and "\n" not in said[1], said

    store = SnapshotStore(loaded.store_url)
    try:
        got = {n: store.latest(dataset_urn("s3", n)).profile for n in ("sales/orders", "sales/capped")}
    finally:
        store.close()
    assert got["sales/orders"].row_count == 3 * ROWS and got["sales/orders"].partial is None
    assert got["sales/capped"].row_count == 2 * ROWS  # what it read, said so:
    everything = capped + s3_lake["sizes"]["sales/capped/part-2.parquet"]
    assert got["sales/capped"].partial == PartialRead(2, 3, capped, everything)

    lite = open_lite(str(tmp_path / "lite.db"), read_only=True)
    try:
        aspects = {n: lite.get(catalog_urn(loaded, n), None) for n in ("sales/orders", "sales/capped", "web/events")}
    finally:
        lite.close()
    orders = aspects["sales/orders"]["datasetProfile"]
    fields = {f["fieldPath"]: f for f in orders["fieldProfiles"]}
    assert orders["rowCount"] == 3 * ROWS, orders
    assert (fields["name"]["nullCount"], fields["name"]["nullProportion"]) == (30, 0.1)
    assert (fields["id"]["min"], fields["id"]["max"], fields["id"]["nullCount"]) == ("0", str(3 * ROWS - 1), 0)
    capped_profile = aspects["sales/capped"]["datasetProfile"]
    # the partition's rows are its footers' (300), never the partial read's (200); no null count either
    assert capped_profile["rowCount"] == 3 * ROWS
    name = {f["fieldPath"]: f for f in capped_profile["fieldProfiles"]}["name"]
    assert "nullCount" not in name and name["nullProportion"] == 0.1 and name["max"] == "n0199"
    events = aspects["web/events"]["datasetProfile"]
    kind = {f["fieldPath"]: f for f in events["fieldProfiles"]}["kind"]
    assert events["rowCount"] == 40 and (kind["nullCount"], kind["min"], kind["max"]) == (10, "click", "click")


def test_the_cap_takes_files_in_path_order_and_refuses_a_first_file_above_it():
    files = [("b", 40), ("a", 50), ("c", 30)]
    assert within_cap(files, None) == ([("a", 50), ("b", 40), ("c", 30)], None)
    assert within_cap(files, 95) == ([("a", 50), ("b", 40)], PartialRead(2, 3, 90, 120))
    assert within_cap(files, 120) == ([("a", 50), ("b", 40), ("c", 30)], None)
    with pytest.raises(NotProfiled, match=r"its first file a \(50 bytes\) is larger than profile.max_bytes \(49\)"):
        within_cap(files, 49)


# ------------------------------------------------------------------ PostgreSQL: its own SQL, no Spark


@pytest.fixture
def pg_table():
    schema = f"lumos_prof_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"CREATE TABLE {schema}.orders (id bigint PRIMARY KEY, note text, paid boolean, at date)")
        conn.execute(
            f"""INSERT INTO {schema}.orders SELECT i, CASE WHEN i % 4 = 0 THEN NULL ELSE 'n' || i END, i % 2 = 0,
                DATE '2026-11-01' + (i % 25) FROM generate_series(1, 20000) i"""
        )
        conn.execute(f"ANALYZE {schema}.orders")  # the catalog's row estimate: what a sample leaves standing
    yield schema
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


def _pg_snapshot(tmp_path, schema: str, profile) -> dict:
    config = {
        "sources": [{"type": "postgres", "name": "db", "dsn": PG, "schemas": [schema]}],
        "datasets": [{"name": f"test/{schema}/orders", "profile": profile}],
        "store": {"path": str(tmp_path / "store.db")},
        "catalog": {"path": str(tmp_path / "lite.db")},
    }
    tmp_path.mkdir()
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump(config))
    for command in ("discover", "snapshot"):
        out = CliRunner().invoke(main, [command, "-c", str(tmp_path / "lumos.yaml")])
        assert out.exit_code == 0, out.output
    loaded = load_config(str(tmp_path / "lumos.yaml"))
    lite = open_lite(str(tmp_path / "lite.db"), read_only=True)
    try:
        return lite.get(catalog_urn(loaded, f"test/{schema}/orders"), None)["datasetProfile"]
    finally:
        lite.close()


def test_a_postgres_table_is_profiled_by_its_own_sql_and_reaches_datahub_lite(tmp_path, pg_table):
    whole = _pg_snapshot(tmp_path / "whole", pg_table, True)
    fields = {f["fieldPath"]: f for f in whole["fieldProfiles"]}
    assert whole["rowCount"] == 20000
    assert (fields["id"]["min"], fields["id"]["max"], fields["id"]["uniqueCount"]) == ("1", "20000", 20000)
    assert (fields["note"]["nullCount"], fields["note"]["nullProportion"]) == (5000, 0.25)
    assert (fields["at"]["min"], fields["at"]["max"], fields["at"]["uniqueCount"]) == ("2026-11-01", "2026-11-25", 25)
    assert fields["paid"]["uniqueCount"] == 2 and "min" not in fields["paid"]  # booleans have no order here

    # the cap samples the table's pages down to it: a sample's rows are not the table's
    capped = _pg_snapshot(tmp_path / "capped", pg_table, {"max_bytes": 200_000})
    fields = {f["fieldPath"]: f for f in capped["fieldProfiles"]}
    assert capped["rowCount"] == 20000  # the catalog's estimate, never the sample's count
    assert "nullCount" not in fields["note"] and 0.15 < fields["note"]["nullProportion"] < 0.35


def test_rows_of_text_files_read_as_spark_reads_them_and_conform_to_the_first_files_columns(tmp_path):
    (tmp_path / "a.tsv").write_text("id\tnote\n1\tx\n2\t\n")
    (tmp_path / "b.json.gz").write_bytes(gzip.compress(b'{"id": 3}\n{"id": 4, "extra": true}\n'))
    (first,) = record_batches(str(tmp_path / "a.tsv"), "tsv", None)
    assert first.to_pylist() == [{"id": 1, "note": "x"}, {"id": 2, "note": None}]  # empty: null, as in Spark
    target = pa.schema([("id", pa.float64()), ("note", pa.string())])
    (other,) = record_batches(str(tmp_path / "b.json.gz"), "json", None)  # gzip undone by its header
    assert conform(other, target).to_pylist() == [{"id": 3.0, "note": None}, {"id": 4.0, "note": None}]
