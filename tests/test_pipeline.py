"""The snapshot pipeline as the core holds it: runnable with neither Dagster nor Spark."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa

from lumos_dagster.config import parse_config
from lumos_dagster.scan.catalogue import chunks, resolve_datasets
from lumos_dagster.scan.judge import COMPATIBLE_CHECK, READABLE_CHECK
from lumos_dagster.scan.pipeline import STEPS
from tests.lake import partitioned_lake, write_parquet

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import json, sys
from datetime import datetime, timedelta, timezone
from lumos_dagster.config import parse_config
from lumos_dagster.scan.catalogue import resolve_datasets
from lumos_dagster.scan.pipeline import Services, read_timings, run_pipeline
from lumos_dagster.scan.readers import read_in_process
from lumos_dagster.scan.report import ScanReport
from lumos_dagster.sources import build_sources, discover

root = sys.argv[1]
config = parse_config({"sources": [{"root": root, "name": "lake"}],
                       "datasets": [{"name": "sales/summary", "upstream": ["sales/orders"]}]})
sources = build_sources(config)
catalogue = resolve_datasets(config, discover(sources, ScanReport()).records, {"lake": root})
day = datetime(2026, 11, 24, tzinfo=timezone.utc)
partitions = [(str(d.date()), d, d + timedelta(days=1)) for d in (day, day + timedelta(days=1))]
steps = []
services = Services(read=read_in_process, history=lambda *_: {}, stored=lambda *_: None, progress=steps.append)
run = run_pipeline(config, catalogue, sources, catalogue.datasets, partitions, services)
print(json.dumps({
    "modules": sorted(m for m in sys.modules if m.split(".")[0] in ("dagster", "pyspark", "dagster_pyspark")),
    "steps": [name for line in steps for name in read_timings(line)],
    "versions": {n: [s.version for _, s in sorted(p.items())] for n, p in run.snapshots.items()},
    "fields": {n: [f.name for f in p["2026-11-25"].schema.fields] for n, p in run.snapshots.items()},
    "costs": {n: p["2026-11-25"].cost.method for n, p in run.snapshots.items()},
    "checks": {n: [(c.name, c.passed) for c in j.checks] for n, j in run.judgements.items()},
    "failures": run.report.failures,
}))
"""


def test_the_pipeline_runs_in_process_with_neither_dagster_nor_spark(tmp_path):
    partitioned_lake(tmp_path, "sales/orders", days=3, extra_field_from=2)
    write_parquet(tmp_path / "sales" / "summary" / "s.parquet", pa.table({"total": [1.0]}))
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["modules"] == []
    assert got["steps"] == [name for name, _ in STEPS]
    # the day with a new nullable column is a minor version, within the same run
    assert got["versions"]["sales/orders"] == ["1.0.0", "1.1.0"]
    assert got["fields"]["sales/orders"] == ["id", "user", "coupon"]
    assert got["costs"] == {"sales/orders": "lineage_weighted", "sales/summary": "lineage_weighted"}
    assert got["checks"]["sales/orders"] == [[READABLE_CHECK, True], [COMPATIBLE_CHECK, True]]
    assert got["failures"] == []


def test_chunks_keep_lineage_groups_whole_and_pack_the_rest(tmp_path):
    config = parse_config(
        {
            "datasets": [
                {"name": "a/1"}, {"name": "a/2", "upstream": ["a/1"]}, {"name": "a/3", "upstream": ["a/2"]},
                {"name": "b/1"}, {"name": "b/2", "upstream": ["b/1"]},
                {"name": "c/1"}, {"name": "d/1"},
            ]
        }
    )  # fmt: skip
    catalogue = resolve_datasets(config, [], {})
    groups = ("a", "b", "c", "d")
    for size in (1, 2, 3, 4, 7):
        parts = chunks(catalogue.datasets, size)
        assert sorted(d.name for part in parts for d in part) == sorted(d.name for d in catalogue.datasets)
        where = {d.name: i for i, part in enumerate(parts) for d in part}
        for group in groups:  # a lineage group is never split, even past `size`
            assert len({i for name, i in where.items() if name.startswith(group)}) == 1, (size, group)
        for part in parts:  # an op holds more than `size` only when one group does
            assert len(part) <= size or len({d.name[0] for d in part}) == 1, (size, part)
            within = [d.name for d in part]
            assert all(within.index(u) < within.index(d.name) for d in part for u in d.upstream)
    assert sorted(len(p) for p in chunks(catalogue.datasets, 4)) == [3, 4]  # a alone; b, c and d packed


