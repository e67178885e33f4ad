"""Catalog adapters: Lumos snapshots out to the catalogs people use."""

from __future__ import annotations

import json

from pydantic import TypeAdapter

from lumos_dagster.catalog.base import CatalogAdapter, secret
from lumos_dagster.config import (
    Catalog,
    DataHubFileCatalogConfig,
    DataHubLiteCatalogConfig,
    DataHubRestCatalogConfig,
    LumosConfig,
    OpenLineageCatalogConfig,
    OpenMetadataCatalogConfig,
)

_CATALOGS = TypeAdapter(list[Catalog])


def catalogs_json(config: LumosConfig) -> str:
    """The catalog entries with their paths made absolute: what a run needs, no secrets."""
    entries = []
    for cat in config.catalogs:
        entry = cat.model_dump()
        if entry.get("path"):
            entry["path"] = config.resolve(entry["path"])
        entries.append(entry)
    return json.dumps(entries)


def catalogs_from_json(text: str) -> list[CatalogAdapter]:
    return [build_catalog(c) for c in _CATALOGS.validate_json(text)]


def build_catalog(cat) -> CatalogAdapter:
    """One adapter for one `catalog` entry (paths already absolute); credentials come from the environment now."""
    if isinstance(cat, DataHubLiteCatalogConfig):
        from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog

        return DataHubLiteCatalog(cat.path, cat.env)
    if isinstance(cat, DataHubFileCatalogConfig):
        from lumos_dagster.catalog.datahub_file import DataHubFileCatalog

        return DataHubFileCatalog(cat.path, cat.env)
    if isinstance(cat, DataHubRestCatalogConfig):
        from lumos_dagster.catalog.datahub_rest import DataHubRestCatalog

        token = secret(cat.token_env, f"DataHub GMS {cat.server}", required=False)
        return DataHubRestCatalog(cat.server, token, cat.env, cat.batch_size, cat.retries, cat.timeout_sec)
    if isinstance(cat, OpenLineageCatalogConfig):
        from lumos_dagster.catalog.openlineage import OpenLineageCatalog

        key = secret(cat.api_key_env, f"OpenLineage {cat.url}", required=cat.api_key_env is not None)
        return OpenLineageCatalog(cat.namespace, cat.url, cat.path, key, cat.timeout_sec)
    if isinstance(cat, OpenMetadataCatalogConfig):
        from lumos_dagster.catalog.openmetadata import OpenMetadataCatalog

        token = secret(cat.token_env, f"OpenMetadata {cat.server}", required=False)
        return OpenMetadataCatalog(cat.server, token, cat.service, cat.database, cat.timeout_sec, cat.retries)
    raise TypeError(f"not a catalog configuration: {cat!r}")


def build_catalogs(config: LumosConfig) -> list[CatalogAdapter]:
    return catalogs_from_json(catalogs_json(config))
