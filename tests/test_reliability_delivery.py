"""Delivery that one bad entry cannot block, and that two deliveries at once never repeat: an entry
the catalog can never take is quarantined (kept, reported, retryable) while the others go through;
outbox entries are claimed, so two `lumos sync`, or a sync beside a run's delivery worker, send each
once, and the claims of a delivery that crashed are taken over when they run out. Each on SQLite and
on the real PostgreSQL server, into real DataHub Lite."""

import multiprocessing
import os
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest
from click.testing import CliRunner

from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog
from lumos_dagster.cli import main
from lumos_dagster.delivery.outbox import deliver
from lumos_dagster.delivery.worker import Delivery
from lumos_dagster.floor.errors import ConfigError
from lumos_dagster.store import SnapshotStore, claim_owner
from lumos_dagster.store.sql_tables import outbox_table
from tests.test_store import record_batch, snap, store_url  # noqa: F401  (store_url: SQLite and PostgreSQL)

pytestmark = pytest.mark.slow

POISON = "urn:lumos:dataset:file:"  # a dataset declared with an empty name, found nowhere: DataHub has no URN for it
WHY = "InvalidUrnError: DatasetUrn name cannot be empty"


def poison(pk: str):
    s = snap("", pk)
    return replace(s, dataset=replace(s.dataset, location=""))


def lite_datasets(path) -> set[str]:
    return {s.dataset.name for s in DataHubLiteCatalog(str(path)).read_all()}


# ------------------------------------------------------------------ quarantine


def test_an_entry_the_catalog_cannot_take_is_quarantined_and_holds_back_no_other(store_url, tmp_path):  # noqa: F811
    with SnapshotStore(store_url) as store:
        catalog = DataHubLiteCatalog(str(tmp_path / "lite.db"))
        store.put([snap("a", "2026-11-24"), poison("2026-11-24"), snap("b", "2026-11-24")], catalogs=[catalog.name])
        report = deliver(store, catalog)
        assert (report.delivered, report.failed, report.quarantined) == (2, {}, {POISON: WHY})
        assert store.outbox_counts(catalog.name) == {"delivered": 2, "quarantined": 1}
        assert [(u, e) for u, _, e, _ in store.outbox_errors(catalog.name, status="quarantined")] == [(POISON, WHY)]

        # later deliveries skip it: another dataset goes through at once
        store.put([snap("c", "2026-11-25")], catalogs=[catalog.name])
        report = deliver(store, catalog)
        assert (report.delivered, report.failed, report.quarantined) == (1, {}, {})
        assert lite_datasets(tmp_path / "lite.db") == {"a", "b", "c"}

        # retryable: queued again, tried again (and kept again, as it still cannot be built)
        assert store.retry_quarantined(catalog.name) == 1
        report = deliver(store, catalog)
        assert (report.delivered, report.quarantined) == (0, {POISON: WHY})
        assert [a for _, a, _, _ in store.outbox_errors(catalog.name, status="quarantined")] == [2]
        catalog.close()


def test_an_entry_gms_refuses_with_a_4xx_is_quarantined_and_a_gms_that_refuses_everyone_is_down(tmp_path):
    """GMS's 422 for one dataset of a batch quarantines that dataset and delivers the rest; a 401 (a wrong
    token) is the catalog being down: every entry waits. The GMS is tests/fake_servers.FakeGMS (no GMS
    can run here)."""
    from lumos_dagster.catalog.datahub_rest import DataHubRestCatalog
    from tests.fake_servers import FakeGMS

    bad = "urn:li:dataset:(urn:li:dataPlatform:file,lake/b,PROD)"
    server = FakeGMS(token="t0k", refuse=(bad,)).start()
    try:
        with SnapshotStore(f"sqlite:///{tmp_path}/store.db") as store:
            wrong = DataHubRestCatalog(server.url, token="wrong", retries=0)
            store.put([snap(n, "2026-11-24") for n in "abc"], catalogs=[wrong.name])
            report = deliver(store, wrong)  # the catalog is down: nothing is quarantined, everything waits
            assert (report.delivered, report.quarantined) == (0, {}) and len(report.failed) == 3
            assert all("authentication error" in error for error in report.failed.values()), report.failed

            catalog = DataHubRestCatalog(server.url, token="t0k", retries=0)
            report = deliver(store, catalog)
            assert report.delivered == 2 and list(report.quarantined) == ["urn:lumos:dataset:file:b"]
            why = report.quarantined["urn:lumos:dataset:file:b"]
            assert "DataHub GMS refused it (HTTP 422)" in why and "Failed to validate entity URN" in why
            delivered = {u for u, _ in server.aspects if u.startswith("urn:li:dataset")}
            assert delivered == {f"urn:li:dataset:(urn:li:dataPlatform:file,lake/{n},PROD)" for n in "ac"}
    finally:
        server.stop()


