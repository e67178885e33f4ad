"""Schema readers: one signature, three engines, chosen by the number of files.

A *schema reader* takes `(path, format[, fs spec])` items and returns a `FileResult` per
path. All of them apply the same per-file reader (`read_file_result` by default), so a
small scan and a large one go down the same code path and give the same results:

* `read_in_process`: a loop in this process. No start-up at all, and no crash isolation:
  meant for a handful of files and for tests.
* `PoolReader`: a process pool on this machine's cores. A worker that dies on a file
  (a native crash in a reader, `os._exit`) costs that file, not the scan.
* Spark (`lumos_dagster.spark.schemas.SparkReader`): the executors of a Spark session. It lives in
  `spark/` (this module imports neither Spark nor Dagster) and is handed to `choose`,
  which only calls it above the threshold.

`isolate_crashes` is the one bisection both the pool and Spark use to find the file that
took a process down.
"""

from __future__ import annotations

import functools
import logging
import math
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Sequence

from lumos_dagster.floor.collector import end_with_parent, frozen
from lumos_dagster.formats import FileResult, FsSpec, load_readers, read_file_result

log = logging.getLogger(__name__)

#: (path, format) or (path, format, fs spec): what `read_file_result` takes
Item = tuple[str, "str | None"] | tuple[str, "str | None", "FsSpec | None"]
#: reads one file; must turn every failure it can into a `FileResult.error`
FileReader = Callable[[Item], FileResult]
#: reads many files, keyed by path
SchemaReader = Callable[[Sequence[Item]], "dict[str, FileResult]"]

POOL_CRASH = "the reader crashed the schema reader process (corrupt file?)"


class ReaderCrashed(Exception):
    """A batch of files took its process down; `done` holds what was read before it did."""

    def __init__(self, reason: str, done: Iterable[FileResult] = ()):
        super().__init__(reason)
        self.reason = reason
        self.done = list(done)


def unique_items(items: Sequence[Item]) -> list[Item]:
    return list(dict.fromkeys(items))


def isolate_crashes(run: Callable[[list[Item]], list[FileResult]], items: list[Item]) -> list[FileResult]:
    """`run(items)`, except that a `ReaderCrashed` is narrowed down to the file that caused it.

    The files a crashed batch did not finish are split in halves and each half is run again
    (in a new process) until a single file still crashes: that file gets the crash as its
    error, every other file its result. Files a batch finished before it crashed are kept.
    """
    try:
        return list(run(items))
    except ReaderCrashed as crash:
        finished = {r.path for r in crash.done}
        rest = [item for item in items if item[0] not in finished]
        if len(rest) <= 1:
            for item in rest:
                log.warning("%s: %s", item[0], crash.reason)
            return crash.done + [FileResult(item[0], error=crash.reason) for item in rest]
        log.warning("%s; bisecting %d files to find the cause", crash.reason, len(rest))
        mid = len(rest) // 2
        return crash.done + isolate_crashes(run, rest[:mid]) + isolate_crashes(run, rest[mid:])


def read_batch(items: Iterable[Item], reader: FileReader = read_file_result) -> list[FileResult]:
    """`reader` over `items`, in order: what every engine runs (the loop, a pool worker, a
    Spark task). Results with equal schemas share one `Schema` object, so a batch pickles
    each distinct schema once: files of a dataset mostly agree, and on a generated lake of
    10 files per dataset this cuts pickling a result by 4× and unpickling it by 10×."""
    schemas: dict = {}
    out = []
    for item in items:
        result = reader(item)
        if result.schema is not None:
            try:
                shared = schemas.setdefault(result.schema, result.schema)
            except TypeError:  # an unhashable default value somewhere in the schema
                shared = result.schema
            if shared is not result.schema:
                result = replace(result, schema=shared)
        out.append(result)
    return out


def read_in_process(items: Sequence[Item], reader: FileReader = read_file_result) -> dict[str, FileResult]:
    """Every item read by a loop in this process (a crashing reader takes this process down)."""
    return {r.path: r for r in read_batch(unique_items(items), reader)}


def start_method(items: Sequence[Item]) -> str:
    """How a pool's workers start: "fork" where the platform has it, for local files.

    Fork, because a worker then starts in milliseconds with pyarrow, fastavro and Lumos
    already imported (spawn re-imports them: about a second per worker, the time the loop
    needs for a few thousand footers), and the file reader reaches the workers by
    inheritance, not by pickling, so any callable works; the workers only run the reader,
    they touch none of the parent's threads, locks or connections.
    Spawn for files on a remote file system: the AWS SDK under pyarrow's S3 file system
    is not fork-safe once the parent has used it (a forked child can hang or crash), and
    a remote read waits on the network, so a second of start-up is small beside it.
    """
    return "fork" if not is_remote(items) and "fork" in multiprocessing.get_all_start_methods() else "spawn"


