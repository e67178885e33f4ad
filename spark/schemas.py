"""Reading file schemas on the Spark executors.

Each task reads footers/headers of a slice of the files (pyarrow, fastavro) and sends
back small `FileResult`s; the driver only lists and merges. On a master the tasks are an RDD's
partitions; over Spark Connect, which has no RDDs, a DataFrame of the pickled items read in
`mapInArrow` tasks. A reader that takes its
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
    AutoReader,
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
from lumos_dagster.spark.session import is_connect

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
    connect = is_connect(spark)
    slices = max(1, min(len(unique), parallelism(spark, connect) * TASKS_PER_CORE))
    read_task = functools.partial(read_batch, reader=reader)  # what a pool worker runs on its chunk

    def job(batch: list[Item]) -> list[FileResult]:
        try:
            if connect:
                return _connect_job(spark, batch, read_task, min(slices, len(batch)))
            return spark.sparkContext.parallelize(batch, min(slices, len(batch))).mapPartitions(read_task).collect()
        except Exception as exc:
            reason = _crash_reason(exc)
            if reason is None:
                raise
            raise ReaderCrashed(reason) from exc  # a failed job returns nothing: the whole batch is bisected

    return {r.path: r for r in isolate_crashes(job, unique)}


#: the tasks' parallelism on a Spark Connect server that does not say it (`spark.default.parallelism`)
CONNECT_PARALLELISM = 8


def parallelism(spark, connect: bool) -> int:
    """How many tasks the cluster runs at once (over Connect: as it says, else `CONNECT_PARALLELISM`)."""
    if not connect:
        return spark.sparkContext.defaultParallelism
    return int(spark.conf.get("spark.default.parallelism", None) or CONNECT_PARALLELISM)


def _connect_job(spark, batch: list[Item], read_task: Callable, slices: int) -> list[FileResult]:
    """`read_task` over `batch` in `slices` tasks on a Spark Connect server, which has no RDDs: the items
    go as a DataFrame of pickled rows, each task reads its rows (`mapInArrow`) and sends back its results
    pickled, as the RDD job's tasks do."""
    import pickle

    frame = spark.createDataFrame([(pickle.dumps(item),) for item in batch], "item binary").repartition(slices)

    def task(batches):
        import pyarrow as pa

        for b in batches:
            results = read_task(pickle.loads(x) for x in b.column(0).to_pylist())
            yield pa.record_batch([pa.array([pickle.dumps(r) for r in results], pa.binary())], names=["result"])

    return [pickle.loads(row.result) for row in frame.mapInArrow(task, "result binary").collect()]


class SparkReader:
    """`read_schemas` as a schema reader whose session is made (`session()`) on first call; `name` is
    how the run's log names it (`Spark (master local[2])`)."""

    def __init__(self, session: Callable[[], Any], reader: Reader = read_file_result, name: str = "Spark"):
        self.session = session
        self.reader = reader
        self.name = name

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
    name: str = "Spark",
) -> AutoReader:
    """`choose_reader` on each call, by the number of distinct items: the session is made
    by the first call that reads above the Spark threshold, if any; `name` names Spark in the log."""
    spark = SparkReader(session, reader, name) if session is not None else None
    return auto_reader(spark, master=master, reader=reader, workers=workers, thresholds=thresholds)
