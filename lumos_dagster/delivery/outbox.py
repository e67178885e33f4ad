"""Delivering queued snapshots from the store's outbox to a catalog.

The catalog holds each dataset's current state, so per dataset only one queued
snapshot is sent: the newest partition's latest capture — or a tombstone, when the
dataset's latest event is its removal. Older queued ones are marked superseded, and a
backfill of old partitions never overwrites a newer partition already delivered. What
is sent is hashed: content the catalog already has is not sent again ("unchanged").
A failed send leaves the snapshot queued for the next run or `lumos sync`: a catalog
that is down delays metadata, it never loses it. A snapshot the catalog can never take (its
adapter cannot build it, `Undeliverable`) is quarantined: kept with its reason, skipped by later
deliveries so it holds back no other, listed by `lumos sync`, queued again by
`lumos sync --retry-quarantined`.

A delivery first claims what it sends (a lease, renewed each batch): two at once — two
`lumos sync`, a sync beside a run's delivery worker — share the outbox and never send an entry
twice; the claims of a delivery that crashed run out and are taken over (at once, by a delivery on
the same host, when the process that claimed them is gone).

The bookkeeping is per batch, never per dataset: the catalog's state is read once (for
the datasets queued), the superseded and unchanged entries are marked together, and each
batch sent is recorded in one transaction with the hashes of what it carried.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from lumos_dagster.catalog.base import CatalogAdapter, Claiming, Undeliverable
from lumos_dagster.floor.masking import mask_secrets
from lumos_dagster.store import Delivery, claim_owner
from lumos_dagster.store.roles import OutboxStore

# Snapshots per emit call. A batch is one DataHub Lite transaction (or a few GMS requests) and one
# store transaction, whose fixed costs (the commit and its fsync, one lookup of the batch's current
# rows) are spread over the batch: at 500 they are ~0.01 ms a dataset. A failure holds back only its
# batch — it stays queued and goes with the next run or `lumos sync` — and a batch holds DataHub
# Lite's write lock for about 0.2 s.
BATCH = 500
#: seconds a delivery's claim lasts unless renewed (each batch renews it): how long the claims of a
#: delivery that crashed hold their entries back
LEASE = 300.0


@dataclass
class DeliveryReport:
    catalog: str = ""
    delivered: int = 0
    unchanged: int = 0
    superseded: int = 0
    aspects: int = 0
    failed: dict[str, str] = field(default_factory=dict)  # dataset name → error
    quarantined: dict[str, str] = field(default_factory=dict)  # dataset URN → why the catalog cannot take it


def _choose(queued: list[Delivery]) -> Delivery:
    """The queued snapshot that is the dataset's current state."""
    queued = sorted(queued, key=lambda d: d.outbox_id)
    if queued[-1].removed:
        return queued[-1]
    alive = [d for d in queued if not d.removed]
    return max(alive, key=lambda d: (d.partition_key or "", d.outbox_id))


def _fingerprint(catalog: CatalogAdapter, d: Delivery) -> str:
    # a DataHub adapter hashes the stored document as it is: no Snapshot to build for content it has
    by_document = getattr(catalog, "fingerprint_document", None)
    if by_document is not None and d.document is not None:
        return by_document(d.document)
    return catalog.fingerprint(d.snapshot)


def _failure(exc: Exception) -> str:
    """Why a catalog did not take a batch, as kept and shown: a client's message may quote its URL."""
    return mask_secrets(f"{type(exc).__name__}: {exc}")


def deliver(
    store: OutboxStore,
    catalog: CatalogAdapter,
    progress: Callable[[str], None] = lambda _: None,
    lease: float = LEASE,
) -> DeliveryReport:
    owner = claim_owner()
    try:
        return _deliver(store, catalog, progress, owner, lease)  # marks every entry it claimed
    except BaseException:
        store.release(owner)  # what an error left claimed goes with the next delivery, not after the lease
        raise


