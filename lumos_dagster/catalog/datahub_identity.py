"""Where a dataset is in DataHub: the URN, containers, browse path and sub-types that DataHub's own
ingestion source for its platform gives the same table, so that Lumos and that source write one
entity, not two.

Each rule follows the source named beside it, as acryl-datahub 1.7.0.17 builds them (docs/catalogs.md
has the table; tests/test_datahub_parity.py runs DataHub's `s3` and `delta-lake` sources on the same
lake and compares):

* files (`file`, `s3`, `gcs`, `abs`, `hdfs`): the `s3` source (`data_lake_common/data_lake_utils.py`):
  the table's path without its scheme (`tmp/lake/sales/orders`, `bucket/lake/sales/orders`); on an
  object store a bucket container, then one folder per level; locally an unnamed root folder, then
  `/tmp`, `/tmp/lake`… (absolute paths);
* `delta-lake`: the `delta-lake` source: the same name, folders without the root or a bucket;
* `iceberg`: the `iceberg` source: `namespace.table` in one namespace container;
* SQL databases: `database.schema.table` in a database and a schema container (Snowflake's lowercased,
  BigQuery's in a project and a dataset, Databricks' in a catalog and a schema);
* `mongodb`: `database.collection` in a database container;
* `kafka`: the topic, no container, the browse path `env/kafka`.

With a platform instance, the URN's name is prefixed with it, the dataset gets its
`dataPlatformInstance` and the browse path starts at the instance, as in DataHub.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import unquote, urlsplit

from datahub.emitter.mce_builder import (
    make_data_platform_urn,
    make_dataplatform_instance_urn,
    make_dataset_urn_with_platform_instance,
)
from datahub.emitter.mcp_builder import (
    BigQueryDatasetKey,
    BucketKey,
    CatalogKey,
    ContainerKey,
    DatabaseKey,
    FolderKey,
    NamespaceKey,
    ProjectIdKey,
    SchemaKey,
    UnitySchemaKey,
)
from datahub.metadata.schema_classes import BrowsePathEntryClass, DataPlatformInstanceClass

from lumos_dagster.floor.model import DatasetRef

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
#: object stores: the bucket's sub-type (DataHub's `s3` source)
_BUCKETS = {"s3": "S3 bucket", "gcs": "GCS bucket", "abs": "ABS container"}
_FILES = frozenset({"file", "hdfs", *_BUCKETS})
#: SQL platforms whose names DataHub's source lowercases by default (`convert_urns_to_lowercase`)
_LOWERCASED = frozenset({"snowflake"})
_VIEWS = frozenset({"view", "materialized_view"})


@dataclass(frozen=True)
class Container:
    key: ContainerKey
    name: str
    sub_type: str


@dataclass(frozen=True)
class Identity:
    """A dataset's place in DataHub."""

    urn: str
    containers: tuple[Container, ...]  # root first; the dataset is in the last
    sub_types: tuple[str, ...]  # the dataset's (none for files, as DataHub's file sources give none)
    platform_instance: DataPlatformInstanceClass | None  # the dataset's, when its source gives one
    browse_root: tuple[BrowsePathEntryClass, ...]  # what comes before the containers in browse paths

    def browse_path(self, depth: int | None = None) -> list[BrowsePathEntryClass]:
        """The browse path of the container at `depth` (its ancestors), or of the dataset (None)."""
        above = self.containers if depth is None else self.containers[:depth]
        return [*self.browse_root, *(BrowsePathEntryClass(id=c.key.as_urn(), urn=c.key.as_urn()) for c in above)]


def identity(ref: DatasetRef, env: str = "PROD") -> Identity:
    """Where DataHub's own source for `ref`'s platform puts it."""
    return _identity(ref.platform, ref.name, ref.location, ref.format, ref.instance, env)


def dataset_urn(ref: DatasetRef, env: str = "PROD") -> str:
    return identity(ref, env).urn


@lru_cache(maxsize=1 << 16)  # built for every aspect and every lineage edge of a write
def _identity(platform: str, name: str, location: str, fmt: str | None, instance: str | None, env: str) -> Identity:
    # a table folder (Delta; an Iceberg table found in a lake rather than in a catalog) is named by its path
    folder = platform == "delta-lake" or platform == "iceberg" and "/" in name
    if platform in _FILES or folder and _is_path(location):
        if not _is_path(location):  # declared, never found: where it will be is not known yet
            return _identity_of(platform, name, [], (), instance, env)
        return _path_identity(platform, location, instance, env)
    if platform == "iceberg":
        namespace, _, _ = name.rpartition(".")
        keys = [Container(NamespaceKey(namespace=namespace, platform=platform, instance=instance, env=env),
                          namespace, "Namespace")] if namespace else []  # fmt: skip
        return _identity_of(platform, name, keys, ("Table",), instance, env, aspect="always")
    if platform == "kafka":
        browse = (BrowsePathEntryClass(id=env.lower()), BrowsePathEntryClass(id=platform))
        return _identity_of(platform, name, [], ("Topic",), instance, env, aspect="always", browse=browse)
    if platform == "mongodb":
        database, _, collection = name.partition("/")
        key = DatabaseKey(database=database, platform=platform, instance=instance, env=env,
                          backcompat_env_as_instance=True)  # fmt: skip
        return _identity_of(platform, f"{database}.{collection}", [Container(key, database, "Database")],
                            ("Collection",), instance, env)  # fmt: skip
    return _sql_identity(platform, name, fmt, instance, env)


