"""One lumos.yaml across platforms (issue 16): local files, S3, GCS, Azure Blob, PostgreSQL,
Snowflake and Kafka in one config, the one docs/sources.md gives ("One lumos.yaml across platforms").

`lumos discover` reads them all, one Dagster run snapshots every dataset into DataHub Lite, and
`lumos search customer` finds a `customer…` dataset on every platform together, each hit with its
platform and owner. What runs: the real PostgreSQL on 127.0.0.1:5432; moto's S3 server,
fake-gcs-server and Azurite on 127.0.0.1 (tests/emulators.py, the fixtures of
tests/test_object_stores.py); Snowflake is fakesnow, which patches the connector in this process,
so the CLI runs in process (click's CliRunner); Kafka is Tansu, a Kafka-compatible broker, on
127.0.0.1 (tests/kafka_broker.py: not Apache Kafka, whose jars on Maven Central cannot be reached here).
"""

from __future__ import annotations

import io
import json
import os
import re
import uuid
from pathlib import Path

import fakesnow
import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner
from dagster import DagsterInstance

from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog
from lumos_dagster.cli import main
from lumos_dagster.definitions import build_definitions
from lumos_dagster.floor.config import load_config
from tests import test_object_stores
from tests.conftest import S3_TEST_CREDENTIALS
from tests.emulators import s3_emulator
from tests.kafka_broker import create_topics, produce, tansu_broker
from tests.test_sources import PG

pytestmark = [pytest.mark.dagster, pytest.mark.servers]

# Azurite and fake-gcs-server: the module fixtures of tests/test_object_stores.py
azure, gcs = test_object_stores.azure, test_object_stores.gcs
DOCS = Path(__file__).resolve().parents[1] / "docs" / "sources.md"
DAY = "2026-11-25"

# The config as docs/sources.md gives it (a test holds them equal: change both); `plumb` points it
# at the servers the test started.
CONFIG = """\
sources:
  - type: local
    name: files
    root: lake
  - type: s3
    name: lake_us_east
    bucket: acme-lake
    prefix: warehouse/
  - type: gcs
    name: lake_us
    bucket: acme-lake-us              # application default credentials
    project: acme-prod
  - type: azure
    name: lake_eu
    account_name: acmelake            # AZURE_STORAGE_* variables or DefaultAzureCredential
    container: warehouse
  - type: postgres
    name: app
    dsn: postgresql://lumos:${PG_PASSWORD}@db.internal:5432/app
    schemas: [crm]
  - type: snowflake
    name: snow
    account: acme-xy12345
    user: LUMOS
    password: ${SNOWFLAKE_PASSWORD}
    database: ANALYTICS
    schemas: [crm]
    warehouse: METADATA_XS
  - type: kafka
    name: events
    bootstrap_servers: kafka.internal:9092
    topics: ["customer_*"]            # JSON messages, sampled (or schema_registry_url: …)

datasets:
  - name: crm/customers
    owners: [group:crm-team]
  - name: web/customer_events
    owners: [alice@example.com]
  - name: marketing/customer_segments
    owners: [group:marketing]
  - name: support/customer_tickets
    owners: [bob@example.com]
  - name: app/crm/customer
    owners: [{id: app-team, kind: group, type: TECHNICAL_OWNER}]
  - name: analytics/crm/customer_accounts
    owners: [carol@example.com]
  - name: customer_signups
    owners: [dave@example.com]
"""

# dataset → (DataHub platform, owner as `lumos search` prints it); the Kafka source's author adds its topic
EXPECTED = {
    "crm/customers": ("file", "crm-team"),
    "web/customer_events": ("s3", "alice@example.com"),
    "marketing/customer_segments": ("gcs", "marketing"),
    "support/customer_tickets": ("abs", "bob@example.com"),
    "app/crm/customer": ("postgres", "app-team"),
    "analytics/crm/customer_accounts": ("snowflake", "carol@example.com"),
    "customer_signups": ("kafka", "dave@example.com"),
}
PLATFORMS = {"file", "s3", "gcs", "abs", "postgres", "snowflake", "kafka"}


def parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


@pytest.fixture(scope="module")
def s3():
    for key, value in S3_TEST_CREDENTIALS.items():  # what the AWS chain finds, as in tests/test_sources.py
        os.environ.setdefault(key, value)
    server, url, client = s3_emulator("acme-lake")
    yield {"url": url, "client": client}
    server.stop()


@pytest.fixture(scope="module")
def kafka():
    """A broker with a `customer_signups` topic of JSON messages; its bootstrap address."""
    with tansu_broker() as bootstrap:
        create_topics(bootstrap, {"customer_signups": 1})
        produce(bootstrap, "customer_signups", [(b"1", json.dumps({"customer_id": 1, "plan": "pro"}).encode())])
        yield bootstrap


@pytest.fixture
def pg_schema():
    schema = f"lumos_mp_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"CREATE TABLE {schema}.customer (id bigint PRIMARY KEY, name text NOT NULL, email text)")
        conn.execute(f"INSERT INTO {schema}.customer VALUES (1, 'Ann', 'ann@example.com')")
    yield schema
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


