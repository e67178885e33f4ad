"""Batched DataHub Lite writes (lite_batch.py) against DataHub Lite's own.

`BatchedSqliteLite` re-implements `SqlBackedLite.write()`'s versioning and calls DataHub's browse
hooks itself, through members DataHub does not document. These tests write the same MCPs through
stock `write()` + `close()` (which reindexes) and through `write_batch`, and require the same file:
every aspect row, version and system metadata (but the clock), and every browse edge. An
acryl-datahub upgrade that changes those rules fails here, not in a user's catalog."""

import json
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata.schema_classes import (
    AuditStampClass,
    ContainerClass,
    CostClass,
    CostCostClass,
    CostTypeClass,
    DatasetPropertiesClass,
    MetadataChangeProposalClass,
    StatusClass,
    StructuredPropertiesClass,
    StructuredPropertyValueAssignmentClass,
)

from benchmarks.micro import catalog_snapshots
from lumos_dagster.catalog.aspect_json import aspect_text, datahub_aspect_text
from lumos_dagster.catalog.datahub import DataHubCatalog
from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog, lite_config, lite_options, open_lite
from lumos_dagster.catalog.lite_batch import open_batched
from lumos_dagster.catalog.patch_apply import IfAbsent, patched, state_of
from lumos_dagster.floor.datatypes import Schema
from lumos_dagster.floor.model import DatasetRef
from tests.test_catalogs import estate

pytestmark = [pytest.mark.servers, pytest.mark.slow]

BIN = Path(sys.executable).parent
ORDERS = "urn:li:dataset:(urn:li:dataPlatform:file,lake/sales/orders,PROD)"
ROOT = Path(__file__).resolve().parents[1]


def first_snapshots():
    """The richest estate (jobs, terms, assertions on two platforms, folders), 30 benchmark
    datasets (10 a folder, lineage), and one at the top level (no folder: the platform's edges)."""
    top = replace(catalog_snapshots(1)[0], dataset=DatasetRef("file", "top_level", "/lake/top_level", "csv"))
    return estate() + catalog_snapshots(30) + [top]


def mcps(snapshots) -> list:
    """Fresh proposals (stock write() stamps systemMetadata on the ones it gets)."""
    return DataHubCatalog("test").aspects(snapshots)


def renamed(s, prefix: str):
    """The snapshot of another dataset, elsewhere: `prefix` before its name and its location."""
    return replace(s, dataset=replace(s.dataset, name=prefix + s.dataset.name,
                                      location=f"/{prefix.rstrip('/')}{s.dataset.location}"))  # fmt: skip


