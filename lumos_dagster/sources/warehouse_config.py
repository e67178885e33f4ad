"""lumos.yaml entries of the warehouse sources (lumos_dagster.sources.warehouse): one type each,
sharing what every warehouse source takes. Credentials are `Secret`s, expanded only when
connecting; left out, each connector's own chain applies (Snowflake's connections.toml, Google's
application default credentials)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from lumos_dagster.floor.plugins import Secret, SourceEntry


class WarehouseSourceConfig(SourceEntry):
    schemas: list[str] = Field(default_factory=lambda: ["*"], description="Schema (dataset) name globs to include.")
    exclude: list[str] = Field(default_factory=list, description="`schema.table` globs to leave out.")


class DuckDBSourceConfig(WarehouseSourceConfig):
    type: Literal["duckdb"] = "duckdb"
    name: str = Field("duckdb", description="Unique source name.")
    path: str = Field(description="The database file, opened read-only; relative paths are relative to lumos.yaml.")
    platform: str = Field("duckdb", description="Catalog platform of the tables.")


class SnowflakeSourceConfig(WarehouseSourceConfig):
    type: Literal["snowflake"] = "snowflake"
    name: str = Field("snowflake", description="Unique source name.")
    database: str = Field(description="The database whose INFORMATION_SCHEMA is read.")
    account: str | None = Field(None, description="Account identifier (default: the connection's).")
    user: str | None = Field(None, description="User (default: the connection's).")
    password: Secret | None = Field(None, description="Use ${ENV}; left out, the connector's own chain applies.")
    warehouse: str | None = Field(None, description="Virtual warehouse for the metadata queries.")
    role: str | None = Field(None, description="Role to read as.")
    connection_name: str | None = Field(None, description="A connection of ~/.snowflake/connections.toml.")
    connect_args: dict[str, Secret] = Field(
        default_factory=dict, description="Further snowflake.connector.connect arguments (`authenticator`…)."
    )
    platform: str = Field("snowflake", description="Catalog platform of the tables.")


class RedshiftSourceConfig(WarehouseSourceConfig):
    type: Literal["redshift"] = "redshift"
    name: str = Field("redshift", description="Unique source name.")
    dsn: Secret = Field(description="libpq connection string or URL (Redshift speaks PostgreSQL's protocol); ${ENV}.")
    platform: str = Field("redshift", description="Catalog platform of the tables.")


class BigQuerySourceConfig(WarehouseSourceConfig):
    type: Literal["bigquery"] = "bigquery"
    name: str = Field("bigquery", description="Unique source name.")
    project: str = Field(description="The project whose datasets are read (credentials: application default).")
    region: str = Field("us", description="Region of the datasets (INFORMATION_SCHEMA is per region).")
    platform: str = Field("bigquery", description="Catalog platform of the tables.")

    @field_validator("region")
    @classmethod
    def _region(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z0-9-]+", value):  # it is part of the INFORMATION_SCHEMA views' name
            raise ValueError("not a BigQuery region such as `us` or `europe-west1`")
        return value


class DatabricksSourceConfig(WarehouseSourceConfig):
    type: Literal["databricks"] = "databricks"
    name: str = Field("databricks", description="Unique source name.")
    server_hostname: str = Field(description="Workspace host, e.g. `dbc-1234.cloud.databricks.com`.")
    http_path: str = Field(description="SQL warehouse HTTP path, e.g. `/sql/1.0/warehouses/abc`.")
    access_token: Secret = Field("${DATABRICKS_TOKEN}", description="Personal access token; use ${ENV}.")
    catalog: str = Field(description="Unity Catalog catalog whose information_schema is read.")
    platform: str = Field("databricks", description="Catalog platform of the tables.")


#: an entry of one of the types above (its `type` tells which)
WarehouseEntry = (
    DuckDBSourceConfig | SnowflakeSourceConfig | RedshiftSourceConfig | BigQuerySourceConfig | DatabricksSourceConfig
)