def _generated(tmp_path, datasets: int, files: int = 6, torn: str = "d1/ds_1/dt={day}/part-1.orc"):
    """A generated lake of `datasets` datasets × `files` files over 2 days with one torn file (`torn`,
    its first day as `{day}`), and its two partitions."""
    from datetime import datetime, timedelta, timezone

    from benchmarks.lake import FIRST_DAY, generate_lake
    from lumos_dagster.scan.report import ScanReport
    from lumos_dagster.sources import build_sources, discover

    generate_lake(tmp_path / "lake", datasets, files, 2)
    (tmp_path / "lake" / torn.format(day=FIRST_DAY)).write_bytes(b"torn: neither footer nor magic")
    config = parse_config({"sources": [{"root": str(tmp_path / "lake"), "name": "lake"}]})
    sources = build_sources(config)
    catalogue = resolve_datasets(config, discover(sources, ScanReport()).records, {"lake": str(tmp_path / "lake")})
    day = datetime(FIRST_DAY.year, FIRST_DAY.month, FIRST_DAY.day, tzinfo=timezone.utc)
    partitions = [(str((day + timedelta(days=d)).date()), day + timedelta(days=d), day + timedelta(days=d + 1))
                  for d in range(2)]  # fmt: skip
    return config, sources, catalogue, partitions, day


def test_the_pool_and_spark_give_identical_snapshots_of_the_same_lake(tmp_path, spark):
    """The fast path (a process pool, no JVM) and the slow one (Spark executors) on one lake:
    the same snapshots, field for field, file errors included."""
    from benchmarks.lake import FIRST_DAY
    from lumos_dagster.scan.pipeline import Services, run_pipeline
    from lumos_dagster.scan.readers import PoolReader
    from spark.schemas import SparkReader

    config, sources, catalogue, partitions, day = _generated(tmp_path, 25, 4, "d0/ds_0/dt={day}/part-9.parquet")
    now = lambda: day  # noqa: E731  (one capture time for both runs)

    def snapshots(read):
        services = Services(read=read, history=lambda *_: {}, stored=lambda *_: None, now=now)
        run = run_pipeline(config, catalogue, sources, catalogue.datasets, partitions, services)
        return {(n, pk): s for n, snaps in run.snapshots.items() for pk, s in snaps.items()}

    fast, slow = snapshots(PoolReader()), snapshots(SparkReader(lambda: spark))
    assert len(fast) == 50 and fast == slow
    torn = fast["d0/ds_0", str(FIRST_DAY)]
    assert [e.path.endswith("part-9.parquet") for e in torn.errors] == [True] and torn.readable


def test_reading_ahead_in_batches_gives_the_snapshots_of_one_run(tmp_path):
    """The op's path (batches, the next one read while this one is recorded) and one run over every
    dataset: the same snapshots, checks and report counts, a torn file included."""
    from lumos_dagster.scan.pipeline import Services, run_pipeline, run_pipelines
    from lumos_dagster.scan.readers import PoolReader

    config, sources, catalogue, partitions, day = _generated(tmp_path, 23)
    services = Services(read=PoolReader(), history=lambda *_: {}, stored=lambda *_: None, now=lambda: day)
    whole = run_pipeline(config, catalogue, sources, catalogue.datasets, partitions, services)
    batches = chunks(catalogue.datasets, 5)
    runs = list(run_pipelines(config, catalogue, sources, batches, partitions, services))
    assert [[d.name for d in r.datasets] for r in runs] == [[d.name for d in b] for b in batches]
    assert {n: s for r in runs for n, s in r.snapshots.items()} == whole.snapshots
    assert {n: j.checks for r in runs for n, j in r.judgements.items()} == {
        n: j.checks for n, j in whole.judgements.items()
    }
    assert sum(r.report.files_read for r in runs) == whole.report.files_read >= 23 * 6  # each file read once
    torn = whole.snapshots["d1/ds_1"][partitions[0][0]]
    assert [e.path.endswith("part-1.orc") for e in torn.errors] == [True]


def test_the_next_batch_is_read_while_the_caller_holds_this_one(tmp_path):
    """Read-ahead for real: when batch 1 is handed over, batch 2's files are being read without the
    caller asking (a sequential pipeline would only read them once the caller comes back)."""
    import threading

    from lumos_dagster.scan.pipeline import Services, run_pipelines
    from lumos_dagster.scan.readers import read_in_process

    config, sources, catalogue, partitions, day = _generated(tmp_path, 6)
    batches = chunks(catalogue.datasets, 3)
    asked: list[set[str]] = []
    second = threading.Event()

    def read(items):
        asked.append({path.split("/lake/")[1].split("/dt=")[0] for path, *_ in items})
        if len(asked) == 2:
            second.set()
        return read_in_process(items)

    services = Services(read=read, history=lambda *_: {}, stored=lambda *_: None, now=lambda: day)
    runs = run_pipelines(config, catalogue, sources, batches, partitions, services)
    first = next(runs)
    assert second.wait(timeout=30), "the second batch was not read ahead"
    assert asked[1] == {d.name for d in batches[1]} and first.datasets == batches[0]
    assert [r.datasets for r in runs] == [batches[1]]


