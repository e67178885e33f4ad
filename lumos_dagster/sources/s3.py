"""S3 and S3-compatible object stores (MinIO, Ceph, … through `endpoint_url`).

Listing pages through ListObjectsV2; schemas are read with ranged requests through
pyarrow's S3 file system (a Parquet footer, an ORC tail, an Avro header, the first MiB
of CSV/JSON) — a whole object is never downloaded for its schema. Credentials come from
the standard AWS chain (environment, profile, instance role), in the driver and in each
Spark executor alike; none are stored by Lumos.
"""

from __future__ import annotations

from typing import Iterator
from urllib.parse import urlparse

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.formats import HEAD_BYTES, format_of
from lumos_dagster.sources.base import FileSource
from lumos_dagster.sources.discovery import FileEntry


class S3Source(FileSource):
    whole_when_listed = True  # an object is listed once its upload completed

    def __init__(self, config, client=None):
        super().__init__(config)
        self.bucket = config.bucket
        self.prefix = config.prefix.strip("/") + "/" if config.prefix.strip("/") else ""
        self.root = f"s3://{self.bucket}/{self.prefix}"
        endpoint = urlparse(config.endpoint_url) if config.endpoint_url else None
        self.fs_spec = (
            "s3",
            endpoint.netloc if endpoint else "",
            config.region or "",
            endpoint.scheme if endpoint else "https",
        )
        self._client = client

    @property
    def client(self):
        if self._client is None:
            session = boto3.session.Session()
            self._client = session.client("s3", endpoint_url=self.config.endpoint_url, region_name=self.config.region)
        return self._client

    def reachable(self, report: ScanReport) -> bool:
        try:
            self.client.head_bucket(Bucket=self.bucket)
            return True
        except (ClientError, BotoCoreError) as exc:
            report.fail(f"source {self.name}", f"cannot reach s3://{self.bucket}: {exc}")
            return False

    def list(self, subpath: str, report: ScanReport) -> Iterator[FileEntry]:
        prefix = self.prefix + subpath
        paginator = self.client.get_paginator("list_objects_v2")
        try:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
                for obj in page.get("Contents", ()):
                    key = obj["Key"]
                    if key.endswith("/"):  # a "folder" placeholder object
                        continue
                    rel = key[len(self.prefix) :]
                    if subpath and rel != subpath and not rel.startswith(subpath.rstrip("/") + "/"):
                        continue  # `raw/a` must not list `raw/ab`
                    yield FileEntry(rel, obj["Size"], obj["LastModified"].timestamp(), obj["ETag"].strip('"'))
        except (ClientError, BotoCoreError) as exc:
            report.fail(f"s3://{self.bucket}/{prefix}", f"cannot list: {exc}")

    def uri(self, relpath: str) -> str:
        return f"{self.bucket}/{self.prefix}{relpath}"

    def head(self, relpath: str) -> bytes | None:
        # a request per object: only names that say nothing are looked at, not every .csv of a lake
        if format_of(relpath) is not None:
            return None
        try:
            obj = self.client.get_object(
                Bucket=self.bucket, Key=self.prefix + relpath, Range=f"bytes=0-{HEAD_BYTES - 1}"
            )
            return obj["Body"].read()
        except (ClientError, BotoCoreError):
            return None
