"""Reading file schemas on the Spark executors.

Each task reads footers/headers of a slice of the files (pyarrow, fastavro) and sends
back small `FileResult`s; the driver only lists and merges. A reader that takes its
Python worker down (a native crash on a corrupt file) fails one Spark job: the files of
that job are then bisected (`lumos_dagster.formats.readers.isolate_crashes`, the same
bisection the process pool uses) until the file is found, which is reported as that
file's error while every other file still gets read.

Below a measured number of files Spark does not pay for its start: `choose_reader` (for a
known count) and `spark_auto_reader` (per call) pick the in-process loop or the process
pool then, and only start a session above it.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

from lumos_dagster.formats import FileResult, read_file_result
from lumos_dagster.formats.readers import (
    THRESHOLDS,
    FileReader,
    Item,
    ReaderCrashed,
    SchemaReader,
    Thresholds,
    auto_reader,
    choose,
    isolate_crashes,
    read_batch,
    unique_items,
)

__all__ = ["Item", "Reader", "SparkReader", "choose_reader", "read_schemas", "spark_auto_reader"]

Reader = FileReader

TASKS_PER_CORE = 4
_WORKER_CRASH = "Python worker exited unexpectedly"


def _crash_reason(exc: Exception) -> str | None:
    text = str(exc)
    if _WORKER_CRASH not in text:
        return None
    return "the reader crashed the Spark Python worker (corrupt file?)"


def read_schemas(spark, items: Sequence[Item], reader: Reader = read_file_result) -> dict[str, FileResult]:
    """Read the schema of every (path, format[, fs spec]) in `items` on the cluster; keyed by path."""
    unique = unique_items(items)
    if not unique:
        return {}
    sc = spark.sparkContext
    slices = max(1, min(len(unique), sc.defaultParallelism * TASKS_PER_CORE))

    read_task = functools.partial(read_batch, reader=reader)  # what a pool worker runs on its chunk

    def job(batch: list[Item]) -> list[FileResult]:
        try:
            return sc.parallelize(batch, min(slices, len(batch))).mapPartitions(read_task).collect()
        except Exception as exc:
            reason = _crash_reason(exc)
            if reason is None:
                raise
            raise ReaderCrashed(reason) from exc  # a failed job returns nothing: the whole batch is bisected

    return {r.path: r for r in isolate_crashes(job, unique)}


class SparkReader:
    """`read_schemas` as a schema reader whose session is made (`session()`) on first call."""

    def __init__(self, session: Callable[[], Any], reader: Reader = read_file_result):
        self.session = session
        self.reader = reader

    def __call__(self, items: Sequence[Item]) -> dict[str, FileResult]:
        return read_schemas(self.session(), items, self.reader) if items else {}


def choose_reader(
    count: int,
    session: Callable[[], Any] | None,
    *,
    master: str | None = None,
    reader: Reader = read_file_result,
    workers: int | None = None,
    thresholds: Thresholds = THRESHOLDS,
) -> SchemaReader:
    """The schema reader for `count` files: in process, the process pool, or Spark on the
    session `session()` returns — called only if Spark is chosen, when the reader first
    reads. `master` is the `spark.master` the session gets (None: local)."""
    spark = SparkReader(session, reader) if session is not None else None
    return choose(count, spark, master=master, reader=reader, workers=workers, thresholds=thresholds)


def spark_auto_reader(
    session: Callable[[], Any] | None,
    *,
    master: str | None = None,
    reader: Reader = read_file_result,
    workers: int | None = None,
    thresholds: Thresholds = THRESHOLDS,
) -> SchemaReader:
    """`choose_reader` on each call, by the number of distinct items: the session is made
    by the first call that reads above the Spark threshold, if any."""
    spark = SparkReader(session, reader) if session is not None else None
    return auto_reader(spark, master=master, reader=reader, workers=workers, thresholds=thresholds)
