"""The datasets Lumos manages, resolved: each one's place, format, cadence, policy and what
declarations and code add to it (`Enrichment`), in lineage order (upstreams first).

`lumos_dagster.lineage.catalogue` resolves them from the registry, lumos.yaml and code; the
snapshot run, the checks, the reports and the Dagster definitions all take this list.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from lumos_dagster.floor.config import ProfileDecl, ScheduleDecl
from lumos_dagster.floor.model import DEFAULT_POLICY, DatasetRef, LineageEdge, Owner
from lumos_dagster.floor.naming import asset_paths

UNDISCOVERED = "(not discovered)"


@dataclass(frozen=True)
class Enrichment:
    """What declarations, code and governance rules add to what the files say."""

    description: str | None = None
    domain: str | None = None
    owners: tuple[Owner, ...] = ()
    tags: tuple[str, ...] = ()
    upstream: tuple[LineageEdge, ...] = ()
    sla: str | None = None
    # used only when neither declarations, code nor the source document the dataset
    default_description: str | None = None
    column_descriptions: Mapping[str, str] = field(default_factory=dict)  # flat path → description
    glossary: tuple[tuple[str, str], ...] = ()  # (column-name glob, business term)
    keys: tuple[str, ...] = ()  # declared primary-key columns (flat paths)


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
    profile: ProfileDecl | None = None  # profiled on Spark when set
    upstream: tuple[str, ...] = ()
    missing_upstream: tuple[str, ...] = ()  # named in lumos.yaml, found nowhere
    time_partition_key: str | None = None
    first_partition: str | None = None  # the earliest time partition's date (ISO) discovery saw
    file_count: int = 0
    total_bytes: int = 0
    instance: str | None = None  # its source's platform instance

    @property
    def ref(self) -> DatasetRef:
        return DatasetRef(self.platform, self.name, self.uri, self.format, self.instance)

    @property
    def domain(self) -> str | None:
        return self.enrichment.domain

    @property
    def source_root(self) -> str | None:
        """The absolute root of the dataset's source (`uri` is it joined with `location`)."""
        if self.source is None or not self.location or not self.uri.endswith("/" + self.location):
            return None
        return self.uri[: -len(self.location) - 1]

    @property
    def description(self) -> str | None:
        """What lumos.yaml or code says, else governance's default by path: what the catalogs get
        (a source's own comment, known only once read, comes before the default there)."""
        return self.enrichment.description or self.enrichment.default_description


@dataclass(frozen=True)
class Catalogue:
    datasets: tuple[DatasetSpec, ...]  # lineage order
    missing_upstreams: dict[str, tuple[str, ...]]  # unknown upstream name → datasets naming it

    def by_name(self) -> dict[str, DatasetSpec]:
        """The datasets by name: one dict for the catalogue's life (read it, never change it). Asked for
        by every batch of a run, building it anew each time made a run's cost grow with the estate's square."""
        return self._by_name

    def consumers(self) -> dict[str, list[str]]:
        """Each dataset's (and missing upstream's) direct consumers, in lineage order; shared as `by_name`."""
        return self._consumers

    @functools.cached_property
    def _by_name(self) -> dict[str, DatasetSpec]:
        return {d.name: d for d in self.datasets}

    @functools.cached_property
    def _consumers(self) -> dict[str, list[str]]:
        children: dict[str, list[str]] = {}
        for d in self.datasets:
            for u in d.upstream:
                children.setdefault(u, []).append(d.name)
        return children

    def asset_paths(self) -> dict[str, tuple[str, ...]]:
        """The asset key path of every dataset, and of every upstream named but missing (the code
        location shows those as external assets)."""
        return asset_paths([d.name for d in self.datasets] + list(self.missing_upstreams))


def chunks(datasets: Sequence[DatasetSpec], size: int) -> list[list[DatasetSpec]]:
    """`datasets` (lineage order) in groups of lineage-linked datasets: those linked by lineage are
    always in one group (which exceeds `size` if it must), unlinked ones are packed together up to
    `size`. Groups are Dagster ops, so no op depends on another: a failed gate holds back exactly
    what is downstream of it, as in one op, and groups can run in separate runs side by side."""
    names = {d.name for d in datasets}
    parent = {d.name: d.name for d in datasets}

    def root(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for d in datasets:
        for u in d.upstream:
            if u in names:
                parent[root(u)] = root(d.name)
    components: dict[str, list[DatasetSpec]] = {}
    for d in datasets:  # each component keeps the lineage order
        components.setdefault(root(d.name), []).append(d)
    out: list[list[DatasetSpec]] = []
    for component in components.values():
        if not out or len(out[-1]) + len(component) > size:
            out.append([])
        out[-1].extend(component)
    return out
