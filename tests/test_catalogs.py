"""Catalog adapters against real DataHub code and local stand-in servers.

No DataHub GMS, OpenMetadata server or Marquez can run here (no Docker, no network): the
REST adapters are tested against HTTP servers on 127.0.0.1 (tests/fake_servers.py) that
speak the endpoints the adapters use and parse every request back with the vendors' own
classes where they exist (DataHub's aspect classes)."""

import json
import os
import pathlib
import subprocess
import sys
from dataclasses import replace

import pytest
import yaml
from click.testing import CliRunner
from datahub.testing.mce_helpers import check_golden_file

from lumos_dagster.catalog.datahub import DataHubCatalog, snapshot_proposals
from lumos_dagster.catalog.datahub_file import DataHubFileCatalog
from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog
from lumos_dagster.catalog.datahub_rest import DataHubRestCatalog
from lumos_dagster.catalog.openlineage import OpenLineageCatalog
from lumos_dagster.catalog.openmetadata import OpenMetadataCatalog
from lumos_dagster.catalog.patch_apply import state_of
from lumos_dagster.cli import main
from lumos_dagster.delivery.catalogs import build_catalogs
from lumos_dagster.delivery.outbox import deliver
from lumos_dagster.floor.config import load_config, parse_config
from lumos_dagster.floor.datatypes import Field, Primitive, Schema
from lumos_dagster.floor.errors import CatalogError
from lumos_dagster.floor.model import ColumnMapping, DatasetRef, LineageEdge, Owner
from lumos_dagster.floor.snapshot_json import snapshot_to_json
from lumos_dagster.store import SnapshotStore
from tests.fake_servers import FakeGMS, FakeOpenLineage, FakeOpenMetadata, free_port
from tests.lake import register
from tests.test_datahub import GOLDEN
from tests.test_datahub import snapshot as rich_snapshot

pytestmark = [pytest.mark.dagster, pytest.mark.servers]

BIN = pathlib.Path(sys.executable).parent


def estate():
    """Three related datasets, the richest one from test_datahub."""
    orders = rich_snapshot()
    raw_ref = DatasetRef("file", "raw/orders", "/lake/raw/orders", "avro")
    mart_ref = DatasetRef("file", "marts/revenue", "/lake/marts/revenue", "parquet")
    raw = replace(orders, dataset=raw_ref, upstream=(), owners=(Owner("ann@example.com"),), tags=(), errors=())
    mart = replace(
        orders, dataset=mart_ref, upstream=(LineageEdge(orders.dataset),), owners=(Owner("ghost@example.com"),),
        tags=("finance",),
    )  # fmt: skip
    return [raw, orders, mart]


def expected_aspects(snapshots):
    """What a catalog holds once every snapshot's proposals are applied (patches included)."""
    return state_of(p for s in snapshots for p in snapshot_proposals(s))


#: what DataHub holds of a Lumos snapshot, and gives back (the rest is in Lumos' store)
HELD = ("dataset", "partition_key", "version", "change_class", "schema", "schema_name", "schema_aliases", "description",
        "owners", "tags", "terms", "domain", "removed")  # fmt: skip


def held(doc: dict) -> dict:
    out = {k: doc.get(k) for k in HELD}
    out["dataset"] = {k: v for k, v in doc["dataset"].items() if k != "location"}
    out["upstream"] = sorted(e["upstream"]["name"] for e in doc["upstream"])
    return out


@pytest.fixture
def gms():
    server = FakeGMS(token="s3cret").start()
    yield server
    server.stop()


# ------------------------------------------------------------ DataHub GMS