def _is_path(location: str) -> bool:
    return location.startswith("/") or bool(_SCHEME.match(location))


def _path_identity(platform: str, location: str, instance: str | None, env: str) -> Identity:
    path = urlsplit(location).path if platform == "hdfs" else _SCHEME.sub("", location)
    path = name = path.rstrip("/")
    keys: list[Container] = []
    parent: ContainerKey | None = None
    if platform in _BUCKETS:
        bucket, _, path = path.partition("/")
        parent = BucketKey(platform=platform, instance=instance, env=env, backcompat_env_as_instance=True,
                           bucket_name=bucket)  # fmt: skip
        keys.append(Container(parent, bucket, _BUCKETS[platform]))
    elif platform != "file" or not location.startswith("/"):
        path = path.lstrip("/")  # the delta-lake source (and a non-local file system): no root folder
    for folder in path.split("/")[:-1]:
        if isinstance(parent, BucketKey):
            at = f"{parent.bucket_name}/{folder}"
        elif isinstance(parent, FolderKey):
            at = f"{parent.folder_abs_path}/{folder}"
        else:
            at = folder
        parent = FolderKey(platform=platform, instance=instance, env=env, backcompat_env_as_instance=True,
                           folder_abs_path=at)  # fmt: skip
        keys.append(Container(parent, folder, "Folder"))
    # the delta-lake source never gives its datasets a dataPlatformInstance, the s3 source only with an instance
    return _identity_of(platform, name.strip("/"), keys, (), instance, env,
                        aspect="never" if platform == "delta-lake" else "when set")  # fmt: skip


def _sql_identity(platform: str, name: str, fmt: str | None, instance: str | None, env: str) -> Identity:
    parts = [unquote(p) for p in name.split("/")]
    if platform in _LOWERCASED:
        parts = [p.lower() for p in parts]
    sub_types = ("View",) if fmt in _VIEWS else ("Table",)
    if len(parts) != 3:  # not database/schema/table: named as it is, without containers
        return _identity_of(platform, ".".join(parts), [], sub_types, instance, env)
    database, schema, table = parts
    common = {"platform": platform, "env": env}
    first: ContainerKey
    second: ContainerKey
    if platform == "bigquery":  # no instance in its URNs or keys
        instance = None
        first = ProjectIdKey(project_id=database, backcompat_env_as_instance=True, **common)
        second = BigQueryDatasetKey(project_id=database, dataset_id=schema, backcompat_env_as_instance=True, **common)
        kinds = ("Project", "Dataset")
    elif platform == "databricks":
        first = CatalogKey(catalog=database, instance=instance, **common)
        second = UnitySchemaKey(catalog=database, unity_schema=schema, instance=instance, **common)
        kinds = ("Catalog", "Schema")
    else:
        first = DatabaseKey(database=database, instance=instance, backcompat_env_as_instance=True, **common)
        second = SchemaKey(database=database, schema=schema, instance=instance, backcompat_env_as_instance=True,
                           **common)  # fmt: skip
        kinds = ("Database", "Schema")
    keys = [Container(first, database, kinds[0]), Container(second, schema, kinds[1])]
    return _identity_of(platform, f"{database}.{schema}.{table}", keys, sub_types, instance, env)


def _identity_of(
    platform: str,
    name: str,
    containers: list[Container],
    sub_types: tuple[str, ...],
    instance: str | None,
    env: str,
    aspect: str = "when set",
    browse: tuple[BrowsePathEntryClass, ...] = (),
) -> Identity:
    """`aspect`: when the dataset gets its `dataPlatformInstance` (never, when set, always); `browse`: the
    browse path's entries between the instance and the containers."""
    urn = make_dataset_urn_with_platform_instance(platform, name, instance, env)
    platform_instance = None
    if aspect == "always" or aspect == "when set" and instance:
        platform_instance = DataPlatformInstanceClass(
            platform=make_data_platform_urn(platform),
            instance=make_dataplatform_instance_urn(platform, instance) if instance else None,
        )
    root: tuple[BrowsePathEntryClass, ...] = ()
    if instance:
        at = make_dataplatform_instance_urn(platform, instance)
        root = (BrowsePathEntryClass(id=at, urn=at),)
    return Identity(urn, tuple(containers), sub_types, platform_instance, root + browse)
