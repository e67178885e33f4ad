"""The snapshot store and the catalog as Dagster resources."""

from __future__ import annotations

from dagster import ConfigurableResource

from lumos_dagster.catalog.base import CatalogAdapter
from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog
from lumos_dagster.store import SnapshotStore


class SnapshotStoreResource(ConfigurableResource):
    """SQLAlchemy URL of the snapshot store (sqlite:///… by default, postgresql+psycopg://… in deployments)."""

    url: str

    def open(self) -> SnapshotStore:
        return SnapshotStore(self.url)


class DataHubLiteResource(ConfigurableResource):
    """DataHub Lite file the catalog adapter writes to."""

    path: str
    env: str = "PROD"

    def adapter(self) -> CatalogAdapter:
        return DataHubLiteCatalog(self.path, self.env)