def _deliver(
    store: OutboxStore, catalog: CatalogAdapter, progress: Callable[[str], None], owner: str, lease: float
) -> DeliveryReport:
    report = DeliveryReport(catalog=catalog.name)
    by_dataset: dict[str, list[Delivery]] = {}
    for d in store.claim(catalog.name, owner, lease):
        by_dataset.setdefault(d.urn, []).append(d)
    if not by_dataset:
        return report
    state = store.catalog_state(catalog.name, list(by_dataset))
    older: list[Delivery] = []  # partitions the catalog shows no longer (or not), but for their own results
    unchanged: list[int] = []
    to_send: list[tuple[Delivery, str]] = []
    for urn, queued in by_dataset.items():
        best = _choose(queued)
        older += [d for d in queued if d is not best]
        shown_partition, sent_hash = state.get(urn, ("", None))
        if not best.removed and (best.partition_key or "") < shown_partition:
            older.append(best)  # the catalog already shows a newer partition
            continue
        content = _fingerprint(catalog, best)
        if content == sent_hash:
            unchanged.append(best.outbox_id)
            continue
        to_send.append((best, content))
    partitions = getattr(catalog, "emit_partitions", None)
    if partitions is not None:  # each older partition's own results (its checks, its profile) reach it first
        for start in range(0, len(older), BATCH):
            try:
                report.aspects += partitions([d.snapshot for d in older[start : start + BATCH] if not d.removed])
            except Exception as exc:  # the catalog cannot take them now: they wait, as any queued snapshot
                error = _failure(exc)
                store.mark([d.outbox_id for d in older[start:]], "pending", error)
                report.failed.update({d.snapshot.dataset.name: error for d in older[start:]})
                older = older[:start]
                break
    superseded = [d.outbox_id for d in older]
    store.mark_many({"superseded": superseded, "unchanged": unchanged})
    report.superseded, report.unchanged = len(superseded), len(unchanged)
    # a catalog shared with other writers: what Lumos added to each dataset there before, so that it
    # removes that and nothing else ("" for a dataset delivered before Lumos kept it)
    claiming = isinstance(catalog, Claiming)
    before = store.catalog_claims(catalog.name, [d.urn for d, _ in to_send]) if claiming else {}

    def emit(batch: list[tuple[Delivery, str]]) -> int:
        snapshots = [d.snapshot for d, _ in batch]
        if isinstance(catalog, Claiming):
            return catalog.emit(snapshots, [before.get(d.urn) for d, _ in batch])
        return catalog.emit(snapshots)

    def delivered(sent: list) -> None:
        store.record_deliveries(
            catalog.name,
            [(d.urn, d.partition_key or "", content) for d, content in sent],
            delivered=[d.outbox_id for d, _ in sent],
            claims={d.urn: catalog.claims(d.snapshot, before.get(d.urn)) for d, _ in sent}
            if isinstance(catalog, Claiming)
            else None,
        )
        report.delivered += len(sent)
        progress(f"{catalog.name}: {report.delivered}/{len(to_send)} delivered")

    for start in range(0, len(to_send), BATCH):
        batch = to_send[start : start + BATCH]
        if start:  # the claim is fresh for the first batch; later ones renew it and keep what is still theirs
            held = store.renew(owner, lease)
            batch = [(d, content) for d, content in batch if d.outbox_id in held]
        while batch:
            try:
                report.aspects += emit(batch)
            except Undeliverable as exc:  # quarantine those, keep what went through, send the rest
                for i, reason in exc.rejected.items():
                    d, reason = batch[i][0], mask_secrets(reason)
                    store.mark([d.outbox_id], "quarantined", reason)
                    report.quarantined[d.urn] = reason
                if exc.delivered:
                    delivered([batch[i] for i in sorted(exc.delivered)])
                batch = [b for i, b in enumerate(batch) if i not in exc.rejected and i not in exc.delivered]
                continue
            except Exception as exc:  # any other failure to deliver keeps the batch queued
                error = _failure(exc)
                store.mark([d.outbox_id for d, _ in batch], "pending", error)
                report.failed.update({d.snapshot.dataset.name: error for d, _ in batch})
                break
            delivered(batch)
            break
    return report
