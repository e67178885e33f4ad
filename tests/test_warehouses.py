"""Warehouse sources (lumos_dagster.sources.warehouse). DuckDB is real (embedded); Snowflake is
fakesnow, which emulates the Snowflake connector on DuckDB; Redshift is its PostgreSQL-compatible
catalog on the real PostgreSQL at 127.0.0.1:5432. BigQuery and Databricks cannot run here: the SQL
the source sends them is parsed in their dialect by sqlglot, and the rows it reads are built with
their connectors' own row types (google.cloud.bigquery.table.Row, databricks.sql.types.Row)."""

import dataclasses
import re
import uuid
from contextlib import contextmanager

import duckdb
import fakesnow
import psycopg
import pytest
import sqlglot
from databricks.sql.types import Row as DatabricksRow
from google.cloud.bigquery.table import Row as BigQueryRow

from lumos_dagster.floor.config import parse_config
from lumos_dagster.floor.datatypes import Array, Decimal, Field, Map, Primitive, Struct, Timestamp
from lumos_dagster.floor.model import ColumnMapping, JobRef
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.inventory.refresh import reconcile
from lumos_dagster.lineage.resolve import read_code, refresh_code
from lumos_dagster.sources import build_sources, discover
from lumos_dagster.sources.warehouse import UNTESTED, bind, to_type
from tests.test_sources import PG

pytestmark = [pytest.mark.dagster, pytest.mark.servers]

# the same little warehouse everywhere: customers, orders, and a view joining them
SCHEMA_SQL = """
CREATE TABLE {s}.customers (id BIGINT PRIMARY KEY, name VARCHAR(40) NOT NULL, country VARCHAR(2));
CREATE TABLE {s}.orders (id INTEGER PRIMARY KEY, customer_id BIGINT NOT NULL, amount DECIMAL(10,2), qty INTEGER);
INSERT INTO {s}.customers VALUES (1, 'Ann', 'FR'), (2, 'Bob', 'DE');
INSERT INTO {s}.orders VALUES (1, 1, 12.50, 1), (2, 2, 3.00, 2), (3, 1, 8.00, 1);
CREATE VIEW {s}.order_totals AS
  SELECT c.name, SUM(o.amount) AS total FROM {s}.orders o JOIN {s}.customers c ON c.id = o.customer_id GROUP BY c.name
"""
COMMENTS = {
    "duckdb": [
        "COMMENT ON TABLE {s}.customers IS 'People who buy'",
        "COMMENT ON COLUMN {s}.orders.amount IS 'Total, tax included'",
    ],
    "snowflake": [
        "ALTER TABLE {s}.customers SET COMMENT = 'People who buy'",
        "COMMENT ON COLUMN {s}.orders.amount IS 'Total, tax included'",
    ],
    "redshift": [
        "COMMENT ON TABLE {s}.customers IS 'People who buy'",
        "COMMENT ON COLUMN {s}.orders.amount IS 'Total, tax included'",
        "ANALYZE {s}.orders",
        "ANALYZE {s}.customers",
    ],
}


def statements(platform: str, schema: str) -> list[str]:
    text = SCHEMA_SQL.format(s=schema)
    return [s for s in text.split(";") if s.strip()] + [c.format(s=schema) for c in COMMENTS[platform]]


@dataclasses.dataclass
class Warehouse:
    """A running warehouse: its source entry, its database and schema as it names them, and `run(sql)`."""

    platform: str
    entry: dict
    database: str
    schema: str
    run: object

    def name(self, table: str) -> str:
        return f"{self.database}/{self.schema}/{table}"


@contextmanager
def duckdb_warehouse(tmp_path):
    path = str(tmp_path / "shop.duckdb")

    def run(sql: str) -> None:
        with duckdb.connect(path) as conn:  # closed at once: the source opens the file read-only
            conn.execute(sql)

    run("CREATE SCHEMA sales")
    for s in statements("duckdb", "sales"):
        run(s)
    yield Warehouse("duckdb", {"type": "duckdb", "name": "wh", "path": path}, "shop", "sales", run)


