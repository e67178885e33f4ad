"""The datasets Lumos manages: the discovery registry enriched by lumos.yaml declarations.

The result is in lineage order (upstreams first) and is what the asset factories turn
into Dagster assets. Declared lineage must be acyclic; an upstream nobody discovered
or declared is reported as missing rather than invented.
"""

from __future__ import annotations

from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter
from typing import Sequence

from lumos_dagster.config import LumosConfig, ScheduleDecl
from lumos_dagster.errors import ConfigError
from lumos_dagster.model import DatasetRef, Owner
from lumos_dagster.snapshots import Enrichment
from lumos_dagster.store import DatasetRecord
from lumos_dagster.versioning import DEFAULT_POLICY

UNDISCOVERED = "(not discovered)"


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    platform: str
    source: str | None  # None: declared in lumos.yaml but not found by discovery
    location: str  # relative to the source root
    uri: str  # absolute location, for people and catalogs
    format: str | None
    cadence: str
    enrichment: Enrichment
    policy: str = DEFAULT_POLICY
    schedule: ScheduleDecl | None = None  # when its data lands (cron, zone, lag)
    upstream: tuple[str, ...] = ()
    missing_upstream: tuple[str, ...] = ()  # named in lumos.yaml, found nowhere
    time_partition_key: str | None = None
    file_count: int = 0
    total_bytes: int = 0

    @property
    def ref(self) -> DatasetRef:
        return DatasetRef(self.platform, self.name, self.uri, self.format)

    @property
    def domain(self) -> str | None:
        return self.enrichment.domain


@dataclass(frozen=True)
class Catalogue:
    datasets: tuple[DatasetSpec, ...]  # lineage order
    missing_upstreams: dict[str, tuple[str, ...]]  # unknown upstream name → datasets naming it

    def by_name(self) -> dict[str, DatasetSpec]:
        return {d.name: d for d in self.datasets}


def resolve_datasets(config: LumosConfig, records: Sequence[DatasetRecord], source_roots: dict[str, str]) -> Catalogue:
    """`source_roots`: source name → absolute root, to give each dataset its URI."""
    by_name: dict[str, DatasetRecord] = {}
    for rec in records:
        if rec.source in source_roots:  # datasets of a source since removed from lumos.yaml are not managed
            by_name[rec.name] = rec
    names = list(by_name) + [d.name for d in config.datasets if d.name not in by_name]
    platform_of = {n: by_name[n].platform if n in by_name else "file" for n in names}

    def ref(name: str) -> DatasetRef:
        rec = by_name.get(name)
        uri = f"{source_roots[rec.source].rstrip('/')}/{rec.location}" if rec else UNDISCOVERED
        return DatasetRef(platform_of.get(name, "file"), name, uri, rec.format if rec else None)

    graph: dict[str, tuple[str, ...]] = {}
    missing: dict[str, list[str]] = {}
    specs: dict[str, DatasetSpec] = {}
    for name in names:
        rec, decl = by_name.get(name), config.declaration(name)
        # lineage declared in lumos.yaml overrides what the source knows (a view's tables)
        upstream = tuple(decl.upstream) if decl and decl.upstream else (rec.upstream if rec else ())
        for u in upstream:
            if u not in platform_of:
                missing.setdefault(u, []).append(name)
        graph[name] = tuple(u for u in upstream if u in platform_of)
        r = ref(name)
        specs[name] = DatasetSpec(
            name=name,
            platform=r.platform,
            source=rec.source if rec else None,
            location=rec.location if rec else "",
            uri=r.location,
            format=r.format,
            cadence=(decl.cadence if decl and decl.cadence else config.partitions.cadence),
            policy=config.policy(name),
            schedule=decl.schedule if decl else None,
            enrichment=Enrichment(
                description=decl.description if decl else None,
                domain=(decl.domain if decl and decl.domain else (rec.domain if rec else None)),
                owners=tuple(Owner(o.id, o.kind, o.type) for o in decl.owners) if decl else (),
                tags=tuple(decl.tags) if decl else (),
                upstream=tuple(ref(u) for u in graph[name]),
            ),
            upstream=graph[name],
            missing_upstream=tuple(u for u in upstream if u not in platform_of),
            time_partition_key=rec.time_partition_key if rec else None,
            file_count=rec.file_count if rec else 0,
            total_bytes=rec.total_bytes if rec else 0,
        )
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        cycle = " → ".join(exc.args[1])
        raise ConfigError(f"{config.source_file}: datasets[].upstream: lineage has a cycle: {cycle}") from None
    return Catalogue(tuple(specs[n] for n in order), {k: tuple(v) for k, v in missing.items()})
