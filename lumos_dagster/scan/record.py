"""What a finished run leaves behind: its snapshots stored and queued for every catalog in one
transaction per batch, then the outbox delivered. Stored first, so nothing is lost: a catalog that
fails keeps its share queued for the next run or `lumos sync`, and is not tried again in this run
(a dead server must not cost a timeout per batch)."""

from __future__ import annotations

from typing import Callable, Sequence

from lumos_dagster.catalog.base import CatalogAdapter
from lumos_dagster.catalog.delivery import deliver
from lumos_dagster.model import Snapshot
from lumos_dagster.store import SnapshotStore


class Recorder:
    def __init__(self, store: SnapshotStore, catalogs: Sequence[CatalogAdapter], warn: Callable[[str], None]):
        self.store, self.catalogs, self.warn = store, list(catalogs), warn
        self.down: dict[str, str] = {}  # catalog → its first error in this run

    def record(self, snapshots: Sequence[Snapshot]) -> dict[str, int]:
        """Store and deliver; returns what each catalog that is down still has queued."""
        self.store.put(snapshots, catalogs=[c.name for c in self.catalogs])
        for catalog in self.catalogs:
            if catalog.name in self.down:
                continue
            report = deliver(self.store, catalog)
            if report.failed:
                self.down[catalog.name] = next(iter(report.failed.values()))
                self.warn(
                    f"catalog {catalog.name} did not take the metadata; what it misses stays queued "
                    f"for the next run or `lumos sync`: {self.down[catalog.name]}"
                )
        return {name: self.store.outbox_counts(name).get("pending", 0) for name in self.down}