def is_remote(items: Sequence[Item]) -> bool:
    """Whether any item is on a remote file system (an object store, HDFS): one with a file system spec."""
    return any(len(item) > 2 and item[2] for item in items)


_worker_reader: FileReader = read_file_result


def _install(reader: FileReader, parent: int) -> None:
    global _worker_reader
    end_with_parent(parent)
    _worker_reader = reader


def _read_chunk(chunk: list[Item]) -> list[FileResult]:
    return read_batch(chunk, _worker_reader)


def chunked(items: list[Item], workers: int, per_worker: int, largest: int) -> list[list[Item]]:
    """`per_worker` chunks per worker (a slow chunk does not hold the others up), at most
    `largest` items each (a crash re-reads at most the chunks in flight)."""
    size = max(1, min(largest, math.ceil(len(items) / (workers * per_worker))))
    return [items[i : i + size] for i in range(0, len(items), size)]


class PoolReader:
    """A schema reader on a pool of `workers` processes (default: `os.cpu_count()`).

    Items travel in chunks, one message per chunk each way. The pool is made per call and
    shut down (its processes joined) before the call returns: with fork, starting it costs
    10-35 ms against 0.2-0.5 ms for a pool kept alive (benchmarks/readers.py), paid once per
    scan, and a pool per call cannot leak processes, outlive a crash or run a reader
    forked before the code it needs was imported. When a worker dies the pool breaks; `isolate_crashes` keeps what was
    finished and bisects the rest in new pools.
    """

    CHUNKS_PER_WORKER = 4
    LARGEST_CHUNK = 256

    def __init__(self, reader: FileReader = read_file_result, workers: int | None = None, start: str | None = None):
        self.reader = reader  # with spawn (remote files, `start="spawn"`) it must be picklable
        self.workers = max(1, workers or os.cpu_count() or 1)
        self.start = start  # None: `start_method(items)`

    @property
    def name(self) -> str:
        """How the run's log names this engine."""
        return f"a process pool of {self.workers}"

    def __call__(self, items: Sequence[Item]) -> dict[str, FileResult]:
        unique = unique_items(items)
        if not unique:
            return {}
        return {r.path: r for r in isolate_crashes(self._run, unique)}

    def _run(self, items: list[Item]) -> list[FileResult]:
        chunks = chunked(items, self.workers, self.CHUNKS_PER_WORKER, self.LARGEST_CHUNK)
        done: list[FileResult] = []
        broken = False
        context = multiprocessing.get_context(self.start or start_method(items))
        if context.get_start_method() == "fork":
            load_readers()  # imported once here, not again in each forked worker
        with ProcessPoolExecutor(
            min(self.workers, len(chunks)),
            mp_context=context,
            initializer=_install,
            initargs=(self.reader, os.getpid()),
        ) as pool:
            with frozen():  # the workers are forked as the chunks are submitted
                futures = [pool.submit(_read_chunk, chunk) for chunk in chunks]
            for future in futures:
                try:
                    done.extend(future.result())
                except BrokenProcessPool:
                    broken = True
        if broken:
            raise ReaderCrashed(POOL_CRASH, done)
        return done


# Where each engine starts to pay, measured by `python -m benchmarks.readers --repeat 3`
# (generated lake, 10 files per dataset, local files, warm cache) on this 2-core machine,
# three runs while other work loaded it (load average 3-6; the figures move by ~30%):
#   loop 0.23-0.24 ms/file; pool of 2, made per call: 10-34 ms start and shutdown, then
#   0.16-0.17 ms/file -> the pool beats the loop from 236, 299, 379 files: POOL_FROM 300.
#   Spark local[*]: session start 11-21 s, a job 0.1-0.4 s, then 0.20-0.26 ms/file: never
#   faster per file than the pool on the same cores, so never worth its start (None).
# On a cluster, measured by `python -m benchmarks.engines` (docs/benchmarks.md, "Engines"): the pool,
# Spark local[2], a standalone cluster (a master and two one-core workers) and Spark Connect read the
# schemas of 1,000 and 10,000 small Parquet files, local and on moto's S3, on this 2-core machine
# (load average 2.5-5). The line through the two sizes gives each engine's fixed seconds and s/file:
#   local files: pool 0.06 s + 0.085 ms/file; standalone 29.3 s start, 1.3 s first read, 0.93 s + 0.091 ms/file.
#   S3 (moto, whose own service time bounds every engine alike): pool 10.0 ms/file; standalone 31 s
#   (start, first read, fixed) + 12.2 ms/file.
# Sharing these 2 cores, the cluster never beats the pool. Its executors bring C cores of their own:
# its s/file becomes the measured one x 2 / C, its fixed cost stays, and it pays from
#   (start + first read + fixed - pool's fixed) / (pool's s/file - its s/file x 2 / C) files:
# with C = 8, 506,000 local files and 4,700 on an object store (C = infinity: 371,000 and 3,300).
# A read on an object store waits on the network, which a cluster's many tasks overlap: it pays
# a hundred times sooner. Connect to a running server starts faster (11 s): 207,000 and 2,000.
# Pass `Thresholds` (or spark.read_from_files) per deployment.
# The pool is nonetheless the default from the first file: a reader that crashes on a corrupt
# file then costs that file, not the run (the loop saves ~30 ms below 300 files).
POOL_FROM = 1
SPARK_FROM_LOCAL: int | None = None
SPARK_FROM_CLUSTER = 500_000
SPARK_FROM_CLUSTER_REMOTE = 5_000


