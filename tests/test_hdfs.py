"""HDFS sources over WebHDFS, against the stand-in in tests/webhdfs.py (a NameNode and a DataNode that
serve a local folder through the WebHDFS REST API as Hadoop's reference describes it: no Hadoop can
run here). A lake read over WebHDFS must give what the same folder gives read from local disk; Delta
and Iceberg tables there what delta-rs and pyiceberg read from the same folder locally."""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lumos_dagster.floor.config import parse_config
from lumos_dagster.floor.errors import ConfigError
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.formats.readers import PoolReader, read_in_process
from lumos_dagster.lineage.catalogue import resolve_datasets
from lumos_dagster.sources import build_sources, discover
from lumos_dagster.sources.builtins import WebHdfsAddress, webhdfs_address
from tests.emulators import free_port
from tests.lake import partitioned_lake, run_in_process
from tests.test_tables_s3 import fields, iceberg_catalog, write_iceberg
from tests.webhdfs import WebHDFS

pytestmark = [pytest.mark.servers]

ROWS = 40_000  # ~1.3 MB of random bytes in the big Parquet file, ~3 MB of CSV: more than a schema costs
DAY = ("2026-11-24", datetime(2026, 11, 24, tzinfo=timezone.utc), datetime(2026, 11, 25, tzinfo=timezone.utc))


@pytest.fixture(scope="module")
def hdfs(tmp_path_factory):
    """The stand-in serving an empty folder; `ls_limit=1` makes LISTSTATUS_BATCH clients page."""
    root = tmp_path_factory.mktemp("hdfs")
    server = WebHDFS(root, ls_limit=1)
    yield server
    server.stop()


def lake(folder: Path) -> dict[str, int]:
    """Parquet, CSV and JSON datasets with dt= partitions, a big file of each text kind, a file whose name
    says nothing and a file at the top; returns the big files' paths (from `folder`) and sizes."""
    partitioned_lake(folder, days=3, extra_field_from=2)
    big = folder / "sales/orders/dt=2026-11-24/part-big.parquet"
    user = pa.struct([("name", pa.string()), ("age", pa.int32())])
    columns = {
        "id": pa.array(range(ROWS), pa.int64()),
        "user": pa.array([{"name": "b", "age": 2}] * ROWS, user),
        "payload": pa.array([os.urandom(32) for _ in range(ROWS)], pa.binary()),
    }
    pq.write_table(pa.table(columns), big)
    events = folder / "web/events/dt=2026-11-24/events.csv"
    events.parent.mkdir(parents=True)
    rows = (f"2026-11-24T00:00:{i % 60:02d},/p/{i},{os.urandom(24).hex()}\n" for i in range(ROWS * 2))
    events.write_text("ts,path,session\n" + "".join(rows))
    customers = folder / "crm/customers/dt=2026-11-24/customers.json"
    customers.parent.mkdir(parents=True)
    customers.write_text("".join(json.dumps({"id": i, "name": f"c{i}", "vip": i % 2 == 0}) + "\n" for i in range(50)))
    export = folder / "misc/export/dt=2026-11-24/part-00000"  # Parquet, known by its first bytes
    export.parent.mkdir(parents=True)
    pq.write_table(pa.table({"k": [1, 2]}), export)
    (folder / "readme.json").write_text('{"title": "lake", "tags": ["a"]}\n')
    return {str(p.relative_to(folder)): p.stat().st_size for p in (big, events)}


def sources_of(*entries: dict):
    cfg = parse_config({"sources": list(entries)})
    return cfg, build_sources(cfg)


def snapshot(cfg, sources, windows=(DAY,)):
    report = ScanReport()
    records = discover(sources, report).records
    assert not report.failures, report.failures
    catalogue = resolve_datasets(cfg, records, {n: s.root for n, s in sources.items()})
    run = run_in_process(cfg, catalogue, sources, list(windows))
    assert run.failure is None, run.failure
    return {r.name: r for r in records}, run


def hdfs_entry(server: WebHDFS, path: str, **more) -> dict:
    """The source as a user writes it: the path as Hive names it (RPC port 8020), WebHDFS's port apart."""
    return {"type": "hdfs", "name": "lake", "url": f"hdfs://{server.host}:8020{path}",
            "webhdfs_port": server.port, "user": "lumos", **more}  # fmt: skip


