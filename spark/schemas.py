"""Reading file schemas on the Spark executors.

Each task reads footers/headers of a slice of the files (pyarrow, fastavro) and sends
back small `FileResult`s; the driver only lists and merges. A reader that takes its
Python worker down (a native crash on a corrupt file) fails one Spark job: the files of
that job are then bisected until the file is found, which is reported as that file's
error while every other file still gets read.
"""

from __future__ import annotations

import logging
from typing import Callable, Sequence

from lumos_dagster.formats import FileResult, read_file_result

log = logging.getLogger(__name__)

Item = tuple[str, "str | None"]  # (path, format)
Reader = Callable[[Item], FileResult]

TASKS_PER_CORE = 4
_WORKER_CRASH = "Python worker exited unexpectedly"


def _crash_reason(exc: Exception) -> str | None:
    text = str(exc)
    if _WORKER_CRASH not in text:
        return None
    return "the reader crashed the Spark Python worker (corrupt file?)"


def read_schemas(spark, items: Sequence[Item], reader: Reader = read_file_result) -> dict[str, FileResult]:
    """Read the schema of every (path, format) in `items` on the cluster; keyed by path."""
    unique = list(dict.fromkeys(items))
    if not unique:
        return {}
    sc = spark.sparkContext
    slices = max(1, min(len(unique), sc.defaultParallelism * TASKS_PER_CORE))
    return {r.path: r for r in _collect(sc, unique, reader, slices)}


def _collect(sc, items: list[Item], reader: Reader, slices: int) -> list[FileResult]:
    try:
        return sc.parallelize(items, min(slices, len(items))).map(reader).collect()
    except Exception as exc:
        reason = _crash_reason(exc)
        if reason is None:
            raise
        if len(items) == 1:
            log.warning("%s: %s", items[0][0], reason)
            return [FileResult(items[0][0], error=reason)]
        mid = len(items) // 2
        log.warning("a Spark Python worker crashed; bisecting %d files to find the cause", len(items))
        return _collect(sc, items[:mid], reader, slices) + _collect(sc, items[mid:], reader, slices)
