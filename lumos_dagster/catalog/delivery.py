"""Delivering queued snapshots from the store's outbox to a catalog.

The catalog holds each dataset's current state, so per dataset only one queued
snapshot is sent: the newest partition's latest capture — or a tombstone, when the
dataset's latest event is its removal. Older queued ones are marked superseded, and a
backfill of old partitions never overwrites a newer partition already delivered. What
is sent is hashed: content the catalog already has is not sent again ("unchanged").
A failed send leaves the snapshot queued for the next run or `lumos sync`: a catalog
that is down delays metadata, it never loses it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from lumos_dagster.catalog.base import CatalogAdapter
from lumos_dagster.store import Delivery, SnapshotStore

BATCH = 50  # snapshots per emit call: one bad batch does not hold back the others


@dataclass
class DeliveryReport:
    catalog: str = ""
    delivered: int = 0
    unchanged: int = 0
    superseded: int = 0
    aspects: int = 0
    failed: dict[str, str] = field(default_factory=dict)  # dataset name → error


def _choose(queued: list[Delivery]) -> Delivery:
    """The queued snapshot that is the dataset's current state."""
    queued = sorted(queued, key=lambda d: d.outbox_id)
    if queued[-1].snapshot.removed:
        return queued[-1]
    alive = [d for d in queued if not d.snapshot.removed]
    return max(alive, key=lambda d: (d.snapshot.partition_key or "", d.outbox_id))


def deliver(
    store: SnapshotStore, catalog: CatalogAdapter, progress: Callable[[str], None] = lambda _: None
) -> DeliveryReport:
    report = DeliveryReport(catalog=catalog.name)
    state = store.catalog_state(catalog.name)
    by_dataset: dict[str, list[Delivery]] = {}
    for d in store.pending(catalog.name):
        by_dataset.setdefault(d.snapshot.dataset.urn, []).append(d)
    to_send: list[tuple[Delivery, str]] = []
    for urn, queued in by_dataset.items():
        best = _choose(queued)
        store.mark([d.outbox_id for d in queued if d is not best], "superseded")
        report.superseded += len(queued) - 1
        shown_partition, sent_hash = state.get(urn, ("", None))
        pk = best.snapshot.partition_key or ""
        if not best.snapshot.removed and pk < shown_partition:
            store.mark([best.outbox_id], "superseded")  # the catalog already shows a newer partition
            report.superseded += 1
            continue
        content = catalog.fingerprint(best.snapshot)
        if content == sent_hash:
            store.mark([best.outbox_id], "unchanged")
            report.unchanged += 1
            continue
        to_send.append((best, content))
    for start in range(0, len(to_send), BATCH):
        batch = to_send[start : start + BATCH]
        try:
            report.aspects += catalog.emit([d.snapshot for d, _ in batch])
        except Exception as exc:  # any failure to deliver keeps the batch queued
            error = f"{type(exc).__name__}: {exc}"
            store.mark([d.outbox_id for d, _ in batch], "pending", error)
            report.failed.update({d.snapshot.dataset.name: error for d, _ in batch})
            continue
        for d, content in batch:
            store.record_delivery(catalog.name, d.snapshot.dataset.urn, d.snapshot.partition_key or "", content)
        store.mark([d.outbox_id for d, _ in batch], "delivered")
        report.delivered += len(batch)
        progress(f"{catalog.name}: {report.delivered}/{len(to_send)} delivered")
    return report