#: the properties the reference marks required in a FileStatus JSON object
FILE_STATUS = {"accessTime", "blockSize", "group", "length", "modificationTime", "owner", "pathSuffix", "permission",
               "replication", "type"}  # fmt: skip


def test_the_stand_in_answers_as_the_webhdfs_reference_says(hdfs):
    """The stand-in itself, held to the reference's examples (what Lumos' tests then stand on)."""
    import requests

    partitioned_lake(hdfs.root / "reference", days=2, files_per_day=2)
    part = "/reference/sales/orders/dt=2026-11-23/part-0.parquet"
    data = (hdfs.root / part.lstrip("/")).read_bytes()

    def call(path: str, op: str, **params):
        return requests.get(f"{hdfs.url}/webhdfs/v1{path}", params={"op": op, **params}, allow_redirects=False)

    folder = call("/reference/sales/orders", "GETFILESTATUS").json()["FileStatus"]
    assert FILE_STATUS <= set(folder)
    assert (folder["type"], folder["pathSuffix"], folder["length"]) == ("DIRECTORY", "", 0)
    listed = call("/reference/sales/orders", "LISTSTATUS").json()["FileStatuses"]["FileStatus"]
    assert [e["pathSuffix"] for e in listed] == ["dt=2026-11-23", "dt=2026-11-24"]
    (itself,) = call(part, "LISTSTATUS").json()["FileStatuses"]["FileStatus"]  # "List a File"
    assert FILE_STATUS <= set(itself)
    assert (itself["type"], itself["pathSuffix"], itself["length"]) == ("FILE", "", len(data))
    batches, after = [], ""  # "Iteratively List a Directory": one entry a batch here (ls_limit=1)
    while True:
        page = call("/reference/sales/orders/dt=2026-11-23", "LISTSTATUS_BATCH", startAfter=after).json()
        batch = page["DirectoryListing"]["partialListing"]["FileStatuses"]["FileStatus"]
        batches.append([e["pathSuffix"] for e in batch])
        if not page["DirectoryListing"]["remainingEntries"]:
            break
        after = batch[-1]["pathSuffix"]
    assert batches == [["part-0.parquet"], ["part-1.parquet"]]
    summary = call("/reference", "GETCONTENTSUMMARY").json()["ContentSummary"]
    assert (summary["fileCount"], summary["directoryCount"]) == (4, 5)

    # OPEN: the NameNode redirects to a DataNode (another address), which sends offset/length
    redirect = call(part, "OPEN", offset=4, length=10)
    assert redirect.status_code == 307 and not redirect.content
    location = redirect.headers["Location"]
    assert not location.startswith(hdfs.url) and "offset=4" in location and "length=10" in location
    assert requests.get(location).content == data[4:14]
    assert call(part, "OPEN", noredirect="true").json()["Location"].startswith(location.split("?")[0])

    # errors: RemoteException JSON, under the reference's status codes
    for (path, op), status, exception in (
        (("/reference/nope", "GETFILESTATUS"), 404, "FileNotFoundException"),
        (("/reference/sales/orders", "OPEN"), 404, "FileNotFoundException"),  # a folder is no file
        (("/reference", "NOSUCHOP"), 400, "IllegalArgumentException"),
        (("/reference/hr", "LISTSTATUS"), 403, "AccessControlException"),
    ):
        (hdfs.root / "reference/hr").mkdir(exist_ok=True)
        hdfs.deny("/reference/hr")
        refused = call(path, op)
        hdfs.allow_all()
        error = refused.json()["RemoteException"]
        assert (refused.status_code, error["exception"]) == (status, exception), (path, op)
        assert error["javaClassName"].endswith(exception) and error["message"]
    assert requests.put(f"{hdfs.url}/webhdfs/v1/reference/x", params={"op": "MKDIRS"}).status_code == 405