@contextmanager
def snowflake_warehouse(tmp_path):
    with fakesnow.patch():
        import snowflake.connector

        conn = snowflake.connector.connect(database="SHOP", schema="SALES")
        conn.cursor().execute("CREATE SCHEMA IF NOT EXISTS SHOP.SALES")

        def run(sql: str) -> None:
            conn.cursor().execute(sql)

        for s in statements("snowflake", "SALES"):
            run(s)
        entry = {"type": "snowflake", "name": "wh", "database": "SHOP", "account": "acme", "user": "lumos",
                 "password": "${SNOWFLAKE_PASSWORD:-unused}"}  # fmt: skip
        yield Warehouse("snowflake", entry, "shop", "sales", run)
        conn.close()


@contextmanager
def redshift_warehouse(tmp_path):
    schema = f"lumos_rs_{uuid.uuid4().hex[:8]}"

    def run(sql: str) -> None:
        with psycopg.connect(PG, autocommit=True) as conn:
            conn.execute(sql)

    run(f"CREATE SCHEMA {schema}")
    try:
        for s in statements("redshift", schema):
            run(s)
        entry = {"type": "redshift", "name": "wh", "dsn": PG, "schemas": [schema]}
        yield Warehouse("redshift", entry, "test", schema, run)
    finally:
        run(f"DROP SCHEMA {schema} CASCADE")


WAREHOUSES = {"duckdb": duckdb_warehouse, "snowflake": snowflake_warehouse, "redshift": redshift_warehouse}


@pytest.fixture(params=sorted(WAREHOUSES))
def warehouse(request, tmp_path):
    with WAREHOUSES[request.param](tmp_path) as w:
        yield w


def source_of(w: Warehouse, **extra):
    config = parse_config({"sources": [w.entry], **extra})
    return config, build_sources(config)["wh"]


def test_discovery_finds_tables_and_views_with_their_platform_and_view_lineage(warehouse):
    w = warehouse
    config, source = source_of(w)
    report = ScanReport()
    records = {r.name: r for r in discover({"wh": source}, report).records}
    assert report.failures == []
    assert {n: (r.format, r.platform, r.domain) for n, r in records.items()} == {
        w.name("customers"): ("table", w.platform, w.schema),
        w.name("orders"): ("table", w.platform, w.schema),
        w.name("order_totals"): ("view", w.platform, w.schema),
    }
    assert records[w.name("order_totals")].upstream == (w.name("customers"), w.name("orders"))


def test_columns_types_keys_comments_and_row_counts(warehouse):
    w = warehouse
    _, source = source_of(w)
    location = next(r.location for r in source.discover(ScanReport()) if r.name == w.name("orders"))
    orders = source.describe(location)
    f = {x.name: x for x in orders.schema.fields}
    assert list(f) == ["id", "customer_id", "amount", "qty"]  # in column order, lowercase where names fold
    assert [n for n, x in f.items() if x.is_key] == ["id"]
    assert not f["customer_id"].nullable and f["amount"].nullable
    assert f["amount"].type == Decimal(10, 2) and f["amount"].description == "Total, tax included"
    # Snowflake has one integer type, NUMBER(38,0)
    integer = Decimal(38, 0) if w.platform == "snowflake" else Primitive("int64")
    assert f["customer_id"].type == integer
    assert orders.stats.row_count == 3
    customers = source.describe(location.replace("orders", "customers").replace("ORDERS", "CUSTOMERS"))
    assert customers.description == "People who buy"
    assert {x.name: x.type for x in customers.schema.fields}["name"] == Primitive("string")
    view = source.describe(location.replace("orders", "order_totals").replace("ORDERS", "ORDER_TOTALS"))
    assert [x.name for x in view.schema.fields] == ["name", "total"] and view.stats.row_count is None
    assert view.upstream == (w.name("customers"), w.name("orders"))
    assert source.describe(location.replace("orders", "gone").replace("ORDERS", "GONE")) is None


