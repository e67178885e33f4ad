"""Sources beyond the local disk: S3 (a real S3-speaking server: moto's standalone
server on 127.0.0.1), PostgreSQL (the real server on 127.0.0.1:5432) and MongoDB (no MongoDB
server can be installed here: NX-27017, a wire-protocol server on SQLite, stands in for it)."""

import datetime as dt
import gzip
import io
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import fastavro
import psycopg
import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pymongo
import pytest
import requests

from lumos_dagster.floor.config import parse_config
from lumos_dagster.floor.datatypes import Array, Decimal, Enum, Primitive, Struct, Timestamp, UnionType, type_str
from lumos_dagster.floor.model import ColumnMapping, JobRef
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.formats import read_file_schema
from lumos_dagster.lineage.catalogue import resolve_datasets
from lumos_dagster.lineage.resolve import read_code, refresh_code
from lumos_dagster.schema.releases import Manifest, read_manifests, write_manifest
from lumos_dagster.sources import build_sources, discover
from lumos_dagster.sources.mongodb import MongoSource
from tests.conftest import S3_TEST_CREDENTIALS
from tests.emulators import _wait_for_port, free_port, s3_emulator
from tests.lake import spark_run

pytestmark = [pytest.mark.dagster, pytest.mark.servers]

# ------------------------------------------------------------------------ S3


@pytest.fixture(scope="module")
def s3():
    """moto's standalone S3 server; the credentials it takes are in the environment (see conftest)."""
    for key, value in S3_TEST_CREDENTIALS.items():
        os.environ.setdefault(key, value)
    server, url, client = s3_emulator("lake")

    def put(key, data):
        client.put_object(Bucket="lake", Key=key, Body=data)

    def parquet(table):
        buf = io.BytesIO()
        pq.write_table(table, buf)
        return buf.getvalue()

    for day in ("2026-11-24", "2026-11-25"):
        table = pa.table({"id": pa.array([1, 2], pa.int64()), "user": [{"name": "a"}, {"name": "b"}]})
        put(f"warehouse/sales/orders/dt={day}/part-0.parquet", parquet(table))
    put("warehouse/sales/orders/dt=2026-11-25/_SUCCESS", b"")
    put("warehouse/web/logs/a.csv.gz", gzip.compress(b"ts,path\n2026-11-25T00:00:00,/x\n"))
    put("warehouse/web/broken/bad.parquet", b"PAR1 nothing of a footer")
    big = pa.table({"x": pa.array(range(1_000_000), pa.int64()), "y": pa.array([0.5] * 1_000_000)})
    put("warehouse/big/table/part.parquet", parquet(big))
    orc_buf = io.BytesIO()
    orc.write_table(big, orc_buf)
    put("warehouse/big/orc/part.orc", orc_buf.getvalue())
    avro_buf = io.BytesIO()
    avro_schema = {
        "type": "record",
        "name": "R",
        "fields": [{"name": "x", "type": "long"}, {"name": "y", "type": "double"}],
    }
    fastavro.writer(avro_buf, avro_schema, ({"x": i, "y": 0.5} for i in range(300_000)), codec="deflate")
    put("warehouse/big/avro/part.avro", avro_buf.getvalue())
    for i in range(1100):  # more than one ListObjectsV2 page
        put(f"warehouse/many/items/part-{i:04d}.json", json.dumps({"i": i}).encode())
    yield {"url": url, "client": client}
    server.stop()


def s3_config(url, **extra):
    return parse_config({"sources": [{"type": "s3", "name": "lake", "bucket": "lake", "prefix": "warehouse/",
                                      "endpoint_url": url, "region": "us-east-1", **extra}]})  # fmt: skip


def test_s3_discovery_pages_through_the_bucket(s3):
    sources = build_sources(s3_config(s3["url"]))
    report = ScanReport()
    found = {r.name: r for r in discover(sources, report).records}
    assert set(found) == {"sales/orders", "web/logs", "web/broken", "big/table", "big/orc", "big/avro", "many/items"}
    assert found["many/items"].file_count == 1100  # the second page was read
    assert found["sales/orders"].time_partition_key == "dt" and found["sales/orders"].platform == "s3"
    assert report.skipped["hidden or marker file"] == 1


