"""Lumos' optional parts: each source, catalog and face beyond the core is an extra of the package
(`pip install 'lumos[s3]'`, `'lumos[all]'` for everything), as DataHub's ingestion takes one per
source. Where an extra's library is imported, `needs` turns its absence into one message naming the
extra to install, instead of a bare `No module named …` deep in a run.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from lumos_dagster.floor.errors import LumosError

#: each extra of pyproject.toml and the top-level modules it brings that Lumos imports
EXTRAS: dict[str, tuple[str, ...]] = {
    "s3": ("boto3", "botocore"),
    "azure": ("adlfs", "fsspec"),
    "gcs": ("gcsfs", "fsspec"),
    "hdfs": ("fsspec",),
    "mongodb": ("pymongo", "bson"),
    "iceberg": ("pyiceberg",),
    "delta": ("deltalake",),
    "postgres": ("psycopg", "dagster_postgres"),
    "warehouses": ("duckdb", "snowflake", "google", "databricks"),
    "kafka": ("confluent_kafka", "grpc_tools"),
    "openlineage": ("openlineage",),
    "api": ("fastapi", "starlette", "uvicorn", "httpx"),
    "excel": ("openpyxl",),
    "deploy": ("supervisor", "httpx"),
}


class MissingExtra(LumosError, ModuleNotFoundError):
    """A library of one of Lumos' extras is not installed (still a ModuleNotFoundError to whoever
    catches those)."""


@contextmanager
def needs(extra: str | None, what: str) -> Iterator[None]:
    """Imports in this block of a module of `extra` that is not installed raise `MissingExtra` saying
    `what` needs it and how to install it; any other missing module is raised as it is."""
    try:
        yield
    except ModuleNotFoundError as exc:
        top = (exc.name or "").partition(".")[0]
        if extra is None or isinstance(exc, MissingExtra) or top not in EXTRAS[extra]:
            raise
        raise MissingExtra(
            f"{what} needs Lumos' `{extra}` extra ({top} is not installed): pip install 'lumos[{extra}]'",
            name=exc.name,
        ) from None
