"""Schema readers: the in-process loop, the process pool and Spark read alike; a file that
kills its process costs that file only; the chooser starts Spark only above its threshold."""

import ast
import os
import subprocess
import sys
from multiprocessing import resource_tracker
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark import cloudpickle

from benchmarks.lake import generate_lake
from lumos_dagster.formats import FileResult, read_file_result, readers, sniff_format
from lumos_dagster.formats.readers import (
    POOL_CRASH,
    PoolReader,
    ReaderCrashed,
    Thresholds,
    auto_reader,
    choose,
    engine_for,
    isolate_crashes,
    read_batch,
    read_in_process,
    start_method,
)
from lumos_dagster.spark.schemas import SparkReader, choose_reader, read_schemas, spark_auto_reader
from tests.lake import ROOT, write_parquet
from tests.test_testdata import FILES


def test_the_core_readers_import_neither_dagster_nor_spark():
    code = "import sys, lumos_dagster.formats.readers; print(sorted({m.split('.')[0] for m in sys.modules}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert not {"dagster", "pyspark", "py4j", "spark"} & set(ast.literal_eval(out.stdout))


def _children() -> set[int]:
    """Live or unreaped (zombie) child processes of this process."""
    me = str(os.getpid())
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:  # ended while listing
            continue
        if stat.rsplit(")", 1)[1].split()[1] == me:  # fields after "(comm)": state, ppid, …
            found.add(int(pid))
    return found


needs_proc = pytest.mark.skipif(not os.path.isdir("/proc"), reason="lists child processes through /proc")


@pytest.fixture(scope="module")
def lake_items(tmp_path_factory) -> list[tuple]:
    root = tmp_path_factory.mktemp("lake")
    generate_lake(root, datasets=10, files=3, partitions=2)  # all five formats, nested columns
    paths = sorted(str(p) for p in root.rglob("*") if p.is_file() and not p.name.startswith("_"))
    return [(p, sniff_format(p)) for p in paths]


def test_loop_pool_and_spark_read_real_and_generated_files_alike(spark, lake_items):
    items = [(p, sniff_format(p)) for p in FILES] + lake_items
    expected = {item[0]: read_file_result(item) for item in items}
    assert any(r.error for r in expected.values()) and any(r.schema for r in expected.values())  # bad_data too

    assert read_in_process(items) == expected
    assert read_batch(items) == list(expected.values())
    assert PoolReader()(items) == expected
    assert PoolReader(workers=1)(items) == expected
    assert read_schemas(spark, items) == expected
    assert SparkReader(lambda: spark)(items) == expected


def test_duplicates_are_read_once_and_nothing_is_read_from_nothing():
    calls = []

    def counting(item):
        calls.append(item)
        return FileResult(item[0])

    assert PoolReader(counting)([]) == {} and read_in_process([], counting) == {}
    assert list(read_in_process([("a", None), ("a", None), ("b", None)], counting)) == ["a", "b"]
    assert calls == [("a", None), ("b", None)]


def test_files_with_equal_schemas_share_one_schema_object(lake_items):
    """What keeps a pool's or an executor's results cheap to pickle (per batch: a chunk, a task)."""
    results = read_in_process(lake_items)
    ids = {}
    for r in results.values():
        ids.setdefault(r.schema, set()).add(id(r.schema))
    assert len(ids) == 10 and all(len(same) == 1 for same in ids.values())  # 10 datasets × 3 files
    pooled = PoolReader(workers=2)(lake_items)
    assert len({id(r.schema) for r in pooled.values()}) < len(pooled)


def crashing_reader(item):
    if "boom" in os.path.basename(item[0]):
        os._exit(1)  # what a segfaulting native reader does to its process
    return read_file_result(item)


@needs_proc
@pytest.mark.slow  # a pool of processes, killed: make test, not the inner loop
@pytest.mark.parametrize(
    "booms,workers",
    [
        ([0], 2),  # the first chunk: the other worker's chunk dies with it
        ([20], 2),
        ([39], 2),  # the last file
        ([3, 31], 2),  # two culprits in different chunks
        ([10, 11], 1),  # two neighbours, one worker
    ],
)
def test_a_file_that_kills_its_pool_worker_costs_that_file_only(tmp_path, booms, workers):
    paths = [
        write_parquet(tmp_path / (f"boom{i}.parquet" if i in booms else f"f{i}.parquet"), pa.table({"a": [i] * i}))
        for i in range(40)
    ]
    before = _children()
    results = PoolReader(crashing_reader, workers=workers)([(p, "parquet") for p in paths])
    assert set(results) == set(paths)
    for i, p in enumerate(paths):
        if i in booms:
            assert results[p] == FileResult(p, error=POOL_CRASH)
        else:
            assert results[p].error is None and results[p].row_count == i
    assert _children() <= before  # every worker, of every pool the bisection made, is joined


