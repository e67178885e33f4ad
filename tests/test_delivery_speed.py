"""Recording and delivering snapshots costs the same per dataset at any estate size: counted in
statements and transactions (what makes the time), not in seconds (which a busy machine blurs);
`benchmarks/micro.py delivery_cost` gives the seconds."""

from contextlib import contextmanager

import pytest
import sqlalchemy as sa

from benchmarks import micro
from benchmarks.micro import catalog_snapshots
from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog
from lumos_dagster.catalog.lite_batch import BatchedSqliteLite
from lumos_dagster.delivery import outbox as delivery
from lumos_dagster.delivery.outbox import deliver
from lumos_dagster.store import SnapshotStore
from tests.conftest import lite_aspect_versions


@contextmanager
def counting(store: SnapshotStore):
    """Statements the store sends, Lite transactions, and store connections opened, meanwhile."""
    counts = {"statements": 0, "lite transactions": 0, "connections": 0}
    original = BatchedSqliteLite.transaction

    def statement(*_):
        counts["statements"] += 1

    def connect(*_):
        counts["connections"] += 1

    @contextmanager
    def transaction(self):
        counts["lite transactions"] += 1
        with original(self):
            yield

    sa.event.listen(store.engine, "before_cursor_execute", statement)
    sa.event.listen(store.engine, "connect", connect)
    BatchedSqliteLite.transaction = transaction
    try:
        yield counts
    finally:
        BatchedSqliteLite.transaction = original
        sa.event.remove(store.engine, "before_cursor_execute", statement)
        sa.event.remove(store.engine, "connect", connect)


def run(tmp_path, datasets: int) -> list[dict]:
    """Counts for: put + deliver of new content, then of the same content again."""
    out = []
    with SnapshotStore(f"sqlite:///{tmp_path}/store-{datasets}.db") as store:
        snapshots = catalog_snapshots(datasets)
        for _ in range(2):
            catalog = DataHubLiteCatalog(str(tmp_path / f"lite-{datasets}.db"))
            with counting(store) as counts:
                store.put(snapshots, catalogs=[catalog.name])
                report = deliver(store, catalog)
            catalog.close()
            assert report.delivered + report.unchanged == datasets and not report.failed
            out.append(counts)
    return out


@pytest.mark.slow  # processes racing: make test, not the inner loop
def test_the_bookkeeping_does_not_grow_with_the_estate(tmp_path, monkeypatch):
    monkeypatch.setattr(delivery, "BATCH", 40)
    small, large = run(tmp_path, 40), run(tmp_path, 400)
    # new content: one batch (40) against ten batches (400), the same statements per batch
    assert small[0]["lite transactions"] == 1 and large[0]["lite transactions"] == 10
    per_batch = large[0]["statements"] - small[0]["statements"]
    assert per_batch <= 9 * 4  # a batch: its state record and outbox mark, whatever its size
    # the same content again: nothing is sent, and it costs the same few statements at any size
    assert small[1]["lite transactions"] == large[1]["lite transactions"] == 0
    assert large[1]["statements"] <= small[1]["statements"] + 2  # a longer IN list is cut in chunks of 500
    assert all(c["connections"] == 0 for c in small + large)  # the store keeps its connection


class FailingSecondBatch(DataHubLiteCatalog):
    def __init__(self, path):
        super().__init__(path)
        self.calls = 0

    def emit(self, snapshots, before=None):
        self.calls += 1
        if self.calls == 2:
            raise ConnectionError("catalog hiccup")
        return super().emit(snapshots, before)


def test_a_failed_batch_holds_back_only_itself_and_the_next_delivery_sends_it(tmp_path, monkeypatch):
    monkeypatch.setattr(delivery, "BATCH", 4)
    snapshots = catalog_snapshots(10)
    with SnapshotStore(f"sqlite:///{tmp_path}/store.db") as store:
        catalog = FailingSecondBatch(str(tmp_path / "lite.db"))
        store.put(snapshots, catalogs=[catalog.name])
        report = deliver(store, catalog)
        assert (report.delivered, len(report.failed)) == (6, 4)
        assert set(report.failed) == {s.dataset.name for s in snapshots[4:8]}
        assert store.outbox_counts(catalog.name) == {"delivered": 6, "pending": 4}
        assert [(a, e) for _, a, e, _ in store.outbox_errors(catalog.name)] == [
            (1, "ConnectionError: catalog hiccup")
        ] * 4
        assert len(store.catalog_state(catalog.name)) == 6  # only what reached the catalog is recorded
        versions = lite_aspect_versions(str(tmp_path / "lite.db"))
        report = deliver(store, catalog)
        assert (report.delivered, report.unchanged, report.failed) == (4, 0, {})
        assert store.outbox_counts(catalog.name) == {"delivered": 10}
        catalog.close()
    after = lite_aspect_versions(str(tmp_path / "lite.db"))
    assert {k: v for k, v in after.items() if k in versions} == versions  # the first six were not re-sent
    assert len(after) > len(versions)


def test_the_delivery_benchmark_runs_at_tiny_sizes():
    rows = micro.delivery_cost(sizes=(6, 12), per_output_sizes=(6,))
    assert [r["benchmark"] for r in rows] == [
        "delivery_cost/new",
        "delivery_cost/unchanged",
        "delivery_cost/new",
        "delivery_cost/unchanged",
        "delivery_cost/per_output/new",
        "delivery_cost/per_output/unchanged",
        "delivery_cost/flatness",
    ]
    assert all(r["value"] > 0 and r["met"] is None for r in rows)  # tiny sizes are not the targets' sizes
    assert rows[-1]["value"] == pytest.approx(rows[2]["value"] / rows[0]["value"])
    assert micro.render(rows).count("\n") == len(rows) + 1
