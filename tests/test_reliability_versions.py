"""Schema versions follow partition time, whatever order the runs finish in (issue 14, defect 2).

A late earlier partition is slotted into history and the captures after it are versioned again
against their true predecessor; two runs storing one dataset at once take turns in the store, so
they never both find no history. On SQLite and on the real PostgreSQL server.
"""

import itertools
import multiprocessing
from datetime import datetime, timedelta, timezone

import pytest

from lumos_dagster.catalog.datahub import dataset_urn
from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog, open_lite
from lumos_dagster.delivery.outbox import deliver
from lumos_dagster.delivery.worker import Delivery
from lumos_dagster.floor.config import parse_config
from lumos_dagster.floor.datatypes import Field, Primitive, Schema
from lumos_dagster.floor.model import DatasetRef, Snapshot
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.floor.windows import Window
from lumos_dagster.formats.readers import read_in_process
from lumos_dagster.lineage.catalogue import resolve_datasets
from lumos_dagster.run.snapshot import Services, SnapshotRun
from lumos_dagster.schema.diff import FIELD_ADDED, FIELD_REMOVED
from lumos_dagster.schema.versioning import slot
from lumos_dagster.sources import build_sources, discover
from lumos_dagster.store import SnapshotStore
from tests.lake import partitioned_lake
from tests.test_store import store_url  # noqa: F401  (the SQLite and PostgreSQL stores)

# ------------------------------------------------------------ the slotting rule, pure

REF = DatasetRef("file", "sales/orders", "/lake/sales/orders", "parquet")
T0 = datetime(2026, 11, 27, tzinfo=timezone.utc)
A = Schema((Field("id", Primitive("int64")),))
B = Schema(A.fields + (Field("coupon", Primitive("string")),))
C = Schema(B.fields + (Field("note", Primitive("string")),))
UNREADABLE = Schema()


def capture(pk: str, schema: Schema, n: int = 0) -> Snapshot:
    return Snapshot(REF, f"2026-11-{pk}", T0 + timedelta(minutes=n), schema=schema, policy="FULL")


def replay(arrivals: list[Snapshot]) -> list[Snapshot]:
    """A store's history after captures arrive one by one: partition then arrival order."""
    history: list[Snapshot] = []
    for s in arrivals:
        (new,), moved = slot(history, [s])
        for i, m in moved.items():
            history[i] = m
        history = sorted(history + [new], key=lambda h: h.partition_key)  # stable: a re-capture goes last
    return history


def outcome(history: list[Snapshot]) -> list[tuple]:
    return [(s.partition_key[-2:], s.version, s.previous_version, tuple(c.kind for c in s.changes)) for s in history]


ADDED, REMOVED = (FIELD_ADDED,), (FIELD_REMOVED,)
FIRST = ("1.0.0", None, ())

#: each day's schema → each day's (version, previous version, changes), whatever order the days arrive in
CASES = [
    ({"25": A, "26": B}, [FIRST, ("1.1.0", "1.0.0", ADDED)]),
    ({"25": A, "26": A}, [FIRST, FIRST]),
    ({"24": A, "25": B, "26": B}, [FIRST, ("1.1.0", "1.0.0", ADDED), ("1.1.0", "1.0.0", ADDED)]),
    ({"24": A, "25": B, "26": A}, [FIRST, ("1.1.0", "1.0.0", ADDED), ("2.0.0", "1.1.0", REMOVED)]),
    ({"24": A, "25": B, "26": C}, [FIRST, ("1.1.0", "1.0.0", ADDED), ("1.2.0", "1.1.0", ADDED)]),
    # an unreadable day keeps the version before it and is no one's predecessor
    ({"24": A, "25": UNREADABLE, "26": B}, [FIRST, FIRST, ("1.1.0", "1.0.0", ADDED)]),
]


@pytest.mark.parametrize("days, expected", CASES)
def test_versions_follow_partition_time_in_every_arrival_order(days, expected):
    want = [(pk, *e) for pk, e in zip(sorted(days), expected, strict=True)]
    for order in itertools.permutations(sorted(days)):
        got = replay([capture(pk, days[pk], n) for n, pk in enumerate(order)])
        assert outcome(got) == want, order
    batch, moved = slot([], [capture(pk, days[pk]) for pk in sorted(days, reverse=True)])  # one run, all days
    assert outcome(sorted(batch, key=lambda s: s.partition_key)) == want and moved == {}