def file_state(path) -> tuple[dict, set]:
    """Every aspect row (system metadata without the clock) and every browse edge."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = {}
        for urn, name, version, metadata, system in db.execute(
            "SELECT urn, aspect_name, version, metadata, system_metadata FROM metadata_aspect_v2"
        ):
            system = json.loads(system)
            system.pop("lastObserved", None)
            rows[urn, name, version] = (metadata, system)
        edges = set(db.execute("SELECT src_id, relnship, dst_id, dst_label FROM metadata_edge_v2"))
        return rows, edges
    finally:
        db.close()


def stock_write(lite, proposals) -> None:
    """Stock write(), which takes no PATCH: a patch is applied here to what the file has (DataHub
    Lite's own `get`) and written whole, as is an `IfAbsent` aspect the entity lacks."""
    for p in proposals:
        if isinstance(p, (MetadataChangeProposalClass, IfAbsent)):
            current = (lite.get(p.entityUrn, [p.aspectName], typed=True) or {}).get(p.aspectName)
            if isinstance(p, IfAbsent) and current is not None:
                continue
            aspect = p.aspect if isinstance(p, IfAbsent) else patched(p, current)
            p = MetadataChangeProposalWrapper(entityUrn=p.entityUrn, aspect=aspect)
        lite.write(p)


def write_stock(path, rounds) -> None:
    for batch in rounds:
        lite = open_lite(str(path))
        stock_write(lite, batch)
        lite.close()  # stock close(): reindex of every entity


def write_batched(path, rounds, size=None) -> None:
    for batch in rounds:
        lite = open_batched(str(path), lite_options())
        for start in range(0, len(batch), size or len(batch) or 1):
            lite.write_batch(batch[start : start + (size or len(batch))])
        lite.close()  # no reindex


def versions(rows: dict) -> dict:
    return {(u, a): s["properties"]["sysVersion"] for (u, a, v), (_, s) in rows.items() if v == 0}


def test_aspect_text_is_datahubs_text_for_every_aspect_lumos_writes():
    written = state_of(mcps(first_snapshots() + [replace(estate()[0], removed=True)]))  # patches applied
    assert len({name for _, name in written}) >= 20
    for (urn, name), aspect in written.items():
        assert aspect_text(aspect) == datahub_aspect_text(aspect), (urn, name)


def test_aspect_text_hands_what_it_does_not_resolve_itself_to_datahub():
    others = [
        CostClass(costType=CostTypeClass.ORG_COST_TYPE, cost=CostCostClass(fieldDiscriminator="costId", costId=4.0)),
        StructuredPropertiesClass(  # a union of string and number: resolved by validating, DataHub's way
            [StructuredPropertyValueAssignmentClass("urn:li:structuredProperty:p", ["a", 1.5], AuditStampClass(0, "x"))]
        ),
        DatasetPropertiesClass(customProperties={"com.linkedin.pegasus2avro.key": "a map's only key"}, name="n"),
    ]
    for aspect in others:
        assert aspect_text(aspect) == datahub_aspect_text(aspect), aspect


def test_batched_writes_give_the_file_stock_datahub_lite_writes(tmp_path):
    first = first_snapshots()
    changed = [replace(s, description="Reworded.") for s in first[:20]]
    changed.append(replace(first[5], schema=Schema(first[5].schema.fields[:-1]), version="2.0.0"))
    rounds = {
        "first": lambda: [mcps(first)],
        "same again": lambda: [mcps(first), mcps(first)],
        "changed": lambda: [mcps(first), mcps(first), mcps(changed)],
    }
    for name, make in rounds.items():
        stock, batched = tmp_path / f"stock-{name}.db", tmp_path / f"batched-{name}.db"
        write_stock(stock, make())
        write_batched(batched, make(), size=57)  # batches that split datasets' aspects apart
        (stock_rows, stock_edges), (rows, edges) = file_state(stock), file_state(batched)
        assert rows == stock_rows, name
        assert edges == stock_edges, name
        assert len(edges) > 100 and len(rows) > 400

    (rows, _), (again, _) = file_state(tmp_path / "batched-first.db"), file_state(tmp_path / "batched-same again.db")
    assert versions(again) == versions(rows) and set(versions(rows).values()) == {"1"}  # same content: no version
    bumped = {k for k, v in versions(file_state(tmp_path / "batched-changed.db")[0]).items() if v != "1"}
    orders = ORDERS
    assert (orders, "datasetProperties") in bumped and (orders, "schemaMetadata") not in bumped
    narrower = "urn:li:dataset:(urn:li:dataPlatform:file,lake/domain_000/ds_00002,PROD)"  # a field fewer
    assert (narrower, "schemaMetadata") in bumped and (narrower, "status") not in bumped


def test_one_batch_may_change_an_aspect_several_times_and_move_an_entity(tmp_path):
    """Within one batch: a status flipped and flipped back (versions 1, 2, 3 as stock gives), and
    a dataset moved to another container (its old place in the browse tree goes, as in a reindex)."""
    snapshots = first_snapshots()[:5]
    orders = ORDERS
    other = next(m.aspect.container for m in mcps(snapshots[3:4]) if m.aspectName == "container")

    def extra():
        return [
            MetadataChangeProposalWrapper(entityUrn=orders, aspect=StatusClass(removed=True)),
            MetadataChangeProposalWrapper(entityUrn=orders, aspect=StatusClass(removed=False)),
            MetadataChangeProposalWrapper(entityUrn=orders, aspect=ContainerClass(container=other)),
        ]

    stock, batched = tmp_path / "stock.db", tmp_path / "batched.db"
    write_stock(stock, [mcps(snapshots), mcps(snapshots) + extra()])
    write_batched(batched, [mcps(snapshots), mcps(snapshots) + extra()])
    assert file_state(batched) == file_state(stock)
    assert versions(file_state(batched)[0])[orders, "status"] == "3"


def test_a_file_an_older_writer_left_unindexed_is_indexed_when_opened(tmp_path):
    """Stock write() adds browse edges only in close(): a run killed before it left entities out of
    `datahub lite ls`. The catalog puts them in when it opens the file."""
    path = tmp_path / "lite.db"
    lite = open_lite(str(path))
    stock_write(lite, mcps(first_snapshots()))
    lite._close_connection()  # as if killed: no close(), no reindex
    reference = tmp_path / "reference.db"
    copy_db(path, reference)
    open_lite(str(reference)).close()  # what stock close() would have made of it
    catalog = DataHubLiteCatalog(str(path))
    catalog.emit(estate()[:1])
    catalog.close()
    assert file_state(path)[1] == file_state(reference)[1]
    again = open_batched(str(path), lite_options())
    assert again.index_unplaced() == 0  # nothing left out: opening a file is one query, no reindex
    again.close()


WRITER = textwrap.dedent(
    """
    import itertools, sys, time
    from dataclasses import replace
    sys.path.insert(0, {root!r})
    from benchmarks.micro import catalog_snapshots
    from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog
    from tests.test_lite_batch import renamed

    snapshots = catalog_snapshots({batch})
    catalog = DataHubLiteCatalog({path!r})
    for run in itertools.count():  # batches of new datasets until killed
        catalog.emit([renamed(s, f"r{{run:04d}}/") for s in snapshots])
        print((run + 1) * {batch}, flush=True)
        time.sleep(0.05)  # a run reads between its writes; it keeps the file small for the checks
    """
)


def copy_db(source, target) -> None:
    """A copy of a SQLite file with what its WAL holds (SQLite's backup API)."""
    src, dst = sqlite3.connect(source), sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()


def dataset_count(path) -> int:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        return db.execute(
            "SELECT count(*) FROM metadata_aspect_v2 WHERE version = 0 AND aspect_name = 'datasetProperties'"
        ).fetchone()[0]
    finally:
        db.close()


def writing(path) -> bool:
    """Someone holds the file's write lock: a batch is being written."""
    db = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        db.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError:
        return True
    finally:
        db.close()


def datahub_lite(tmp_path, *args) -> subprocess.CompletedProcess:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    lite = lite_config(str(tmp_path / "lite.db"), read_only=True)
    (home / ".datahubenv").write_text(yaml.safe_dump({"gms": {"server": "http://localhost:8080"}, "lite": lite}))
    env = {**os.environ, "HOME": str(home), "DATAHUB_TELEMETRY_ENABLED": "false"}
    return subprocess.run([BIN / "datahub", "lite", *args], capture_output=True, text=True, env=env, timeout=120)


def test_readers_see_whole_batches_while_a_run_writes_and_a_kill_leaves_whole_batches(tmp_path):
    path, batch = tmp_path / "lite.db", 100
    script = WRITER.format(root=str(ROOT), path=str(path), batch=batch)
    writer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert int(writer.stdout.readline()) == batch  # the first batch is in
        seen = set()
        while len(seen) < 6:  # the reader's view while batches land
            count = dataset_count(path)
            assert count % batch == 0, count  # never half a batch
            seen.add(count)
            time.sleep(0.01)
        out = datahub_lite(tmp_path, "ls", "/")  # DataHub's own CLI reads the file meanwhile
        assert out.returncode == 0 and "data_platforms" in out.stdout, out.stderr[-2000:]
        while not writing(path):  # kill -9 while a batch is being written
            time.sleep(0.001)
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait(30)
        committed = int(writer.stdout.read().split()[-1])  # the writer's last whole batch
    finally:
        if writer.poll() is None:
            writer.kill()
        writer.stdout.close()

    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    db.close()
    count = dataset_count(path)
    assert count % batch == 0 and count >= max(seen)
    assert count in (committed, committed + batch)  # the batch being written is gone (or was just done)
    # every browse edge a full reindex would give the file is there, and no other
    reindexed = tmp_path / "reindexed.db"
    copy_db(path, reindexed)
    open_lite(str(reindexed)).close()
    assert file_state(path)[1] == file_state(reindexed)[1]
    # and the next run completes on the same file
    catalog = DataHubLiteCatalog(str(path))
    catalog.emit(catalog_snapshots(batch))
    catalog.close()
    assert dataset_count(path) == count + batch
    out = datahub_lite(
        tmp_path, "get", "--urn", "urn:li:dataset:(urn:li:dataPlatform:file,r0000/lake/domain_000/ds_00001,PROD)"
    )
    assert out.returncode == 0, out.stderr[-2000:]
    properties = json.loads(out.stdout)["datasetProperties"]["customProperties"]
    assert properties["lumos.dataset"] == "r0000/domain_000/ds_00001"


def _emit_runs(path: str, worker: int, batches: int) -> None:
    snapshots = catalog_snapshots(20)
    catalog = DataHubLiteCatalog(path)
    for b in range(batches):
        catalog.emit([renamed(s, f"w{worker}-b{b}/") for s in snapshots])
    catalog.close()


def test_two_runs_writing_one_file_at_once_lose_nothing(tmp_path):
    path = str(tmp_path / "lite.db")
    first = DataHubLiteCatalog(path)
    first.emit(catalog_snapshots(1))  # the tables exist before the race
    first.close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_emit_runs, args=(path, w, 5)) for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert dataset_count(path) == 1 + 2 * 5 * 20
    reindexed = tmp_path / "reindexed.db"
    copy_db(path, reindexed)
    open_lite(str(reindexed)).close()
    assert file_state(path) == file_state(reindexed)  # the browse tree is whole: a full reindex changes nothing
