"""The snapshot store on SQLite and on the real PostgreSQL server, and outbox delivery."""

import dataclasses
import json
import multiprocessing
import uuid
from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa

from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog, open_lite
from lumos_dagster.delivery.outbox import deliver
from lumos_dagster.floor.datatypes import Field, Primitive, Schema
from lumos_dagster.floor.errors import StoreError
from lumos_dagster.floor.model import DatasetRecord, DatasetRef, Snapshot
from lumos_dagster.store import SnapshotStore
from lumos_dagster.store.sql_tables import SCHEMA_VERSION, outbox_table, snapshots_table
from tests.conftest import lite_aspect_versions

PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
T0 = datetime(2026, 11, 20, tzinfo=timezone.utc)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/store.db"
        return
    schema = f"lumos_test_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(PG)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    yield f"{PG}?options=-csearch_path%3D{schema}"
    with admin.begin() as conn:
        conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()


def snap(name: str, pk: str, n_fields: int = 1, minutes: int = 0) -> Snapshot:
    fields = tuple(Field(f"f{i}", Primitive("int64")) for i in range(n_fields))
    return Snapshot(
        DatasetRef("file", name, f"/lake/{name}", "parquet"),
        pk,
        T0 + timedelta(minutes=minutes),
        schema=Schema(fields),
        version=f"1.{n_fields}.0",
    )


def record_batch(delivery, snapshots) -> dict[str, int]:
    """What a run does with a batch (`run.record`, then its delivery): store the captures versioned,
    queued for the delivery's catalogs, and deliver; what each catalog that is down still has queued."""
    from lumos_dagster.run.record import store_versioned

    with SnapshotStore(delivery.store.url) as store:
        store_versioned(store, snapshots, delivery.names)
    return delivery.deliver()


def test_registry_upsert_keeps_first_seen_and_updates_counts(store_url):
    store = SnapshotStore(store_url)
    rec = DatasetRecord("raw/a", "file", "lake", "raw/a", "parquet", "raw", ("dt",), "dt", "%Y-%m-%d", 3, 300)
    store.upsert_datasets([rec])
    store.upsert_datasets(
        [DatasetRecord("raw/a", "file", "lake", "raw/a", "parquet", "raw", ("dt",), "dt", "%Y-%m-%d", 5, 500)]
    )
    (got,) = store.datasets()
    assert (got.file_count, got.total_bytes, got.partition_keys, got.time_partition_key) == (5, 500, ("dt",), "dt")
    assert got.urn == "urn:lumos:dataset:file:raw/a"
    store.close()


def test_a_code_location_reads_the_datasets_of_its_own_sources_only(store_url):
    # a location of an estate in many locations must not read (and pay for) every other location's
    with SnapshotStore(store_url) as store:
        store.upsert_datasets(
            [DatasetRecord(f"d{i}/t", "file", f"part{i}", f"/lake/d{i}/t", "parquet") for i in range(3)]
        )
        assert [r.source for r in store.datasets(sources=["part2", "part0"])] == ["part0", "part2"]
        assert store.datasets(sources=[]) == []
        assert len(store.datasets()) == 3


def test_history_previous_and_latest(store_url):
    store = SnapshotStore(store_url)
    store.put(
        [snap("a", "2026-11-20", 1), snap("a", "2026-11-22", 2), snap("a", "2026-11-21", 3), snap("b", "2026-11-21")]
    )
    store.put([snap("a", "2026-11-22", 4, minutes=5)])  # a re-capture of an existing partition
    urn = "urn:lumos:dataset:file:a"
    assert [len(s.schema.fields) for s in store.history(urn)] == [1, 3, 2, 4]
    assert len(store.latest(urn).schema.fields) == 4
    assert len(store.latest(urn, "2026-11-21").schema.fields) == 3
    assert len(store.previous(urn, "2026-11-21").schema.fields) == 3  # its own earlier capture counts
    assert len(store.previous(urn, "2026-11-20").schema.fields) == 1
    assert store.previous(urn, "2026-11-19") is None
    assert store.latest("urn:lumos:dataset:file:nope") is None
    store.close()