def test_s3_schemas_are_read_on_spark_from_ranged_reads(s3, spark):
    config = s3_config(s3["url"])
    sources = build_sources(config)
    records = discover(sources, ScanReport()).records
    catalogue = resolve_datasets(config, records, {"lake": sources["lake"].root})
    # from the 25th to tomorrow: sales/orders' files by their dt= date (the 25th's only), the undated objects
    # by their LastModified, which is when the fixture put them (moto cannot set it)
    start, end = dt.datetime(2026, 11, 25, tzinfo=dt.UTC), dt.datetime.now(dt.UTC) + dt.timedelta(days=1)
    run = spark_run(spark, config, sources, catalogue, [("2026-11-25", start, end)])
    orders = run.snapshots["sales/orders"]["2026-11-25"]
    assert [type_str(f.type) for f in orders.schema.fields] == ["int64", "struct<name: string>"]
    assert (orders.stats.file_count, orders.stats.row_count) == (1, 2)
    assert orders.dataset.location == "s3://lake/warehouse/sales/orders"
    logs = run.snapshots["web/logs"]["2026-11-25"]
    assert [f.name for f in logs.schema.fields] == ["ts", "path"]  # gzip undone on the way
    broken = run.snapshots["web/broken"]["2026-11-25"]
    assert (
        "no PAR1 footer" in broken.errors[0].reason and broken.errors[0].path == "lake/warehouse/web/broken/bad.parquet"
    )


@pytest.mark.parametrize("key, fmt", [("big/table/part.parquet", "parquet"), ("big/orc/part.orc", "orc"),
                                      ("big/avro/part.avro", "avro")])  # fmt: skip
def test_a_schema_costs_a_footer_not_the_object(s3, key, fmt):
    size = s3["client"].head_object(Bucket="lake", Key=f"warehouse/{key}")["ContentLength"]
    requests.post(s3["url"] + "/moto-api/recorder/reset-recording")
    requests.post(s3["url"] + "/moto-api/recorder/start-recording")
    spec = build_sources(s3_config(s3["url"]))["lake"].fs_spec
    found = read_file_schema(f"lake/warehouse/{key}", fmt, spec)
    requests.post(s3["url"] + "/moto-api/recorder/stop-recording")
    recording = requests.get(s3["url"] + "/moto-api/recorder/download-recording").text
    log = [json.loads(line) for line in recording.split("\n") if line]
    gets = [e for e in log if e["method"] == "GET"]
    assert [f.name for f in found.schema.fields] == ["x", "y"]
    assert gets and all("Range" in e["headers"] for e in gets)
    read = sum(int(b) - int(a) + 1 for e in gets for a, b in [e["headers"]["Range"].split("=")[1].split("-")])
    assert read < size / 50, (read, size)  # a few hundred KB of a multi-MB object


def test_an_unreachable_bucket_is_a_failure_not_an_empty_source(s3):
    config = parse_config(
        {"sources": [{"type": "s3", "bucket": "nope", "endpoint_url": s3["url"], "region": "us-east-1"}]}
    )
    report = ScanReport()
    found = discover(build_sources(config), report)
    assert found.scanned == [] and "cannot reach s3://nope" in report.failures[0][1]


def test_release_manifests_in_an_s3_prefix_of_an_s3_compatible_store(s3):
    released = dt.datetime(2026, 11, 25, 9, tzinfo=dt.UTC)
    where = write_manifest("s3://lake/releases/", Manifest("S-7", released, ("sales/orders",)), s3["url"])
    assert where == "s3://lake/releases/S-7.json"
    s3["client"].put_object(Bucket="lake", Key="releases/S-8.yaml", Body=b"name: S-8\n")  # no released_at
    manifests, problems = read_manifests("s3://lake/releases/", s3["url"])
    assert manifests == [Manifest("S-7", released, ("sales/orders",))]
    assert problems == ["s3://lake/releases/S-8.yaml: `released_at:` is missing"]


# ------------------------------------------------------------------ PostgreSQL

PG = "postgresql://postgres@127.0.0.1:5432/test"