@pytest.mark.parametrize("kind", ["openlineage", "openmetadata"])
def test_an_entry_openlineage_or_openmetadata_refuses_is_quarantined_and_the_rest_delivered_once(kind, tmp_path):
    """The server refuses one dataset of the batch (Marquez 422, OpenMetadata 400): that one is quarantined,
    the others are delivered, lineage included, and none is sent twice. The servers are tests/fake_servers
    (neither Marquez nor OpenMetadata can run here)."""
    from dataclasses import replace

    from lumos_dagster.catalog.openlineage import OpenLineageCatalog
    from lumos_dagster.catalog.openmetadata import OpenMetadataCatalog
    from lumos_dagster.floor.model import DatasetRef, LineageEdge
    from tests.fake_servers import FakeOpenLineage, FakeOpenMetadata

    if kind == "openlineage":
        server = FakeOpenLineage(refuse=("raw/b",)).start()
        catalog = OpenLineageCatalog("lumos", url=server.url)
    else:
        server = FakeOpenMetadata().start()
        server.refuse_tables.add("b")
        catalog = OpenMetadataCatalog(server.url, retries=0)
    try:
        a, b = snap("raw/a", "2026-11-24"), snap("raw/b", "2026-11-24")
        c = replace(snap("raw/c", "2026-11-24"), upstream=(LineageEdge(DatasetRef("file", "raw/a", "/lake/raw/a")),))
        with SnapshotStore(f"sqlite:///{tmp_path}/store.db") as store:
            store.put([a, b, c], catalogs=[catalog.name])
            report = deliver(store, catalog)
            assert report.delivered == 2 and report.failed == {}
            assert list(report.quarantined) == ["urn:lumos:dataset:file:raw/b"]
            assert "refused it (HTTP 4" in report.quarantined["urn:lumos:dataset:file:raw/b"]
            assert store.outbox_counts(catalog.name) == {"delivered": 2, "quarantined": 1}
        if kind == "openlineage":
            assert sorted(e["dataset"]["name"] for e in server.events) == ["raw/a", "raw/c"]  # each once
        else:
            tables = server.entities["tables"]
            assert sorted(tables) == ["lumos.lake.raw.a", "lumos.lake.raw.c"]
            assert server.lineage == {(tables["lumos.lake.raw.a"]["id"], tables["lumos.lake.raw.c"]["id"])}
            assert sum(1 for m, p, _ in server.requests if m == "PUT" and p == "/api/v1/tables") == 3
    finally:
        server.stop()


def test_lumos_sync_reports_a_quarantined_entry_in_one_line_and_retries_it_on_demand(tmp_path):
    lite = tmp_path / "lite.db"
    (tmp_path / "lumos.yaml").write_text(f"catalog:\n  type: datahub-lite\n  path: {lite}\nstore:\n  path: store.db\n")
    with SnapshotStore(f"sqlite:///{tmp_path}/store.db") as store:
        store.put([poison("2026-11-24"), snap("a", "2026-11-24")], catalogs=[f"datahub-lite:{lite}"])

    def sync(*args):
        return CliRunner().invoke(main, ["sync", "-c", str(tmp_path / "lumos.yaml"), *args])

    first = sync()
    assert first.exit_code == 1 and isinstance(first.exception, SystemExit)  # no traceback
    assert "1 delivered, 0 unchanged, 0 superseded, 0 failed, 1 quarantined" in first.stdout
    assert f"  quarantined {POISON}: {WHY}\n" in first.stdout
    assert "lumos sync --retry-quarantined" in first.stdout
    assert lite_datasets(lite) == {"a"}

    again = sync()  # nothing new failed: done, and what stays quarantined is still listed
    assert again.exit_code == 0 and "0 delivered" in again.stdout and f"quarantined {POISON}: {WHY}" in again.stdout
    status = sync("--status")
    assert f"datahub-lite:{lite}: 1 delivered, 1 quarantined" in status.stdout and POISON in status.stdout
    retried = sync("--retry-quarantined")
    assert "1 quarantined queued again" in retried.stdout and retried.exit_code == 1
    assert "0 delivered, 0 unchanged, 0 superseded, 0 failed, 1 quarantined" in retried.stdout


