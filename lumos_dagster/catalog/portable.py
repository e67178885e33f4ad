"""The portable Lumos Snapshot: a catalog-independent JSON document of the whole metadata
estate at one time — every dataset's current snapshot (schema, lineage, ownership, tags,
domain, documentation, stats, version, changes, errors) with the snapshots of its earlier
versions, and the releases. `estate.schema.json` next to this module describes it.

Catalogs hold current state, so an export from a catalog has no history; an export from
the Lumos store has it all, and importing it into a store restores it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib.resources import files
from typing import Callable, Iterable

import jsonschema

from lumos_dagster.errors import LumosError
from lumos_dagster.model import DatasetRecord, Snapshot, snapshot_from_json, snapshot_to_json
from lumos_dagster.store import Release, SnapshotStore

ESTATE_VERSION = "1"
DEFAULT_MAX_BYTES = 256 * 1024 * 1024


class EstateError(LumosError):
    """A portable snapshot that is unreadable, invalid or inconsistent."""


@dataclass
class Entry:
    snapshot: Snapshot
    history: list[Snapshot] = field(default_factory=list)  # earlier versions, oldest first


@dataclass
class Estate:
    entries: list[Entry]
    releases: list[Release] = field(default_factory=list)
    source: str = ""
    exported_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))


# ------------------------------------------------------------------ building


def from_store(store: SnapshotStore) -> Estate:
    entries = []
    for rec in store.datasets():
        current = store.latest(rec.urn)
        if current is None:
            continue
        earlier: dict[str, Snapshot] = {}
        for s in store.history(rec.urn):  # oldest first: the last capture of each version wins
            if s.version and s.version != current.version:
                earlier.pop(s.version, None)
                earlier[s.version] = s
        entries.append(Entry(current, list(earlier.values())))
    return Estate(entries, store.releases(), source=f"store:{store.url}")


def from_snapshots(snapshots: Iterable[Snapshot], source: str) -> Estate:
    return Estate([Entry(s) for s in sorted(snapshots, key=lambda s: s.dataset.urn)], source=source)


# ------------------------------------------------------------ serialization


def to_json(estate: Estate) -> dict:
    return {
        "lumos_snapshot_version": ESTATE_VERSION,
        "exported_at": estate.exported_at.isoformat(),
        "source": estate.source,
        "datasets": [
            {"snapshot": snapshot_to_json(e.snapshot), "history": [snapshot_to_json(h) for h in e.history]}
            for e in sorted(estate.entries, key=lambda e: e.snapshot.dataset.urn)
        ],
        "releases": [
            {"name": r.name, "created_at": r.created_at.isoformat(), "versions": r.versions} for r in estate.releases
        ],
    }


def from_json(doc: dict) -> Estate:
    return Estate(
        entries=[
            Entry(snapshot_from_json(d["snapshot"]), [snapshot_from_json(h) for h in d["history"]])
            for d in doc["datasets"]
        ],
        releases=[
            Release(r["name"], datetime.fromisoformat(r["created_at"]), dict(r["versions"])) for r in doc["releases"]
        ],
        source=doc["source"],
        exported_at=datetime.fromisoformat(doc["exported_at"]),
    )


def _schema() -> dict:
    estate = json.loads(files("lumos_dagster").joinpath("estate.schema.json").read_text())
    snapshot = json.loads(files("lumos_dagster").joinpath("snapshot.schema.json").read_text())
    estate["$defs"]["snapshot"] = {k: v for k, v in snapshot.items() if k not in ("$schema", "$id", "$defs")}
    estate["$defs"].update(snapshot["$defs"])
    return estate


def load(path: str, max_bytes: int = DEFAULT_MAX_BYTES) -> dict:
    """Read a portable snapshot file; refuse it (before anything is written) when it is too
    large, not JSON, truncated, or not a portable snapshot of a version this Lumos reads."""
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise EstateError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if size > max_bytes:
        raise EstateError(
            f"{path}: {size / 2**20:.1f} MiB, more than the limit of {max_bytes / 2**20:.0f} MiB "
            "(raise --max-bytes if the file is meant to be that large)"
        )
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except UnicodeDecodeError:
        raise EstateError(f"{path}: not UTF-8 text, so not a portable snapshot") from None
    except json.JSONDecodeError as exc:
        hint = " (the file ends early: truncated?)" if exc.pos >= size - 1 else ""
        raise EstateError(f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}{hint}") from None
    if not isinstance(doc, dict) or "lumos_snapshot_version" not in doc:
        raise EstateError(f"{path}: not a Lumos portable snapshot (no lumos_snapshot_version)")
    if doc["lumos_snapshot_version"] != ESTATE_VERSION:
        raise EstateError(
            f"{path}: portable snapshot version {doc['lumos_snapshot_version']!r}; this Lumos reads {ESTATE_VERSION!r}"
        )
    return doc


@dataclass
class Validation:
    problems: list[str]
    datasets: int = 0
    versions: int = 0
    edges: int = 0
    releases: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


def validate(doc: dict) -> Validation:
    """JSON Schema first; then that every reference resolves: lineage edges point at
    datasets in the document, history belongs to its dataset, releases name known versions."""
    errors = sorted(jsonschema.Draft202012Validator(_schema()).iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        return Validation([f"{'/'.join(str(p) for p in e.absolute_path) or '(top)'}: {e.message}" for e in errors[:20]])
    problems: list[str] = []
    urns: dict[str, str] = {}
    versions: dict[str, set[str]] = {}
    for i, d in enumerate(doc["datasets"]):
        snap = d["snapshot"]
        urn, name = snap["dataset"]["urn"], snap["dataset"]["name"]
        if urn in urns:
            problems.append(f"datasets/{i}: {name} appears twice")
        urns[urn] = name
        versions[name] = {h["version"] for h in d["history"]} | {snap["version"]}
        for j, h in enumerate(d["history"]):
            if h["dataset"]["urn"] != urn:
                problems.append(f"datasets/{i}/history/{j}: belongs to {h['dataset']['name']}, not {name}")
    edges = 0
    for i, d in enumerate(doc["datasets"]):
        for e in d["snapshot"]["upstream"]:
            edges += 1
            if e["upstream"]["urn"] not in urns:
                problems.append(
                    f"datasets/{i}: {d['snapshot']['dataset']['name']} has upstream {e['upstream']['name']}, "
                    "which is not in the document"
                )
    for r in doc["releases"]:
        for name, version in r["versions"].items():
            if version not in versions.get(name, ()):
                problems.append(f"release {r['name']}: {name} {version} is not in the document")
    return Validation(
        problems,
        datasets=len(doc["datasets"]),
        versions=sum(len(v - {None}) for v in versions.values()),
        edges=edges,
        releases=len(doc["releases"]),
    )


# ------------------------------------------------------------------ import


def import_into_store(estate: Estate, store: SnapshotStore, progress: Callable[[str], None] = lambda _: None) -> int:
    """Restore history and current snapshots into a store (e.g. SQLite → PostgreSQL)."""
    n = 0
    for i, e in enumerate(estate.entries, 1):
        s = e.snapshot
        store.upsert_datasets([DatasetRecord(s.dataset.name, s.dataset.platform, "imported", s.dataset.location,
                                             s.dataset.format, s.domain)])  # fmt: skip
        n += len(store.put([*e.history, s]))
        if i % 100 == 0 or i == len(estate.entries):
            progress(f"{i}/{len(estate.entries)} datasets")
    existing = {r.name for r in store.releases()}
    for r in estate.releases:
        if r.name not in existing:
            store.add_release(r.name, r.versions, r.created_at)
    return n


def import_into_catalog(
    estate: Estate, catalog, batch: int = 100, progress: Callable[[str], None] = lambda _: None
) -> int:
    snapshots = [e.snapshot for e in estate.entries]
    sent = 0
    for start in range(0, len(snapshots), batch):
        sent += catalog.emit(snapshots[start : start + batch])
        progress(f"{min(start + batch, len(snapshots))}/{len(snapshots)} datasets")
    return sent


# ------------------------------------------------------------------ compare


def normalized(doc: dict) -> dict:
    """The document without the times it was taken (export time, capture times)."""
    out = json.loads(json.dumps(doc))
    out.pop("exported_at", None)
    out.pop("source", None)
    for d in out["datasets"]:
        for s in [d["snapshot"], *d["history"]]:
            s.pop("captured_at", None)
    return out


@dataclass
class Comparison:
    only_left: list[str]
    only_right: list[str]
    differences: dict[str, list[str]]  # dataset → what differs

    @property
    def same(self) -> bool:
        return not (self.only_left or self.only_right or self.differences)


_COMPARED = {
    "schema": lambda s: s.fingerprint,
    "version": lambda s: s.version,
    "owners": lambda s: sorted((o.id, o.kind, o.type) for o in s.owners),
    "tags": lambda s: sorted(s.tags),
    "upstream": lambda s: sorted(e.upstream.name for e in s.upstream),
    "description": lambda s: s.description,
    "domain": lambda s: s.domain,
    "removed": lambda s: s.removed,
}


def compare(left: Estate, right: Estate) -> Comparison:
    """Migration verification: datasets, edges, owners, tags… present on both sides, and what differs."""
    a = {e.snapshot.dataset.name: e.snapshot for e in left.entries}
    b = {e.snapshot.dataset.name: e.snapshot for e in right.entries}
    differences = {}
    for name in sorted(set(a) & set(b)):
        diff = [
            f"{what}: {get(a[name])!r} ≠ {get(b[name])!r}"
            for what, get in _COMPARED.items()
            if get(a[name]) != get(b[name])
        ]
        if diff:
            differences[name] = diff
    return Comparison(sorted(set(a) - set(b)), sorted(set(b) - set(a)), differences)