class FlakyCatalog(DataHubLiteCatalog):
    """A real DataHub Lite catalog behind a switch that makes it refuse every write."""

    def __init__(self, path: str):
        super().__init__(path)
        self.down = True
        self.sent: list[str] = []

    def emit(self, snapshots, before=None):
        if self.down:
            raise ConnectionRefusedError("catalog is down")
        self.sent += [s.dataset.urn for s in snapshots]
        return super().emit(snapshots, before)


def test_a_catalog_that_is_down_delays_metadata_and_never_loses_or_repeats_it(store_url, tmp_path):
    store = SnapshotStore(store_url)
    catalog = FlakyCatalog(str(tmp_path / "catalog.db"))
    names = [f"d{i}" for i in range(5)]
    store.put([snap(n, "2026-11-24") for n in names], catalogs=[catalog.name])
    report = deliver(store, catalog)
    assert report.delivered == 0 and set(report.failed) == set(names)
    assert store.outbox_counts(catalog.name) == {"pending": 5}

    store.put([snap(n, "2026-11-25", 2) for n in names], catalogs=[catalog.name])  # the next run, still down
    deliver(store, catalog)
    catalog.down = False
    report = deliver(store, catalog)
    assert report.delivered == 5 and not report.failed
    assert store.outbox_counts(catalog.name) == {"delivered": 5, "superseded": 5}  # the older day never needed
    assert sorted(catalog.sent) == sorted(f"urn:lumos:dataset:file:{n}" for n in names)  # each once, newest only
    lite = open_lite(str(tmp_path / "catalog.db"), read_only=True)
    try:
        for n in names:
            got = lite.get(
                f"urn:li:dataset:(urn:li:dataPlatform:file,lake/{n},PROD)", aspects=["schemaMetadata"], typed=True
            )
            assert [f.fieldPath.rsplit(".", 1)[-1] for f in got["schemaMetadata"].fields] == ["f0", "f1"]
    finally:
        lite.close()

    versions = lite_aspect_versions(str(tmp_path / "catalog.db"))
    store.put([snap(n, "2026-11-25", 2) for n in names], catalogs=[catalog.name])  # same content again
    report = deliver(store, catalog)
    assert (report.delivered, report.unchanged) == (0, 5)  # nothing sent: the catalog has it
    assert lite_aspect_versions(str(tmp_path / "catalog.db")) == versions
    assert len(catalog.sent) == 5
    assert store.outbox_counts(catalog.name) == {"delivered": 5, "superseded": 5, "unchanged": 5}
    store.close()


def test_a_backfill_of_old_partitions_does_not_overwrite_a_newer_one(store_url, tmp_path):
    store = SnapshotStore(store_url)
    catalog = FlakyCatalog(str(tmp_path / "catalog.db"))
    catalog.down = False
    store.put([snap("a", "2026-11-25", 3)], catalogs=[catalog.name])
    deliver(store, catalog)
    store.put([snap("a", "2026-11-01", 1)], catalogs=[catalog.name])
    report = deliver(store, catalog)
    assert (report.delivered, report.superseded) == (0, 1)
    assert catalog.sent == ["urn:lumos:dataset:file:a"]
    store.close()


def _writer(url: str, worker: int, n: int) -> None:
    store = SnapshotStore(url)
    for i in range(n):
        store.put([snap(f"w{worker}-{i}", "2026-11-25")], catalogs=["c"])
    store.close()


def _two_at_once(target, store_url: str, n: int) -> None:
    """Two processes running `target(store_url, worker, n)` at the same time; both must succeed."""
    SnapshotStore(store_url).close()  # create the tables before the race
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=target, args=(store_url, w, n)) for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0  # e.g. no unique-key error from two writers creating one row


