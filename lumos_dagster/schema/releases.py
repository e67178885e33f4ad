"""Release manifests: a release lands as a small YAML/JSON file in a watched folder or S3
prefix (`lumos release` writes one); the release sensor refreshes the datasets it names
once their next data window after the release is ready."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlparse

import yaml

from lumos_dagster.floor.extras import needs

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class Manifest:
    name: str
    released_at: datetime
    datasets: tuple[str, ...] = ()  # empty: every dataset


def parse_manifest(text: str, where: str) -> Manifest:
    doc = yaml.safe_load(text)
    if not isinstance(doc, dict) or "name" not in doc:
        raise ValueError(f"{where}: a release manifest needs at least `name:`")
    released = doc.get("released_at")
    if isinstance(released, str):
        released = datetime.fromisoformat(released)
    if released is None:
        raise ValueError(f"{where}: `released_at:` is missing")
    if released.tzinfo is None:
        released = released.replace(tzinfo=UTC)
    return Manifest(str(doc["name"]), released, tuple(doc.get("datasets") or ()))


def _s3(watch: str, endpoint_url: str | None):
    with needs("s3", "reading releases from S3"):
        import boto3

    url = urlparse(watch)
    return boto3.client("s3", endpoint_url=endpoint_url), url.netloc, url.path.lstrip("/")


def read_manifests(watch: str, endpoint_url: str | None = None) -> tuple[list[Manifest], list[str]]:
    """(manifests, problems): a malformed manifest is a problem to report, not a crash.
    `endpoint_url`: an S3-compatible store (MinIO…) for an s3:// `watch`."""
    texts: list[tuple[str, str]] = []
    if watch.startswith("s3://"):
        client, bucket, prefix = _s3(watch, endpoint_url)
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for obj in page.get("Contents", ()):
                if obj["Key"].endswith(MANIFEST_SUFFIXES):
                    body = client.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read().decode()
                    texts.append((f"s3://{bucket}/{obj['Key']}", body))
    elif os.path.isdir(watch):
        for name in sorted(os.listdir(watch)):
            if name.endswith(MANIFEST_SUFFIXES):
                with open(os.path.join(watch, name)) as fh:
                    texts.append((os.path.join(watch, name), fh.read()))
    manifests, problems = [], []
    for where, text in texts:
        try:
            manifests.append(parse_manifest(text, where))
        except (ValueError, yaml.YAMLError) as exc:
            problems.append(str(exc))
    return sorted(manifests, key=lambda m: m.released_at), problems


def write_manifest(watch: str, manifest: Manifest, endpoint_url: str | None = None) -> str:
    doc = {"name": manifest.name, "released_at": manifest.released_at.isoformat(), "datasets": list(manifest.datasets)}
    body = json.dumps(doc, indent=2)
    if watch.startswith("s3://"):
        client, bucket, prefix = _s3(watch, endpoint_url)
        key = f"{prefix.rstrip('/')}/{manifest.name}.json".lstrip("/")
        client.put_object(Bucket=bucket, Key=key, Body=body.encode())
        return f"s3://{bucket}/{key}"
    os.makedirs(watch, exist_ok=True)
    path = os.path.join(watch, f"{manifest.name}.json")
    with open(path, "w") as fh:
        fh.write(body)
    return path