WEBHDFS_ADDRESSES = [
    # url, webhdfs_port, https → address, or the error's start
    ("hdfs://namenode/lake", None, None, WebHdfsAddress("namenode", 9870, False, "/lake")),
    ("hdfs://namenode:8020/lake/", None, None, WebHdfsAddress("namenode", 9870, False, "/lake")),  # the RPC port
    ("hdfs://namenode:8020/lake", 50070, None, WebHdfsAddress("namenode", 50070, False, "/lake")),
    ("hdfs://namenode/lake", None, True, WebHdfsAddress("namenode", 9871, True, "/lake")),
    ("hdfs://namenode", None, None, WebHdfsAddress("namenode", 9870, False, "/")),
    ("hdfs://namenode/a//b/./c", None, None, WebHdfsAddress("namenode", 9870, False, "/a/b/c")),
    ("webhdfs://namenode:50070/lake", None, None, WebHdfsAddress("namenode", 50070, False, "/lake")),
    ("webhdfs://namenode/lake", None, None, WebHdfsAddress("namenode", 9870, False, "/lake")),
    ("swebhdfs://namenode/lake", None, None, WebHdfsAddress("namenode", 9871, True, "/lake")),
    ("HDFS://namenode/lake", None, None, WebHdfsAddress("namenode", 9870, False, "/lake")),
    ("webhdfs://namenode:50070/lake", 9870, None, "webhdfs_port: a webhdfs:// url carries the HTTP port itself"),
    ("swebhdfs://namenode/lake", None, True, "https: a swebhdfs:// url says it already"),
    ("webhdfs://namenode/lake", None, False, "https: a webhdfs:// url says it already"),
    ("s3://bucket/lake", None, None, "url: 's3://bucket/lake' is not an hdfs://"),
    ("/lake", None, None, "url: '/lake' is not an hdfs://"),
    ("hdfs:///lake", None, None, "url: 'hdfs:///lake' names no NameNode"),
    ("hdfs://namenode:port/lake", None, None, "url: 'hdfs://namenode:port/lake' has a port that is not a number"),
    ("hdfs://alice@namenode/lake", None, None, "url: 'hdfs://alice@namenode/lake' has a user, query or fragment"),
    ("hdfs://namenode/lake?op=OPEN", None, None, "url: 'hdfs://namenode/lake?op=OPEN' has a user, query or fragment"),
]


@pytest.mark.parametrize("url, port, https, expected", WEBHDFS_ADDRESSES)
def test_hdfs_urls_name_the_namenodes_webhdfs_address(url, port, https, expected):
    if isinstance(expected, WebHdfsAddress):
        assert webhdfs_address(url, port, https) == expected
        return
    with pytest.raises(ValueError) as raised:
        webhdfs_address(url, port, https)
    assert str(raised.value).startswith(expected)
    # in lumos.yaml the same words come after the entry's place
    entry = {"type": "hdfs", "url": url, **({"webhdfs_port": port} if port else {}),
             **({"https": https} if https is not None else {})}  # fmt: skip
    with pytest.raises(ConfigError) as bad:
        parse_config({"sources": [entry]}, file="lumos.yaml")
    assert f"lumos.yaml: invalid configuration:\n  sources[0]: {expected}" in str(bad.value)


def test_a_lake_on_hdfs_gets_the_schemas_the_same_lake_gets_on_local_disk(hdfs):
    big = lake(hdfs.root / "same")
    cfg_h, on_hdfs = sources_of(hdfs_entry(hdfs, "/same"))
    cfg_l, on_disk = sources_of({"type": "local", "name": "lake", "root": str(hdfs.root / "same")})
    seen = len(hdfs.requests)
    found_h, run_h = snapshot(cfg_h, on_hdfs)
    found_l, run_l = snapshot(cfg_l, on_disk)

    names = ["crm/customers", "misc/export", "readme", "sales/orders", "web/events"]
    assert sorted(found_h) == sorted(found_l) == names
    for name, record in found_l.items():
        # what discovery says is the same, but where the datasets are
        assert found_h[name].platform == "hdfs" and record.platform == "file"
        assert replace(found_h[name], platform="file") == record, name
    assert found_h["misc/export"].format == "parquet" and found_h["sales/orders"].partition_keys == ("dt",)
    for name in found_l:
        h, local = run_h.snapshots[name]["2026-11-24"], run_l.snapshots[name]["2026-11-24"]
        assert not h.errors and not local.errors, (name, h.errors, local.errors)
        assert h.schema == local.schema, name
        assert (h.stats.file_count, h.stats.total_bytes, h.stats.row_count) == (
            local.stats.file_count, local.stats.total_bytes, local.stats.row_count), name  # fmt: skip
    assert run_h.snapshots["sales/orders"]["2026-11-24"].dataset.location == (
        f"hdfs://{hdfs.host}:8020/same/sales/orders")  # fmt: skip
    assert [f.name for f in run_h.snapshots["sales/orders"]["2026-11-24"].schema.fields] == ["id", "user", "payload"]

    asked = hdfs.requests[seen:]
    assert {r["params"].get("user.name") for r in asked} == {"lumos"}
    # each file's bytes came from the DataNode the NameNode redirected to, a footer or first blocks of it
    assert all(r["status"] == 307 for r in asked if r["node"] == "namenode" and r["op"] == "OPEN")
    for path, size in big.items():
        assert 0 < hdfs.sent(f"/same/{path}") < size / 2, (path, hdfs.sent(f"/same/{path}"), size)

    # pool workers (started by spawn for remote files, as Spark executors) read what the loop reads
    source = on_hdfs["lake"]
    items = [(source.uri(e.path), None, source.fs_spec) for e in source.list("sales", ScanReport())]
    assert len(items) == 7 and PoolReader(workers=2)(items) == read_in_process(items)


