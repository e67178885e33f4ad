"""The snapshot run as the core holds it (`lumos_dagster.run.snapshot`): runnable with neither Dagster
nor Spark, versions decided once where the store keeps them, checks judged on those versions."""

import json
import os
import subprocess
import sys
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa

from lumos_dagster.floor.config import parse_config
from lumos_dagster.floor.dataset_specs import chunks
from lumos_dagster.floor.scan_report import SAMPLES, ScanReport
from lumos_dagster.floor.windows import Window
from lumos_dagster.formats.readers import PoolReader, read_in_process
from lumos_dagster.governance.checks import COMPATIBLE_CHECK, READABLE_CHECK
from lumos_dagster.lineage.catalogue import resolve_datasets
from lumos_dagster.run.snapshot import STEPS, Services, SnapshotRun
from lumos_dagster.store import SnapshotStore
from tests.lake import backdate, partitioned_lake, run_in_process, write_parquet

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import json, sys
from datetime import datetime, timedelta, timezone
from lumos_dagster.floor.config import parse_config
from lumos_dagster.formats.readers import read_in_process
from lumos_dagster.lineage.catalogue import resolve_datasets
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.run.snapshot import Services, SnapshotRun
from lumos_dagster.sources import build_sources, discover
from lumos_dagster.store import SnapshotStore
from lumos_dagster.floor.windows import Window

root = sys.argv[1]
config = parse_config({"sources": [{"root": root, "name": "lake"}],
                       "datasets": [{"name": "sales/summary", "upstream": ["sales/orders"]}]})
sources = build_sources(config)
catalogue = resolve_datasets(config, discover(sources, ScanReport()).records, {"lake": root})
day = datetime(2026, 11, 24, tzinfo=timezone.utc)
windows = [Window(str(d.date()), d, d + timedelta(days=1)) for d in (day, day + timedelta(days=1))]
lines = []
with SnapshotStore(f"sqlite:///{root}/store.db") as store:
    run = SnapshotRun(config, catalogue, sources, store, None, Services(read=read_in_process, say=lines.append))
    batches = list(run.run(catalogue.datasets, windows))
    stored = {d.name: [s.version for s in store.history(d.ref.urn)] for d in catalogue.datasets}