@pytest.fixture
def pg_schema():
    schema = f"lumos_src_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG, autocommit=True) as conn:
        for statement in f"""
            CREATE SCHEMA {schema};
            SET search_path TO {schema};
            CREATE TYPE status AS ENUM ('new', 'paid', 'shipped');
            CREATE DOMAIN positive_amount AS numeric(10, 2) CHECK (VALUE >= 0);
            CREATE TYPE address AS (city text, zip varchar(10));
            CREATE TABLE customers (id bigint PRIMARY KEY, name text NOT NULL, home address);
            COMMENT ON TABLE customers IS 'People who buy';
            CREATE TABLE orders (
                id serial PRIMARY KEY,
                customer_id bigint NOT NULL REFERENCES customers(id),
                status status NOT NULL DEFAULT 'new',
                amount positive_amount,
                tags text[],
                placed_at timestamptz NOT NULL DEFAULT now(),
                shipped_on date,
                qty integer DEFAULT 1,
                price numeric
            );
            COMMENT ON COLUMN orders.amount IS 'Total, tax included';
            CREATE VIEW order_totals AS
                SELECT c.name, sum(o.amount) AS total
                FROM orders o JOIN customers c ON c.id = o.customer_id GROUP BY c.name;
            CREATE MATERIALIZED VIEW top_customers AS SELECT name FROM order_totals WHERE total > 10;
            INSERT INTO customers VALUES (1, 'Ann', ROW('Paris', '75001')), (2, 'Bob', NULL);
            INSERT INTO orders (customer_id, amount, tags) VALUES (1, 12.5, ARRAY['a']), (2, 3, NULL), (1, 8, NULL);
            ANALYZE {schema}.orders;
            ANALYZE {schema}.customers;
            SELECT count(*) FROM orders;
        """.split(";"):  # fmt: skip
            if statement.strip():
                conn.execute(statement)
    yield schema
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


def pg_source(schema):
    config = parse_config({"sources": [{"type": "postgres", "name": "db", "dsn": PG, "schemas": [schema]}]})
    return config, build_sources(config)


def test_postgres_discovery_finds_tables_views_and_view_lineage(pg_schema):
    config, sources = pg_source(pg_schema)
    records = {r.name.split("/")[-1]: r for r in discover(sources, ScanReport()).records}
    assert {k: r.format for k, r in records.items()} == {
        "customers": "table",
        "orders": "table",
        "order_totals": "view",
        "top_customers": "materialized_view",
    }
    prefix = f"test/{pg_schema}"
    assert records["order_totals"].upstream == (f"{prefix}/customers", f"{prefix}/orders")
    assert records["top_customers"].upstream == (f"{prefix}/order_totals",)
    assert records["orders"].domain == pg_schema and records["orders"].total_bytes > 0
    catalogue = resolve_datasets(config, list(records.values()), {"db": sources["db"].root})
    names = [d.name for d in catalogue.datasets]
    assert (
        names.index(f"{prefix}/orders") < names.index(f"{prefix}/order_totals") < names.index(f"{prefix}/top_customers")
    )


def test_postgres_view_definitions_give_column_lineage(pg_schema):
    config, sources = pg_source(pg_schema)
    stored = sources["db"].stored_sql(ScanReport())
    views = {job: body for job, _, body in stored.views}
    assert sorted(views) == [f"{pg_schema}.order_totals", f"{pg_schema}.top_customers"]
    assert f"{pg_schema}.orders" in views[f"{pg_schema}.order_totals"]  # qualified, whatever the search_path
    prefix = f"test/{pg_schema}"
    tables = ("customers", "orders", "order_totals", "top_customers")
    code = read_code(config, {f"{prefix}/{t}": [] for t in tables}, [stored])
    assert not code.problems and not code.external
    totals = code.docs[f"{prefix}/order_totals"]
    columns = {(e.upstream, c.downstream, c.upstream) for e in totals.edges for c in e.columns}
    assert columns == {(f"{prefix}/customers", "name", "name"), (f"{prefix}/orders", "total", "amount")}
    assert {e.job for e in totals.edges} == {JobRef("sql", "db", f"{pg_schema}.order_totals")}
    (top,) = code.docs[f"{prefix}/top_customers"].edges  # a materialized view over a view
    assert (top.upstream, top.columns) == (f"{prefix}/order_totals", (ColumnMapping("name", "name"),))