def test_a_run_of_other_datasets_is_not_held_back_by_a_quarantined_entry(store_url, tmp_path):  # noqa: F811
    path = str(tmp_path / "lite.db")
    with SnapshotStore(store_url) as store:
        store.put([poison("2026-11-24")], catalogs=[DataHubLiteCatalog(path).name])  # left by an earlier run
    warnings: list[str] = []
    recorder = Delivery(store_url, lambda: [DataHubLiteCatalog(path)], warnings.append)  # the run's delivery worker
    for batch in ([snap(f"r{i}", "2026-11-25") for i in range(3)], [snap("r3", "2026-11-25")]):
        assert record_batch(recorder, batch) == {}
    assert recorder.finish() == {}  # no catalog is down, nothing of the run is left queued
    assert warnings == [] and recorder.down == {}
    assert lite_datasets(path) == {"r0", "r1", "r2", "r3"}
    with SnapshotStore(store_url) as store:
        assert store.outbox_counts(DataHubLiteCatalog(path).name) == {"delivered": 4, "quarantined": 1}


def test_the_delivery_worker_builds_the_catalogs_and_the_run_only_learns_their_names(store_url, tmp_path):  # noqa: F811
    path = str(tmp_path / "lite.db")
    recorder = Delivery(store_url, lambda: [DataHubLiteCatalog(path)], print)
    try:
        assert recorder.names == [DataHubLiteCatalog(path).name]
        assert recorder.catalogs == []  # none built in the run's process: the worker has them
    finally:
        recorder.finish()


def test_a_run_that_recorded_nothing_finishes_its_delivery_worker(store_url, tmp_path):  # noqa: F811
    recorder = Delivery(store_url, lambda: [DataHubLiteCatalog(str(tmp_path / "lite.db"))], print)
    assert recorder.finish() == {}  # every dataset held back, say: the names come first, then the last round
    assert not recorder._worker.is_alive()


def test_a_catalog_that_cannot_be_built_fails_the_recording_with_its_own_error(store_url):  # noqa: F811
    def unbuildable():
        raise ConfigError("catalog[0].token_env: LUMOS_GMS_TOKEN is not set")

    for background in (True, False):  # built by the delivery worker, or here
        with pytest.raises(ConfigError, match="LUMOS_GMS_TOKEN is not set"):
            record_batch(Delivery(store_url, unbuildable, print, background=background), [snap("a", "2026-11-25")])
    with SnapshotStore(store_url) as store:
        assert [d.name for d in store.datasets()] == []  # nothing stored under no catalog


# ---------------------------------------------------------- claims and leases


class RecordingLite(DataHubLiteCatalog):
    """Real DataHub Lite that appends each snapshot it sends to a log file (one line each, shared by
    processes), slowly enough for deliveries running at once to overlap."""

    def __init__(self, path: str, log: str, crash: bool = False):
        super().__init__(path)
        self.log, self.crash = log, crash

    def emit(self, snapshots, before=None):
        if self.crash:
            os._exit(1)  # a sync killed mid-delivery: its claims stay behind
        time.sleep(0.3)
        with open(self.log, "a") as fh:  # O_APPEND: lines of two processes never mix
            fh.write("".join(f"{s.dataset.name}@{s.partition_key}\n" for s in snapshots))
        return super().emit(snapshots, before)


def sent(log) -> list[str]:
    return sorted(log.read_text().split()) if log.exists() else []


def _sync(url: str, path: str, log: str, start=None, crash: bool = False, lease: float = 300.0) -> None:
    """What `lumos sync` does for a catalog; at once with another, when `start` is their barrier."""
    with SnapshotStore(url) as store:
        if start is not None:
            start.wait(60)
        deliver(store, RecordingLite(path, log, crash), lease=lease)


def _fork(target, *args):
    process = multiprocessing.get_context("fork").Process(target=target, args=args)
    process.start()
    return process


def test_two_syncs_at_once_deliver_each_entry_exactly_once(store_url, tmp_path):  # noqa: F811
    path, log = str(tmp_path / "lite.db"), tmp_path / "sent.log"
    names = [f"d{i}" for i in range(30)]
    with SnapshotStore(store_url) as store:
        store.put([snap(n, "2026-11-25") for n in names], catalogs=[DataHubLiteCatalog(path).name])
    start = multiprocessing.get_context("fork").Barrier(2)
    syncs = [_fork(_sync, store_url, path, str(log), start) for _ in range(2)]
    for p in syncs:
        p.join(120)
        assert p.exitcode == 0
    assert sent(log) == sorted(f"{n}@2026-11-25" for n in names)  # each once, by one sync or the other
    assert lite_datasets(path) == set(names)
    with SnapshotStore(store_url) as store:
        assert store.outbox_counts(DataHubLiteCatalog(path).name) == {"delivered": 30}