def test_a_failed_read_ahead_fails_its_batch_after_the_ones_before_it_and_leaves_no_thread(tmp_path):
    import threading

    from lumos_dagster.scan.pipeline import Services, run_pipelines
    from lumos_dagster.scan.readers import read_in_process

    config, sources, catalogue, partitions, day = _generated(tmp_path, 9)
    batches = chunks(catalogue.datasets, 3)
    calls = []

    def read(items):
        calls.append(len(items))
        if len(calls) == 2:
            raise OSError("the file system went away")
        return read_in_process(items)

    threads = threading.active_count()
    services = Services(read=read, history=lambda *_: {}, stored=lambda *_: None, now=lambda: day)
    got = []
    try:
        for run in run_pipelines(config, catalogue, sources, batches, partitions, services):
            got.append(run.datasets)
    except OSError as error:
        assert "went away" in str(error)
    else:
        raise AssertionError("the read's error was swallowed")
    assert got == [batches[0]]
    assert threading.active_count() == threads


def test_the_batches_reports_add_up_to_the_report_of_one_run(tmp_path):
    """The op says one scan report for its batches: their sum is what one run over all would say."""
    from lumos_dagster.scan.pipeline import Services, run_pipeline, run_pipelines
    from lumos_dagster.scan.readers import read_in_process
    from lumos_dagster.scan.report import SAMPLES, ScanReport

    config, sources, catalogue, partitions, day = _generated(tmp_path, 12)
    for i in (2, 7):  # an unsupported file in two datasets of different batches: skipped, with samples
        (tmp_path / "lake" / f"d{i}" / f"ds_{i}" / "notes.txt").write_text("x")
    services = Services(read=read_in_process, history=lambda *_: {}, stored=lambda *_: None, now=lambda: day)
    whole = run_pipeline(config, catalogue, sources, catalogue.datasets, partitions, services)
    total = ScanReport()
    for run in run_pipelines(config, catalogue, sources, chunks(catalogue.datasets, 4), partitions, services):
        total.add(run.report)
    assert total.render() == whole.report.render()
    assert total.failures and total.files_read == whole.report.files_read
    many = ScanReport()
    for n in range(SAMPLES + 3):  # samples stay bounded however many batches add theirs
        one = ScanReport()
        one.skip(f"f{n}", "unsupported")
        many.add(one)
    assert many.skipped["unsupported"] == SAMPLES + 3 and len(many.skipped_samples["unsupported"]) == SAMPLES


def test_a_file_failing_in_several_partitions_or_batches_is_one_failure():
    """A range run reads an undated dataset's torn file for each partition: the report names it once."""
    from lumos_dagster.scan.report import ScanReport

    first, second = ScanReport(), ScanReport()
    for report in (first, first, second):
        report.fail("raw/feed/part-0.parquet", "not a Parquet file (torn footer)")
    second.fail("raw/feed/part-1.parquet", "not a Parquet file (torn footer)")
    first.add(second)
    assert first.failures == [
        ("raw/feed/part-0.parquet", "not a Parquet file (torn footer)"),
        ("raw/feed/part-1.parquet", "not a Parquet file (torn footer)"),
    ]
    assert first.render().count("FAILED  raw/feed/part-0.parquet") == 1


def test_each_batch_says_one_line_of_its_step_times_as_the_benchmark_reads_them(tmp_path):
    """One progress line per batch (not one per step): what it holds, and each step's seconds,
    which benchmarks/scale.py sums into the run's phases."""
    from benchmarks.scale import PIPELINE
    from lumos_dagster.scan.pipeline import Services, read_timings, run_pipelines
    from lumos_dagster.scan.readers import read_in_process

    config, sources, catalogue, partitions, day = _generated(tmp_path, 6)
    lines: list[str] = []
    services = Services(
        read=read_in_process, history=lambda *_: {}, stored=lambda *_: None, now=lambda: day, progress=lines.append
    )
    runs = list(run_pipelines(config, catalogue, sources, chunks(catalogue.datasets, 3), partitions, services))
    assert len(lines) == len(runs) == 2
    for i, (line, run) in enumerate(zip(lines, runs, strict=True), 1):
        assert line.startswith(f"batch {i}/2 ({len(run.datasets)} datasets, {run.report.files_read} files read): ")
        assert list(read_timings(line)) == list(PIPELINE) and all(s >= 0 for s in read_timings(line).values())
    for other in ("scan report:\nfiles listed 3", "recorded 3/6 datasets", "steps: not materialized: upstream a failed",
                  "batch exports: not materialized: x", "batch 1/2 (3 datasets): list fast"):  # fmt: skip
        assert read_timings(other) == {}, other