def lake(tmp_path, s3, gcs, azure) -> None:
    """A `customer…` dataset in each object store and on the local disk, partition DAY."""
    part = f"dt={DAY}"
    local = tmp_path / "lake" / "crm" / "customers" / part / "part-0.parquet"
    local.parent.mkdir(parents=True)
    local.write_bytes(parquet(pa.table({"customer_id": [1, 2], "name": ["Ann", "Bob"]})))
    events = b"".join(json.dumps({"customer_id": i, "path": f"/p/{i}"}).encode() + b"\n" for i in range(3))
    s3["client"].put_object(Bucket="acme-lake", Key=f"warehouse/web/customer_events/{part}/e.json", Body=events)
    gcs["fs"].pipe(f"lake/multi/marketing/customer_segments/{part}/s.csv", b"customer_id,segment\n1,vip\n2,new\n")
    azure["fs"].pipe(
        f"lake/multi/support/customer_tickets/{part}/t.parquet",
        parquet(pa.table({"ticket_id": [7], "customer_id": [1], "subject": ["refund"]})),
    )


def snowflake_tables() -> None:
    import snowflake.connector

    conn = snowflake.connector.connect(database="ANALYTICS", schema="CRM")
    conn.cursor().execute("CREATE SCHEMA IF NOT EXISTS ANALYTICS.CRM")
    conn.cursor().execute(
        "CREATE TABLE CRM.CUSTOMER_ACCOUNTS (ID BIGINT PRIMARY KEY, CUSTOMER_ID BIGINT, PLAN VARCHAR)"
    )
    conn.cursor().execute("INSERT INTO CRM.CUSTOMER_ACCOUNTS VALUES (1, 1, 'pro')")
    conn.close()


def plumb(config: dict, s3, gcs, azure, pg_schema: str, kafka: str) -> dict:
    """The docs' config pointed at the test's servers: endpoints, the test database and its schema
    (PostgreSQL names its tables database/schema/table, so the declared names follow)."""
    by_type = {s["type"]: s for s in config["sources"]}
    by_type["s3"].update(endpoint_url=s3["url"], region="us-east-1")
    for kind, server in (("gcs", gcs), ("azure", azure)):
        by_type[kind].update(server["source"], prefix="multi/")
    by_type["postgres"].update(dsn=PG, schemas=[pg_schema])
    by_type["kafka"].update(bootstrap_servers=kafka)
    for d in config["datasets"]:
        d["name"] = re.sub(r"^app/crm/", f"test/{pg_schema}/", d["name"])
    config["partitions"] = {"start": "2026-11-01"}
    return config


def hits(output: str) -> dict[str, str]:
    """`lumos search`'s text output as dataset → the hit's platform/owner line."""
    lines = output.splitlines()
    return {
        line.split("  (")[0]: lines[i + 1].strip()
        for i, line in enumerate(lines)
        if not line.startswith(" ") and "  (" in line and i + 1 < len(lines)
    }


def test_one_config_discovers_snapshots_and_searches_every_platform(
    tmp_path, s3, gcs, azure, pg_schema, kafka, monkeypatch
):
    monkeypatch.setenv("SNOWFLAKE_PASSWORD", "unused-by-fakesnow")
    lake(tmp_path, s3, gcs, azure)
    path = tmp_path / "lumos.yaml"
    path.write_text(yaml.safe_dump(plumb(yaml.safe_load(CONFIG), s3, gcs, azure, pg_schema, kafka)))
    expected = {re.sub(r"^app/crm/", f"test/{pg_schema}/", name): facts for name, facts in EXPECTED.items()}

    with fakesnow.patch():  # in this process only: the CLI and the Dagster run stay in process
        snowflake_tables()
        discovered = CliRunner().invoke(main, ["discover", "-c", str(path)])
        assert discovered.exit_code == 0, discovered.output
        for name in expected:
            assert name in discovered.stdout, name

        config = load_config(str(path))
        job = build_definitions(config).resolve_implicit_global_asset_job_def()
        assert job.execute_in_process(partition_key=DAY, instance=DagsterInstance.ephemeral()).success

    lite = {s.dataset.name: s for s in DataHubLiteCatalog(config.lite_path).read_all()}
    assert {name: (lite[name].dataset.platform, lite[name].version) for name in expected} == {
        name: (platform, "1.0.0") for name, (platform, _) in expected.items()
    }
    assert {name: [o.id for o in lite[name].owners] for name in expected} == {
        name: [owner] for name, (_, owner) in expected.items()
    }
    assert "customer_id" in [f.name for f in lite["support/customer_tickets"].schema.fields]

    found = CliRunner().invoke(main, ["search", "customer", "-c", str(path)])
    assert found.exit_code == 0, found.output
    shown = hits(found.output)
    assert set(expected) <= set(shown), found.output
    for name, (platform, owner) in expected.items():
        assert shown[name].startswith(f"platform {platform} · owner {owner} ·"), (name, shown[name])
    assert {line.split(" · ")[0].removeprefix("platform ") for line in shown.values()} == PLATFORMS


def test_the_docs_give_the_config_the_test_uses():
    """docs/sources.md's "One lumos.yaml across platforms" shows exactly CONFIG."""
    section = DOCS.read_text().split("## One lumos.yaml across platforms", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    assert block == CONFIG