def _syncs_until(url: str, path: str, log: str, start, stop) -> None:
    with SnapshotStore(url) as store:
        start.wait(60)
        while not stop.is_set():
            deliver(store, RecordingLite(path, log))


def test_a_sync_during_a_run_delivers_each_entry_once_and_loses_nothing(store_url, tmp_path):  # noqa: F811
    path, log = str(tmp_path / "lite.db"), tmp_path / "sent.log"
    ctx = multiprocessing.get_context("fork")
    start, stop = ctx.Barrier(2), ctx.Event()
    SnapshotStore(store_url).close()  # the tables, before the race
    syncing = _fork(_syncs_until, store_url, path, str(log), start, stop)
    recorder = Delivery(store_url, lambda: [RecordingLite(path, str(log))], lambda _: None)
    start.wait(60)
    for b in range(6):  # the run's batches, each handed to its delivery worker as it goes on
        record_batch(recorder, [snap(f"b{b}-{i}", "2026-11-25") for i in range(5)])
        time.sleep(0.2)
    assert recorder.finish() == {}
    stop.set()
    syncing.join(120)
    assert syncing.exitcode == 0
    names = [f"b{b}-{i}" for b in range(6) for i in range(5)]
    assert sent(log) == sorted(f"{n}@2026-11-25" for n in names)  # each once, by the run or the sync
    assert lite_datasets(path) == set(names)
    with SnapshotStore(store_url) as store:
        assert store.outbox_counts(DataHubLiteCatalog(path).name) == {"delivered": 30}


def test_the_claims_of_a_sync_that_crashed_are_taken_over_at_once_on_its_host(store_url, tmp_path):  # noqa: F811
    path, log = str(tmp_path / "lite.db"), tmp_path / "sent.log"
    with SnapshotStore(store_url) as store:
        store.put([snap(f"d{i}", "2026-11-25") for i in range(3)], catalogs=[DataHubLiteCatalog(path).name])
    crashed = _fork(_sync, store_url, path, str(log), None, True, 300.0)  # a lease far longer than the test
    crashed.join(60)
    assert crashed.exitcode == 1
    with SnapshotStore(store_url) as store:
        catalog = RecordingLite(path, str(log))
        assert deliver(store, catalog).delivered == 3  # its process is gone: nobody can be sending them
        catalog.close()
    assert sent(log) == ["d0@2026-11-25", "d1@2026-11-25", "d2@2026-11-25"]


def test_the_claims_of_a_live_process_or_another_host_are_taken_over_when_they_run_out(store_url, tmp_path):  # noqa: F811
    path, log = str(tmp_path / "lite.db"), tmp_path / "sent.log"
    here = claim_owner()  # this process: alive
    elsewhere = f"{int(here[:8], 16) ^ 1:08x}{here[8:]}"  # the same pid on another host: unknown
    for owner in (here, elsewhere):
        name = DataHubLiteCatalog(path).name
        with SnapshotStore(store_url) as store:
            store.put([snap(f"{owner[:9]}-{i}", "2026-11-25") for i in range(3)], catalogs=[name])
            assert len(store.claim(name, owner, 300.0)) == 3
            catalog = RecordingLite(path, str(log))
            assert deliver(store, catalog).delivered == 0  # still claimed: its owner might be sending
            # the lease runs out (moved into the past rather than waited for: no timing in the test)
            with store.engine.begin() as conn:
                conn.execute(outbox_table.update().where(outbox_table.c.claimed_by == owner)
                             .values(claimed_until=datetime.now(timezone.utc) - timedelta(seconds=1)))  # fmt: skip
            assert deliver(store, catalog).delivered == 3  # its lease ran out: taken over
            catalog.close()


def test_a_delivery_sends_the_fingerprint_the_store_recorded(store_url, tmp_path):  # noqa: F811
    """The catalog's schema hash is the one recorded with the snapshot (an earlier Lumos may have hashed
    differently), not the schema hashed again from the stored document."""
    import json
    import sqlite3

    recorded = snap("a", "2026-11-24")
    recorded.schema.recorded_with("0123456789abcdef")
    fresh = snap("a", "2026-11-24").fingerprint
    assert fresh != "0123456789abcdef"
    with SnapshotStore(store_url) as store:
        catalog = DataHubLiteCatalog(str(tmp_path / "lite.db"))
        store.put([recorded], catalogs=[catalog.name])
        assert deliver(store, catalog).delivered == 1
        catalog.close()
    with sqlite3.connect(tmp_path / "lite.db") as db:
        (text,) = db.execute("SELECT metadata FROM metadata_aspect_v2 WHERE aspect_name = 'schemaMetadata'").fetchone()
    assert json.loads(text)["hash"] == "0123456789abcdef"
