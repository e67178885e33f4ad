"""Catalog adapters: Lumos snapshots out to the catalogs people use."""

from __future__ import annotations

from lumos_dagster.catalog.base import CatalogAdapter
from lumos_dagster.config import DataHubLiteCatalogConfig, LumosConfig


def build_catalog(config: LumosConfig) -> CatalogAdapter:
    cat = config.catalog
    if isinstance(cat, DataHubLiteCatalogConfig):
        from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog

        return DataHubLiteCatalog(config.resolve(cat.path), cat.env)
    raise NotImplementedError(f"catalog type {cat.type!r}")
