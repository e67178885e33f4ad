"""Keeping the registry in step with storage: new datasets recorded, vanished ones
soft-deleted — unless too many vanish at once, which says more about the storage
(an unmounted disk, a wrong prefix) than about the datasets."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Callable, Sequence

from lumos_dagster.floor.model import DatasetRecord, DatasetRef, Snapshot
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.schema.versioning import retire as retire_snapshot
from lumos_dagster.sources import Discovery
from lumos_dagster.store import SnapshotStore
from lumos_dagster.store.roles import RegistryAndHistory

if TYPE_CHECKING:
    from lumos_dagster.floor.config import LumosConfig
    from lumos_dagster.lineage.resolve import CodeContext


@dataclass
class Reconciliation:
    recorded: int = 0
    added: list[str] = field(default_factory=list)  # names the registry did not hold (or held as removed)
    removed: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # source → why nothing was removed


def retire(store: RegistryAndHistory, records: Sequence[DatasetRecord], catalogs: Sequence[str]) -> list[str]:
    """Soft-delete datasets: each one's last snapshot as a tombstone (a DATASET_REMOVED version),
    queued for `catalogs`, and the registry marks it removed. Returns their names."""
    now = datetime.now(timezone.utc)
    tombstones: list[Snapshot] = []
    for rec in records:
        last = store.latest(rec.urn)
        ref = last.dataset if last else DatasetRef(rec.platform, rec.name, rec.location, rec.format)
        base = last or Snapshot(ref, None, now)
        tombstones.append(retire_snapshot(last, replace(base, captured_at=now, removed=True)))
    if tombstones:
        store.put(tombstones, catalogs=catalogs)
    store.mark_removed([t.dataset.urn for t in tombstones])
    return [r.name for r in records]


def too_many(vanished: int, known: int, max_share: float) -> str | None:
    """Why nothing of a source is removed when `vanished` of its `known` datasets vanish at once
    (None: they may go). That says more about the storage (an unmounted disk, a wrong prefix) than
    about the datasets."""
    if vanished <= max_share * known:
        return None
    return (
        f"{vanished} of its {known} datasets vanished at once (more than {max_share:.0%}): nothing was removed. "
        "Is the storage mounted and the root right? If they really are gone, raise removal.max_share in "
        "lumos.yaml for one run."
    )


def reconcile(
    store: RegistryAndHistory,
    discovery: Discovery,
    max_share: float,
    catalogs: Callable[[], Sequence[str]],
    report: ScanReport,
) -> Reconciliation:
    """Record what was found; soft-delete what vanished from a source that was scanned
    (queued as tombstones for every catalog, asked for only then). A source that could not be
    listed, wholly or in part, or lost more than `max_share` of its datasets at once, removes nothing."""
    out = Reconciliation()
    found = {r.urn for r in discovery.records}
    registered: set[str] = set()
    for source in discovery.partial:
        registered.update(r.urn for r in store.datasets(sources=[source]))
    for source in discovery.scanned:
        known = store.datasets(sources=[source])
        registered.update(r.urn for r in known)
        vanished = [r for r in known if r.urn not in found]
        if not vanished:
            continue
        why = too_many(len(vanished), len(known), max_share)
        if why is not None:
            out.refused[source] = why
            report.fail(f"source {source}", why)
            continue
        out.removed += retire(store, vanished, catalogs())
    out.added = sorted(r.name for r in discovery.records if r.urn not in registered)
    out.recorded = store.upsert_datasets(discovery.records)
    return out


@dataclass
class Refresh:
    """What one discovery did: the datasets found, the ones removed, what code says."""

    found: Discovery
    reconciliation: Reconciliation
    code: CodeContext | None
    report: ScanReport


def refresh_registry(config: LumosConfig, store: SnapshotStore, progress: Callable[[str], None]) -> Refresh:
    """`lumos discover` and the `lumos_discover` job: scan the sources, record what they hold,
    soft-delete what vanished (delivered to the catalogs now), and read lineage from code and
    from the databases' view definitions. Every role of the store: the registry, the tombstones'
    history and the outbox."""
    from lumos_dagster.delivery.catalogs import build_catalogs
    from lumos_dagster.delivery.outbox import deliver
    from lumos_dagster.lineage.resolve import refresh_code
    from lumos_dagster.sources import build_sources, discover
    from lumos_dagster.sources.base import TableSource

    report = ScanReport()
    sources = build_sources(config)
    found = discover(sources, report, progress=progress)
    stored = [sql for s in sources.values() if isinstance(s, TableSource) and (sql := s.stored_sql(report))]
    catalogs: list = []  # built only to tombstone vanished datasets: a catalog client is slow to import

    def names() -> list[str]:
        catalogs[:] = catalogs or build_catalogs(config)
        return [c.name for c in catalogs]

    try:
        result = reconcile(store, found, config.removal.max_share, names, report)
        code = refresh_code(store, config, stored)
        for catalog in catalogs:
            deliver(store, catalog)
    finally:
        for catalog in catalogs:
            catalog.close()
    return Refresh(found, result, code, report)
