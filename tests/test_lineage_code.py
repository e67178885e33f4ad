"""Lineage read from code: SQL statements and files (through DataHub's parser) and dbt manifests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lumos_dagster.code_lineage import CodeLineage, ColumnEdge
from lumos_dagster.code_lineage.dbt import read_manifest
from lumos_dagster.code_lineage.sql import normalize_table_name, parse_sql, parse_sql_folder

DATA = Path(__file__).parent / "data" / "lineage"
MANIFEST = DATA / "dbt" / "manifest.json"

E = ColumnEdge

# (sql, dialect, schemas, output, inputs, column edges that must be among those found)
SQL_CASES = [
    pytest.param(
        """INSERT INTO analytics.daily_revenue
           SELECT o.order_date AS day, SUM(o.amount * fx.rate) AS revenue
           FROM raw.orders AS o JOIN ref.fx_rates fx ON o.currency = fx.currency
           GROUP BY o.order_date""",
        None,
        None,
        "analytics.daily_revenue",
        ("raw.orders", "ref.fx_rates"),
        {
            E("day", "raw.orders", "order_date"),
            E("revenue", "raw.orders", "amount"),
            E("revenue", "ref.fx_rates", "rate"),
        },
        id="insert-select-join-aliases",
    ),
    pytest.param(
        "CREATE TABLE `Analytics`.`Customer_Dim` AS "
        "SELECT c.id AS customer_id, upper(c.Name) AS name FROM Raw.Customers c",
        None,
        None,
        "analytics.customer_dim",
        ("raw.customers",),
        {E("customer_id", "raw.customers", "id"), E("name", "raw.customers", "name")},
        id="ctas-quoted-mixed-case",
    ),
    pytest.param(
        'CREATE TABLE "WH"."Sales"."Orders_Copy" AS SELECT "Id", amount FROM wh.sales.orders',
        "snowflake",
        None,
        "wh.sales.orders_copy",
        ("wh.sales.orders",),
        {E("id", "wh.sales.orders", "id")},
        id="ctas-three-part-snowflake",
    ),
    pytest.param(
        "CREATE VIEW reporting.active_users AS SELECT user_id, last_seen FROM analytics.users WHERE active",
        None,
        None,
        "reporting.active_users",
        ("analytics.users",),
        {E("user_id", "analytics.users", "user_id"), E("last_seen", "analytics.users", "last_seen")},
        id="create-view",
    ),
    pytest.param(
        """INSERT OVERWRITE TABLE lake.events_daily PARTITION (dt = '2024-01-01')
           SELECT event_id, user_id FROM lake.events WHERE dt = '2024-01-01'""",
        "spark",
        None,
        "lake.events_daily",
        ("lake.events",),
        {E("event_id", "lake.events", "event_id"), E("user_id", "lake.events", "user_id")},
        id="insert-overwrite-spark",
    ),
    pytest.param(
        """MERGE INTO analytics.customers t USING staging.customer_updates s ON t.id = s.id
           WHEN MATCHED THEN UPDATE SET t.email = s.email
           WHEN NOT MATCHED THEN INSERT (id, email) VALUES (s.id, s.email)""",
        "spark",
        None,
        "analytics.customers",
        ("staging.customer_updates",),
        set(),  # DataHub's parser gives MERGE table-level lineage only
        id="merge",
    ),
    pytest.param(
        """CREATE OR REPLACE VIEW mart.top_customers AS
           WITH paid AS (SELECT customer_id, amount FROM analytics.orders WHERE status = 'paid'),
                totals AS (SELECT customer_id, SUM(amount) AS total FROM paid GROUP BY customer_id)
           SELECT customer_id, total FROM totals ORDER BY total DESC LIMIT 100""",
        None,
        None,
        "mart.top_customers",
        ("analytics.orders",),
        {E("customer_id", "analytics.orders", "customer_id"), E("total", "analytics.orders", "amount")},
        id="create-or-replace-cte-chain",
    ),
    pytest.param(
        "INSERT INTO analytics.order_totals (order_id, Total) SELECT id, amount FROM raw.orders",
        None,
        None,
        "analytics.order_totals",
        ("raw.orders",),
        {E("order_id", "raw.orders", "id"), E("total", "raw.orders", "amount")},
        id="insert-column-list",
    ),
    pytest.param(
        "INSERT INTO copy.orders SELECT * FROM raw.orders",
        None,
        {"raw.orders": ["id", "amount"]},
        "copy.orders",
        ("raw.orders",),
        {E("id", "raw.orders", "id"), E("amount", "raw.orders", "amount")},
        id="select-star-with-schema",
    ),
    pytest.param(
        "UPDATE analytics.accounts SET balance = (SELECT MAX(b.amount) FROM raw.balances b)",
        None,
        None,
        "analytics.accounts",
        ("analytics.accounts", "raw.balances"),
        {E("balance", "raw.balances", "amount")},
        id="update",
    ),
]


@pytest.mark.parametrize("sql, dialect, schemas, output, inputs, edges", SQL_CASES)
def test_sql_statement_lineage(sql, dialect, schemas, output, inputs, edges):
    [entry] = parse_sql(sql, "case.sql", dialect, schemas)
    assert (entry.job, entry.kind, entry.output, entry.inputs, entry.errors) == ("case.sql", "sql", output, inputs, ())
    assert edges <= set(entry.columns)


def test_select_star_without_schema_gives_tables_but_no_columns():
    [entry] = parse_sql("INSERT INTO copy.orders SELECT * FROM raw.orders", "copy.sql")
    assert (entry.output, entry.inputs, entry.columns) == ("copy.orders", ("raw.orders",), ())


def test_select_only_is_not_a_write_unless_a_header_names_it():
    select = "SELECT o.id, c.email FROM raw.orders o JOIN raw.customers c ON o.customer_id = c.id"
    assert parse_sql(select, "adhoc.sql") == []
    [entry] = parse_sql(f"-- dataset: Analytics.Order_Emails\n{select}", "model.sql")
    assert (entry.output, entry.inputs) == ("analytics.order_emails", ("raw.customers", "raw.orders"))
    assert set(entry.columns) == {E("id", "raw.orders", "id"), E("email", "raw.customers", "email")}


def test_multi_statement_text_gives_one_entry_per_write_in_order():
    sql = """
        SET spark.sql.shuffle.partitions = 8;
        CREATE TEMPORARY VIEW recent AS SELECT id, amount FROM raw.orders WHERE day > '2024-01-01';
        SELECT COUNT(*) FROM recent;
        INSERT INTO analytics.recent_orders SELECT id, amount FROM recent;
        MSCK REPAIR TABLE analytics.recent_orders;
    """
    entries = parse_sql(sql, "multi.sql", "spark")
    assert [(e.output, e.inputs) for e in entries] == [
        ("recent", ("raw.orders",)),
        ("analytics.recent_orders", ("recent",)),
    ]
    assert all(e.errors == () for e in entries)


def test_syntax_error_falls_back_to_table_lineage_and_names_the_file_and_line():
    sql = "INSERT INTO a.ok SELECT x FROM b.src;\n\nINSERT INTO a.bad\nSELECT x FROM b.one JOIN b.two ON WHERE;\n"
    ok, bad = parse_sql(sql, "jobs/bad.sql")
    assert (ok.output, ok.inputs, ok.errors) == ("a.ok", ("b.src",), ())
    assert (bad.output, bad.inputs, bad.columns) == ("a.bad", ("b.one", "b.two"), ())
    [error] = bad.errors
    assert error.startswith("jobs/bad.sql: line 4: ")


def test_unrecoverable_statement_gives_an_error_entry_with_no_output():
    [entry] = parse_sql("INSERT INTO t SELECT 'unterminated FROM x", "junk.sql")
    assert (entry.output, entry.inputs) == ("", ())
    assert entry.errors == ("junk.sql: line 1: Error tokenizing 'INSERT INTO t SELECT 'unterminated FROM '",)


def test_header_documents_every_output_of_the_file():
    sql = """/*
     * description: Customer facts,
     * description: refreshed nightly.
     * owner: alice@example.com, bob@example.com
     */
    -- owner: carol@example.com
    -- owners: alice@example.com
    -- sla: 6h
    -- tags: crm, daily
    -- a comment that is not a key
    CREATE TABLE a.one AS SELECT id FROM raw.src;
    -- owner: mallory@example.com (not in the header: the SQL has started)
    CREATE TABLE a.two AS SELECT id FROM a.one;
    """
    entries = parse_sql(sql, "facts.sql")
    assert [e.output for e in entries] == ["a.one", "a.two"]
    for entry in entries:
        assert entry.description == "Customer facts, refreshed nightly."
        assert entry.owners == ("alice@example.com", "bob@example.com", "carol@example.com")
        assert (entry.sla, entry.tags) == ("6h", ("crm", "daily"))


def test_normalize_table_name():
    assert normalize_table_name('"Sales".`Orders`') == "sales.orders"
    assert normalize_table_name("[DB].[dbo].[T]") == "db.dbo.t"
    assert normalize_table_name("orders") == "orders"


def test_folder_sorted_relative_jobs_with_errors_kept_per_file():
    entries = parse_sql_folder(DATA / "sql", dialect="spark")
    assert [(e.job, e.output) for e in entries] == [
        ("daily_revenue.sql", "analytics.daily_revenue"),
        ("marts/customer_ltv.sql", "mart.customer_ltv"),
        ("staging/broken.sql", "analytics.refunds"),
        ("staging/load_orders.sql", "new_orders"),
        ("staging/load_orders.sql", "analytics.orders_clean"),
    ]
    daily, ltv, broken, _, orders_clean = entries

    assert daily.inputs == ("raw.orders", "ref.fx_rates")
    assert E("revenue_eur", "ref.fx_rates", "rate") in daily.columns
    assert daily.owners == ("alice@example.com", "bob@example.com", "finance-team@example.com")
    assert (daily.description, daily.sla, daily.tags) == (
        "Revenue per day, converted to EUR",
        "6h",
        ("finance", "daily"),
    )

    assert ltv.inputs == ("analytics.customers", "analytics.orders_clean")
    assert E("lifetime_value", "analytics.orders_clean", "amount") in ltv.columns
    assert (ltv.description, ltv.owners, ltv.tags) == ("Lifetime value per customer.", ("crm@example.com",), ("crm",))

    assert broken.inputs == ("raw.orders", "raw.refunds")
    assert broken.owners == ("oncall@example.com",)
    [error] = broken.errors
    assert error.startswith("staging/broken.sql: line 7: ")

    assert orders_clean.inputs == ("new_orders",)
    assert E("order_date", "new_orders", "order_date") in orders_clean.columns


def test_folder_reports_an_unreadable_file_and_goes_on(tmp_path):
    (tmp_path / "a_latin1.sql").write_bytes("-- owner: José\nINSERT INTO t SELECT 1".encode("latin-1"))
    (tmp_path / "b.sql").write_text("INSERT INTO t2 SELECT x FROM t")
    bad, good = parse_sql_folder(tmp_path)
    assert (bad.job, bad.output) == ("a_latin1.sql", "")
    assert bad.errors[0].startswith("a_latin1.sql: UnicodeDecodeError")
    assert (good.job, good.output, good.inputs) == ("b.sql", "t2", ("t",))


# --- dbt -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def manifest() -> dict[str, CodeLineage]:
    return {e.job: e for e in read_manifest(MANIFEST)}


def test_manifest_gives_models_seeds_snapshots_and_sources(manifest):
    assert list(manifest) == [
        "model.shop.fct_revenue",
        "model.shop.stg_customers",
        "model.shop.stg_orders",
        "seed.shop.fx_rates",
        "snapshot.shop.customers_snapshot",
        "source.shop.shop.customers",
        "source.shop.shop.orders",
    ]
    assert {e.kind for e in manifest.values()} == {"dbt"}
    assert all(e.errors == () for e in manifest.values())


def test_a_source_documents_the_table_it_names_and_reads_nothing(manifest):
    orders = manifest["source.shop.shop.orders"]
    assert (orders.output, orders.inputs, orders.columns) == ("warehouse.raw_shop.orders", (), ())
    assert orders.description == "Orders as placed"
    assert orders.column_descriptions == {"id": "Order id", "amount_cents": "Amount in cents"}
    assert orders.sla == "12 hour"  # freshness warn_after: an SLA, made canonical (12h) when attached


def test_manifest_relations_and_inputs(manifest):
    assert {job: (e.output, e.inputs) for job, e in manifest.items()} == {
        "model.shop.fct_revenue": (
            "warehouse.marts.fct_revenue",
            ("warehouse.seeds.fx_rates", "warehouse.staging.stg_orders"),
        ),
        # alias and source identifier name the relations, not the node names
        "model.shop.stg_customers": ("warehouse.staging.customers", ("warehouse.raw_shop.customers_v2",)),
        "model.shop.stg_orders": ("warehouse.staging.stg_orders", ("warehouse.raw_shop.orders",)),
        "seed.shop.fx_rates": ("warehouse.seeds.fx_rates", ()),
        "snapshot.shop.customers_snapshot": (
            "warehouse.snapshots.customers_snapshot",
            ("warehouse.raw_shop.customers_v2",),
        ),
        "source.shop.shop.customers": ("warehouse.raw_shop.customers_v2", ()),
        "source.shop.shop.orders": ("warehouse.raw_shop.orders", ()),
    }


def test_manifest_documentation(manifest):
    revenue = manifest["model.shop.fct_revenue"]
    assert revenue.description == "Revenue per day in EUR."
    assert (revenue.owners, revenue.sla, revenue.tags) == (
        ("finance@example.com", "alice@example.com"),
        "6h",
        ("finance",),
    )
    assert revenue.column_descriptions == {
        "order_date": "Day the orders were placed",
        "revenue_eur": "Sum of order amounts, in EUR",
    }
    # owner and sla from config.meta, owners as a list
    assert (manifest["model.shop.stg_orders"].owners, manifest["model.shop.stg_orders"].sla) == (
        ("data-eng@example.com",),
        "2h",
    )
    assert manifest["model.shop.stg_customers"].owners == ("crm@example.com", "data-eng@example.com")
    assert manifest["snapshot.shop.customers_snapshot"].owners == ("crm@example.com",)
    assert manifest["seed.shop.fx_rates"].column_descriptions == {"rate": "EUR per unit"}


def test_manifest_column_lineage_from_compiled_code(manifest):
    assert {
        E("revenue_eur", "warehouse.staging.stg_orders", "amount"),
        E("revenue_eur", "warehouse.seeds.fx_rates", "rate"),
        E("order_date", "warehouse.staging.stg_orders", "order_date"),
    } <= set(manifest["model.shop.fct_revenue"].columns)
    # through the CTEs and `select *`, expanded from the source's documented columns
    assert {
        E("order_id", "warehouse.raw_shop.orders", "id"),
        E("amount", "warehouse.raw_shop.orders", "amount_cents"),
    } <= set(manifest["model.shop.stg_orders"].columns)
    assert E("email", "warehouse.raw_shop.customers_v2", "email") in manifest["model.shop.stg_customers"].columns


def test_older_manifest_compiled_sql(tmp_path, manifest):
    data = json.loads(MANIFEST.read_text())
    for node in data["nodes"].values():
        if "compiled_code" in node:
            node["compiled_sql"] = node.pop("compiled_code")
    old = tmp_path / "manifest.json"
    old.write_text(json.dumps(data))
    assert {e.job: e.columns for e in read_manifest(old)} == {job: e.columns for job, e in manifest.items()}


def test_dependency_missing_from_the_manifest_is_reported(tmp_path):
    data = json.loads(MANIFEST.read_text())
    data["nodes"]["model.shop.fct_revenue"]["depends_on"]["nodes"].append("model.shop.gone")
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(data))
    revenue = next(e for e in read_manifest(path) if e.job == "model.shop.fct_revenue")
    assert revenue.errors == ("model.shop.fct_revenue: depends on model.shop.gone, which the manifest does not define",)


@pytest.mark.parametrize(
    "content, problem",
    [
        ("{not json", "not a JSON dbt manifest"),
        ("[]", "top level"),
        ('{"metadata": {}}', "nodes: Field required"),
        (
            '{"nodes": {"model.p.m": {"resource_type": "model", "name": "m"}}}',
            "model.p.m: schema: Field required",
        ),
        (
            '{"nodes": {"model.p.m": {"resource_type": "model", "name": "m", "schema": "s", '
            '"depends_on": {"nodes": "x"}}}}',
            "model.p.m: depends_on.nodes: Input should be a valid list",
        ),
    ],
)
def test_malformed_manifest_raises_naming_file_and_problem(tmp_path, content, problem):
    path = tmp_path / "manifest.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=str(path)) as raised:
        read_manifest(path)
    assert problem in str(raised.value)