@needs_proc
def test_the_pool_leaves_no_process_behind(lake_items):
    before = _children()
    PoolReader(workers=2)(lake_items)
    assert _children() <= before


def test_the_pool_hands_any_callable_to_its_workers(lake_items):
    """Fork: the reader is inherited, not pickled, so a closure works."""
    seen = {"prefix": "read:"}
    results = PoolReader(lambda item: FileResult(seen["prefix"] + item[0]), workers=2)(lake_items[:5])
    assert sorted(results) == sorted("read:" + p for p, _ in lake_items[:5])


def test_workers_fork_for_local_files_and_spawn_for_remote_ones():
    s3 = ("s3", "http://127.0.0.1:9000", "us-east-1", "http")
    assert start_method([("/lake/a.parquet", "parquet"), ("/lake/b.orc", "orc", None)]) == "fork"
    assert start_method([("/lake/a.parquet", "parquet"), ("bucket/b.parquet", "parquet", s3)]) == "spawn"


@needs_proc
@pytest.mark.slow  # spawned processes each import Lumos: make test, not the inner loop
def test_a_spawned_pool_reads_alike_and_leaves_no_process_behind(lake_items):
    resource_tracker.ensure_running()  # spawn starts multiprocessing's one tracker per process: not a leak
    before = _children()
    assert PoolReader(workers=2, start="spawn")(lake_items[:8]) == read_in_process(lake_items[:8])
    assert _children() <= before


def test_an_exception_that_is_not_a_crash_is_raised():
    def failing(item):
        raise ValueError(f"bug reading {item[0]}")

    with pytest.raises(ValueError, match="bug reading"):
        PoolReader(failing, workers=1)([("a", None)])


def test_the_bisection_keeps_finished_files_and_runs_the_rest_again():
    """A fake engine that finishes the files before the culprit, then crashes."""
    runs = []

    def run(batch):
        runs.append([p for p, _ in batch])
        done = []
        for path, _ in batch:
            if path == "c":
                raise ReaderCrashed("it crashed", done)
            done.append(FileResult(path, row_count=1))
        return done

    results = isolate_crashes(run, [(p, None) for p in "abcdef"])
    assert sorted(r.path for r in results) == list("abcdef")
    assert [r for r in results if r.error] == [FileResult("c", error="it crashed")]
    # a and b are not read again; c alone crashes, so it is the culprit
    assert runs == [list("abcdef"), ["c", "d"], ["c"], ["d"], ["e", "f"]]


def test_a_crash_on_spark_is_still_reported_as_a_spark_worker_crash(spark, tmp_path):
    """The bisection is shared; Spark keeps its own message."""
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the executors cannot import tests/
    try:
        paths = [write_parquet(tmp_path / f"f{i}.parquet", pa.table({"a": [i]})) for i in range(3)]
        boom = write_parquet(tmp_path / "boom.parquet", pa.table({"a": [0]}))
        results = read_schemas(spark, [(p, "parquet") for p in paths + [boom]], reader=crashing_reader)
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert results[boom] == FileResult(boom, error="the reader crashed the Spark Python worker (corrupt file?)")
    assert all(results[p].row_count == 1 for p in paths)


LIMITS = Thresholds(pool_from=10, spark_from_local=1_000, spark_from_cluster=100)


@pytest.mark.parametrize(
    "count,spark,master,engine",
    [
        (0, True, "local[*]", "in_process"),
        (9, True, "local[*]", "in_process"),
        (10, True, "local[*]", "pool"),
        (999, True, "local[*]", "pool"),
        (1_000, True, "local[*]", "spark"),
        (1_000, True, None, "spark"),  # no master set: Spark's default, local
        (1_000, True, "local-cluster[2,1,1024]", "spark"),  # on this machine's cores: local
        (1_000, False, "local[*]", "pool"),  # no Spark to be had
        (100, True, "spark://master:7077", "spark"),  # a cluster pays sooner
        (100, True, "yarn", "spark"),
        (99, True, "k8s://https://api:6443", "pool"),
        (5, True, "yarn", "in_process"),
    ],
)
def test_the_engine_for_a_scan(count, spark, master, engine):
    assert engine_for(count, spark, master, LIMITS) == engine