def test_view_definitions_give_column_lineage_through_datahubs_parser(warehouse):
    w = warehouse
    config, source = source_of(w)
    stored = source.stored_sql(ScanReport())
    assert stored.dialect == w.platform and [job for job, _, _ in stored.views] == [f"{w.schema}.order_totals"]
    names = [w.name(t) for t in ("customers", "orders", "order_totals")]
    code = read_code(config, {n: [] for n in names}, [stored])
    assert not code.problems and not code.external
    totals = code.docs[w.name("order_totals")]
    columns = {(e.upstream, c.downstream, c.upstream) for e in totals.edges for c in e.columns}
    assert columns == {(w.name("customers"), "name", "name"), (w.name("orders"), "total", "amount")}
    assert {e.job for e in totals.edges} == {JobRef("sql", "wh", f"{w.schema}.order_totals")}


def test_redshift_view_definitions_are_qualified_even_in_the_search_path(tmp_path):
    table = f"lumos_t_{uuid.uuid4().hex[:8]}"
    with redshift_warehouse(tmp_path) as w:
        w.run(f"CREATE TABLE public.{table} (id int)")  # `public` is on every default search_path
        try:
            w.run(f"CREATE VIEW {w.schema}.reads_public AS SELECT id FROM public.{table}")
            _, source = source_of(w)
            views = {job: body for job, _, body in source.stored_sql(ScanReport()).views}
            assert f"public.{table}" in views[f"{w.schema}.reads_public"]  # not taken for the view's schema
        finally:
            w.run(f"DROP TABLE public.{table} CASCADE")


def test_names_from_the_warehouse_are_bound_never_sql(warehouse):
    w = warehouse
    _, source = source_of(w)
    location = next(r.location for r in source.discover(ScanReport()) if r.name == w.name("orders"))
    hostile = location[:-1] + "; DROP TABLE x" + location[-1]
    assert source.describe(hostile) is None
    assert source.describe(location) is not None


def test_an_unreachable_warehouse_is_a_failure_that_shows_no_password(tmp_path):
    config = parse_config({"sources": [
        {"type": "redshift", "name": "rs", "dsn": "postgresql://lumos:s3cret@127.0.0.1:1/none"},
        {"type": "duckdb", "name": "dk", "path": "missing/shop.duckdb"},
        {"type": "snowflake", "name": "sf", "database": "DB", "password": "${LUMOS_TEST_UNSET_PASSWORD}"},
    ]}, base_dir=str(tmp_path))  # fmt: skip
    assert config.sources[2].password == "${LUMOS_TEST_UNSET_PASSWORD}"  # kept as written until connecting
    report = ScanReport()
    assert discover(build_sources(config), report).scanned == []
    (_, why_rs), (_, why_dk), (_, why_sf) = report.failures
    assert "cannot read the catalog of redshift://127.0.0.1:1/none" in why_rs and "s3cret" not in why_rs
    assert f"cannot read the catalog of duckdb://{tmp_path}/missing/shop.duckdb" in why_dk
    assert why_sf == (
        "<memory>: sources[2].password: environment variable LUMOS_TEST_UNSET_PASSWORD is not set "
        "(set it, or write ${LUMOS_TEST_UNSET_PASSWORD:-default})"
    )


# ----------------------------------------------------- through Dagster into DataHub Lite

# each platform's way to widen a column: an integer to a larger one, a decimal to more digits
WIDEN = {
    "duckdb": ("ALTER TABLE sales.orders ALTER COLUMN qty TYPE BIGINT", "qty", Primitive("int64")),
    "snowflake": ("ALTER TABLE SALES.ORDERS ALTER COLUMN AMOUNT SET DATA TYPE NUMBER(12,2)", "amount", Decimal(12, 2)),
    "redshift": ("ALTER TABLE {s}.orders ALTER COLUMN qty TYPE bigint", "qty", Primitive("int64")),
}