def test_gms_receives_every_aspect_in_batches_with_the_token(gms):
    snapshots = estate()
    catalog = DataHubRestCatalog(gms.url, token="s3cret", batch_size=7, retries=0, timeout_sec=5)
    sent = catalog.emit(snapshots)
    catalog.close()
    assert sent == len(DataHubCatalog("count").aspects(snapshots))  # containers shared by datasets are sent once
    # each body parsed back into DataHub's classes, each patch applied
    assert {k: v[-1] for k, v in gms.aspects.items()} == expected_aspects(snapshots)
    batches = [body for method, path, body in gms.requests if path == "/aspects?action=ingestProposalBatch"]
    assert [len(b["proposals"]) for b in batches] == [7] * (sent // 7) + ([sent % 7] if sent % 7 else [])


def test_gms_with_a_wrong_token_fails_with_datahubs_message(gms):
    catalog = DataHubRestCatalog(gms.url, token="wrong", retries=0, timeout_sec=5)
    with pytest.raises(Exception, match="authentication error"):
        catalog.emit(estate())


@pytest.mark.parametrize("outage", ["refused", "dropped", "reply lost"])
def test_a_gms_outage_for_a_whole_run_delays_every_aspect_and_loses_none(tmp_path, outage):
    """The catalog refuses connections (nothing listens), drops them, or takes a request
    but the reply never arrives; then it comes back. Every aspect arrives, none twice."""
    port = free_port()
    store = SnapshotStore(f"sqlite:///{tmp_path}/store.db")
    catalog = DataHubRestCatalog(f"http://127.0.0.1:{port}", token="s3cret", retries=1, timeout_sec=2)
    snapshots = estate()
    store.put(snapshots, catalogs=[catalog.name])
    server = None
    if outage != "refused":
        server = FakeGMS(token="s3cret", port=port).start()
        server.mode = "drop" if outage == "dropped" else "lose-reply"
    report = deliver(store, catalog)
    assert report.delivered == 0 and len(report.failed) == 3
    assert store.outbox_counts(catalog.name) == {"pending": 3}
    assert all(attempts == 1 and error for _, attempts, error, _ in store.outbox_errors(catalog.name))

    if server is None:
        server = FakeGMS(token="s3cret", port=port).start()
    server.mode = "up"
    catalog = DataHubRestCatalog(f"http://127.0.0.1:{port}", token="s3cret", retries=1, timeout_sec=2)
    assert deliver(store, catalog).delivered == 3
    assert {k: v[-1] for k, v in server.aspects.items()} == expected_aspects(snapshots)
    assert all(len(versions) == 1 for versions in server.aspects.values())  # compared by content: none twice
    assert deliver(store, catalog).delivered == 0  # nothing left
    server.stop()
    store.close()


# ---------------------------------------------------------------- MCP file


def test_the_mcp_file_matches_its_golden_file_and_is_stable(pytestconfig, tmp_path):
    path = tmp_path / "mcps.json"
    catalog = DataHubFileCatalog(str(path))
    catalog.emit(estate())
    check_golden_file(pytestconfig, path, GOLDEN / "estate_mcps.json")
    first = path.read_bytes()
    catalog.emit(estate()[1:])  # the same content again, in another batch
    assert path.read_bytes() == first


def test_datahub_ingest_loads_the_mcp_file(tmp_path):
    """DataHub's own `datahub ingest` (file source, REST sink) sends the file to GMS, patches and all."""
    path = tmp_path / "mcps.json"
    snapshots = estate()
    DataHubFileCatalog(str(path)).emit(snapshots)
    gms = FakeGMS().start()
    try:
        recipe = {"source": {"type": "file", "config": {"path": str(path)}},
                  "sink": {"type": "datahub-rest", "config": {"server": gms.url}}}  # fmt: skip
        (tmp_path / "recipe.yml").write_text(yaml.safe_dump(recipe))
        env = {**os.environ, "HOME": str(tmp_path), "DATAHUB_TELEMETRY_ENABLED": "false"}
        out = subprocess.run([BIN / "datahub", "ingest", "-c", tmp_path / "recipe.yml"], capture_output=True,
                             text=True, env=env, timeout=300)  # fmt: skip
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        ingestion = ("urn:li:dataHubExecutionRequest:", "urn:li:dataHubIngestionSource:")  # the CLI reports its run
        loaded = {k: v[-1] for k, v in gms.aspects.items() if not k[0].startswith(ingestion)}
        assert loaded == expected_aspects(snapshots)
    finally:
        gms.stop()


def test_catalogs_read_back_what_lumos_wrote(tmp_path, gms):
    snapshots = estate()
    gone = replace(snapshots[0], removed=True)
    rest = DataHubRestCatalog(gms.url, token="s3cret", retries=0)
    for catalog in (DataHubFileCatalog(str(tmp_path / "mcps.json")), DataHubLiteCatalog(str(tmp_path / "lite.db")),
                    rest):  # fmt: skip
        catalog.emit(snapshots)
        back = {s.dataset.name: s for s in catalog.read_all()}
        for s in snapshots:
            got, want = held(snapshot_to_json(back[s.dataset.name])), held(snapshot_to_json(s))
            assert got == want, (catalog.name, s.dataset.name)
    rest.emit([gone])  # GMS gives back soft-deleted datasets too
    assert {s.dataset.name: s.removed for s in rest.read_all()} == {n: n == "raw/orders" for n in back}
    rest.close()
    # and `lumos export --from datahub-rest` writes it as a portable snapshot
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump({"catalog": {"type": "datahub-rest", "server": gms.url}}))
    args = ["export", "--from", "datahub-rest", "-o", str(tmp_path / "gms.json"), "-c", str(tmp_path / "lumos.yaml")]
    out = CliRunner().invoke(main, args, env={"DATAHUB_GMS_TOKEN": "s3cret"})
    assert out.exit_code == 0, out.output
    assert f"3 datasets, 3 versions, 2 lineage edges, 0 releases (from datahub-rest:{gms.url})" in out.stdout


