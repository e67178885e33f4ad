"""The source types: each one's lumos.yaml entry and builder, built-ins and `lumos.sources` plug-ins.

A source's entry needs `type` and a unique `name`; the source it builds is a FileSource or
a TableSource (lumos_dagster.sources.base). Builders import their source's module only
when one is configured: S3 needs boto3, Azure adlfs, GCS gcsfs, PostgreSQL psycopg, MongoDB pymongo, Iceberg pyiceberg,
Kafka confluent-kafka (HDFS: fsspec's WebHDFS client, which comes with fsspec).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from lumos_dagster.floor.errors import ConfigError
from lumos_dagster.floor.masking import AMBIGUOUS_PASSWORD
from lumos_dagster.floor.plugins import SOURCES, BuildContext, Plugin, Secret, SourceEntry
from lumos_dagster.formats import FORMATS
from lumos_dagster.sources.discovery import PathTemplate
from lumos_dagster.sources.warehouse_config import (
    BigQuerySourceConfig,
    DatabricksSourceConfig,
    DuckDBSourceConfig,
    RedshiftSourceConfig,
    SnowflakeSourceConfig,
    WarehouseEntry,
)

Format = Literal[FORMATS]  # type: ignore[valid-type]


class FileSourceConfig(SourceEntry):
    """What every file source shares: how files group into datasets."""

    template: str | None = Field(
        None,
        description="Path template such as `{domain}/{dataset}/dt={date}/*`; without one, datasets are auto-detected.",
    )
    formats: list[Format] | None = Field(None, description="Only these formats (default: all supported).")
    exclude: list[str] = Field(default_factory=list, description="Glob patterns of paths to ignore.")

    @field_validator("template")
    @classmethod
    def _template_compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                PathTemplate(value)
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
        return value


class LocalSourceConfig(FileSourceConfig):
    type: Literal["local"] = "local"
    name: str = Field("local", description="Unique source name; shown in reports and asset metadata.")
    root: str = Field(description="Folder to scan; relative paths are relative to lumos.yaml.")
    platform: str = Field("file", description="Catalog platform of the datasets found here.")

    @field_validator("root")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("empty: name a folder (`.` is the folder of lumos.yaml)")
        return value


class S3SourceConfig(FileSourceConfig):
    type: Literal["s3"] = "s3"
    name: str = Field("s3", description="Unique source name.")
    bucket: str = Field(description="Bucket to scan.")
    prefix: str = Field("", description="Only keys under this prefix; dataset paths are relative to it.")
    endpoint_url: str | None = Field(None, description="S3-compatible endpoint (MinIO…); default: AWS.")
    region: str | None = Field(None, description="Region (default: the AWS chain's).")
    platform: str = Field("s3", description="Catalog platform of the datasets found here.")


class AzureSourceConfig(FileSourceConfig):
    type: Literal["azure"] = "azure"
    name: str = Field("azure", description="Unique source name.")
    account_name: str = Field(description="Storage account (Blob Storage or ADLS Gen2).")
    container: str = Field(description="Container (ADLS Gen2: file system) to scan.")
    prefix: str = Field("", description="Only blobs under this prefix; dataset paths are relative to it.")
    platform: str = Field("abs", description="Catalog platform of the datasets found here (DataHub's is `abs`).")


class GCSSourceConfig(FileSourceConfig):
    type: Literal["gcs"] = "gcs"
    name: str = Field("gcs", description="Unique source name.")
    bucket: str = Field(description="Bucket to scan.")
    prefix: str = Field("", description="Only objects under this prefix; dataset paths are relative to it.")
    project: str | None = Field(None, description="Google Cloud project (default: the credentials').")
    endpoint_url: str | None = Field(
        None, description="GCS-compatible endpoint (an emulator); default: Google's, or $STORAGE_EMULATOR_HOST."
    )
    platform: str = Field("gcs", description="Catalog platform of the datasets found here.")


#: the NameNode's WebHDFS port by default (Hadoop 3's dfs.namenode.http-address, dfs.namenode.https-address)
WEBHDFS_PORT = {False: 9870, True: 9871}


@dataclass(frozen=True)
class WebHdfsAddress:
    """Where an `hdfs` source's folder is read: the NameNode's HTTP(S) address and the folder's path."""

    host: str
    port: int
    https: bool
    path: str  # absolute, without a trailing `/` (`/` itself for the root)


