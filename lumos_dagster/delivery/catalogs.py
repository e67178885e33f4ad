"""The catalog adapters a lumos.yaml (or a run's resource) names, built by their types' plug-ins."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from lumos_dagster.catalog.base import CatalogAdapter
from lumos_dagster.floor.config import LumosConfig
from lumos_dagster.floor.errors import ConfigError
from lumos_dagster.floor.plugins import CATALOGS, BuildContext


def build_catalog(entry: Any, context: BuildContext) -> CatalogAdapter:
    """The adapter of one validated `catalog` entry, by its type's plug-in; credentials are read now."""
    return CATALOGS[entry.type].built(entry, context)


def build_catalogs(config: LumosConfig) -> list[CatalogAdapter]:
    return [
        build_catalog(entry, BuildContext(f"{config.source_file}: catalog[{i}]", config.base_dir))
        for i, entry in enumerate(config.catalogs)
    ]


def catalog_names(config: LumosConfig) -> list[str]:
    """The names lumos.yaml's catalogs are queued under (what a run's delivery worker says)."""
    catalogs = build_catalogs(config)
    for catalog in catalogs:
        catalog.close()
    return [c.name for c in catalogs]


def catalogs_from_entries(entries: Iterable[Mapping[str, Any]]) -> list[CatalogAdapter]:
    """The adapters of `catalog` entries given as plain values, as a run's resource holds them
    (relative paths already made absolute)."""
    adapters = []
    for i, entry in enumerate(entries):
        context = BuildContext(f"catalog[{i}]", os.getcwd())
        plugin = CATALOGS.get(entry["type"])
        if plugin is None:  # validated where lumos.yaml loaded, yet not installed where the run is
            known = ", ".join(map(repr, CATALOGS.names()))
            raise ConfigError(f"{context.where}.type: unknown type {entry['type']!r} (known: {known})")
        adapters.append(build_catalog(plugin.config.model_validate(dict(entry)), context))
    return adapters
