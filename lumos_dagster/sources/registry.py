"""The source types: each one's lumos.yaml entry and builder, built-ins and `lumos.sources` plug-ins.

A source's entry needs `type` and a unique `name`; the source it builds is a FileSource or
a TableSource (lumos_dagster.sources.base). Builders import their source's module only
when one is configured: S3 needs boto3, PostgreSQL psycopg, MongoDB pymongo.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from lumos_dagster.errors import ConfigError
from lumos_dagster.formats import FORMATS
from lumos_dagster.plugins import BuildContext, ConfigModel, Plugin, Registry, Secret
from lumos_dagster.scan.discovery import PathTemplate

Format = Literal[FORMATS]  # type: ignore[valid-type]


class FileSourceConfig(ConfigModel):
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


class PostgresSourceConfig(ConfigModel):
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
            psycopg.conninfo.conninfo_to_dict(value)
        except psycopg.ProgrammingError:
            if "${" not in value:  # a DSN kept in a variable is checked when it is read
                # libpq's reason may quote part of the password: not repeated
                raise ValueError(
                    "not a libpq connection string (`host=… dbname=…`) or URL (`postgresql://…`)"
                ) from None
        return value


class MongoSourceConfig(ConfigModel):
    type: Literal["mongodb"] = "mongodb"
    name: str = Field("mongodb", description="Unique source name.")
    uri: Secret = Field(description="MongoDB connection URI; use ${ENV} for credentials (read when connecting).")
    databases: list[str] = Field(description="Databases to scan.")
    exclude: list[str] = Field(
        default_factory=lambda: ["*.system.*"], description="`database.collection` globs to leave out."
    )
    sample_size: int = Field(1000, ge=1, description="Documents sampled per collection to infer its schema.")
    platform: str = Field("mongodb", description="Catalog platform of the collections.")


def _local(entry: LocalSourceConfig, context: BuildContext):
    from lumos_dagster.sources.local import LocalSource

    return LocalSource(entry, context.resolve(entry.root))


def _s3(entry: S3SourceConfig, context: BuildContext):
    from lumos_dagster.sources.s3 import S3Source

    return S3Source(entry)


def _postgres(entry: PostgresSourceConfig, context: BuildContext):
    from lumos_dagster.sources.postgres import PostgresSource

    return PostgresSource(entry, where=f"{context.where}.dsn")


def _mongodb(entry: MongoSourceConfig, context: BuildContext):
    from lumos_dagster.sources.mongodb import MongoSource

    return MongoSource(entry, where=f"{context.where}.uri")


SOURCES: Registry[Plugin] = Registry(
    "lumos.sources",
    Plugin,
    (
        Plugin("local", LocalSourceConfig, _local),
        Plugin("s3", S3SourceConfig, _s3),
        Plugin("postgres", PostgresSourceConfig, _postgres),
        Plugin("mongodb", MongoSourceConfig, _mongodb),
    ),
)