def test_postgres_view_definitions_are_qualified_even_in_the_search_path():
    table, view = f"lumos_t_{uuid.uuid4().hex[:8]}", f"lumos_v_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG, autocommit=True) as conn:  # `public` is on every default search_path
        conn.execute(f"CREATE TABLE public.{table} (id int)")
        conn.execute(f"CREATE VIEW public.{view} AS SELECT id FROM {table}")
    try:
        _, sources = pg_source("public")
        views = {job: body for job, _, body in sources["db"].stored_sql(ScanReport()).views}
        assert f"public.{table}" in views[f"public.{view}"]
    finally:
        with psycopg.connect(PG, autocommit=True) as conn:
            conn.execute(f"DROP VIEW public.{view}")
            conn.execute(f"DROP TABLE public.{table}")


def test_postgres_describes_columns_keys_defaults_comments_sizes_and_usage(pg_schema):
    _, sources = pg_source(pg_schema)
    desc = sources["db"].describe(f'"{pg_schema}"."orders"')
    f = {x.name: x for x in desc.schema.fields}
    assert f["id"].is_key and not f["id"].nullable and f["id"].type == Primitive("int32")
    assert f["id"].default == {"expression": f"nextval('{pg_schema}.orders_id_seq'::regclass)"}
    assert f["status"].type == Enum(("new", "paid", "shipped"), "status") and f["status"].default == "new"
    assert f["amount"].type == Decimal(10, 2) and f["amount"].description == "Total, tax included"
    assert f["amount"].native_type.endswith("positive_amount")  # a domain, resolved to its base type
    assert f["tags"].type == Array(Primitive("string")) and f["placed_at"].type == Timestamp("us", "UTC")
    assert f["qty"].default == 1 and f["price"].type == Primitive("unknown") and f["price"].native_type == "numeric"
    assert desc.stats.row_count == 3 and desc.stats.total_bytes > 0
    assert desc.stats.usage["n_tup_ins"] == 3 and desc.stats.usage["seq_scan"] >= 1
    assert desc.stats.usage["last_analyze"] is not None
    customers = sources["db"].describe(f'"{pg_schema}"."customers"')
    home = next(x for x in customers.schema.fields if x.name == "home")
    assert home.type == Struct(tuple(home.type.fields)) and [c.name for c in home.type.fields] == ["city", "zip"]
    assert customers.description == "People who buy"
    view = sources["db"].describe(f'"{pg_schema}"."order_totals"')
    assert [x.name for x in view.schema.fields] == ["name", "total"] and view.stats.row_count is None
    assert sources["db"].describe(f'"{pg_schema}"."gone"') is None


def test_postgres_names_from_outside_are_never_sql(pg_schema):
    _, sources = pg_source(pg_schema)
    assert sources["db"].describe(f'"{pg_schema}"."orders; DROP TABLE orders"') is None
    assert sources["db"].describe(f'"{pg_schema}"."orders"') is not None  # still there


def test_an_unreachable_database_is_a_failure_not_an_empty_source():
    config = parse_config({"sources": [{"type": "postgres", "dsn": "postgresql://nobody@127.0.0.1:1/none"}]})
    report = ScanReport()
    assert discover(build_sources(config), report).scanned == []
    assert "cannot read the catalog of postgresql://127.0.0.1:1/none" in report.failures[0][1]


# ------------------------------------------------------------------- MongoDB


@pytest.fixture(scope="module")
def mongodb(tmp_path_factory):
    """NX-27017 (PyPI): MongoDB's wire protocol over SQLite, one file per database, on 127.0.0.1. The
    driver, the wire protocol and the commands the source sends ($sample, collStats, count) are real;
    the storage is not MongoDB's (docs/sources.md says what it lacks). Its URI."""
    folder = tmp_path_factory.mktemp("mongodb")
    port = free_port()
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "nx-27017"), "--data-dir", str(folder), "--host", "127.0.0.1",
         "-p", str(port), "--log-file", str(folder / "server.log"), "--pid-file", str(folder / "server.pid")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    _wait_for_port(port, server, "NX-27017")
    yield f"mongodb://127.0.0.1:{port}"
    server.terminate()
    server.wait(timeout=20)


