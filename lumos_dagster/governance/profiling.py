"""What a profile reads, wherever the data is: a partition's files (on Spark, through the file system
the source lists them with) up to `profile.max_bytes`, or a database table through its own source (its
SQL, no Spark). The Spark side is `lumos_dagster.spark.profile`."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Mapping, Sequence

from lumos_dagster.floor.dataset_specs import DatasetSpec
from lumos_dagster.floor.errors import NotProfiled
from lumos_dagster.floor.model import PartialRead, Profile
from lumos_dagster.formats import FsSpec
from lumos_dagster.sources import Source
from lumos_dagster.sources.base import FileSource, TableSource

#: (path as the source's readers open it, bytes as listed)
SizedPath = tuple[str, int]


@dataclass(frozen=True)
class PartitionFiles:
    """A partition's readable files and the file system they are on (None: local)."""

    files: tuple[SizedPath, ...]
    fs: FsSpec | None = None


#: profile of (all of) the given files of a dataset's partition
FileProfiler = Callable[[DatasetSpec, PartitionFiles], Profile]
#: profile of a dataset's newest partition, given its readable files (none for a table)
Profiler = Callable[[DatasetSpec, Sequence[SizedPath]], Profile]


def within_cap(files: Sequence[SizedPath], max_bytes: int | None) -> tuple[list[SizedPath], PartialRead | None]:
    """The files a profile reads, in path order while their bytes stay within `max_bytes`, and what was left
    out (None: nothing). A first file alone above the cap is not profiled at all: reading part of a
    file would say nothing of the rest either, and reading it whole would ignore the cap."""
    ordered = sorted(files)
    taken: list[SizedPath] = []
    total = 0
    for path, size in ordered:
        if max_bytes is not None and total + size > max_bytes:
            break
        taken.append((path, size))
        total += size
    if len(taken) == len(ordered):
        return taken, None
    if not taken:
        path, size = ordered[0]
        raise NotProfiled(f"its first file {path} ({size:,} bytes) is larger than profile.max_bytes ({max_bytes:,})")
    return taken, PartialRead(len(taken), len(ordered), total, sum(size for _, size in ordered))


def profiler(sources: Mapping[str, Source], files: FileProfiler | None) -> Profiler:
    """A database table is profiled by its source; files by `files` (None: no Spark in this run), those
    within the dataset's `profile.max_bytes`."""

    def profile(d: DatasetSpec, readable: Sequence[SizedPath]) -> Profile:
        decl = d.profile
        if decl is None:
            raise ValueError(f"{d.name} is not to be profiled")
        source = sources.get(d.source or "")
        if isinstance(source, TableSource):
            return source.profile(d.location, decl.sample, decl.max_bytes)
        if files is None:
            raise NotProfiled("no Spark in this run to profile files on")
        if not readable:
            raise NotProfiled("no readable file in the partition")
        taken, partial = within_cap(readable, decl.max_bytes)
        fs = source.fs_spec if isinstance(source, FileSource) else None
        return replace(files(d, PartitionFiles(tuple(taken), fs)), partial=partial)

    return profile
