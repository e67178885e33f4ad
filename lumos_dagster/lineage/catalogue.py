"""The dataset list, resolved: the discovery registry, lumos.yaml's declarations and what code says,
in lineage order (upstreams first). Declared lineage must be acyclic; an upstream nobody discovered
or declared is reported as missing rather than invented."""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import json
from dataclasses import asdict, dataclass
from graphlib import CycleError, TopologicalSorter
from typing import Mapping, Sequence

from lumos_dagster.floor.config import LumosConfig, OwnerConfig
from lumos_dagster.floor.dataset_specs import UNDISCOVERED, Catalogue, DatasetSpec, Enrichment
from lumos_dagster.floor.errors import ConfigError
from lumos_dagster.floor.model import ColumnMapping, DatasetRecord, DatasetRef, LineageEdge, Owner
from lumos_dagster.lineage.resolve import CodeDoc, doc_from_json
from lumos_dagster.store import SnapshotStore
from lumos_dagster.store.roles import RegistryStore


@dataclass(frozen=True)
class RegistryState:
    """What the registry holds that a dataset list is resolved from: the datasets discovery recorded
    and what code says of them. One document, so that every process that builds definitions from the
    same document builds the same ones (the code location keeps it as Dagster's defs state)."""

    records: tuple[DatasetRecord, ...]
    code: Mapping[str, dict]

    @classmethod
    def read(cls, store: RegistryStore, sources: Sequence[str] | None = None) -> RegistryState:
        """The registry now; only the datasets of `sources` when given (a code location's own)."""
        return cls(tuple(store.datasets(sources=sources)), store.code())

    @classmethod
    def of_location(cls, config: LumosConfig) -> RegistryState:
        """The registry now, as a code location of `config` sees it: its own sources' datasets."""
        with SnapshotStore(config.store_url, f"{config.source_file}: store.url") as store:
            return cls.read(store, [s.name for s in config.sources])

    @functools.cached_property
    def text(self) -> str:
        """The document (compact, keys sorted: equal registries, equal text)."""
        records = [asdict(r) for r in self.records]
        return json.dumps({"datasets": records, "code": self.code}, sort_keys=True, separators=(",", ":"))

    @classmethod
    def loads(cls, text: str) -> RegistryState:
        doc = json.loads(text)
        records = tuple(
            DatasetRecord(**{**r, "partition_keys": tuple(r["partition_keys"]), "upstream": tuple(r["upstream"])})
            for r in doc["datasets"]
        )
        return cls(records, doc["code"])

    @functools.cached_property
    def digest(self) -> str:
        """The document's identity: equal registries, equal digests."""
        return hashlib.sha256(self.text.encode()).hexdigest()[:20]


def catalogue_of(config: LumosConfig, state: RegistryState, source_roots: dict[str, str]) -> Catalogue:
    code = {name: doc_from_json(doc) for name, doc in state.code.items()}
    return resolve_datasets(config, state.records, source_roots, code)


def load_catalogue(config: LumosConfig, store: RegistryStore, source_roots: dict[str, str]) -> Catalogue:
    return catalogue_of(config, RegistryState.read(store), source_roots)


def resolve_datasets(
    config: LumosConfig,
    records: Sequence[DatasetRecord],
    source_roots: dict[str, str],
    code: Mapping[str, CodeDoc] | None = None,
) -> Catalogue:
    """`source_roots`: source name → absolute root, to give each dataset its URI; `code`: what SQL
    files and dbt models say about datasets (lineage, documentation)."""
    code = code or {}
    by_name: dict[str, DatasetRecord] = {}
    for record in records:
        if record.source in source_roots:  # datasets of a source since removed from lumos.yaml are not managed
            by_name[record.name] = record
    names = list(by_name) + [d.name for d in config.datasets if d.name not in by_name]
    platform_of = {n: by_name[n].platform if n in by_name else "file" for n in names}
    instance_of = {s.name: getattr(s, "platform_instance", None) for s in config.sources}  # plug-ins may lack it

    def ref(name: str) -> DatasetRef:
        rec = by_name.get(name)
        if rec is None:
            return DatasetRef(platform_of.get(name, "file"), name, UNDISCOVERED, None)
        uri = f"{source_roots[rec.source].rstrip('/')}/{rec.location}"
        return DatasetRef(rec.platform, name, uri, rec.format, instance_of.get(rec.source))

    graph: dict[str, tuple[str, ...]] = {}
    missing: dict[str, list[str]] = {}
    specs: dict[str, DatasetSpec] = {}
    for name in names:
        rec, decl, doc = by_name.get(name), config.declaration(name), code.get(name, CodeDoc())
        # lineage declared in lumos.yaml overrides what code and the source know (a view's tables)
        if decl and decl.upstream:
            upstream = tuple(decl.upstream)
        else:
            upstream = tuple(dict.fromkeys(doc.upstream + (rec.upstream if rec else ())))
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
            profile=decl.profile if decl and decl.profile and decl.profile.enabled else None,
            enrichment=Enrichment(
                description=(decl.description if decl else None) or doc.description,
                domain=(decl.domain if decl and decl.domain else (rec.domain if rec else None)),
                owners=_owners(decl.owners if decl and decl.owners else doc.owners),
                tags=tuple(dict.fromkeys((tuple(decl.tags) if decl else ()) + doc.tags)),
                upstream=tuple(_edge(ref(u), doc) for u in graph[name]),
                sla=(decl.sla if decl else None) or doc.sla,
                default_description=next(
                    (p.description for p in config.governance.descriptions if fnmatch.fnmatchcase(name, p.path)), None
                ),
                column_descriptions=doc.column_descriptions,
                glossary=tuple((g.column, g.term) for g in config.governance.glossary),
                keys=tuple(decl.keys) if decl else (),
            ),
            upstream=graph[name],
            missing_upstream=tuple(u for u in upstream if u not in platform_of),
            time_partition_key=rec.time_partition_key if rec else None,
            first_partition=rec.first_partition if rec else None,
            file_count=rec.file_count if rec else 0,
            total_bytes=rec.total_bytes if rec else 0,
            instance=r.instance,
        )
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        cycle = " → ".join(exc.args[1])
        raise ConfigError(f"{config.source_file}: datasets[].upstream: lineage has a cycle: {cycle}") from None
    return Catalogue(tuple(specs[n] for n in order), {k: tuple(v) for k, v in missing.items()})


def _owners(owners: Sequence) -> tuple[Owner, ...]:
    """Declared owners, or code's (plain strings, read as lumos.yaml reads them)."""
    configs = (o if isinstance(o, OwnerConfig) else OwnerConfig.model_validate(o) for o in owners)
    return tuple(Owner(o.id, o.kind, o.type) for o in configs)


def _edge(upstream: DatasetRef, doc: CodeDoc) -> LineageEdge:
    """The edge, with its columns and job when code builds it (the first job found names it)."""
    found = [e for e in doc.edges if e.upstream == upstream.name]
    columns: tuple[ColumnMapping, ...] = tuple(dict.fromkeys(c for e in found for c in e.columns))
    return LineageEdge(upstream, columns, found[0].job if found else None)