def test_snapshots_versions_checks_and_the_change_sensor_through_dagster(warehouse, tmp_path, spark):
    """Discover, snapshot into DataHub Lite; then add, widen and drop a column: each time the table
    change sensor asks for exactly `orders`, and the run it asks for gives the version and check."""
    from dagster import DagsterInstance

    from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog
    from lumos_dagster.definitions import build_definitions
    from lumos_dagster.store import SnapshotStore
    from tests.test_sensors import Ticks

    w = warehouse
    config = parse_config(
        {"sources": [w.entry], "store": {"path": "store.db"}, "catalog": {"path": "lite.db"},
         "partitions": {"start": "2026-11-01"}},
        base_dir=str(tmp_path),
    )  # fmt: skip
    store = SnapshotStore(config.store_url)
    sources = build_sources(config)
    reconcile(store, discover(sources, ScanReport()), 0.75, list, ScanReport())
    refresh_code(store, config, [sources["wh"].stored_sql(ScanReport())])  # what `lumos discover` does
    store.close()
    defs = build_definitions(config)
    instance = DagsterInstance.ephemeral()
    assert (
        defs.resolve_implicit_global_asset_job_def()
        .execute_in_process(instance=instance, partition_key="2026-11-25")
        .success
    )
    lite = DataHubLiteCatalog(config.lite_path)
    got = {s.dataset.name: s for s in lite.read_all()}
    orders = got[w.name("orders")]
    assert orders.dataset.platform == w.platform and orders.version == "1.0.0" and orders.stats.row_count == 3
    assert [f.name for f in orders.schema.fields if f.is_key] == ["id"]
    assert got[w.name("customers")].description == "People who buy"
    totals = {e.upstream.name: e for e in got[w.name("order_totals")].upstream}
    assert totals[w.name("orders")].columns == (ColumnMapping("total", "amount"),)

    latest = defs.resolve_implicit_global_asset_job_def().partitions_def.get_last_partition_key()
    ticks = Ticks(defs, "lumos_tables_wh")
    ticks.instance = instance  # the instance the tables were materialized in: no first snapshot to take
    assert "baseline of 3 tables" in ticks.tick().skip_message
    assert not ticks.tick().run_requests  # nothing changed
    widen, widened, wide = WIDEN[w.platform]
    steps = [
        (f"ALTER TABLE {w.schema}.orders ADD COLUMN note VARCHAR(20)", "1.1.0", True),
        # under the default policy, FULL, a widened column breaks old readers, a dropped one queries
        (widen.format(s=w.schema), "2.0.0", False),
        (f"ALTER TABLE {w.schema}.orders DROP COLUMN note", "3.0.0", False),
    ]
    for change, version, compatible in steps:
        w.run(change)
        result = ticks.tick()
        # one request: the current partition of exactly the changed table
        assert Ticks.wanted(result) == [f"{w.name('orders')}@{latest}"]
        check = ticks.run_request(result, instance)["schema_compatible"]
        assert check.passed == compatible, change
        snap = {s.dataset.name: s for s in lite.read_all()}[w.name("orders")]
        assert snap.version == version, change
    assert {f.name: f.type for f in snap.schema.fields}[widened] == wide