def test_never_means_never():
    never = Thresholds(pool_from=None, spark_from_local=None, spark_from_cluster=None)
    assert engine_for(10**9, True, "yarn", never) == "in_process"


def test_the_measured_defaults():
    """benchmarks/readers.py: Spark local[*] is never faster than the pool on the same cores;
    benchmarks/engines.py: a cluster pays sooner on an object store than on local files."""
    assert engine_for(readers.POOL_FROM - 1, True, "local[*]") == "in_process"
    assert engine_for(readers.POOL_FROM, True, "local[*]") == "pool"
    assert engine_for(10**7, True, "local[*]") == "pool"
    assert engine_for(10**7, True, "local[*]", remote=True) == "pool"
    assert engine_for(readers.SPARK_FROM_CLUSTER - 1, True, "yarn") == "pool"
    assert engine_for(readers.SPARK_FROM_CLUSTER, True, "yarn") == "spark"
    assert engine_for(readers.SPARK_FROM_CLUSTER_REMOTE - 1, True, "yarn", remote=True) == "pool"
    assert engine_for(readers.SPARK_FROM_CLUSTER_REMOTE, True, "yarn", remote=True) == "spark"
    assert readers.SPARK_FROM_CLUSTER_REMOTE < readers.SPARK_FROM_CLUSTER


def test_a_run_reader_takes_the_object_store_threshold_for_remote_files_and_names_what_read(lake_items):
    def spark_reader(items):
        return {p: FileResult(p, error="read on spark") for p, *_ in items}

    spark_reader.name = "Spark (master yarn)"  # type: ignore[attr-defined]
    limits = Thresholds(pool_from=None, spark_from_local=None, spark_from_cluster=100, spark_from_cluster_remote=2)
    read = auto_reader(spark_reader, master="yarn", thresholds=limits)
    remote = [(f"bucket/k{i}.parquet", "parquet", ("s3", "127.0.0.1:9", "us-east-1", "http")) for i in range(3)]
    assert {r.error for r in read(remote).values()} == {"read on spark"}
    assert read.engine(3) == "Spark (master yarn)"
    assert read(lake_items[:3]) == read_in_process(lake_items[:3])  # local files: below the cluster's 100
    assert read.engine(3) == "this process"


def test_the_chooser_never_touches_spark_below_the_threshold(lake_items):
    def no_spark():
        raise AssertionError("Spark was started below the threshold")

    small = lake_items[:5]
    for count in (len(small), LIMITS.pool_from, LIMITS.spark_from_local - 1):
        reader = choose_reader(count, no_spark, master="local[*]", thresholds=LIMITS)
        assert reader(small) == {p: read_file_result((p, f)) for p, f in small}
        assert not isinstance(reader, SparkReader)


def test_the_chooser_starts_spark_once_it_reads_above_the_threshold(spark, lake_items):
    started = []

    def session():
        started.append(1)
        return spark

    reader = choose_reader(LIMITS.spark_from_local, session, master="local[*]", thresholds=LIMITS)
    assert isinstance(reader, SparkReader) and started == []  # chosen, not started yet
    assert reader(lake_items[:4]) == read_in_process(lake_items[:4])
    assert started == [1]


def test_a_run_reader_chooses_per_call_by_distinct_files(spark, lake_items):
    started = []

    def session():
        started.append(1)
        return spark

    read = spark_auto_reader(session, master="local[*]", thresholds=Thresholds(3, 6, 6))
    assert read(lake_items[:2] * 4) == read_in_process(lake_items[:2]) and started == []  # 2 distinct: loop
    assert read(lake_items[:5]) == read_in_process(lake_items[:5]) and started == []  # the pool
    assert read(lake_items[:6]) == read_in_process(lake_items[:6]) and started == [1]  # Spark, started now


def test_the_core_chooser_takes_any_lazy_spark_reader():
    spark_reader = lambda items: {p: FileResult(p, error="spark") for p, *_ in items}  # noqa: E731
    assert choose(5, spark_reader, master="yarn", thresholds=LIMITS) is not spark_reader
    assert choose(100, spark_reader, master="yarn", thresholds=LIMITS) is spark_reader
    assert isinstance(choose(100, None, master="yarn", thresholds=LIMITS), PoolReader)