@pytest.mark.slow  # processes racing: make test, not the inner loop
def test_two_runs_writing_at_once_lose_nothing(store_url):
    _two_at_once(_writer, store_url, 40)
    store = SnapshotStore(store_url)
    assert store.outbox_counts("c") == {"pending": 80}
    assert all(store.latest(f"urn:lumos:dataset:file:w{w}-{i}") for w in range(2) for i in range(40))
    store.close()


def _recorder(url: str, worker: int, n: int) -> None:
    store = SnapshotStore(url)
    for i in range(n):  # the release sensor's runs: each records its datasets' versions in one release
        store.record_release_versions("S-1", {f"w{worker}-{i}": "1.0.0"})
        store.upsert_datasets([DatasetRecord(f"shared-{i}", "file", "lake", f"/lake/shared-{i}", "parquet")])
        store.record_delivery("c", f"urn:shared-{i}", "2026-11-25", f"h{worker}")
    store.close()


@pytest.mark.slow  # processes racing: make test, not the inner loop
def test_runs_recording_into_one_release_at_once_lose_no_version(store_url):
    _two_at_once(_recorder, store_url, 30)
    store = SnapshotStore(store_url)
    (release,) = store.releases()
    assert len(release.versions) == 60
    assert len(store.datasets()) == 30 and len(store.catalog_state("c")) == 30
    store.close()


# ------------------------------------------------- batched writes, one connection


def test_put_writes_many_snapshots_at_once_and_gives_their_ids_in_order(store_url):
    snapshots = [snap(f"p{i % 700}", "2026-11-25", 1 + i % 3, minutes=i) for i in range(1500)]  # re-captures too
    with SnapshotStore(store_url) as store:
        ids = store.put(snapshots, catalogs=["c1", "c2"])
        assert len(ids) == len(set(ids)) == 1500
        with store.engine.connect() as conn:
            t, o = snapshots_table, outbox_table
            stored = {i: (u, c) for i, u, c in conn.execute(sa.select(t.c.id, t.c.urn, t.c.captured_at))}
            queued = sorted(conn.execute(sa.select(o.c.snapshot_id, o.c.catalog)).all())
        for sid, s in zip(ids, snapshots, strict=True):
            urn, captured = stored[sid]
            assert urn == s.dataset.urn and captured.replace(tzinfo=timezone.utc) == s.captured_at
        assert queued == sorted((sid, c) for sid in ids for c in ("c1", "c2"))
        assert store.put([]) == []


def test_the_store_keeps_one_connection_and_closes_it_as_a_context_manager(store_url):
    connects = []
    with SnapshotStore(store_url) as store:
        sa.event.listen(store.engine, "connect", lambda *_: connects.append(1))
        for i in range(20):
            store.put([snap(f"c{i}", "2026-11-25")], catalogs=["c"])
            store.claim("c", "test", 60)
            store.latest(f"urn:lumos:dataset:file:c{i}")
        assert connects == []  # opened once, when the store was
        held = store._conn
        assert held is not None and not held.closed
    assert held.closed and store._conn is None


def test_a_sqlite_store_commits_to_its_wal_without_an_fsync(tmp_path):
    with SnapshotStore(f"sqlite:///{tmp_path}/store.db") as store:
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL


def test_deliveries_are_recorded_and_marked_in_one_go(store_url):
    with SnapshotStore(store_url) as store:
        ids = store.put([snap(f"r{i}", "2026-11-25") for i in range(4)], catalogs=["c"])
        store.record_delivery("c", "urn:lumos:dataset:file:r0", "2026-11-24", "old")
        store.record_deliveries(
            "c",
            [(f"urn:lumos:dataset:file:r{i}", "2026-11-25", f"h{i}") for i in range(3)],
            delivered=ids[:3],
        )
        store.mark_many({"unchanged": ids[3:], "superseded": []})
        state = store.catalog_state("c")
        assert state == {f"urn:lumos:dataset:file:r{i}": ("2026-11-25", f"h{i}") for i in range(3)}
        assert store.catalog_state("c", ["urn:lumos:dataset:file:r1", "urn:nope"]) == {
            "urn:lumos:dataset:file:r1": ("2026-11-25", "h1")
        }
        assert store.catalog_state("other", list(state)) == {}
        assert store.outbox_counts("c") == {"delivered": 3, "unchanged": 1}