def test_a_table_sensor_preview_shows_what_a_tick_would_request_and_writes_nothing(tmp_path):
    """As the storage sensor's (tests/test_sensors.py): the UI's "Preview tick" does not consume a change."""
    from lumos_dagster.definitions import build_definitions
    from lumos_dagster.store import SnapshotStore
    from tests.test_sensors import Ticks

    with duckdb_warehouse(tmp_path) as w:
        config = parse_config({"sources": [w.entry], "store": {"path": "store.db"}, "catalog": {"path": "lite.db"},
                               "partitions": {"start": "2026-11-01"}}, base_dir=str(tmp_path))  # fmt: skip
        with SnapshotStore(config.store_url) as store:
            reconcile(store, discover(build_sources(config), ScanReport()), 0.75, list, ScanReport())
        defs = build_definitions(config)
        latest = defs.resolve_implicit_global_asset_job_def().partitions_def.get_last_partition_key()
        ticks = Ticks(defs, "lumos_tables_wh")
        ticks.tick()  # the baseline: generation 1
        w.run(f"ALTER TABLE {w.schema}.orders ADD COLUMN note VARCHAR(20)")
        with SnapshotStore(config.store_url) as store:
            before = store.file_state("wh", 1)
        preview = ticks.tick(preview=True)
        assert Ticks.wanted(preview) == [f"{w.name('orders')}@{latest}"]
        with SnapshotStore(config.store_url) as store:
            assert store.file_state("wh", 1) == before
            assert not store.file_state("wh", 2)  # the preview's look was not kept
        real = ticks.tick()  # the same change, now taken and recorded
        assert [r.run_key for r in real.run_requests] == [r.run_key for r in preview.run_requests]
        with SnapshotStore(config.store_url) as store:
            assert store.file_state("wh", 2) != before
        assert not ticks.tick().run_requests


@pytest.mark.parametrize(
    "platform, schemas, exclude, schema, table, wanted",
    [
        # Snowflake's names fold (shown lowercase in the catalog): its globs match in any case
        ("snowflake", ["crm"], [], "CRM", "CUSTOMERS", True),
        ("snowflake", ["CRM"], [], "CRM", "CUSTOMERS", True),
        ("snowflake", ["Cr?"], [], "CRM", "CUSTOMERS", True),
        ("snowflake", ["crm"], [], "SALES", "CUSTOMERS", False),
        ("snowflake", ["*"], ["crm.cust*"], "CRM", "CUSTOMERS", False),
        ("snowflake", ["*"], ["CRM.ORDERS"], "CRM", "CUSTOMERS", True),
        # DuckDB keeps names as written: case counts
        ("duckdb", ["crm"], [], "CRM", "customers", False),
        ("duckdb", ["CRM"], [], "CRM", "customers", True),
        ("duckdb", ["*"], ["crm.Cust*"], "crm", "customers", True),
        ("duckdb", ["*"], ["crm.cust*"], "crm", "customers", False),
    ],
)  # fmt: skip
def test_schema_and_exclude_globs_ignore_case_where_the_platform_folds_names(
    platform, schemas, exclude, schema, table, wanted
):
    entry = {"snowflake": {"database": "SHOP", "account": "acme", "user": "lumos"}, "duckdb": {"path": "w.duckdb"}}
    config = parse_config({"sources": [{"type": platform, "name": "wh", "schemas": schemas, "exclude": exclude,
                                        **entry[platform]}]})  # fmt: skip
    assert build_sources(config)["wh"]._wanted(schema, table) is wanted


# --------------------------------------------------------------- types, binding


@pytest.mark.parametrize(
    "native, dialect, expected",
    [
        ("NUMBER(38,0)", "snowflake", Decimal(38, 0)),
        ("TIMESTAMP_NTZ", "snowflake", Timestamp("us", None)),
        ("TIMESTAMP_TZ", "snowflake", Timestamp("us", "UTC")),
        ("VARIANT", "snowflake", Primitive("json")),
        ("STRUCT(a INTEGER, b VARCHAR[])", "duckdb",
         Struct((Field("a", Primitive("int32")), Field("b", Array(Primitive("string")))))),
        ("MAP(VARCHAR, BIGINT)", "duckdb", Map(Primitive("string"), Primitive("int64"))),
        ("character varying(40)", "redshift", Primitive("string")),
        ("timestamp with time zone", "redshift", Timestamp("us", "UTC")),
        ("STRUCT<id INT64, tags ARRAY<STRING>>", "bigquery",
         Struct((Field("id", Primitive("int64")), Field("tags", Array(Primitive("string")))))),
        ("NUMERIC", "bigquery", Decimal(38, 9)),
        ("BIGNUMERIC(40, 2)", "bigquery", Decimal(40, 2)),
        ("decimal(10,2)", "databricks", Decimal(10, 2)),
        ("map<string,array<int>>", "databricks", Map(Primitive("string"), Array(Primitive("int32")))),
        ("GEOGRAPHY", "bigquery", Primitive("unknown")),
    ],
)  # fmt: skip
def test_native_types_are_read_in_the_platforms_dialect(native, dialect, expected):
    assert to_type(native, dialect) == expected


