"""Schema reading on Spark executors and snapshotting many datasets × partitions."""

import json
import os
import shutil
import subprocess
import sys
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark import cloudpickle

from lumos_dagster.floor.config import parse_config
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.formats import read_file_result, sniff_format
from lumos_dagster.lineage.catalogue import resolve_datasets
from lumos_dagster.sources import build_sources, discover
from lumos_dagster.spark.schemas import read_schemas
from tests.lake import backdate, partitioned_lake, spark_run, write_parquet
from tests.test_testdata import FILES

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def test_executors_read_every_real_world_file_like_a_single_process_does(spark):
    items = [(p, sniff_format(p)) for p in FILES]
    results = read_schemas(spark, items)
    assert set(results) == set(FILES)
    assert results == {p: read_file_result(item) for p, item in zip(FILES, items, strict=True)}


def crashing_reader(item):
    if item[0].endswith("boom.parquet"):
        os._exit(1)  # what a segfaulting native reader does to the Python worker
    return read_file_result(item)


def test_a_file_that_kills_its_worker_is_found_and_reported_and_the_rest_is_read(spark, tmp_path):
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the executors cannot import tests/
    try:
        paths = [write_parquet(tmp_path / f"f{i}.parquet", pa.table({"a": [i]})) for i in range(7)]
        boom = write_parquet(tmp_path / "boom.parquet", pa.table({"a": [0]}))
        results = read_schemas(spark, [(p, "parquet") for p in paths + [boom]], reader=crashing_reader)
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert "crashed the Spark Python worker" in results[boom].error
    assert all(results[p].error is None and results[p].row_count == 1 for p in paths)


def _records(sources):
    return discover(sources, ScanReport()).records


def _window(day: date):
    start = datetime(day.year, day.month, day.day, tzinfo=timezone.utc)
    return (str(day), start, start + timedelta(days=1))


def test_snapshots_of_partitions_read_each_file_once_and_chain_versions(spark, tmp_path):
    partitioned_lake(tmp_path, "sales/orders", days=3, extra_field_from=2)
    write_parquet(tmp_path / "ref" / "countries" / "c.parquet", pa.table({"code": ["FR"]}))
    (tmp_path / "ref" / "countries" / "broken.parquet").write_bytes(b"PAR1 not really")
    backdate(tmp_path / "ref")
    config = parse_config({"sources": [{"root": str(tmp_path), "name": "lake"}]})
    sources = build_sources(config)
    catalogue = resolve_datasets(config, _records(sources), {"lake": str(tmp_path)})
    days = [date(2026, 11, 23), date(2026, 11, 24), date(2026, 11, 25)]
    run = spark_run(spark, config, sources, catalogue, [_window(d) for d in days])

    orders = run.snapshots["sales/orders"]
    assert [orders[str(d)].stats.file_count for d in days] == [2, 2, 2]
    assert [orders[str(d)].stats.row_count for d in days] == [20, 20, 20]
    assert [orders[str(d)].version for d in days] == ["1.0.0", "1.0.0", "1.1.0"]  # a nullable column arrived
    assert [f.name for f in orders["2026-11-25"].schema.fields] == ["id", "user", "coupon"]
    assert orders["2026-11-24"].stats.partition_values == {"dt": ["2026-11-24"]}

    countries = run.snapshots["ref/countries"]
    assert all(s.stats.file_count == 2 and len(s.errors) == 1 for s in countries.values())
    assert countries["2026-11-25"].errors[0].path.endswith("broken.parquet")
    assert countries["2026-11-25"].stats.row_count is None  # partial counts are not reported
    # the unpartitioned dataset's 2 files are read once for all 3 partitions: 6 + 2
    assert run.report.files_read == 8
    # each partition's snapshot names the broken file (above); the run's report names it once
    assert [where.rsplit("/", 2)[-2:] for where, _ in run.report.failures] == [["countries", "broken.parquet"]]


def test_a_dataset_that_vanished_gets_a_snapshot_saying_so(spark, tmp_path):
    partitioned_lake(tmp_path, "a/b", days=1)
    config = parse_config({"sources": [{"root": str(tmp_path), "name": "lake"}], "datasets": [{"name": "ghost/x"}]})
    sources = build_sources(config)
    records = _records(sources)
    shutil.rmtree(tmp_path / "a")
    catalogue = resolve_datasets(config, records, {"lake": str(tmp_path)})
    run = spark_run(spark, config, sources, catalogue, [_window(date(2026, 11, 23))])
    (gone,) = run.snapshots["a/b"].values()
    (ghost,) = run.snapshots["ghost/x"].values()
    assert "no longer found in storage" in gone.errors[0].reason and not gone.readable
    assert "declared in lumos.yaml but not found in any source" in ghost.errors[0].reason
    assert run.report.datasets_failed == 2


CLUSTER_SCRIPT = """
import json, os, sys
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
from lumos_dagster.spark.schemas import read_schemas
from lumos_dagster.formats import sniff_format
paths = json.loads(sys.argv[1])
spark = SparkSession.builder.master("local-cluster[2,1,1024]").config("spark.ui.enabled", "false").getOrCreate()
results = read_schemas(spark, [(p, sniff_format(p)) for p in paths])
executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1  # minus the driver
pids = spark.sparkContext.parallelize(range(8), 8).map(lambda _: os.getppid()).distinct().count()
summary = {p: [r.error, r.row_count, len(r.schema.fields) if r.schema else None] for p, r in results.items()}
print(json.dumps({"executors": executors, "worker_parents": pids, "results": summary}))
spark.stop()
"""


def test_the_scan_runs_on_separate_executor_jvms(testdata):
    """local-cluster mode starts real executor JVMs: code that only works on the driver fails here."""
    paths = [p for p in FILES if "parquet-testing/data" in p][:40]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", CLUSTER_SCRIPT, json.dumps(paths)],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["executors"] == 2
    assert got["worker_parents"] >= 2  # Python workers were forked under more than one executor
    for p in paths:
        local = read_file_result((p, sniff_format(p)))
        assert got["results"][p] == [local.error, local.row_count, len(local.schema.fields) if local.schema else None]
