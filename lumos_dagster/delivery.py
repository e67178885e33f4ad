"""Delivering queued snapshots from the store's outbox to a catalog.

The catalog holds each dataset's current state, so per dataset only the newest
partition's latest capture is sent; older pending ones are marked superseded, and a
backfill of old partitions never overwrites a newer partition already delivered. A
failed send leaves the snapshot pending for the next run (or `lumos sync`): a catalog
that is down delays metadata, it never loses it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lumos_dagster.catalog.base import CatalogAdapter
from lumos_dagster.store import Delivery, SnapshotStore


@dataclass
class DeliveryReport:
    delivered: int = 0
    superseded: int = 0
    aspects: int = 0
    failed: dict[str, str] = field(default_factory=dict)  # dataset name → error


def _order(d: Delivery) -> tuple[str, int]:
    return (d.snapshot.partition_key or "", d.outbox_id)


def deliver(store: SnapshotStore, catalog: CatalogAdapter) -> DeliveryReport:
    report = DeliveryReport()
    newest_delivered = store.delivered_partitions(catalog.name)
    by_dataset: dict[str, list[Delivery]] = {}
    for d in store.pending(catalog.name):
        by_dataset.setdefault(d.snapshot.dataset.urn, []).append(d)
    for urn, queued in by_dataset.items():
        best = max(queued, key=_order)
        stale = [d.outbox_id for d in queued if d is not best]
        if (best.snapshot.partition_key or "") < newest_delivered.get(urn, ""):
            stale.append(best.outbox_id)
        else:
            try:
                report.aspects += catalog.emit([best.snapshot])
            except Exception as exc:  # any failure to deliver keeps the snapshot queued
                store.mark([best.outbox_id], "pending", f"{type(exc).__name__}: {exc}")
                report.failed[best.snapshot.dataset.name] = f"{type(exc).__name__}: {exc}"
                continue
            store.mark([best.outbox_id], "delivered")
            report.delivered += 1
        store.mark(stale, "superseded")
        report.superseded += len(stale)
    return report
