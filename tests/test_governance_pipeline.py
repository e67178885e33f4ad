"""Governance through the whole pipeline: lineage from SQL files becomes asset deps, column
lineage and DataHub jobs; Great Expectations results and Spark profiles become quality;
required documentation blocks downstream assets; `lumos report` writes the overview and posts
each owner's missing context."""

import json
import os
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.csv as pcsv
import pytest
import yaml
from click.testing import CliRunner
from dagster import AssetKey, DagsterInstance

from lumos_dagster.catalog.datahub_lite import open_lite
from lumos_dagster.cli import main
from lumos_dagster.definitions import build_definitions
from lumos_dagster.floor.config import load_config
from lumos_dagster.floor.model import dataset_urn
from lumos_dagster.store import SnapshotStore
from tests.fake_servers import WebhookReceiver, free_port
from tests.lake import backdate, catalog_urn, write_parquet

pytestmark = [pytest.mark.dagster, pytest.mark.servers]

DATA = Path(__file__).parent / "data"
PARTITION = "2026-11-25"

MARTS_ORDERS = """-- description: Orders in euros
-- owner: ann@example.com
INSERT OVERWRITE TABLE marts.orders
SELECT o.order_id, o.amount * 0.9 AS amount_eur
FROM raw.orders AS o;
"""
CUSTOMER_VALUE = """-- owner: group:crm
INSERT OVERWRITE TABLE marts.customer_value
SELECT c.customer_id, SUM(o.amount) AS total
FROM raw.customers AS c JOIN raw.orders AS o ON o.customer_id = c.customer_id
GROUP BY c.customer_id;
"""


def _ge_result(asset: str) -> dict:
    result = json.loads((DATA / "quality" / "ge_classic_customers.json").read_text())
    result["meta"]["active_batch_definition"]["data_asset_name"] = asset
    result["meta"]["batch_spec"]["data_asset_name"] = asset
    return result


@pytest.fixture
def governed(tmp_path, spark):
    lake = tmp_path / "lake"
    amounts = [10.0, None, 30.0, None, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0]
    orders = pa.table({"order_id": pa.array(range(1, 11), pa.int64()), "customer_id": [1, 2] * 5, "amount": amounts})
    write_parquet(lake / "raw/orders/part-0.parquet", orders)
    (lake / "raw/orders/part-1.parquet").write_bytes(b"PAR1 truncated")  # the schema pass reports it
    os.makedirs(lake / "raw/customers")
    pcsv.write_csv(pa.table({"customer_id": [1, 2, 3], "country": ["FR", None, "US"]}), lake / "raw/customers/c.csv")
    write_parquet(lake / "marts/orders/part.parquet", pa.table({"order_id": [1], "amount_eur": [9.0]}))
    write_parquet(lake / "marts/customer_value/part.parquet", pa.table({"customer_id": [1], "total": [1.0]}))
    os.makedirs(lake / "raw/events")
    schema = {"type": "record", "name": "E", "fields": [{"name": "kind", "type": "string"}]}
    with open(lake / "raw/events/e.avro", "wb") as fh:
        fastavro.writer(fh, schema, [{"kind": k} for k in ("click", "view", "click")])
    backdate(lake)  # undated files, snapshotted for PARTITION
    (tmp_path / "sql").mkdir()
    (tmp_path / "sql" / "marts_orders.sql").write_text(MARTS_ORDERS)
    (tmp_path / "sql" / "customer_value.sql").write_text(CUSTOMER_VALUE)
    (tmp_path / "ge").mkdir()
    (tmp_path / "ge" / "customers.json").write_text(json.dumps(_ge_result("raw.customers")))
    config = {
        "sources": [{"name": "lake", "root": "lake"}],
        "datasets": [
            {"name": "raw/orders", "owners": ["ann@example.com"], "description": "Orders", "profile": True},
            {"name": "raw/events", "owners": ["ann@example.com"], "description": "Events", "profile": True},
            {"name": "raw/customers", "profile": {"sample": 1.0}},
        ],
        "lineage": {"sql": [{"path": "sql"}]},
        "quality": {"great_expectations": ["ge"]},
        "governance": {
            "glossary": [{"column": "customer_id", "term": "Customer Identifier"}],
            "descriptions": [{"path": "marts/*", "description": "A mart."}],
            "required": {"fields": ["owner"], "mode": "block"},
        },
        "store": {"path": "store.db"},
        "catalog": {"path": "lite.db"},
        "partitions": {"start": "2026-11-01"},
        "reports": {"dir": "reports"},
    }
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump(config))
    out = CliRunner().invoke(main, ["discover", "-c", str(tmp_path / "lumos.yaml")])
    assert "code: 2 datasets built by SQL, dbt or views, 3 lineage edges" in out.output, out.output
    return load_config(str(tmp_path / "lumos.yaml"))


