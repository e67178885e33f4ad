"""The snapshot store and the catalog as Dagster resources."""

from __future__ import annotations

from dagster import ConfigurableResource

from lumos_dagster.catalog import catalogs_from_json
from lumos_dagster.catalog.base import CatalogAdapter
from lumos_dagster.store import SnapshotStore


class SnapshotStoreResource(ConfigurableResource):
    """SQLAlchemy URL of the snapshot store (sqlite:///… by default, postgresql+psycopg://… in deployments)."""

    url: str

    def open(self) -> SnapshotStore:
        return SnapshotStore(self.url)


class CatalogsResource(ConfigurableResource):
    """The catalogs of lumos.yaml (JSON, absolute paths, no secrets). Tokens are read from
    the environment variables they name when a run builds the adapters."""

    catalogs: str

    def adapters(self) -> list[CatalogAdapter]:
        return catalogs_from_json(self.catalogs)