def test_parameters_follow_each_connectors_paramstyle():
    sql = "SELECT 1 WHERE a = :schema AND b = :table AND c::text = :schema"
    params = {"schema": "s", "table": "t"}
    assert bind(sql, params, "qmark") == ("SELECT 1 WHERE a = ? AND b = ? AND c::text = ?", ("s", "t", "s"))
    assert bind(sql, params, "format")[0] == "SELECT 1 WHERE a = %s AND b = %s AND c::text = %s"
    assert (
        bind(sql, params, "pyformat")[0] == "SELECT 1 WHERE a = %(schema)s AND b = %(table)s AND c::text = %(schema)s"
    )
    assert bind(sql, params, "named") == (sql, params)


# ---------------------------------------------- BigQuery and Databricks: no live service here


class RecordingConnection:
    """A PEP 249 connection that records the SQL it is sent and answers with canned rows of the
    connector's own row type, chosen by what the SQL reads."""

    def __init__(self, make_row, answers):
        self.make_row, self.answers, self.sent = make_row, answers, []

    def cursor(self):
        return RecordingCursor(self)

    def close(self):
        pass


class RecordingCursor:
    def __init__(self, conn):
        self.conn, self.description, self._rows = conn, None, []

    def execute(self, sql, params=None):
        self.conn.sent.append((sql, params))
        names, rows = next(a for m, a in self.conn.answers.items() if m in sql)
        self.description = [(n, None, None, None, None, None, None) for n in names]
        self._rows = [self.conn.make_row(names, r) for r in rows]

    def fetchall(self):
        return self._rows

    def close(self):
        pass


def bigquery_row(names, values):
    return BigQueryRow(values, {n: i for i, n in enumerate(names)})


def databricks_row(names, values):
    return DatabricksRow(**dict(zip(names, values, strict=True)))


TABLES = ("table_schema", "table_name", "table_type", "comment", "rows", "bytes", "altered")
COLUMNS = ("table_schema", "table_name", "column_name", "data_type", "len", "precision", "scale", "is_nullable",
           "column_default", "description")  # fmt: skip
CANNED = {
    "bigquery": (
        {"SELECT @@project_id": (("p",), [("acme-prod",)]),
         "TABLE_OPTIONS": (TABLES, [("sales", "orders", "BASE TABLE", "Every order", 3, 2048, None),
                                    ("sales", "order_totals", "VIEW", None, None, None, None)]),
         "COLUMN_FIELD_PATHS": (COLUMNS, [
             ("sales", "orders", "id", "INT64", None, None, None, "NO", None, None),
             ("sales", "orders", "amount", "NUMERIC(10, 2)", None, None, None, "YES", None, "Total, tax included"),
             ("sales", "orders", "items", "ARRAY<STRUCT<sku STRING, qty INT64>>", None, None, None, "NO", None, None),
             ("sales", "order_totals", "total", "NUMERIC", None, None, None, "YES", None, None)]),
         "KEY_COLUMN_USAGE": (("table_schema", "table_name", "column_name"), [("sales", "orders", "id")]),
         "VIEWS": (("table_schema", "table_name", "view_definition"),
                   [("sales", "order_totals", "SELECT SUM(amount) AS total FROM `acme-prod`.sales.orders")])},
        bigquery_row,
        {"type": "bigquery", "name": "wh", "project": "acme-prod", "region": "eu"},
    ),
    "databricks": (
        {"current_catalog()": (("c",), [("main",)]),
         "information_schema.tables": (TABLES, [("sales", "orders", "MANAGED", "Every order", None, None, None),
                                                ("sales", "order_totals", "VIEW", None, None, None, None)]),
         "information_schema.columns": (COLUMNS, [
             ("sales", "orders", "id", "bigint", None, None, None, "NO", None, None),
             ("sales", "orders", "amount", "decimal(10,2)", None, None, None, "YES", None, "Total, tax included"),
             ("sales", "orders", "items", "array<struct<sku:string,qty:bigint>>", None, None, None, "NO", None, None),
             ("sales", "order_totals", "total", "decimal(20,2)", None, None, None, "YES", None, None)]),
         "KEY_COLUMN_USAGE": (("table_schema", "table_name", "column_name"), [("sales", "orders", "id")]),
         "VIEWS": (("table_schema", "table_name", "view_definition"),
                   [("sales", "order_totals", "SELECT SUM(amount) AS total FROM main.sales.orders")])},
        databricks_row,
        {"type": "databricks", "name": "wh", "server_hostname": "dbc-1.cloud.databricks.com",
         "http_path": "/sql/1.0/warehouses/abc", "catalog": "main"},
    ),
}  # fmt: skip