def test_slot_reports_only_the_later_captures_it_versions_again():
    later = replay([capture("26", B)])
    assert outcome(later) == [("26", *FIRST)]
    (first,), moved = slot(later, [capture("25", A)])
    assert first.version == "1.0.0"
    assert list(moved) == [0] and outcome([moved[0]]) == [("26", "1.1.0", "1.0.0", ADDED)]
    assert slot(replay([capture("26", A)]), [capture("25", A)])[1] == {}  # same schema: nothing moves
    # a re-capture of a day goes after the day's earlier captures: it is versioned against them
    recaptured = replay([capture("25", A, 0), capture("25", B, 1)])
    assert outcome(recaptured) == [("25", *FIRST), ("25", "1.1.0", "1.0.0", ADDED)]


# ------------------------------------------- the real pipeline, recorded into a real store

DAYS = ("2026-11-25", "2026-11-26")  # the 26th adds a nullable column
EXPECTED = [("2026-11-25", "1.0.0", None, "new", ()), ("2026-11-26", "1.1.0", "1.0.0", "minor", ADDED)]


def snapshot_day(root: str, store_url: str, lite: str, day: str, barrier=None) -> None:  # noqa: F811
    """What the Dagster op does for one partition, without Dagster: the snapshot run, versioned
    against the store's history when it stores, then delivered to DataHub Lite. `barrier`: both runs
    have listed their files before either reads them and goes on to store (two runs at once)."""
    config = parse_config({"sources": [{"root": root, "name": "lake"}]})
    sources = build_sources(config)
    catalogue = resolve_datasets(config, discover(sources, ScanReport()).records, {"lake": root})
    start = datetime.fromisoformat(day).replace(tzinfo=timezone.utc)

    def read(items):
        if barrier is not None:
            barrier.wait(60)
        return read_in_process(items)

    delivery = Delivery(store_url, lambda: [DataHubLiteCatalog(lite)], print)
    try:
        with SnapshotStore(store_url) as store:
            run = SnapshotRun(config, catalogue, sources, store, delivery, Services(read=read, say=print))
            done = run.complete(catalogue.datasets, [Window(day, start, start + timedelta(days=1))])
    finally:
        delivery.finish()
    assert [pk for pk, s in done.snapshots["sales/orders"].items() if s.version] == [day]


def check_history_and_catalog(store_url: str, lite: str) -> None:  # noqa: F811
    with SnapshotStore(store_url) as store:
        history = store.history("urn:lumos:dataset:file:sales/orders")
        # exactly one snapshot a day, numbered as if the days had come in order
        got = [(s.partition_key, s.version, s.previous_version, s.change_class, tuple(c.kind for c in s.changes))
               for s in history]  # fmt: skip
        assert got == EXPECTED
        deliver(store, DataHubLiteCatalog(lite))  # whatever a run's delivery left queued
        assert store.outbox_counts(f"datahub-lite:{lite}").get("pending", 0) == 0
    reader = open_lite(lite, read_only=True)
    try:
        shown = reader.get(dataset_urn(history[-1].dataset), None, typed=True)
    finally:
        reader.close()
    # the catalog shows the latest partition, with its version: never the late earlier day's
    props = shown["datasetProperties"].customProperties
    assert (props["lumos.partition"], props["lumos.version"]) == ("2026-11-26", "1.1.0")
    assert "coupon" in {f.fieldPath.split(".")[-1] for f in shown["schemaMetadata"].fields}


@pytest.fixture
def lake(tmp_path):
    partitioned_lake(tmp_path / "lake", days=2, start=datetime(2026, 11, 25).date(), extra_field_from=1)
    return str(tmp_path / "lake")


@pytest.mark.parametrize("order", [DAYS, DAYS[::-1]], ids=["in-order", "later-day-first"])
def test_a_late_earlier_day_is_slotted_in_and_the_later_day_versioned_against_it(store_url, lake, tmp_path, order):  # noqa: F811
    lite = str(tmp_path / "catalog.db")
    for day in order:
        snapshot_day(lake, store_url, lite, day)
    check_history_and_catalog(store_url, lite)


@pytest.mark.slow  # processes racing: make test, not the inner loop
def test_two_days_snapshotted_at_once_give_the_versions_of_in_order(store_url, lake, tmp_path):  # noqa: F811
    lite = str(tmp_path / "catalog.db")
    SnapshotStore(store_url).close()  # the tables exist before the race
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    runs = [ctx.Process(target=snapshot_day, args=(lake, store_url, lite, day, barrier)) for day in DAYS[::-1]]
    for p in runs:
        p.start()
    for p in runs:
        p.join(180)
        assert p.exitcode == 0
    check_history_and_catalog(store_url, lite)
