"""What changed in storage since the last look: created, modified and deleted files, the datasets
and partitions they belong to, the datasets that appeared and those whose files are all gone.

Per-file fingerprints (size + nanosecond mtime, or the object's ETag) live in the store,
one generation per look, never in a sensor cursor: a cursor names a generation, so it stays
a few bytes however many objects a bucket holds. A look that is not committed (its
cursor lost) is simply taken again against the same generation.

A caller may hold changes back (`Look.save(deferred)`): a file still being written, one dated in
a partition that does not exist yet. The generation then keeps such a file as it was before, so
the next look finds the change again, until it is taken.

A clock is never trusted: a file is whole when it stopped changing, not when its modification time
is old enough (a writer's clock may be hours ahead or behind, a copy may keep the original's times).
So a file found changed is looked at again `SETTLE_SECONDS` later (`still_changing`), and taken only
when its fingerprint is the same at both looks; a source whose objects appear whole (S3, Azure, GCS)
needs no second look.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Collection

from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.sources.base import FileSource
from lumos_dagster.store.roles import RegistryStore

#: seconds between the two looks at a file found changed: taken when its size and modification time
#: are the same at both, else its change waits for the next tick (which looks twice again)
SETTLE_SECONDS = 5.0
#: a modification time this far ahead of the sensor's clock is said once, naming the file (taken all the same)
AHEAD_SECONDS = 60.0
#: above this many files to look at again, one listing of the source costs less than a look at each
RELIST_AT = 200


@dataclass(frozen=True)
class FileChange:
    path: str
    kind: str  # created | modified | deleted
    dataset: str | None  # None: not part of any dataset (skipped by the discovery rules)
    partition: str | None  # the time-partition date of the file, if its dataset has one
    fingerprint: str  # the new one; "deleted" for a deletion
    mtime: float = 0.0  # when it was last written (epoch s); 0 for a deletion

    def ahead(self, now: float) -> float:
        """Seconds its modification time is ahead of `now` (the sensor's clock) beyond AHEAD_SECONDS; 0 if not."""
        return self.mtime - now if self.kind != "deleted" and self.mtime - now > AHEAD_SECONDS else 0.0


@dataclass
class Look:
    generation: int
    files: int = 0
    changes: list[FileChange] = field(default_factory=list)
    new_datasets: dict = field(default_factory=dict)  # name → DiscoveredDataset, for the registry
    vanished: list[str] = field(default_factory=list)  # datasets that had files at the last look, none now
    baseline: bool = False  # the first look: everything is recorded, nothing is a change
    unchanged: bool = False  # the listing is the last generation saved: nothing to compare, nothing to save
    state: str = ""  # digest of the generation saved: an equal listing next time means nothing changed
    # what `save` writes: path → (fingerprint, dataset, partition), now and at the generation before
    current: dict[str, tuple[str, str | None, str | None]] = field(default_factory=dict)
    before: dict[str, tuple[str, str | None, str | None]] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        return digest(self.changes)

    def save(self, store: RegistryStore, source: str, deferred: Collection[FileChange] = ()) -> str:
        """Write this look's generation, each of `deferred` as it was before (so the next look finds it
        again); returns the generation's state digest, the cursor's."""
        if self.unchanged:
            return self.state
        rows = dict(self.current)
        for change in deferred:
            if change.path in self.before:
                rows[change.path] = self.before[change.path]
            else:
                rows.pop(change.path, None)
        store.save_file_state(source, self.generation, ((p, *row) for p, row in rows.items()))
        self.state = listing_state({p: row[0] for p, row in rows.items()})
        return self.state


def digest(changes: list[FileChange]) -> str:
    payload = "\n".join(sorted(f"{c.path}\t{c.fingerprint}" for c in changes))
    return hashlib.sha1(payload.encode()).hexdigest()[:16]


def listing_state(current: dict[str, str]) -> str:
    return hashlib.sha1("\n".join(f"{p}\t{f}" for p, f in sorted(current.items())).encode()).hexdigest()


def look(
    source: FileSource,
    store: RegistryStore,
    generation: int | None,
    report: ScanReport,
    state: str | None = None,
    save: bool = True,
) -> Look:
    """List the source and compare with `generation` (None: no earlier look). When the listing's
    digest equals `state` (the last generation saved), nothing changed: the store is not even read.
    `save=False` writes nothing (a preview, or a caller that holds changes back: it calls `Look.save`)."""
    entries = list(source.list("", report))
    fingerprints = {e.path: e.fingerprint for e in entries}
    digest_now = listing_state(fingerprints)
    if generation is not None and digest_now == state:
        return Look(generation=generation, files=len(entries), unchanged=True, state=digest_now)
    grouping = source._group(entries)
    where: dict[str, tuple[str, str | None]] = {}
    for ds in grouping.datasets.values():
        for f in ds.files:
            date = ds.file_date(f)
            where[f.entry.path] = (ds.name, date.isoformat() if date else None)
    out = Look(generation=(generation or 0) + 1, files=len(entries), baseline=generation is None, state=digest_now)
    out.current = {p: (fp, *where.get(p, (None, None))) for p, fp in fingerprints.items()}
    known = {r.name for r in store.datasets(include_removed=True, sources=[source.name])}
    out.new_datasets = {name: ds for name, ds in grouping.datasets.items() if name not in known}
    if generation is not None:
        mtimes = {e.path: e.mtime for e in entries}
        out.before = store.file_state(source.name, generation)
        for path, fingerprint in fingerprints.items():
            dataset, partition = where.get(path, (None, None))
            old = out.before.get(path)
            if old is None or old[0] != fingerprint:
                kind = "created" if old is None else "modified"
                out.changes.append(FileChange(path, kind, dataset, partition, fingerprint, mtimes[path]))
        for path, (_, dataset, partition) in out.before.items():
            if path not in fingerprints:
                out.changes.append(FileChange(path, "deleted", dataset, partition, "deleted"))
        had = {dataset for _, dataset, _ in out.before.values() if dataset}
        out.vanished = sorted(had - set(grouping.datasets))
    if save:
        out.save(store, source.name)
    return out


def still_changing(source: FileSource, changes: list[FileChange], report: ScanReport) -> list[FileChange]:
    """The created and modified files of `changes` whose fingerprint moved (or which went) between this
    look and another SETTLE_SECONDS later: still being written. None on a source whose files are whole
    once listed."""
    written = [c for c in changes if c.kind != "deleted"]
    if not written or source.whole_when_listed:
        return []
    time.sleep(SETTLE_SECONDS)
    again = source.fingerprints_of([c.path for c in written], report, relist_at=RELIST_AT)
    return [c for c in written if again.get(c.path) != c.fingerprint]
