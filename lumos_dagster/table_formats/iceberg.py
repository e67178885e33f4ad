"""Iceberg tables found in storage: a folder with `metadata/*.metadata.json` is one table, whatever
its `data/` and `metadata/` hold (`lumos_dagster.table_formats` groups every file under it into it).

The current metadata file is the one `metadata/version-hint.text` names, else the highest
version; pyiceberg reads it and `tables/iceberg_history.py` turns it into the table's states (with,
for the states a run reads, the partition values from their manifests). Data files are never opened.
A table copied or moved keeps the absolute paths it was written at in its metadata: the files they
name are read from the table's own `metadata/` folder when it holds them.
"""

from __future__ import annotations

import posixpath
import re
from typing import Iterable, Sequence

from lumos_dagster.floor.extras import needs
from lumos_dagster.floor.model import Commit, TableVersion
from lumos_dagster.formats.base import FsSpec, fsspec_filesystem
from lumos_dagster.table_formats.base import ListedFile, TableState, table_url

FORMAT = "iceberg"
METADATA_DIR = "metadata"
VERSION_HINT = f"{METADATA_DIR}/version-hint.text"
_METADATA_FILE = re.compile(r"^v?(\d+)(?:-[^/]*)?\.metadata\.json$")


def metadata_version(name: str) -> int | None:
    """The version in a metadata file's name: `v3.metadata.json` (Hadoop tables) or
    `00007-<uuid>.metadata.json` (catalog tables); None for any other file."""
    m = _METADATA_FILE.match(name)
    return int(m.group(1)) if m else None


def current_metadata(metadata_files: Iterable[str], hint: str | None = None) -> str | None:
    """The current metadata file of a table found in storage: the one `version-hint.text` names
    (its content, when given), else the highest version."""
    files = list(metadata_files)
    if hint is not None:
        hint = hint.strip()
        for path in files:
            name = posixpath.basename(path)
            if name in (hint, f"{hint}.metadata.json") or (hint.isdigit() and metadata_version(name) == int(hint)):
                return path
    return max(files, key=lambda p: metadata_version(posixpath.basename(p)) or -1, default=None)


class IcebergFormat:
    type = FORMAT
    platform = "iceberg"  # DataHub's platform for Iceberg tables
    hidden: tuple[str, ...] = ()

    def root_of(self, path: str) -> str | None:
        folder, name = posixpath.split(path)
        if posixpath.basename(folder) != METADATA_DIR or metadata_version(name) is None:
            return None
        return posixpath.dirname(folder)

    def open(self, uri: str, fs: FsSpec | None, listed: Sequence[ListedFile]) -> IcebergTable:
        return IcebergTable(uri, fs, listed)


ICEBERG = IcebergFormat()


def _file_io(fs: FsSpec | None, location: str):
    """The FileIO reading `location` on `fs`: pyiceberg's own locally and on S3; on Azure, GCS and HDFS the
    fsspec file system the source's files are read with, so its endpoint and credentials are the files'."""
    with needs("iceberg", "reading an Iceberg table"):
        from pyiceberg.io import load_file_io

        from lumos_dagster.table_formats.iceberg_history import FsspecReadIO

    if fs is None:
        return load_file_io({}, location)
    kind, endpoint, region, scheme = fs
    if kind != "s3":
        return FsspecReadIO(fsspec_filesystem(fs))
    out = {}
    if endpoint:
        out["s3.endpoint"] = f"{scheme or 'https'}://{endpoint}"
    if region:
        out["s3.region"] = region
    return load_file_io(out, location)


class IcebergTable:
    """One Iceberg table found in storage, its current metadata read once."""

    def __init__(self, uri: str, fs: FsSpec | None, listed: Sequence[ListedFile]):
        with needs("iceberg", "reading an Iceberg table"):
            from pyiceberg.serializers import FromInputFile

            from lumos_dagster.table_formats.iceberg_history import FolderIO, IcebergHistory

        base = table_url(uri, fs)
        files = _file_io(fs, base)
        in_metadata = [f.path for f in listed if posixpath.dirname(f.path) == METADATA_DIR]
        hint = None
        if VERSION_HINT in in_metadata:
            with files.new_input(f"{base}/{VERSION_HINT}").open() as stream:
                hint = stream.read().decode()
        current = current_metadata(
            [f for f in in_metadata if metadata_version(posixpath.basename(f)) is not None], hint
        )
        if current is None:
            raise ValueError(f"no metadata file in {uri}/{METADATA_DIR}")
        path = f"{base}/{current}"
        io = FolderIO(files, f"{base}/{METADATA_DIR}", {posixpath.basename(f) for f in in_metadata})
        self.history = IcebergHistory(FromInputFile.table_metadata(io.new_input(path)), io)
        self.states = {s.table: s for s in self.history.states}

    def versions(self) -> list[TableVersion]:
        return list(self.states)

    def state(self, version: TableVersion) -> TableState:
        return self.history.with_partitions(self.states[version])

    def commits(self) -> list[Commit]:
        return self.history.commits()