def test_a_store_url_reads_its_credentials_when_it_opens_and_never_shows_them(tmp_path, monkeypatch):
    from lumos_dagster.floor.config import parse_config
    from lumos_dagster.floor.errors import ConfigError

    config = parse_config({"store": {"url": "sqlite:///${LUMOS_TEST_STORE_DIR}/s.db"}}, file="lumos.yaml")
    assert config.store_url == "sqlite:///${LUMOS_TEST_STORE_DIR}/s.db"  # kept as written at load
    with pytest.raises(
        ConfigError, match=r"lumos.yaml: store.url: environment variable LUMOS_TEST_STORE_DIR is not set"
    ):
        SnapshotStore(config.store_url, "lumos.yaml: store.url")
    monkeypatch.setenv("LUMOS_TEST_STORE_DIR", str(tmp_path))
    with SnapshotStore(config.store_url) as store:
        assert store.url == config.store_url and str(tmp_path) not in store.url
    assert (tmp_path / "s.db").exists()


def test_version_histories_answer_for_many_datasets_what_version_history_answers_for_one(store_url):
    unreadable = Snapshot(DatasetRef("file", "c", "/lake/c", "parquet"), "2026-11-22", T0)  # no schema
    with SnapshotStore(store_url) as store:
        store.put([snap("a", "2026-11-20", 1), snap("a", "2026-11-22", 2), snap("a", "2026-11-21", 3)])
        store.put([snap("a", "2026-11-22", 4, minutes=5), snap("b", "2026-11-23"), snap("c", "2026-11-20", 2)])
        store.put([unreadable])
        urns = [f"urn:lumos:dataset:file:{n}" for n in ("a", "b", "c", "nope")]
        for pk in ("2026-11-19", "2026-11-21", "2026-11-22", "2026-11-30", None):
            for full in ([], urns[:1]):
                got = store.version_histories(urns, pk, full)
                expected = {u: h for u in urns if (h := store.version_history(u, pk, full=u in full))}
                assert {u: [s.schema for s in h] for u, h in got.items()} == {
                    u: [s.schema for s in h] for u, h in expected.items()
                }, (pk, full)


def test_a_store_of_the_previous_schema_version_is_brought_up_to_date_once_and_keeps_its_entries(store_url):
    store = SnapshotStore(store_url)
    store.put([snap("raw/a", "2026-11-20")], catalogs=["c"])
    store.close()
    # what schema version 1 was: no outbox claims
    engine = sa.create_engine(store_url)
    with engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE lumos_outbox DROP COLUMN claimed_by"))
        conn.execute(sa.text("ALTER TABLE lumos_outbox DROP COLUMN claimed_until"))
        conn.execute(sa.text("UPDATE lumos_meta SET value = '1' WHERE key = 'schema_version'"))
    engine.dispose()

    first, second = SnapshotStore(store_url), SnapshotStore(store_url)  # the second finds it migrated
    (entry,) = second.claim("c", "test", 60)
    assert entry.snapshot.dataset.name == "raw/a"
    assert first.claim("c", "other", 60) == []  # the claim columns work: the entry is held
    for s in (first, second):
        s.close()