def _key(name: str) -> AssetKey:
    return AssetKey(name.split("/"))


def test_governance_in_the_dagster_run(governed):
    defs = build_definitions(governed)
    graph = defs.resolve_asset_graph()
    # edges from the SQL files are asset deps
    assert graph.get(_key("marts/customer_value")).parent_keys == {_key("raw/customers"), _key("raw/orders")}
    assert graph.get(_key("marts/orders")).parent_keys == {_key("raw/orders")}

    job = defs.resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(partition_key=PARTITION, instance=DagsterInstance.ephemeral(), raise_on_error=False)
    materialized = {
        "/".join(m.asset_key.path): m.metadata for m in result.asset_materializations_for_node("lumos_daily_datasets")
    }
    # raw/customers has no owner and owner is required in block mode: what is built from it waits
    assert "marts/customer_value" not in materialized
    assert {"raw/orders", "raw/customers", "raw/events", "marts/orders"} <= set(materialized)
    checks = {
        ("/".join(e.asset_key.path), e.check_name): e
        for e in result.get_asset_check_evaluations()
    }  # fmt: skip
    assert not checks["raw/customers", "metadata_complete"].passed
    assert checks["raw/customers", "metadata_complete"].description == "missing: owner"
    assert checks["raw/orders", "metadata_complete"].passed
    assert not checks["raw/customers", "data_quality"].passed  # the GE suite has failures
    assert "failed test" in checks["raw/customers", "data_quality"].description
    # no quality evidence for marts/orders: its check is not evaluated, rather than "passed"
    assert ("marts/orders", "data_quality") not in checks and ("marts/orders", "files_readable") in checks

    orders_md = materialized["marts/orders"]
    lineage = orders_md["dagster/column_lineage"].value.deps_by_column
    assert [(d.asset_key, d.column_name) for d in lineage["amount_eur"]] == [(_key("raw/orders"), "amount")]
    assert orders_md["lumos/built_by"].value == "sql: marts_orders.sql"
    # code's header documents the dataset; the path pattern is not needed
    store = SnapshotStore(governed.store_url)
    try:
        marts = store.latest(dataset_urn("file", "marts/orders"), PARTITION)
        raw_orders = store.latest(dataset_urn("file", "raw/orders"), PARTITION)
        events = store.latest(dataset_urn("file", "raw/events"), PARTITION)
        customers = store.latest(dataset_urn("file", "raw/customers"), PARTITION)
    finally:
        store.close()
    assert marts.description == "Orders in euros" and [o.id for o in marts.owners] == ["ann@example.com"]

    # the profile reads the readable file only: two of ten amounts are null
    columns = {c.path: c for c in raw_orders.profile.columns}
    assert raw_orders.profile.row_count == 10
    assert columns["amount"].null_fraction == pytest.approx(0.2)
    assert (columns["order_id"].min, columns["order_id"].max, columns["order_id"].distinct) == ("1", "10", 10)
    assert "lumos/profile" in materialized["raw/orders"]
    assert events.profile.row_count == 3 and {c.path: c.distinct for c in events.profile.columns} == {"kind": 2}
    assert {c.path: c.null_fraction for c in customers.profile.columns}["country"] == pytest.approx(1 / 3)
    assert customers.schema.field("customer_id").terms == ("Customer Identifier",)
    assert {a.source for a in customers.quality.assertions} == {"great_expectations"}
    assert 0 < customers.quality.score < 1

    lite = open_lite(governed.lite_path, read_only=True)
    try:
        ids = set(lite.list_ids())
        job_urn = "urn:li:dataJob:(urn:li:dataFlow:(sql,sql,PROD),marts_orders.sql)"
        assert job_urn in ids
        io = lite.get(id=job_urn, aspects=["dataJobInputOutput"], typed=False, as_of=None, details=False)
        assert io["dataJobInputOutput"]["inputDatasets"] == [catalog_urn(governed, "raw/orders")]
        # the dbt and Great Expectations results, beside Lumos' own checks (custom assertions)
        kinds = [lite.get(i, ["assertionInfo"], typed=True)["assertionInfo"].type for i in ids if "assertion:" in i]
        assert kinds.count("DATASET") == len(customers.quality.assertions) and "CUSTOM" in kinds
        assert "urn:li:glossaryTerm:Customer Identifier" in ids
    finally:
        lite.close()