def test_a_file_written_anew_changes_its_fingerprint_even_at_the_same_size(hdfs):
    folder = hdfs.root / "rewritten"
    partitioned_lake(folder, days=1, files_per_day=1)
    _, sources = sources_of(hdfs_entry(hdfs, "/rewritten"))
    (before,) = sources["lake"].list("", ScanReport())
    path = folder / before.path
    copy = path.with_name("copy")
    shutil.copy(path, copy)
    os.utime(copy, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns))
    copy.replace(path)  # as HDFS writes a file anew: a new inode, here with the same size and time
    (after,) = sources["lake"].list("", ScanReport())
    assert (after.size, after.mtime) == (before.size, before.mtime)
    assert after.fingerprint != before.fingerprint


def test_a_missing_folder_a_refusal_or_no_namenode_fails_the_source_by_name(hdfs):
    partitioned_lake(hdfs.root / "guarded", name="sales/orders")
    partitioned_lake(hdfs.root / "guarded", name="hr/salaries")
    cases = [
        (hdfs_entry(hdfs, "/nowhere"), "does not exist"),
        (hdfs_entry(hdfs, "/guarded/hr"), "cannot be reached: PermissionError: Permission denied: user=lumos"),
        (hdfs_entry(hdfs, "/guarded/sales/orders/dt=2026-11-23/part-0.parquet"), "cannot be reached: "
         "NotADirectoryError: /guarded/sales/orders/dt=2026-11-23/part-0.parquet is a file, not a folder"),
        ({**hdfs_entry(hdfs, "/guarded"), "webhdfs_port": free_port()}, "cannot be reached: ConnectionError"),
    ]  # fmt: skip
    hdfs.deny("/guarded/hr")
    try:
        for entry, problem in cases:
            report = ScanReport()
            assert discover(sources_of(entry)[1], report).records == []
            ((where, reason),) = report.failures
            assert where == "source lake" and reason.startswith(entry["url"] + "/ "), (where, reason)
            assert problem in reason, reason
    finally:
        hdfs.allow_all()


def test_a_folder_or_file_it_may_not_read_fails_alone(hdfs):
    folder = hdfs.root / "partly"
    partitioned_lake(folder, name="sales/orders")
    partitioned_lake(folder, name="sales/refunds")
    partitioned_lake(folder, name="hr/salaries")
    cfg, sources = sources_of(hdfs_entry(hdfs, "/partly"))
    hdfs.deny("/partly/hr")
    try:
        report = ScanReport()
        records = discover(sources, report).records
        assert [r.name for r in records] == ["sales/orders", "sales/refunds"]
        ((where, reason),) = report.failures
        assert where == f"hdfs://{hdfs.host}:8020/partly/hr/" and reason.startswith("cannot list: PermissionError")

        hdfs.deny("/partly/sales/refunds/dt=2026-11-24/part-1.parquet")  # refused after it was listed
        catalogue = resolve_datasets(cfg, records, {"lake": sources["lake"].root})
        run = run_in_process(cfg, catalogue, sources, [DAY])
    finally:
        hdfs.allow_all()
    assert not run.snapshots["sales/orders"]["2026-11-24"].errors
    (error,) = run.snapshots["sales/refunds"]["2026-11-24"].errors
    assert error.path.endswith("/partly/sales/refunds/dt=2026-11-24/part-1.parquet")
    assert "permission denied" in error.reason