def webhdfs_address(url: str, webhdfs_port: int | None = None, https: bool | None = None) -> WebHdfsAddress:
    """An `hdfs` source's `url` (and, with `hdfs://`, its `webhdfs_port` and `https`) as a WebHDFS address.

    `hdfs://namenode[:rpc-port]/path` is how Hive and Spark name a folder: its port is the RPC port,
    which WebHDFS does not use. `webhdfs://namenode:http-port/path` and `swebhdfs://…` are Hadoop's own
    WebHDFS URIs, whose port is the NameNode's HTTP(S) port. Raises ValueError naming the key at fault.
    """
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in ("hdfs", "webhdfs", "swebhdfs"):
        raise ValueError(f"url: {url!r} is not an hdfs://, webhdfs:// or swebhdfs:// URL")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"url: {url!r} has a port that is not a number from 0 to 65535") from None
    if not parts.hostname:
        raise ValueError(f"url: {url!r} names no NameNode (hdfs://namenode/path)")
    if parts.username or parts.query or parts.fragment:
        raise ValueError(f"url: {url!r} has a user, query or fragment: give the user in `user`")
    path = posixpath.normpath("/" + parts.path.lstrip("/"))
    if scheme == "hdfs":
        secure = bool(https)
        return WebHdfsAddress(parts.hostname, webhdfs_port or WEBHDFS_PORT[secure], secure, path)
    if webhdfs_port is not None:
        raise ValueError(f"webhdfs_port: a {scheme}:// url carries the HTTP port itself ({scheme}://namenode:port/…)")
    if https is not None:
        raise ValueError(f"https: a {scheme}:// url says it already (webhdfs:// is HTTP, swebhdfs:// HTTPS)")
    secure = scheme == "swebhdfs"
    return WebHdfsAddress(parts.hostname, port or WEBHDFS_PORT[secure], secure, path)


class HDFSSourceConfig(FileSourceConfig):
    type: Literal["hdfs"] = "hdfs"
    name: str = Field("hdfs", description="Unique source name.")
    url: str = Field(
        description="Folder to scan, read over WebHDFS: `hdfs://namenode[:rpc-port]/path` as Hive and Spark name "
        "it, or Hadoop's WebHDFS URI `webhdfs://namenode:http-port/path` (`swebhdfs://` for HTTPS)."
    )
    webhdfs_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="With an `hdfs://` url: the NameNode's HTTP port, `dfs.namenode.http-address` (default 9870; "
        "9871 with `https`; an HttpFS gateway's is 14000).",
    )
    https: bool | None = Field(None, description="With an `hdfs://` url: WebHDFS over HTTPS (default: false).")
    user: str | None = Field(
        None,
        description="User name sent as `user.name` (simple authentication); default: the NameNode's static web "
        "user (`dr.who`). Kerberos (SPNEGO) and delegation tokens are not supported.",
    )
    platform: str = Field("hdfs", description="Catalog platform of the datasets found here (DataHub's is `hdfs`).")

    @model_validator(mode="after")
    def _address(self) -> "HDFSSourceConfig":
        webhdfs_address(self.url, self.webhdfs_port, self.https)  # raises ValueError naming the key at fault
        return self

    @property
    def address(self) -> WebHdfsAddress:
        return webhdfs_address(self.url, self.webhdfs_port, self.https)


class PostgresSourceConfig(SourceEntry):
    type: Literal["postgres"] = "postgres"
    name: str = Field("postgres", description="Unique source name.")
    dsn: Secret = Field(
        description="libpq connection string or URL; use ${ENV} for the password (read when connecting)."
    )
    schemas: list[str] = Field(default_factory=lambda: ["*"], description="Schema name globs to include.")
    exclude: list[str] = Field(default_factory=list, description="`schema.table` globs to leave out.")
    platform: str = Field("postgres", description="Catalog platform of the tables.")

    @field_validator("dsn")
    @classmethod
    def _parses(cls, value: str) -> str:
        import psycopg

        try:
            if "@" in str(psycopg.conninfo.conninfo_to_dict(value).get("host", "")):
                raise ValueError(AMBIGUOUS_PASSWORD)
        except psycopg.ProgrammingError:
            if "${" not in value:  # a DSN kept in a variable is checked when it is read
                # libpq's reason may quote part of the password: not repeated
                raise ValueError(
                    "not a libpq connection string (`host=… dbname=…`) or URL (`postgresql://…`)"
                ) from None
        return value


class MongoSourceConfig(SourceEntry):
    type: Literal["mongodb"] = "mongodb"
    name: str = Field("mongodb", description="Unique source name.")
    uri: Secret = Field(description="MongoDB connection URI; use ${ENV} for credentials (read when connecting).")
    databases: list[str] = Field(description="Databases to scan.")
    exclude: list[str] = Field(
        default_factory=lambda: ["*.system.*"], description="`database.collection` globs to leave out."
    )
    sample_size: int = Field(1000, ge=1, description="Documents sampled per collection to infer its schema.")
    platform: str = Field("mongodb", description="Catalog platform of the collections.")


class IcebergSourceConfig(SourceEntry):
    type: Literal["iceberg"] = "iceberg"
    name: str = Field("iceberg", description="Unique source name.")
    uri: Secret = Field(
        description="Catalog URI: SQL (`postgresql+psycopg://…`, `sqlite:///…`), REST (`https://…`) or Hive "
        "(`thrift://…`); use ${ENV} for credentials (read when connecting)."
    )
    catalog_name: str = Field("default", description="The catalog's name (a SQL catalog keeps tables per name).")
    warehouse: str | None = Field(None, description="Warehouse location, when the catalog needs one.")
    namespaces: list[str] = Field(default_factory=lambda: ["*"], description="Namespace name globs to include.")
    exclude: list[str] = Field(default_factory=list, description="`namespace.table` globs to leave out.")
    properties: dict[str, str] = Field(
        default_factory=dict, description="Further pyiceberg catalog properties (`s3.endpoint`, `credential`…)."
    )
    platform: str = Field("iceberg", description="Catalog platform of the tables (DataHub's is `iceberg`).")