# ----------------------------------------------------------------- OpenLineage


def _events_file(path):
    return [json.loads(line) for line in pathlib.Path(path).read_text().splitlines() if line]


def test_openlineage_dataset_events_through_the_file_transport(tmp_path):
    catalog = OpenLineageCatalog("lumos", path=str(tmp_path / "ol.jsonl"))
    snapshots = estate()
    assert catalog.emit(snapshots) == 3
    catalog.close()
    events = _events_file(tmp_path / "ol.jsonl")
    orders = next(e for e in events if e["dataset"]["name"] == "sales/orders")
    assert orders["schemaURL"].endswith("#/$defs/DatasetEvent") and orders["producer"]
    facets = orders["dataset"]["facets"]
    assert orders["dataset"]["namespace"] == "lumos"
    assert set(facets) == {"datasource", "storage", "symlinks", "schema", "version", "documentation", "ownership",
                           "tags", "columnLineage"}  # fmt: skip
    assert facets["columnLineage"]["fields"]["amount"]["inputFields"] == [
        {"namespace": "lumos", "name": "raw/orders", "field": "total", "transformations": []}
    ]
    assert "columnLineage" not in next(e for e in events if e["dataset"]["name"] == "raw/orders")["dataset"]["facets"]
    assert facets["version"]["datasetVersion"] == "1.2.0"
    assert facets["storage"] == {**facets["storage"], "storageLayer": "file", "fileFormat": "avro"}
    customer = next(f for f in facets["schema"]["fields"] if f["name"] == "customer")
    assert [c["name"] for c in customer["fields"]] == ["id", "address"]  # nested fields kept nested
    assert facets["ownership"]["owners"][1] == {"name": "group:data-eng", "type": "TECHNICAL_OWNER"}
    assert all("_producer" in f and "_schemaURL" in f for f in facets.values())
    removed = catalog.event(replace(snapshots[0], removed=True))
    assert removed.dataset.facets["lifecycleStateChange"].lifecycleStateChange.value == "DROP"


def test_openlineage_without_a_transport_is_refused_when_built():
    with pytest.raises(ValueError, match="needs a url"):  # not a TypeError deep in the client at the first emit
        OpenLineageCatalog("lumos")