outcomes = [o for b in batches for o in b.datasets]
print(json.dumps({
    "modules": sorted(m for m in sys.modules if m.split(".")[0] in ("dagster", "pyspark", "dagster_pyspark")),
    "steps": [list(b.seconds) for b in batches],
    "lines": lines,
    "versions": {o.spec.name: [s.version for _, s in sorted(o.snapshots.items())] for o in outcomes},
    "stored": stored,
    "fields": {o.spec.name: [f.name for f in o.snapshots["2026-11-25"].schema.fields] for o in outcomes},
    "costs": {o.spec.name: o.snapshots["2026-11-25"].cost.method for o in outcomes},
    "checks": {o.spec.name: [(c.name, c.passed) for c in o.judgement.checks] for o in outcomes},
    "failures": run.report.failures,
}))
"""


def test_the_run_goes_through_every_step_with_neither_dagster_nor_spark(tmp_path):
    partitioned_lake(tmp_path, "sales/orders", days=3, extra_field_from=2)
    backdate(write_parquet(tmp_path / "sales" / "summary" / "s.parquet", pa.table({"total": [1.0]})))
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["modules"] == []
    assert got["steps"] == [list(STEPS)]  # step times as data, one batch
    assert [line.split(":")[0] for line in got["lines"]] == ["batch 1/1 (2 datasets, 5 files read)"]
    # the day with a new nullable column is a minor version, within the same run, as the store keeps it
    assert got["versions"]["sales/orders"] == ["1.0.0", "1.1.0"] == got["stored"]["sales/orders"]
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

    from benchmarks.lake import FIRST_DAY, generate_lake
    from lumos_dagster.floor.scan_report import ScanReport
    from lumos_dagster.sources import build_sources, discover

    generate_lake(tmp_path / "lake", datasets, files, 2)
    (tmp_path / "lake" / torn.format(day=FIRST_DAY)).write_bytes(b"torn: neither footer nor magic")
    config = parse_config({"sources": [{"root": str(tmp_path / "lake"), "name": "lake"}]})
    sources = build_sources(config)
    catalogue = resolve_datasets(config, discover(sources, ScanReport()).records, {"lake": str(tmp_path / "lake")})
    day = datetime(FIRST_DAY.year, FIRST_DAY.month, FIRST_DAY.day, tzinfo=timezone.utc)
    partitions = [Window(str((day + timedelta(days=d)).date()), day + timedelta(days=d), day + timedelta(days=d + 1))
                  for d in range(2)]  # fmt: skip
    return config, sources, catalogue, partitions, day


def test_the_pool_and_spark_give_identical_snapshots_of_the_same_lake(tmp_path, spark):
    """The fast path (a process pool, no JVM) and the slow one (Spark executors) on one lake:
    the same snapshots, field for field, file errors included."""
    from benchmarks.lake import FIRST_DAY
    from lumos_dagster.spark.schemas import SparkReader

    config, sources, catalogue, partitions, day = _generated(tmp_path, 25, 4, "d0/ds_0/dt={day}/part-9.parquet")

    def snapshots(read):
        done = run_in_process(config, catalogue, sources, partitions, read=read, now=lambda: day)
        return {(n, pk): s for n, snaps in done.snapshots.items() for pk, s in snaps.items()}

    fast, slow = snapshots(PoolReader()), snapshots(SparkReader(lambda: spark))
    assert len(fast) == 50 and fast == slow
    torn = fast["d0/ds_0", str(FIRST_DAY)]
    assert [e.path.endswith("part-9.parquet") for e in torn.errors] == [True] and torn.readable


def _run(config, sources, catalogue, day, read, store, size) -> SnapshotRun:
    services = Services(read=read, say=lambda _: None, now=lambda: day)
    return SnapshotRun(config, catalogue, sources, store, None, services, batch_size=size)


def test_batches_read_ahead_give_the_snapshots_of_one_run(tmp_path):
    """The op's path (batches, the next one read while this one is recorded) and one run over every
    dataset: the same snapshots, checks and report counts, a torn file included."""
    config, sources, catalogue, partitions, day = _generated(tmp_path, 23)
    whole = run_in_process(config, catalogue, sources, partitions, read=PoolReader(), now=lambda: day)
    with SnapshotStore("sqlite:///:memory:") as store:
        run = _run(config, sources, catalogue, day, PoolReader(), store, 5)
        batches = list(run.run(catalogue.datasets, partitions))
    expected = chunks(catalogue.datasets, 5)
    assert [[o.spec.name for o in b.datasets] for b in batches] == [[d.name for d in part] for part in expected]
    assert {o.spec.name: dict(o.snapshots) for b in batches for o in b.datasets} == whole.snapshots
    assert {o.spec.name: o.judgement.checks for b in batches for o in b.datasets} == {
        n: j.checks for n, j in whole.judgements.items()
    }
    assert sum(b.report.files_read for b in batches) == whole.report.files_read >= 23 * 6  # each file read once
    torn = whole.snapshots["d1/ds_1"][partitions[0].key]
    assert [e.path.endswith("part-1.orc") for e in torn.errors] == [True]


def test_the_next_batch_is_read_while_the_caller_holds_this_one(tmp_path):
    """Read-ahead for real: when batch 1 is handed over, batch 2's files are being read without the
    caller asking (a sequential run would only read them once the caller comes back)."""
    config, sources, catalogue, partitions, day = _generated(tmp_path, 6)
    expected = chunks(catalogue.datasets, 3)
    asked: list[set[str]] = []
    second = threading.Event()

    def read(items):
        asked.append({path.split("/lake/")[1].split("/dt=")[0] for path, *_ in items})
        if len(asked) == 2:
            second.set()
        return read_in_process(items)

    with SnapshotStore("sqlite:///:memory:") as store:
        batches = _run(config, sources, catalogue, day, read, store, 3).run(catalogue.datasets, partitions)
        first = next(batches)
        assert second.wait(timeout=30), "the second batch was not read ahead"
        assert asked[1] == {d.name for d in expected[1]}
        assert [o.spec for o in first.datasets] == expected[0]
        assert [[o.spec for o in b.datasets] for b in batches] == [expected[1]]


def test_a_failed_read_ahead_fails_its_batch_after_the_ones_before_it_and_leaves_no_thread(tmp_path):
    config, sources, catalogue, partitions, day = _generated(tmp_path, 9)
    calls = []

    def read(items):
        calls.append(len(items))
        if len(calls) == 2:
            raise OSError("the file system went away")
        return read_in_process(items)

    threads = threading.active_count()
    got = []
    with SnapshotStore("sqlite:///:memory:") as store:
        try:
            for batch in _run(config, sources, catalogue, day, read, store, 3).run(catalogue.datasets, partitions):
                got.append([o.spec for o in batch.datasets])
        except OSError as error:
            assert "went away" in str(error)
        else:
            raise AssertionError("the read's error was swallowed")
    assert got == [chunks(catalogue.datasets, 3)[0]]
    assert threading.active_count() == threads


def test_the_batches_reports_add_up_to_the_report_of_one_run(tmp_path):
    """The op says one scan report for its batches: their sum is what one run over all would say."""
    config, sources, catalogue, partitions, day = _generated(tmp_path, 12)
    for i in (2, 7):  # an unsupported file in two datasets of different batches: skipped, with samples
        (tmp_path / "lake" / f"d{i}" / f"ds_{i}" / "notes.txt").write_text("x")
    whole = run_in_process(config, catalogue, sources, partitions, now=lambda: day)
    total = ScanReport()
    with SnapshotStore("sqlite:///:memory:") as store:
        run = _run(config, sources, catalogue, day, read_in_process, store, 4)
        for batch in run.run(catalogue.datasets, partitions):
            total.add(batch.report)
    assert total.render() == whole.report.render() == run.report.render()
    assert total.failures and total.files_read == whole.report.files_read
    many = ScanReport()
    for n in range(SAMPLES + 3):  # samples stay bounded however many batches add theirs
        one = ScanReport()
        one.skip(f"f{n}", "unsupported")
        many.add(one)
    assert many.skipped["unsupported"] == SAMPLES + 3 and len(many.skipped_samples["unsupported"]) == SAMPLES


def test_a_file_failing_in_several_partitions_or_batches_is_one_failure():
    """A range run reads an undated dataset's torn file for each partition: the report names it once."""
    from lumos_dagster.floor.scan_report import ScanReport

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


def test_each_batch_says_its_step_times_as_data_and_in_one_line(tmp_path):
    """One progress line per batch (not one per step), and each step's seconds as data: what the op
    sums into its run's `lumos/step_seconds` tag for the benchmarks."""
    config, sources, catalogue, partitions, day = _generated(tmp_path, 6)
    lines: list[str] = []
    with SnapshotStore("sqlite:///:memory:") as store:
        run = SnapshotRun(config, catalogue, sources, store, None,
                          Services(read=read_in_process, say=lines.append, now=lambda: day), batch_size=3)  # fmt: skip
        batches = list(run.run(catalogue.datasets, partitions))
    assert len(lines) == len(batches) == 2
    for i, (line, batch) in enumerate(zip(lines, batches, strict=True), 1):
        assert line == batch.line()
        assert line.startswith(f"batch {i}/2 ({len(batch.datasets)} datasets, {batch.report.files_read} files read): ")
        assert list(batch.seconds) == list(STEPS) and all(s >= 0 for s in batch.seconds.values())
    assert run.seconds == {step: sum(b.seconds[step] for b in batches) for step in STEPS}
