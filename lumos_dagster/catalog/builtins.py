"""The catalog types: each one's lumos.yaml entry and builder, built-ins and `lumos.catalogs` plug-ins.

A catalog's builder returns a CatalogAdapter (lumos_dagster.catalog.base), made of plain
values; it runs when a run starts, so credentials named by `*_env` fields are read then.
Builders import their adapter's module only when one is configured (DataHub, OpenLineage
and requests are heavy).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from lumos_dagster.catalog.base import secret
from lumos_dagster.floor.masking import shown_url
from lumos_dagster.floor.plugins import CATALOGS, BuildContext, ConfigModel, Plugin


class DataHubLiteCatalogConfig(ConfigModel):
    type: Literal["datahub-lite"] = "datahub-lite"
    path: str = Field(".lumos/catalog.db", description="DataHub Lite (SQLite) file.")
    env: str = Field("PROD", description="DataHub environment (fabric) of dataset URNs.")


class DataHubRestCatalogConfig(ConfigModel):
    type: Literal["datahub-rest"] = "datahub-rest"
    server: str = Field(description="DataHub GMS URL, e.g. http://datahub-gms:8080.")
    token_env: str | None = Field(
        "DATAHUB_GMS_TOKEN",
        description="Environment variable holding the access token, read when a run starts (unset: no token).",
    )
    env: str = Field("PROD", description="DataHub environment (fabric) of dataset URNs.")
    batch_size: int = Field(100, ge=1, description="Aspects per ingest request.")
    retries: int = Field(3, ge=0, description="Retries of a failed request, with exponential backoff.")
    timeout_sec: float = Field(30, gt=0, description="Connect and read timeout of each request.")


class DataHubFileCatalogConfig(ConfigModel):
    type: Literal["datahub-file"] = "datahub-file"
    path: str = Field(".lumos/datahub-mcps.json", description="MCP file in DataHub's file-sink format.")
    env: str = Field("PROD", description="DataHub environment (fabric) of dataset URNs.")


class OpenLineageCatalogConfig(ConfigModel):
    type: Literal["openlineage"] = "openlineage"
    url: str | None = Field(
        None, description="HTTP endpoint of an OpenLineage consumer (Marquez: http://marquez:5000)."
    )
    path: str | None = Field(None, description="Or a file: one OpenLineage event per line.")
    api_key_env: str | None = Field(None, description="Environment variable holding the HTTP API key (must be set).")
    namespace: str = Field("lumos", description="OpenLineage namespace of the datasets.")
    timeout_sec: float = Field(30, gt=0, description="HTTP timeout.")

    @model_validator(mode="after")
    def _one_transport(self) -> "OpenLineageCatalogConfig":
        if (self.url is None) == (self.path is None):
            raise ValueError("give exactly one of url (HTTP transport) or path (file transport)")
        return self


class OpenMetadataCatalogConfig(ConfigModel):
    type: Literal["openmetadata"] = "openmetadata"
    server: str = Field(description="OpenMetadata server, e.g. http://openmetadata:8585.")
    token_env: str | None = Field(
        "OPENMETADATA_TOKEN", description="Environment variable holding the JWT token (unset: no token)."
    )
    service: str = Field("lumos", description="Database service the tables are registered under.")
    database: str = Field("lake", description="Database name under the service.")
    timeout_sec: float = Field(30, gt=0, description="HTTP timeout.")
    retries: int = Field(3, ge=0, description="Retries of a failed request, with exponential backoff.")


class AtlasCatalogConfig(ConfigModel):
    type: Literal["atlas"] = "atlas"
    url: str = Field(description="Apache Atlas server, e.g. http://atlas:21000.")
    username: str | None = Field(None, description="User for basic authentication (Atlas' default).")
    password_env: str | None = Field(
        "ATLAS_PASSWORD", description="Environment variable holding that user's password (must be set with username)."
    )
    token_env: str | None = Field(
        None, description="Or environment variable holding a bearer token (a Knox or JWT front), must be set."
    )
    cluster: str = Field("lumos", description="Suffix of qualified names: `file://raw/orders@lumos`.")
    timeout_sec: float = Field(30, gt=0, description="HTTP timeout.")
    retries: int = Field(3, ge=0, description="Retries of a failed request, with exponential backoff.")


class AmundsenCatalogConfig(ConfigModel):
    type: Literal["amundsen"] = "amundsen"
    path: str = Field(
        ".lumos/amundsen", description="Folder of databuilder's node and relationship CSVs (its publisher loads them)."
    )
    cluster: str = Field("lumos", description="Amundsen cluster of the tables: `file://lumos.raw/orders`.")


def _datahub_lite(entry: DataHubLiteCatalogConfig, context: BuildContext):
    from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog

    return DataHubLiteCatalog(context.resolve(entry.path), entry.env)


def _datahub_rest(entry: DataHubRestCatalogConfig, context: BuildContext):
    from lumos_dagster.catalog.datahub_rest import DataHubRestCatalog

    token = secret(entry.token_env, f"DataHub GMS {shown_url(entry.server)}", required=False)
    return DataHubRestCatalog(entry.server, token, entry.env, entry.batch_size, entry.retries, entry.timeout_sec)


def _datahub_file(entry: DataHubFileCatalogConfig, context: BuildContext):
    from lumos_dagster.catalog.datahub_file import DataHubFileCatalog

    return DataHubFileCatalog(context.resolve(entry.path), entry.env)


def _openlineage(entry: OpenLineageCatalogConfig, context: BuildContext):
    from lumos_dagster.catalog.openlineage import OpenLineageCatalog

    shown = shown_url(entry.url) if entry.url else entry.path
    key = secret(entry.api_key_env, f"OpenLineage {shown}", required=entry.api_key_env is not None)
    path = context.resolve(entry.path) if entry.path else None
    return OpenLineageCatalog(entry.namespace, entry.url, path, key, entry.timeout_sec)


def _openmetadata(entry: OpenMetadataCatalogConfig, context: BuildContext):
    from lumos_dagster.catalog.openmetadata import OpenMetadataCatalog

    token = secret(entry.token_env, f"OpenMetadata {shown_url(entry.server)}", required=False)
    return OpenMetadataCatalog(entry.server, token, entry.service, entry.database, entry.timeout_sec, entry.retries)


def _atlas(entry: AtlasCatalogConfig, context: BuildContext):
    from lumos_dagster.catalog.atlas import AtlasCatalog

    token = secret(entry.token_env, f"Atlas {shown_url(entry.url)}", required=True) if entry.token_env else None
    password = secret(entry.password_env, f"Atlas {shown_url(entry.url)}", required=True) if entry.username else None
    return AtlasCatalog(entry.url, entry.username, password, token, entry.cluster, entry.timeout_sec, entry.retries)


def _amundsen(entry: AmundsenCatalogConfig, context: BuildContext):
    from lumos_dagster.catalog.amundsen import AmundsenCatalog

    return AmundsenCatalog(context.resolve(entry.path), entry.cluster)


for _plugin in (
    Plugin("datahub-lite", DataHubLiteCatalogConfig, _datahub_lite),
    Plugin("datahub-rest", DataHubRestCatalogConfig, _datahub_rest),
    Plugin("datahub-file", DataHubFileCatalogConfig, _datahub_file),
    Plugin("openlineage", OpenLineageCatalogConfig, _openlineage, extra="openlineage"),
    Plugin("openmetadata", OpenMetadataCatalogConfig, _openmetadata),
    Plugin("atlas", AtlasCatalogConfig, _atlas),
    Plugin("amundsen", AmundsenCatalogConfig, _amundsen),
):
    CATALOGS.register(_plugin)