def test_mongodb_schemas_inferred_from_a_sample(mongodb):
    with pymongo.MongoClient(mongodb) as client:
        client.shop.orders.insert_many([
            {"_id": 1, "total": 10, "items": [{"sku": "a", "qty": 1}], "customer": {"name": "Ann", "vip": True},
             "at": dt.datetime(2026, 11, 25)},
            {"_id": 2, "total": 12.5, "items": [], "customer": {"name": "Bob"}, "coupon": "X"},
            {"_id": 3, "total": "n/a", "items": [{"sku": "b"}], "coupon": None},
        ])  # fmt: skip
        client.shop.customers.insert_one({"_id": "c1"})
        size = client.shop.command("collStats", "orders")["size"]
    config = parse_config({"sources": [{"type": "mongodb", "name": "mongo", "uri": mongodb, "databases": ["shop"]}]})
    source = MongoSource(config.sources[0])  # its own client, from the URI
    records = source.discover(ScanReport())
    assert sorted(r.name for r in records) == ["shop/customers", "shop/orders"]
    desc = source.describe("shop.orders")
    f = {x.name: x for x in desc.schema.fields}
    assert f["total"].type == UnionType((Primitive("float64"), Primitive("string")))  # int and double widen first
    assert not f["total"].nullable and f["coupon"].nullable and f["at"].nullable
    assert f["at"].type == Timestamp("ms", "UTC")
    assert type_str(f["items"].type) == "array<struct<sku: string, qty: int64>>"
    item = f["items"].type.element.fields
    assert [(x.name, x.nullable) for x in item] == [("sku", False), ("qty", True)]
    assert type_str(f["customer"].type) == "struct<name: string, vip: boolean>" and f["customer"].nullable
    assert desc.stats.row_count == 3 and desc.stats.total_bytes == size > 0  # the server's count and collStats
    assert source.describe("shop.gone") is None


def test_mongodb_samples_sample_size_documents_with_the_servers_sample_stage(mongodb):
    with pymongo.MongoClient(mongodb) as client:
        client.events.clicks.insert_many([{"n": i, f"only_{i}": True} for i in range(40)])
    config = parse_config({"sources": [{"type": "mongodb", "name": "mongo", "uri": mongodb, "databases": ["events"],
                                        "sample_size": 5}]})  # fmt: skip
    desc = MongoSource(config.sources[0]).describe("events.clicks")
    names = [x.name for x in desc.schema.fields]
    # each document has a field of its own: the schema shows which documents the sample drew
    drawn = sorted(int(n.removeprefix("only_")) for n in names if n.startswith("only_"))
    assert names[:2] == ["_id", "n"] and len(drawn) == 5 and desc.stats.row_count == 40
    # $sample's, not the first five (the fallback for servers without it): 1 chance in 658,008 to be them
    assert drawn != [0, 1, 2, 3, 4]


def test_postgres_tables_reach_datahub_with_view_lineage_through_dagster(pg_schema, tmp_path, spark):
    from dagster import DagsterInstance

    from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog
    from lumos_dagster.definitions import build_definitions
    from lumos_dagster.inventory.refresh import reconcile
    from lumos_dagster.store import SnapshotStore

    config = parse_config(
        {"sources": [{"type": "postgres", "name": "db", "dsn": PG, "schemas": [pg_schema]}],
         "store": {"path": "store.db"}, "catalog": {"path": "lite.db"}, "partitions": {"start": "2026-11-01"}},
        base_dir=str(tmp_path),
    )  # fmt: skip
    store = SnapshotStore(config.store_url)
    sources = build_sources(config)
    reconcile(store, discover(sources, ScanReport()), 0.75, list, ScanReport())
    refresh_code(store, config, [sources["db"].stored_sql(ScanReport())])  # what `lumos discover` does
    store.close()
    job = build_definitions(config).resolve_implicit_global_asset_job_def()
    assert job.execute_in_process(partition_key="2026-11-25", instance=DagsterInstance.ephemeral()).success
    got = {s.dataset.name.split("/")[-1]: s for s in DataHubLiteCatalog(config.lite_path).read_all()}
    assert sorted(e.upstream.name.split("/")[-1] for e in got["order_totals"].upstream) == ["customers", "orders"]
    totals = {e.upstream.name.split("/")[-1]: e for e in got["order_totals"].upstream}
    assert totals["orders"].columns == (ColumnMapping("total", "amount"),)
    assert totals["orders"].job == JobRef("sql", "db", f"{pg_schema}.order_totals")
    assert got["orders"].dataset.platform == "postgres" and got["orders"].stats.row_count == 3
    assert got["customers"].description == "People who buy"
    assert [f.name for f in got["orders"].schema.fields if f.is_key] == ["id"]