class KafkaSourceConfig(SourceEntry):
    type: Literal["kafka"] = "kafka"
    name: str = Field("kafka", description="Unique source name.")
    bootstrap_servers: str = Field(description="Brokers to bootstrap from, `host:port[,host:port…]`.")
    topics: list[str] = Field(default_factory=lambda: ["*"], description="Topic name globs to include.")
    exclude: list[str] = Field(default_factory=list, description="Topic name globs to leave out.")
    internal: bool = Field(False, description="Also topics whose name starts with `_` (`__consumer_offsets`…).")
    schema_registry_url: Secret | None = Field(
        None, description="Confluent Schema Registry (REST): subjects `<topic>-key`/`<topic>-value` give the schemas."
    )
    schema_registry_user: str | None = Field(None, description="Registry basic-auth user.")
    schema_registry_password: Secret | None = Field(None, description="Registry basic-auth password; use ${ENV}.")
    sample_size: int = Field(
        100, ge=1, le=10000, description="Messages read per topic where no subject gives its schema."
    )
    timeout: float = Field(10.0, gt=0, description="Seconds to wait for the brokers or the registry before failing.")
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT", description="How to reach the brokers."
    )
    sasl_mechanism: str | None = Field(None, description="`PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`…")
    sasl_username: str | None = Field(None, description="SASL user.")
    sasl_password: Secret | None = Field(None, description="SASL password; use ${ENV}.")
    properties: dict[str, Secret] = Field(
        default_factory=dict, description="Further librdkafka properties (`ssl.ca.location`…); ${ENV} allowed."
    )
    platform: str = Field("kafka", description="Catalog platform of the topics (DataHub's is `kafka`).")


def _local(entry: LocalSourceConfig, context: BuildContext):
    from lumos_dagster.sources.local import LocalSource

    return LocalSource(entry, context.resolve(entry.root))


def _s3(entry: S3SourceConfig, context: BuildContext):
    from lumos_dagster.sources.s3 import S3Source

    return S3Source(entry)


def _azure(entry: AzureSourceConfig, context: BuildContext):
    from lumos_dagster.sources.objectstore import azure_source

    return azure_source(entry)


def _gcs(entry: GCSSourceConfig, context: BuildContext):
    from lumos_dagster.sources.objectstore import gcs_source

    return gcs_source(entry)


def _hdfs(entry: HDFSSourceConfig, context: BuildContext):
    from lumos_dagster.sources.objectstore import hdfs_source

    return hdfs_source(entry)


def _postgres(entry: PostgresSourceConfig, context: BuildContext):
    from lumos_dagster.sources.postgres import PostgresSource

    return PostgresSource(entry, where=f"{context.where}.dsn")


def _mongodb(entry: MongoSourceConfig, context: BuildContext):
    from lumos_dagster.sources.mongodb import MongoSource

    return MongoSource(entry, where=f"{context.where}.uri")


def _warehouse(entry: WarehouseEntry, context: BuildContext):
    from lumos_dagster.sources.warehouse import WarehouseSource

    if entry.type == "duckdb":
        entry = entry.model_copy(update={"path": context.resolve(entry.path)})
    return WarehouseSource(entry, where=context.where)


def _kafka(entry: KafkaSourceConfig, context: BuildContext):
    from lumos_dagster.sources.kafka import KafkaSource

    return KafkaSource(entry, where=context.where)


def _iceberg(entry: IcebergSourceConfig, context: BuildContext):
    from lumos_dagster.sources.iceberg import IcebergSource

    return IcebergSource(entry, where=f"{context.where}.uri")


for _plugin in (
    Plugin("local", LocalSourceConfig, _local),
    Plugin("s3", S3SourceConfig, _s3, extra="s3"),
    Plugin("azure", AzureSourceConfig, _azure, extra="azure"),
    Plugin("gcs", GCSSourceConfig, _gcs, extra="gcs"),
    Plugin("hdfs", HDFSSourceConfig, _hdfs, extra="hdfs"),
    Plugin("postgres", PostgresSourceConfig, _postgres, extra="postgres"),
    Plugin("mongodb", MongoSourceConfig, _mongodb, extra="mongodb"),
    Plugin("iceberg", IcebergSourceConfig, _iceberg, extra="iceberg"),
    Plugin("kafka", KafkaSourceConfig, _kafka, extra="kafka"),
    # warehouses: one source, a dialect each (lumos_dagster.sources.warehouse)
    Plugin("snowflake", SnowflakeSourceConfig, _warehouse, extra="warehouses"),
    Plugin("duckdb", DuckDBSourceConfig, _warehouse, extra="warehouses"),
    Plugin("redshift", RedshiftSourceConfig, _warehouse, extra="warehouses"),
    Plugin("bigquery", BigQuerySourceConfig, _warehouse, extra="warehouses"),
    Plugin("databricks", DatabricksSourceConfig, _warehouse, extra="warehouses"),
):
    SOURCES.register(_plugin)
