"""Schema history: version timelines, evolution over a period, and release names."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Sequence

from lumos_dagster.floor.model import BREAKING, SchemaChange, Snapshot

if TYPE_CHECKING:  # for the annotation only: the store imports slowly
    from lumos_dagster.store.roles import RegistryAndHistory


@dataclass(frozen=True)
class VersionEntry:
    version: str
    previous_version: str | None
    change_class: str | None
    changes: tuple[SchemaChange, ...]
    first_partition: str | None  # where the version was first seen
    first_captured: datetime
    last_partition: str | None
    captures: int

    @property
    def breaking(self) -> int:
        return sum(c.severity == BREAKING for c in self.changes)


def timeline(history: Sequence[Snapshot]) -> list[VersionEntry]:
    """One entry per version, in the order versions appeared (history: oldest first)."""
    entries: dict[str, VersionEntry] = {}
    for s in history:
        if s.version is None:
            continue
        e = entries.get(s.version)
        if e is None:
            entries[s.version] = VersionEntry(
                s.version,
                s.previous_version,
                s.change_class,
                s.changes,
                s.partition_key,
                s.captured_at,
                s.partition_key,
                1,
            )
        else:
            entries[s.version] = VersionEntry(
                e.version,
                e.previous_version,
                e.change_class,
                e.changes,
                e.first_partition,
                e.first_captured,
                s.partition_key,
                e.captures + 1,
            )
    return list(entries.values())


@dataclass(frozen=True)
class Evolution:
    dataset: str
    versions: int  # versions that appeared in the period
    changes: int
    breaking: int
    per_30_days: float  # changes per 30 days over the period


def evolution(dataset: str, entries: Sequence[VersionEntry], since: datetime, until: datetime) -> Evolution:
    """Versions that first appeared in [since, until) and their changes ('new' versions bring none)."""
    inside = [e for e in entries if since <= e.first_captured < until and e.change_class != "new"]
    changes = sum(len(e.changes) for e in inside)
    days = max((until - since).total_seconds() / 86400, 1e-9)
    return Evolution(dataset, len(inside), changes, sum(e.breaking for e in inside), round(changes * 30 / days, 2))


def next_release_name(prefix: str, existing: Sequence[str]) -> str:
    """`S-` and [`S-311`, `S-9`] → `S-312`."""
    numbers = [int(m.group(1)) for n in existing if (m := re.fullmatch(re.escape(prefix) + r"(\d+)", n))]
    return f"{prefix}{max(numbers, default=0) + 1}"


def current_versions(store: RegistryAndHistory, wanted: set[str] | None = None) -> tuple[dict[str, str], list[str]]:
    """What a release records: each dataset's latest schema version (only `wanted`, when given), and
    the wanted datasets that have none (never materialized)."""
    versions = {}
    for rec in store.datasets():
        if wanted is None or rec.name in wanted:
            snap = store.latest(rec.urn)
            if snap and snap.version:
                versions[rec.name] = snap.version
    return versions, sorted(wanted - set(versions)) if wanted else []
