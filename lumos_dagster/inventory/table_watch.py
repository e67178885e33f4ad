"""What changed in a table source since the last look: tables whose fingerprint (a digest of
their columns, comments, row count, size and last change, `TableSource.fingerprints`) differs,
appeared or went away. Fingerprints live in the store, one generation per look, as the file
sources' do (lumos_dagster.inventory.watch): a location stands for a path, its dataset for the
dataset a file belongs to."""

from __future__ import annotations

from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.inventory.watch import FileChange, Look, listing_state
from lumos_dagster.sources.base import TableSource
from lumos_dagster.store.roles import RegistryStore


def look_tables(
    source: TableSource,
    store: RegistryStore,
    generation: int | None,
    report: ScanReport,
    state: str | None = None,
    save: bool = True,
) -> Look | None:
    """List the source's fingerprints and compare with `generation` (None: no earlier look); None when
    the source cannot be read. When the whole listing's digest equals `state`, the store is not read.
    `save=False` (a preview) writes nothing: the look's generation is not kept."""
    current = source.fingerprints(report)
    if current is None:
        return None
    digest_now = listing_state({location: fp for location, (_, fp) in current.items()})
    if generation is not None and digest_now == state:
        return Look(generation=generation, files=len(current), state=digest_now)
    out = Look(generation=(generation or 0) + 1, files=len(current), baseline=generation is None, state=digest_now)
    if generation is not None:
        before = store.file_state(source.name, generation)
        for location, (name, fp) in current.items():
            old = before.get(location)
            if old is None or old[0] != fp:
                out.changes.append(FileChange(location, "created" if old is None else "modified", name, None, fp))
        for location, (_, dataset, _) in before.items():
            if location not in current:
                out.changes.append(FileChange(location, "deleted", dataset, None, "deleted"))
    if save:
        rows = ((loc, fp, name, None) for loc, (name, fp) in current.items())
        store.save_file_state(source.name, out.generation, rows)
    return out
