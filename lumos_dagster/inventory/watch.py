"""What changed in storage since the last look: created, modified and deleted files, and
the datasets and partitions they belong to.

Per-file fingerprints (size + nanosecond mtime, or the object's ETag) live in the store,
one generation per look, never in a sensor cursor: a cursor names a generation, so it stays
a few bytes however many objects a bucket holds. A look that is not committed (its
cursor lost) is simply taken again against the same generation.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from lumos_dagster.report import ScanReport
from lumos_dagster.sources.base import FileSource
from lumos_dagster.store import SnapshotStore


@dataclass(frozen=True)
class FileChange:
    path: str
    kind: str  # created | modified | deleted
    dataset: str | None  # None: not part of any dataset (skipped by the discovery rules)
    partition: str | None  # the time-partition date of the file, if its dataset has one
    fingerprint: str  # the new one; "deleted" for a deletion


@dataclass
class Look:
    generation: int
    files: int = 0
    changes: list[FileChange] = field(default_factory=list)
    new_datasets: dict = field(default_factory=dict)  # name → DiscoveredDataset, for the registry
    baseline: bool = False  # the first look: everything is recorded, nothing is a change
    state: str = ""  # digest of the whole listing: an equal one next time means nothing changed

    @property
    def digest(self) -> str:
        return digest(self.changes)


def digest(changes: list[FileChange]) -> str:
    payload = "\n".join(sorted(f"{c.path}\t{c.fingerprint}" for c in changes))
    return hashlib.sha1(payload.encode()).hexdigest()[:16]


def listing_state(current: dict[str, str]) -> str:
    return hashlib.sha1("\n".join(f"{p}\t{f}" for p, f in sorted(current.items())).encode()).hexdigest()


def look(
    source: FileSource,
    store: SnapshotStore,
    generation: int | None,
    report: ScanReport,
    state: str | None = None,
    save: bool = True,
) -> Look:
    """List the source and compare with `generation` (None: no earlier look). When the listing's
    digest equals `state` (the previous look's), nothing changed: the store is not even read.
    `save=False` (a preview) writes nothing: the look's generation is not kept."""
    entries = list(source.list("", report))
    current = {e.path: e.fingerprint for e in entries}
    digest_now = listing_state(current)
    if generation is not None and digest_now == state:
        return Look(generation=generation, files=len(entries), state=digest_now)
    grouping = source._group(entries)
    where: dict[str, tuple[str, str | None]] = {}
    for ds in grouping.datasets.values():
        for f in ds.files:
            date = ds.file_date(f)
            where[f.entry.path] = (ds.name, date.isoformat() if date else None)
    out = Look(generation=(generation or 0) + 1, files=len(entries), baseline=generation is None, state=digest_now)
    known = {r.name for r in store.datasets(include_removed=True)}
    out.new_datasets = {name: ds for name, ds in grouping.datasets.items() if name not in known}
    if generation is not None:
        before = store.file_state(source.name, generation)
        for path, fingerprint in current.items():
            dataset, partition = where.get(path, (None, None))
            old = before.get(path)
            if old is None:
                out.changes.append(FileChange(path, "created", dataset, partition, fingerprint))
            elif old[0] != fingerprint:
                out.changes.append(FileChange(path, "modified", dataset, partition, fingerprint))
        for path, (_, dataset, partition) in before.items():
            if path not in current:
                out.changes.append(FileChange(path, "deleted", dataset, partition, "deleted"))
    if save:
        store.save_file_state(
            source.name, out.generation, ((p, fp, *where.get(p, (None, None))) for p, fp in current.items())
        )
    return out
