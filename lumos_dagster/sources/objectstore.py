"""Object stores through fsspec: Azure Blob Storage / ADLS Gen2 (adlfs) and Google Cloud
Storage (gcsfs), one code path.

Listing is the file system's recursive `find`; schemas are read by the same readers as local
and S3 files, through a pyarrow file system wrapping the fsspec one (`formats.base.filesystem`),
so a Parquet footer or the first MiB of a CSV costs ranged reads, never the whole object.
Credentials come from each SDK's own chain (adlfs: `AZURE_STORAGE_*` variables, else Azure's
DefaultAzureCredential; gcsfs: Google's application-default credentials); Lumos neither
stores nor logs them. S3 keeps its own source (boto3 listing, pyarrow's native S3 reads).
"""

from __future__ import annotations

from datetime import datetime
from typing import Iterator

from lumos_dagster.formats import HEAD_BYTES, format_of
from lumos_dagster.formats.base import FsSpec, fsspec_filesystem
from lumos_dagster.report import ScanReport
from lumos_dagster.sources.base import FileSource
from lumos_dagster.sources.discovery import FileEntry


def _mtime(info: dict) -> float:
    # adlfs gives a datetime; gcsfs an RFC 3339 string
    when = info.get("last_modified") or info.get("updated")
    if isinstance(when, datetime):
        return when.timestamp()
    return datetime.fromisoformat(when.replace("Z", "+00:00")).timestamp() if when else 0.0


def _fingerprint(info: dict) -> str:
    # GCS bumps `generation` on every write of the object; Azure's ETag changes on every write
    return str(info.get("generation") or info.get("etag") or "").strip('"')


class ObjectStoreSource(FileSource):
    """A container (Azure) or bucket (GCS) under an optional prefix; `scheme` names it for people."""

    def __init__(self, config, scheme: str, bucket: str, fs_spec: FsSpec):
        super().__init__(config)
        self.bucket = bucket
        self.prefix = config.prefix.strip("/") + "/" if config.prefix.strip("/") else ""
        self.root = f"{scheme}://{bucket}/{self.prefix}"
        self.fs_spec = fs_spec

    @property
    def fs(self):
        return fsspec_filesystem(self.fs_spec)

    def reachable(self, report: ScanReport) -> bool:
        try:
            if self.fs.exists(self.bucket):
                return True
            problem = "does not exist"
        except Exception as exc:  # each SDK raises its own errors (auth, network, …)
            problem = f"cannot be reached: {type(exc).__name__}: {exc}"
        report.fail(f"source {self.name}", f"{self.root} {problem}")
        return False

    def list(self, subpath: str, report: ScanReport) -> Iterator[FileEntry]:
        base = f"{self.bucket}/{self.prefix}"
        start = (base + subpath).rstrip("/")
        try:
            found = self.fs.find(start, detail=True)
        except FileNotFoundError:
            return
        except Exception as exc:
            report.fail(f"{self.root}{subpath}", f"cannot list: {type(exc).__name__}: {exc}")
            return
        for path, info in sorted(found.items()):
            if info.get("type") == "directory" or path.endswith("/"):
                continue
            rel = path[len(base) :]
            if subpath and rel != subpath and not rel.startswith(subpath.rstrip("/") + "/"):
                continue  # `raw/a` must not list `raw/ab`
            yield FileEntry(rel, int(info["size"]), _mtime(info), _fingerprint(info))

    def uri(self, relpath: str) -> str:
        return f"{self.bucket}/{self.prefix}{relpath}"

    def head(self, relpath: str) -> bytes | None:
        # a request per object: only names that say nothing are looked at
        if format_of(relpath) is not None:
            return None
        try:
            return self.fs.cat_file(self.uri(relpath), start=0, end=HEAD_BYTES)
        except Exception:  # gone or unreadable since listed: the reader reports it
            return None


def azure_source(config) -> ObjectStoreSource:
    return ObjectStoreSource(config, "abfs", config.container, ("abfs", config.account_name, "", ""))


def gcs_source(config) -> ObjectStoreSource:
    return ObjectStoreSource(config, "gs", config.bucket, ("gcs", config.endpoint_url or "", config.project or "", ""))