def literal_params(sql: str, params) -> str:
    """The SQL as the service would run it: placeholders replaced by the bound values as string literals."""
    if not params:
        return sql
    quoted = {k: "'" + v.replace("'", "''") + "'" for k, v in params.items()}
    return re.sub(r"%\((\w+)\)s|(?<![:\w]):(\w+)", lambda m: quoted[m.group(1) or m.group(2)], sql)


@pytest.mark.parametrize("platform", sorted(CANNED))
def test_sql_sent_to_a_service_not_run_here_parses_in_its_dialect_and_its_rows_map(platform):
    answers, make_row, entry = CANNED[platform]
    config = parse_config({"sources": [entry]})
    source = build_sources(config)["wh"]
    conn = RecordingConnection(make_row, answers)
    source.dialect = dataclasses.replace(source.dialect, connect=lambda config, where: conn)
    report = ScanReport()
    records = {r.name: r for r in source.discover(report)}
    database = "acme-prod" if platform == "bigquery" else "main"
    assert report.failures == [] and sorted(records) == [f"{database}/sales/order_totals", f"{database}/sales/orders"]
    assert list(report.notes) == [UNTESTED.format(platform=platform)]  # said in every scan report
    assert records[f"{database}/sales/order_totals"].upstream == (f"{database}/sales/orders",)
    assert records[f"{database}/sales/orders"].platform == platform
    orders = source.describe(records[f"{database}/sales/orders"].location)
    f = {x.name: x for x in orders.schema.fields}
    assert f["id"].is_key and not f["id"].nullable and f["id"].type == Primitive("int64")
    assert f["amount"].type == Decimal(10, 2) and f["amount"].description == "Total, tax included"
    assert f["items"].type == Array(Struct((Field("sku", Primitive("string")), Field("qty", Primitive("int64")))))
    assert orders.description == "Every order"
    assert orders.stats.row_count == (3 if platform == "bigquery" else None)
    stored = source.stored_sql(ScanReport())
    code = read_code(config, {n: [] for n in records}, [stored])
    (edge,) = code.docs[f"{database}/sales/order_totals"].edges
    assert (edge.upstream, edge.columns) == (f"{database}/sales/orders", (ColumnMapping("total", "amount"),))
    if platform == "bigquery":  # INFORMATION_SCHEMA of the configured region; the keys' of the table's dataset
        keys = [sql for sql, _ in conn.sent if "KEY_COLUMN_USAGE" in sql]
        assert keys and all(sql.count("`acme-prod`.`sales`.INFORMATION_SCHEMA") == 2 for sql in keys)
        others = [sql for sql, _ in conn.sent if "@@" not in sql and sql not in keys]
        assert all("`region-eu`.INFORMATION_SCHEMA" in sql for sql in others)
    for sql, params in conn.sent:  # every statement is one the service's dialect reads
        sqlglot.parse_one(literal_params(sql, params), read=platform, error_level=sqlglot.ErrorLevel.RAISE)