def test_openlineage_over_http_with_an_api_key(tmp_path):
    server = FakeOpenLineage(token="k3y").start()
    catalog = OpenLineageCatalog("lumos", url=server.url, api_key="k3y")
    catalog.emit(estate())
    server.stop()
    assert sorted(e["dataset"]["name"] for e in server.events) == ["marts/revenue", "raw/orders", "sales/orders"]
    first = estate()[0]
    later = replace(first, captured_at=first.captured_at.replace(year=2030))
    assert catalog.fingerprint(first) == catalog.fingerprint(later)  # when Lumos looked is not a change


# ---------------------------------------------------------------- OpenMetadata


def test_openmetadata_tables_columns_owners_tags_and_lineage():
    server = FakeOpenMetadata(token="jwt", users=("ann@example.com",), teams=("data-eng",)).start()
    catalog = OpenMetadataCatalog(server.url, token="jwt", service="lake-svc", database="lake", retries=0)
    snapshots = estate()
    # the columns sales/orders maps from: `total` as the table spells it, and no `discount`
    raw_columns = Schema((Field("id", Primitive("int64")), Field("Total", Primitive("float64"))))
    sales = snapshots[1]
    edge = replace(sales.upstream[0], columns=(*sales.upstream[0].columns, ColumnMapping("discount", "discount")))
    snapshots = [replace(snapshots[0], schema=raw_columns), replace(sales, upstream=(edge,)), snapshots[2]]
    catalog.emit(snapshots)
    tables = server.entities["tables"]
    assert sorted(tables) == ["lake-svc.lake.marts.revenue", "lake-svc.lake.raw.orders", "lake-svc.lake.sales.orders"]
    orders = tables["lake-svc.lake.sales.orders"]
    columns = {c["name"]: c for c in orders["columns"]}
    assert columns["order_id"] == {"name": "order_id", "dataType": "BIGINT", "dataTypeDisplay": "int64",
                                   "constraint": "NOT_NULL", "description": "Unique order number"}  # fmt: skip
    assert (columns["amount"]["dataType"], columns["amount"]["precision"], columns["amount"]["scale"]) == (
        "DECIMAL", 10, 2)  # fmt: skip
    assert [c["name"] for c in columns["customer"]["children"]] == ["id", "address"]
    assert columns["items"]["arrayDataType"] == "STRUCT" and len(columns["items"]["children"]) == 2
    assert {o["type"] for o in orders["owners"]} == {"user", "team"}
    assert tables["lake-svc.lake.marts.revenue"].get("owners") is None  # ghost@ is unknown to OpenMetadata
    assert orders["tags"][0]["tagFQN"] == "Lumos.pii" and "lake-svc.Lumos.pii" not in server.entities["tags"]
    assert server.lineage == {
        (tables["lake-svc.lake.raw.orders"]["id"], orders["id"]),
        (orders["id"], tables["lake-svc.lake.marts.revenue"]["id"]),
    }
    assert server.column_lineage[tables["lake-svc.lake.raw.orders"]["id"], orders["id"]] == [
        {"fromColumns": ["lake-svc.lake.raw.orders.id"], "toColumn": "lake-svc.lake.sales.orders.order_id"},
        {"fromColumns": ["lake-svc.lake.raw.orders.Total"], "toColumn": "lake-svc.lake.sales.orders.amount"},
    ]  # not `discount`: neither table has it, and OpenMetadata would refuse the edge
    versions = dict(server.versions)
    catalog.emit(snapshots)
    assert server.versions == versions  # the same content again changes nothing
    server.stop()


def test_openmetadata_soft_deletes_a_removed_table_and_a_return_restores_it():
    server = FakeOpenMetadata().start()
    catalog = OpenMetadataCatalog(server.url, retries=0)
    orders = estate()[1]
    catalog.emit([orders])
    table = server.entities["tables"]["lumos.lake.sales.orders"]
    gone = replace(orders, removed=True)
    assert catalog.fingerprint(gone) != catalog.fingerprint(orders)  # the removal is delivered, not skipped
    catalog.emit([gone, replace(estate()[0], removed=True)])  # one it never had: nothing to delete
    assert server.entities["tables"]["lumos.lake.sales.orders"]["deleted"] is True
    assert ("DELETE", "/api/v1/tables/name/lumos.lake.sales.orders?hardDelete=false", None) in server.requests
    catalog.emit([orders])  # the dataset came back: the same table, restored
    restored = server.entities["tables"]["lumos.lake.sales.orders"]
    assert restored["id"] == table["id"] and not restored.get("deleted")
    server.stop()