def test_a_store_of_a_newer_schema_version_is_refused_naming_both_versions(store_url):
    SnapshotStore(store_url).close()
    engine = sa.create_engine(store_url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE lumos_meta SET value = '99' WHERE key = 'schema_version'"))
    engine.dispose()
    with pytest.raises(StoreError, match=f"schema version 99, this Lumos uses {SCHEMA_VERSION}"):
        SnapshotStore(store_url)


# ------------------------------------------------- bodies kept once, outbox retention


def _rich(name: str, pk: str | None, at: datetime, age: float | None = 30.25, fields: int = 3) -> Snapshot:
    """A capture with what differs between captures of one content: partition, time, the data's age."""
    from lumos_dagster.floor.model import AssertionResult, Owner, Quality

    return Snapshot(
        DatasetRef("file", name, f"/lake/{name}", "parquet"),
        pk,
        at,
        schema=Schema(tuple(Field(f"f{i}", Primitive("int64"), description=f"field {i}") for i in range(fields))),
        version="1.0.0",
        description="orders",
        owners=(Owner("alice"),),
        tags=("gold",),
        sla="24h",
        quality=Quality(0.9, "fresh", age, (AssertionResult("not_null", "pass", "completeness", "f0", "dbt"),)),
    )


def _reads(store: SnapshotStore, s: Snapshot) -> dict[str, str]:
    """How each read of the store gives back capture `s` (its only capture, or its dataset's latest):
    the document text of each."""
    from lumos_dagster.floor.snapshot_json import snapshot_dumps
    from lumos_dagster.store.sql_tables import latest_captures

    urn, pk = s.dataset.urn, s.partition_key or ""
    got = {
        "latest": store.latest(urn),
        "latest of its partition": store.latest(urn, s.partition_key),
        "previous": store.previous(urn, pk),
        "history": store.history(urn)[-1],
        "at_version": store.at_version(urn, s.version),
        "version_history": store.version_history(urn, pk, full=True)[-1],
        "version_histories": store.version_histories([urn], pk)[urn][-1],
    }
    out = {k: snapshot_dumps(v) for k, v in got.items()}
    with store.engine.connect() as conn:  # the API's read (api.reading.ReadView.latest_many)
        out["latest_captures"] = dict(conn.execute(latest_captures(), {"urns": [urn]}).all())[urn]
    return out


@pytest.mark.parametrize(
    "at",
    [
        T0 + timedelta(microseconds=123456),
        datetime(2026, 11, 20, 9, 30, tzinfo=timezone(timedelta(hours=2))),  # not UTC: kept as written
        datetime(2026, 11, 20, 9, 30),  # naive
    ],
    ids=["utc", "offset", "naive"],
)
@pytest.mark.parametrize("pk", ["2026-11-20", None, ""], ids=["partition", "unpartitioned", "empty-key"])
@pytest.mark.parametrize("age", [30.25, None, 0.1 + 0.2], ids=["age", "no-age", "long-float"])
def test_every_read_gives_back_the_document_the_store_kept_whole_before(store_url, at, pk, age):
    from lumos_dagster.floor.snapshot_json import snapshot_dumps

    s = _rich("a", pk, at, age)
    with SnapshotStore(store_url) as store:
        store.put([s], catalogs=["c"])
        assert set(_reads(store, s).values()) == {snapshot_dumps(s)}
        (entry,) = store.claim("c", "test", 60)
        assert entry.document == json.loads(snapshot_dumps(s)) and entry.snapshot == s


def test_captures_of_unchanged_content_store_its_body_once(store_url):
    from lumos_dagster.run.record import store_versioned
    from lumos_dagster.store.sql_tables import documents_table

    days = [T0 + timedelta(days=d, minutes=5) for d in range(10)]
    with SnapshotStore(store_url) as store:
        for d, at in enumerate(days):  # a daily re-snapshot of an undated dataset, then re-runs of its last day
            store_versioned(store, [_rich("a", at.date().isoformat(), at, age=24.0 * d + 3)], ["c"])
        for r in range(3):
            at = days[-1] + timedelta(minutes=10 * (r + 1))
            store_versioned(store, [_rich("a", days[-1].date().isoformat(), at, age=300.0 + r)], ["c"])
        with store.engine.connect() as conn:
            bodies = conn.execute(sa.select(sa.func.count()).select_from(documents_table)).scalar()
            rows = conn.execute(sa.select(snapshots_table.c.document, snapshots_table.c.body)).all()
        assert bodies == 1  # one content, captured 13 times
        assert len(rows) == 13 and all(doc == "" and body is not None for doc, body in rows)
        history = store.history("urn:lumos:dataset:file:a")
        assert [s.captured_at for s in history] == days + [days[-1] + timedelta(minutes=10 * r) for r in (1, 2, 3)]
        assert [s.quality.age_hours for s in history] == [24.0 * d + 3 for d in range(10)] + [300.0, 301.0, 302.0]
        assert {s.version for s in history} == {"1.0.0"} and store.outbox_counts("c") == {"pending": 13}


def test_a_store_of_schema_version_2_opens_migrated_and_reads_its_whole_documents_as_before(store_url):
    from lumos_dagster.floor.snapshot_json import snapshot_dumps
    from lumos_dagster.store.sql_tables import documents_table

    old = [_rich("a", "2026-11-20", T0, 3.5), _rich("a", "2026-11-21", T0 + timedelta(days=1), 27.5, fields=4),
           _rich("b", None, T0, None)]  # fmt: skip
    SnapshotStore(store_url).close()
    engine = sa.create_engine(store_url)
    with engine.begin() as conn:  # what schema version 2 was, and what it wrote: whole documents
        conn.execute(sa.text("DROP TABLE lumos_documents"))
        for column in ("body", "capture"):
            conn.execute(sa.text(f"ALTER TABLE lumos_snapshots DROP COLUMN {column}"))
        conn.execute(sa.text("UPDATE lumos_meta SET value = '2' WHERE key = 'schema_version'"))
        for s in old:
            conn.execute(
                sa.text("INSERT INTO lumos_snapshots (urn, partition_key, captured_at, version, fingerprint, readable, "
                        "document) VALUES (:urn, :pk, :at, :version, :fp, :readable, :doc)"),
                dict(urn=s.dataset.urn, pk=s.partition_key or "", at=s.captured_at, version=s.version,
                     fp=s.fingerprint, readable=s.readable, doc=snapshot_dumps(s)),
            )  # fmt: skip
    engine.dispose()

    with SnapshotStore(store_url) as store:
        for s in old[1:]:
            assert set(_reads(store, s).values()) == {snapshot_dumps(s)}
        assert [snapshot_dumps(s) for s in store.history(old[0].dataset.urn)] == [snapshot_dumps(s) for s in old[:2]]
        # a stored capture whose version moves (a run versioned an earlier partition since) takes the new layout
        moved = dataclasses.replace(old[1], version="2.0.0", previous_version="1.0.0", change_class="major")
        with store.versioning([moved.dataset.urn]) as v:
            (sid,) = [i for i, s in v.after({moved.dataset.urn: "2026-11-20"})[moved.dataset.urn]]
            v.revise([(sid, moved)])
        assert set(_reads(store, moved).values()) == {snapshot_dumps(moved)}
        store.put([_rich("c", "2026-11-22", T0)])
        with store.engine.connect() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(documents_table)).scalar() == 2
            layout = sa.select(snapshots_table.c.body.is_(None)).order_by(snapshots_table.c.id)
            assert conn.execute(layout).scalars().all() == [True, False, True, False]  # whole, moved, whole, new


def test_the_outbox_keeps_entries_done_with_for_its_retention_window_then_removes_them(store_url):
    with SnapshotStore(store_url) as store:
        ids = store.put([snap(f"o{i}", "2026-11-25") for i in range(6)], catalogs=["c"])
        store.mark_many({"delivered": ids[:2], "unchanged": ids[2:3], "superseded": ids[3:4]})
        store.mark(ids[4:5], "quarantined", "refused")  # ids[5] stays pending
        now = datetime.now(timezone.utc)
        assert store.prune_outbox(days=7, now=now) == 0  # all done with just now
        assert store.prune_outbox(days=7, now=now + timedelta(days=8), batch=2) == 4  # in batches of 2
        assert store.outbox_counts("c") == {"quarantined": 1, "pending": 1}
        assert len(store.claim("c", "test", 60)) == 1  # the pending one is still delivered
