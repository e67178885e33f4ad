"""File systems through fsspec: Azure Blob Storage / ADLS Gen2 (adlfs), Google Cloud Storage (gcsfs)
and HDFS over WebHDFS (fsspec's WebHDFS client), one code path.

Listing is the file system's recursive `find` (HDFS: a LISTSTATUS per folder); schemas are read by
the same readers as local and S3 files, through a pyarrow file system wrapping the fsspec one
(`formats.base.filesystem`), so a Parquet footer or the first MiB of a CSV costs ranged reads, never
the whole object. Credentials come from each SDK's own chain (adlfs: `AZURE_STORAGE_*` variables, else
Azure's DefaultAzureCredential; gcsfs: Google's application-default credentials); Lumos neither stores
nor logs them. HDFS takes a user name (simple authentication), no secret. S3 keeps its own source
(boto3 listing, pyarrow's native S3 reads).
"""

from __future__ import annotations

from datetime import datetime
from typing import Iterator

from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.formats import HEAD_BYTES, format_of
from lumos_dagster.formats.base import FsSpec, fsspec_filesystem
from lumos_dagster.sources.base import FileSource
from lumos_dagster.sources.discovery import FileEntry


def _mtime(info: dict) -> float:
    # adlfs gives a datetime; gcsfs an RFC 3339 string; WebHDFS milliseconds
    if "modificationTime" in info:
        return info["modificationTime"] / 1000
    when = info.get("last_modified") or info.get("updated")
    if isinstance(when, datetime):
        return when.timestamp()
    return datetime.fromisoformat(when.replace("Z", "+00:00")).timestamp() if when else 0.0


def _fingerprint(info: dict) -> str:
    # GCS bumps `generation` on every write of the object; Azure's ETag changes on every write; an HDFS
    # file written anew is a new inode (`fileId`), one appended to has a later modification time
    if "fileId" in info:
        return f"{info['fileId']}@{info['modificationTime']}"
    return str(info.get("generation") or info.get("etag") or "").strip('"')


class ObjectStoreSource(FileSource):
    """The files under `base` (a path of the file system, ending in `/`), which must be in `top` (the
    container or bucket; for HDFS, the folder itself); `root` names the place for people."""

    whole_when_listed = True  # an object is listed once it is written whole (HDFS files are not: below)

    def __init__(self, config, root: str, top: str, base: str, fs_spec: FsSpec):
        super().__init__(config)
        self.root, self.top, self.base = root, top, base
        self.fs_spec = fs_spec

    @property
    def fs(self):
        return fsspec_filesystem(self.fs_spec)

    def reachable(self, report: ScanReport) -> bool:
        try:
            if self._exists():
                return True
            problem = "does not exist"
        except Exception as exc:  # each SDK raises its own errors (auth, network, …)
            problem = f"cannot be reached: {type(exc).__name__}: {exc}"
        report.fail(f"source {self.name}", f"{self.root} {problem}")
        return False

    def _exists(self) -> bool:
        return self.fs.exists(self.top)

    def _find(self, start: str, report: ScanReport) -> dict[str, dict]:
        """Every file under `start` (a folder or a file): path → the file system's info."""
        return self.fs.find(start, detail=True)

    def list(self, subpath: str, report: ScanReport) -> Iterator[FileEntry]:
        start = (self.base + subpath).rstrip("/") or "/"
        try:
            found = self._find(start, report)
        except FileNotFoundError:
            return
        except Exception as exc:
            report.fail(f"{self.root}{subpath}", f"cannot list: {type(exc).__name__}: {exc}")
            return
        for path, info in sorted(found.items()):
            if info.get("type") == "directory" or path.endswith("/"):
                continue
            rel = path[len(self.base) :]
            if subpath and rel != subpath and not rel.startswith(subpath.rstrip("/") + "/"):
                continue  # `raw/a` must not list `raw/ab`
            yield FileEntry(rel, int(info["size"]), _mtime(info), _fingerprint(info))

    def uri(self, relpath: str) -> str:
        return f"{self.base}{relpath}"

    def head(self, relpath: str) -> bytes | None:
        # a request per object: only names that say nothing are looked at
        if format_of(relpath) is not None:
            return None
        try:
            return self.fs.cat_file(self.uri(relpath), start=0, end=HEAD_BYTES)
        except Exception:  # gone or unreadable since listed: the reader reports it
            return None


class HdfsSource(ObjectStoreSource):
    """An HDFS folder over WebHDFS. The NameNode answers for names and redirects each read to a DataNode,
    whose address (as the cluster knows it) must be reachable from Lumos, as for any WebHDFS client."""

    whole_when_listed = False  # a file being written is listed, its length growing block by block

    def _exists(self) -> bool:
        # fsspec's `exists` says False to a refusal (403) too: that one is said as it is
        try:
            info = self.fs.info(self.top)
        except FileNotFoundError:
            return False
        if info["type"] != "directory":
            raise NotADirectoryError(f"{self.top} is a file, not a folder")
        return True

    def _find(self, start: str, report: ScanReport) -> dict[str, dict]:
        """Folder by folder, a LISTSTATUS each: fsspec's `find` silently skips a folder below the first
        level that it may not list; here that folder fails in the report, and the others are listed."""
        found: dict[str, dict] = {}
        folders = [start]
        while folders:
            folder = folders.pop()
            try:
                listing = self.fs.ls(folder, detail=True)
            except Exception as exc:
                if folder == start:
                    raise
                if not isinstance(exc, FileNotFoundError):  # one removed since its parent was listed is gone
                    report.fail(f"{self.root}{folder[len(self.base) :]}/", f"cannot list: {type(exc).__name__}: {exc}")
                continue
            for info in listing:
                path = info["name"].rstrip("/")  # LISTSTATUS of a file names it `file/` (its pathSuffix is empty)
                if info["type"] == "directory":
                    folders.append(path)
                else:
                    found[path] = info
        return found


def _in_bucket(config, scheme: str, bucket: str, fs_spec: FsSpec) -> ObjectStoreSource:
    prefix = config.prefix.strip("/") + "/" if config.prefix.strip("/") else ""
    return ObjectStoreSource(config, f"{scheme}://{bucket}/{prefix}", bucket, f"{bucket}/{prefix}", fs_spec)


def azure_source(config) -> ObjectStoreSource:
    return _in_bucket(config, "abfs", config.container, ("abfs", config.account_name, "", ""))


def gcs_source(config) -> ObjectStoreSource:
    return _in_bucket(config, "gs", config.bucket, ("gcs", config.endpoint_url or "", config.project or "", ""))


def hdfs_source(config) -> HdfsSource:
    at = config.address
    spec = ("webhdfs", f"{at.host}:{at.port}", config.user or "", "https" if at.https else "http")
    return HdfsSource(config, config.url.strip().rstrip("/") + "/", at.path, at.path.rstrip("/") + "/", spec)