# ------------------------------------------------------------- configuration


def test_lumos_yaml_selects_several_catalogs_and_reads_tokens_from_the_environment(tmp_path, monkeypatch, gms):
    config = parse_config(
        {
            "catalog": [
                {"type": "datahub-lite", "path": "lite.db"},
                {"type": "datahub-rest", "server": gms.url, "token_env": "LUMOS_TEST_GMS_TOKEN"},
                {"type": "openlineage", "path": "ol.jsonl", "api_key_env": "LUMOS_TEST_OL_KEY"},
            ]
        },  # fmt: skip
        base_dir=str(tmp_path),
    )
    with pytest.raises(CatalogError, match="LUMOS_TEST_OL_KEY is not set"):
        build_catalogs(config)
    monkeypatch.setenv("LUMOS_TEST_OL_KEY", "x")
    monkeypatch.setenv("LUMOS_TEST_GMS_TOKEN", "s3cret")
    lite, rest, ol = build_catalogs(config)
    assert lite.name == f"datahub-lite:{tmp_path}/lite.db" and ol.name == f"openlineage:{tmp_path}/ol.jsonl"
    rest.emit(estate()[:1])  # the token came from the environment
    assert gms.aspects


def test_a_run_with_gms_down_succeeds_and_lumos_sync_delivers_later(tmp_path, spark):
    """Through Dagster: GMS refuses connections for the whole run; DataHub Lite gets
    everything at once; `lumos sync` delivers to GMS when it is back, each aspect once."""
    from datetime import date

    from click.testing import CliRunner
    from dagster import DagsterInstance

    from lumos_dagster.cli import main
    from lumos_dagster.cli.demo_lake import build_demo_lake
    from lumos_dagster.definitions import build_definitions
    from tests.test_gate import project

    build_demo_lake(str(tmp_path / "lake"), today=date(2026, 11, 25))
    port = free_port()
    path = project(tmp_path, catalog=[{"type": "datahub-lite", "path": "catalog.db"},
                                      {"type": "datahub-rest", "server": f"http://127.0.0.1:{port}", "retries": 0,
                                       "timeout_sec": 2, "token_env": None}])  # fmt: skip
    config = load_config(str(path))
    register(config)
    job = build_definitions(config).resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(partition_key="2026-11-25", instance=DagsterInstance.ephemeral())
    assert result.success
    md = next(iter(result.asset_materializations_for_node("lumos_daily_datasets"))).metadata
    assert md[f"lumos/pending/datahub-rest:http://127.0.0.1:{port}"].value >= 1

    server = FakeGMS(port=port).start()
    try:
        out = CliRunner().invoke(main, ["sync", "-c", str(path)])
        assert out.exit_code == 0, out.output
        assert f"datahub-rest:http://127.0.0.1:{port}: 8 delivered" in out.stdout
        assert f"datahub-lite:{tmp_path}/catalog.db: 0 delivered" in out.stdout
        lite = {s.dataset.name: s for s in DataHubLiteCatalog(config.lite_path).read_all()}
        assert len(lite) == 8
        # each aspect once (a partition's profile and the table's: two events of one timeseries aspect)
        assert all(len(v) == len({json.dumps(a.to_obj(), sort_keys=True) for a in v}) for v in server.aspects.values())
        assert {k[1] for k, v in server.aspects.items() if len(v) > 1} <= {"datasetProfile"}
        datasets = {k[0] for k in server.aspects if k[0].startswith("urn:li:dataset:")}
        assert len(datasets) == 8
    finally:
        server.stop()