@dataclass(frozen=True)
class Thresholds:
    """File counts from which the pool, and Spark, are used (None: never); on a cluster, for local
    files and for files on a remote file system (an object store, HDFS)."""

    pool_from: int | None = POOL_FROM
    spark_from_local: int | None = SPARK_FROM_LOCAL
    spark_from_cluster: int | None = SPARK_FROM_CLUSTER
    spark_from_cluster_remote: int | None = SPARK_FROM_CLUSTER_REMOTE

    def spark_from(self, master: str | None, remote: bool = False) -> int | None:
        """The threshold for `master` (None: local), for files on a remote file system or local ones."""
        if is_local(master):
            return self.spark_from_local
        return self.spark_from_cluster_remote if remote else self.spark_from_cluster


THRESHOLDS = Thresholds()


def is_local(master: str | None) -> bool:
    """`local`, `local[*]`, `local[4]`, `local-cluster[…]` (or none set) run on this machine's cores."""
    return master is None or master.strip().startswith("local")


def engine_for(count: int, spark: bool, master: str | None = None, thresholds: Thresholds = THRESHOLDS,
               remote: bool = False) -> str:  # fmt: skip
    """The engine for a scan of `count` files (`remote`: on an object store or HDFS): "in_process", "pool" or
    "spark" (`spark`: whether a Spark session can be had at all)."""
    spark_from = thresholds.spark_from(master, remote)
    if spark and spark_from is not None and count >= spark_from:
        return "spark"
    if thresholds.pool_from is not None and count >= thresholds.pool_from:
        return "pool"
    return "in_process"


def choose(
    count: int,
    spark: SchemaReader | None = None,
    *,
    master: str | None = None,
    reader: FileReader = read_file_result,
    workers: int | None = None,
    thresholds: Thresholds = THRESHOLDS,
    remote: bool = False,
) -> SchemaReader:
    """The schema reader for a scan of `count` files (`remote`: on an object store or HDFS).

    `spark` is a schema reader that starts its session on first call
    (`lumos_dagster.spark.schemas.SparkReader`); it is returned, never called, and only above the Spark
    threshold for `master` (the `spark.master` the session would get: a local master
    shares this machine's cores with the pool, a cluster brings its own). `reader` is the
    per-file reader for the other engines; Spark's reader is the one it was made with.
    """
    engine = engine_for(count, spark is not None, master, thresholds, remote)
    if engine == "spark" and spark is not None:
        return spark
    if engine == "pool":
        return PoolReader(reader, workers)
    return functools.partial(read_in_process, reader=reader)


def engine_name(engine: SchemaReader) -> str:
    """How the run's log names a schema reader `choose` gave: its `name`, else (the loop) this process."""
    return getattr(engine, "name", "this process")


class AutoReader:
    """A schema reader that `choose`s its engine on each call, by the number of distinct items and whether
    they are remote: what a run holds when it does not know yet how many files it will read.
    `engine(count)` names the engine the last call of `count` distinct items read with (local files if none
    did), for the run's log."""

    def __init__(self, spark: SchemaReader | None, master: str | None, reader: FileReader, workers: int | None,
                 thresholds: Thresholds):  # fmt: skip
        self.spark, self.master, self.reader, self.workers, self.thresholds = spark, master, reader, workers, thresholds
        self._named: dict[int, str] = {}

    def _choose(self, count: int, remote: bool) -> SchemaReader:
        return choose(count, self.spark, master=self.master, reader=self.reader, workers=self.workers,
                      thresholds=self.thresholds, remote=remote)  # fmt: skip

    def __call__(self, items: Sequence[Item]) -> dict[str, FileResult]:
        unique = unique_items(items)
        engine = self._choose(len(unique), is_remote(unique))
        self._named[len(unique)] = engine_name(engine)
        return engine(unique)

    def engine(self, count: int) -> str:
        return self._named.get(count) or engine_name(self._choose(count, False))


def auto_reader(
    spark: SchemaReader | None = None,
    *,
    master: str | None = None,
    reader: FileReader = read_file_result,
    workers: int | None = None,
    thresholds: Thresholds = THRESHOLDS,
) -> AutoReader:
    """An `AutoReader`: the engine chosen per call."""
    return AutoReader(spark, master, reader, workers, thresholds)