def test_warn_mode_reports_without_blocking(governed, tmp_path):
    doc = yaml.safe_load((tmp_path / "lumos.yaml").read_text())
    doc["governance"]["required"]["mode"] = "warn"
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump(doc))
    defs = build_definitions(load_config(str(tmp_path / "lumos.yaml")))
    job = defs.resolve_implicit_global_asset_job_def()
    selection = [_key(n) for n in ("raw/customers", "raw/orders", "marts/customer_value")]
    result = job.execute_in_process(
        partition_key=PARTITION, instance=DagsterInstance.ephemeral(), asset_selection=selection
    )
    names = {"/".join(m.asset_key.path) for m in result.asset_materializations_for_node("lumos_daily_datasets")}
    assert "marts/customer_value" in names


def test_report_writes_every_format_and_posts_the_missing_context(governed, tmp_path):
    job = build_definitions(governed).resolve_implicit_global_asset_job_def()
    job.execute_in_process(partition_key=PARTITION, instance=DagsterInstance.ephemeral(), raise_on_error=False)
    receiver = WebhookReceiver().start()
    try:
        doc = yaml.safe_load((tmp_path / "lumos.yaml").read_text())
        doc["governance"]["webhook"] = f"{receiver.url}/hooks/lumos"
        (tmp_path / "lumos.yaml").write_text(yaml.safe_dump(doc))
        out = CliRunner().invoke(main, ["report", "-c", str(tmp_path / "lumos.yaml")])
        assert out.exit_code == 0, out.output
        assert "posted the missing-context list" in out.output
        ((method, path, body),) = receiver.requests
        assert (method, path) == ("POST", "/hooks/lumos")
        assert [t["dataset"] for t in body["owners"]["(unowned)"]] == ["raw/customers"]
    finally:
        receiver.stop()
    overview = json.loads((tmp_path / "reports" / "overview.json").read_text())
    assert overview["totals"]["datasets"] == 4  # marts/customer_value was held back: no snapshot yet
    assert overview["risky"][0] == {"dataset": "raw/orders", "downstream": 2, "owners": ["ann@example.com"]}

    # a webhook that is down fails the command, naming it, and loses no file
    doc["governance"]["webhook"] = f"http://127.0.0.1:{free_port()}/hook"
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump(doc))
    os.remove(tmp_path / "reports" / "overview.html")
    out = CliRunner().invoke(main, ["report", "-c", str(tmp_path / "lumos.yaml")])
    assert out.exit_code == 1 and "governance.webhook: could not post to http://127.0.0.1:" in out.output
    assert (tmp_path / "reports" / "overview.html").exists()


def test_search_ranks_what_the_store_knows_and_filters_by_quality(governed):
    job = build_definitions(governed).resolve_implicit_global_asset_job_def()
    job.execute_in_process(partition_key=PARTITION, instance=DagsterInstance.ephemeral(), raise_on_error=False)
    config = ["-c", governed.source_file]

    def search(*args):
        out = CliRunner().invoke(main, ["search", *config, *args, "--format", "json"])
        assert out.exit_code == 0, out.output
        return json.loads(out.output)

    hits = {h["dataset"]: h["matched"] for h in search("amount")}
    assert hits == {"raw/orders": ["field:amount"], "marts/orders": ["field:amount_eur"]}
    # the GE failures bring raw/customers below 0.9; datasets with no quality evidence are left out
    scored = {h["dataset"]: h["quality"] for h in search("--min-quality", "0.9")}
    assert "raw/customers" not in scored and all(q >= 0.9 for q in scored.values()) and "raw/orders" in scored
    # glossary terms are searchable tags; the SQL header's owner is an owner
    assert {h["dataset"] for h in search("--tag", "customer identifier")} == {"raw/customers", "raw/orders"}
    assert [h["dataset"] for h in search("euros", "--owner", "ann@example.com")] == ["marts/orders"]


def test_profiles_sample_and_keep_nested_columns_to_null_counts(spark, tmp_path):
    from lumos_dagster.spark.profile import NotProfiled, profile_files

    rows = 2000
    table = pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "user": pa.array(
                [{"name": "a"} if i % 4 else None for i in range(rows)], pa.struct([("name", pa.string())])
            ),
        }
    )
    path = write_parquet(tmp_path / "t.parquet", table)
    full = profile_files(spark, [path], "parquet", 1.0)
    assert full.row_count == rows and full.completeness == pytest.approx(1 - 0.25 / 2)
    user = {c.path: c for c in full.columns}["user"]
    assert (user.null_fraction, user.distinct, user.min) == (0.25, None, None)
    sampled = profile_files(spark, [path], "parquet", 0.1)
    assert sampled.sample_fraction == 0.1 and 100 < sampled.row_count < 300
    with pytest.raises(NotProfiled, match="s3://bucket/t.parquet: no file system to read it with"):
        profile_files(spark, ["s3://bucket/t.parquet"], "parquet", 1.0)
    with pytest.raises(NotProfiled, match="no readable file"):
        profile_files(spark, [], "parquet", 1.0)