def test_a_corrupt_file_fails_only_its_dataset(hdfs):
    folder = hdfs.root / "corrupt"
    partitioned_lake(folder, name="sales/orders")
    partitioned_lake(folder, name="sales/refunds")
    bad = folder / "sales/refunds/dt=2026-11-24/part-0.parquet"
    bad.write_bytes(bad.read_bytes()[:-20] + b"\0" * 20)  # its footer overwritten
    cfg, sources = sources_of(hdfs_entry(hdfs, "/corrupt"))
    _, run = snapshot(cfg, sources)
    assert not run.snapshots["sales/orders"]["2026-11-24"].errors
    refunds = run.snapshots["sales/refunds"]["2026-11-24"]
    (error,) = refunds.errors
    assert error.path == "/corrupt/sales/refunds/dt=2026-11-24/part-0.parquet" and "Parquet" in error.reason
    assert [f.name for f in refunds.schema.fields] == ["id", "user"]  # from the other file of the day


def test_delta_and_iceberg_tables_on_hdfs_snapshot_as_delta_rs_and_pyiceberg_read_them(hdfs):
    from deltalake import DeltaTable, write_deltalake

    from lumos_dagster.formats.arrow import from_arrow_schema

    folder = hdfs.root / "tables"
    delta = folder / "sales/orders"
    write_deltalake(str(delta), pa.table({"id": pa.array([1, 2, 3], pa.int64()), "day": ["2026-11-24"] * 3}),
                    partition_by=["day"])  # fmt: skip
    time.sleep(1.1)  # the second commit file's modification time a second later
    write_deltalake(str(delta), pa.table({"id": pa.array([4, 5], pa.int64()), "day": ["2026-11-25"] * 2,
                                          "amount": [1.5, 2.5]}), mode="append", schema_mode="merge")  # fmt: skip
    catalog = iceberg_catalog(f"file://{hdfs.root / 'warehouse'}", hdfs.root / "iceberg.db")
    events = write_iceberg(catalog, "web.events", f"file://{folder / 'web/events'}")
    cfg, sources = sources_of(hdfs_entry(hdfs, "/tables"))

    first = datetime.fromtimestamp((delta / "_delta_log/00000000000000000000.json").stat().st_mtime, timezone.utc)
    start, later = datetime(2026, 1, 1, tzinfo=timezone.utc), datetime.now(timezone.utc) + timedelta(days=1)
    log = [e.timestamp_ms for e in events.metadata.metadata_log[1:]] + [events.metadata.last_updated_ms]
    ticks = [datetime.fromtimestamp((ms + 1) / 1000, timezone.utc) for ms in log]
    windows = [("a", start, first + timedelta(milliseconds=500)), ("z", start, later)]
    found, run = snapshot(cfg, sources, windows + [(f"i{n}", start, t) for n, t in enumerate(ticks)])
    assert (found["sales/orders"].format, found["web/events"].format) == ("delta", "iceberg")
    assert not run.report.failures, run.report.failures

    for key, version in (("a", 0), ("z", 1)):
        reference = DeltaTable(str(delta), version=version)
        snap = run.snapshots["sales/orders"][key]
        assert not snap.errors, snap.errors
        assert snap.table.version == str(version)
        assert fields(snap.schema) == fields(from_arrow_schema(pa.schema(reference.schema().to_arrow())))
        assert snap.stats.row_count == reference.to_pyarrow_table().num_rows == (3, 5)[version]
        assert snap.stats.file_count == len(reference.file_uris()) and snap.table.partition_spec == ("day",)
    for n in range(len(ticks)):
        snap = run.snapshots["web/events"][f"i{n}"]
        assert not snap.errors, snap.errors
        at = events.snapshot_by_id(int(snap.table.version))
        assert snap.stats.row_count == events.scan(snapshot_id=at.snapshot_id).to_arrow().num_rows
    last = run.snapshots["web/events"]["z"]
    assert fields(last.schema) == [("id", "int64", True), ("path", "string", True), ("session", "string", True)]
    assert last.table.version == str(events.current_snapshot().snapshot_id)
    # delta-rs listed the log in LISTSTATUS_BATCH pages (of one entry here), as OpenDAL does
    assert any(r["op"] == "LISTSTATUS_BATCH" and r["params"].get("startAfter") for r in hdfs.requests)
    catalog.engine.dispose()
