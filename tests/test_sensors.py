"""Storage-change, release and schedule sensors, evaluated with Dagster's own sensor
context on a real instance; release windows across time zones and DST."""

import json
import logging
import os
from datetime import UTC, date, datetime, timedelta
from unittest import mock

import pyarrow as pa
import pytest
import yaml
from click.testing import CliRunner
from dagster import AssetKey, AssetMaterialization, DagsterInstance, SensorEvaluationContext, build_sensor_context

from lumos_dagster.cli import main
from lumos_dagster.definitions import assemble, build_definitions
from lumos_dagster.floor.config import load_config
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.floor.windows import latest_due, next_window, parse_lag
from lumos_dagster.schema.releases import Manifest
from lumos_dagster.sensors.releases import release_requests, schedule_requests
from lumos_dagster.sources import build_sources
from lumos_dagster.store import SnapshotStore
from tests.lake import partitioned_lake, register, write_parquet
from tests.test_sources import s3  # noqa: F401  (fixture: moto's S3 server)

pytestmark = [pytest.mark.dagster, pytest.mark.servers]


@pytest.fixture(autouse=True)
def settled(monkeypatch):
    """Files count as fully written at once here (test_files_still_being_written_wait checks the wait)."""
    monkeypatch.setattr("lumos_dagster.inventory.watch.SETTLE_SECONDS", 0.0)


def make_project(tmp_path, **extra):
    partitioned_lake(tmp_path / "lake", "sales/orders", days=2, start=date(2026, 11, 24), files_per_day=1)
    write_parquet(tmp_path / "lake" / "ref" / "countries" / "c.parquet", pa.table({"code": ["FR"]}))
    config = {"sources": [{"name": "lake", "root": "lake"}], "store": {"path": "store.db"},
              "catalog": {"path": "lite.db"}, "partitions": {"start": "2026-11-01"}, **extra}  # fmt: skip
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump(config))
    cfg = load_config(str(tmp_path / "lumos.yaml"))
    register(cfg)
    return cfg


class _Lines(logging.Handler):
    def __init__(self, lines: list[str]):
        super().__init__()
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


class Ticks:
    """Evaluates a sensor tick after tick, carrying the cursor like the daemon does."""

    def __init__(self, defs, name):
        self.sensor = defs.resolve_sensor_def(name)
        self.defs = defs
        self.instance = DagsterInstance.ephemeral()
        self.cursor = None
        self.lines: list[str] = []  # what the ticks logged
        self.logger = logging.getLogger(f"tests.ticks.{id(self)}")
        self.logger.setLevel(logging.INFO)
        self.logger.addHandler(_Lines(self.lines))

    def tick(self, cursor="carry", preview=False):
        """A tick of the started sensor, as the daemon evaluates it (with the time it was started), or
        a preview (without: the UI's "Preview tick"), whose cursor Dagster throws away."""
        started = None if preview else 1.0
        context = build_sensor_context(instance=self.instance, cursor=self.cursor if cursor == "carry" else cursor,
                                       definitions=self.defs, last_sensor_start_time=started)  # fmt: skip
        with mock.patch.object(SensorEvaluationContext, "log", new_callable=mock.PropertyMock) as log:
            log.return_value = self.logger
            result = self.sensor.evaluate_tick(context)
        if not preview:
            self.cursor = result.cursor
        return result

    def reload(self, defs) -> None:
        """The code location loaded again (the sensor asked for it): the same sensor, new definitions."""
        self.defs, self.sensor = defs, defs.resolve_sensor_def(self.sensor.name)

    def run_request(self, result, instance) -> dict:
        """Run the tick's one run request in process, as the daemon would launch it: the check
        evaluations of that run, by check name."""
        (request,) = result.run_requests
        run = self.defs.resolve_implicit_global_asset_job_def().execute_in_process(
            instance=instance,
            partition_key=request.partition_key,
            asset_selection=request.asset_selection,
            raise_on_error=False,
        )
        return {e.check_name: e for e in run.get_asset_check_evaluations()}

    @staticmethod
    def wanted(result):
        return sorted("/".join(k.path) + "@" + r.partition_key for r in result.run_requests for k in r.asset_selection)


def test_created_modified_and_deleted_files_request_exactly_their_partitions(tmp_path):
    cfg = make_project(tmp_path)
    ticks = Ticks(build_definitions(cfg), "lumos_storage_lake")
    ticks.tick()  # the baseline (and the first snapshots: below)
    assert len(ticks.cursor) < 100  # a generation number and a digest, not a list of files

    part = tmp_path / "lake" / "sales" / "orders" / "dt=2026-11-25" / "part-9.parquet"
    write_parquet(part, pa.table({"id": [1]}))
    created = ticks.tick()
    assert Ticks.wanted(created) == ["sales/orders@2026-11-25"]
    (request,) = created.run_requests
    assert request.run_key.startswith("storage:lake:2026-11-25:") and request.tags["lumos/trigger"] == "storage-change"
    assert not ticks.tick().run_requests  # nothing changed since

    before = ticks.cursor
    stat = os.stat(part)
    with open(part, "r+b") as fh:  # same size, new content
        data = bytearray(fh.read())
        data[10] ^= 0xFF
        fh.seek(0)
        fh.write(data)
    os.utime(part, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1000))
    modified = ticks.tick()
    assert Ticks.wanted(modified) == ["sales/orders@2026-11-25"]
    replay = ticks.tick(cursor=before)  # the daemon lost the cursor: the same tick again
    assert [r.run_key for r in replay.run_requests] == [r.run_key for r in modified.run_requests]

    os.remove(tmp_path / "lake" / "sales" / "orders" / "dt=2026-11-24" / "part-0.parquet")
    write_parquet(tmp_path / "lake" / "ref" / "countries" / "d.parquet", pa.table({"code": ["DE"]}))
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    assert Ticks.wanted(ticks.tick()) == sorted(["sales/orders@2026-11-24", f"ref/countries@{today}"])


def test_a_new_dataset_is_recorded_then_requested_once_the_code_location_knows_it(tmp_path):
    cfg = make_project(tmp_path)
    ticks = Ticks(build_definitions(cfg), "lumos_storage_lake")
    ticks.tick()
    write_parquet(tmp_path / "lake" / "crm" / "contacts" / "dt=2026-11-24" / "a.parquet", pa.table({"id": [1]}))
    write_parquet(tmp_path / "lake" / "crm" / "contacts" / "dt=2026-11-25" / "a.parquet", pa.table({"id": [1]}))
    result = ticks.tick()
    assert not result.run_requests  # not an asset in the running code location yet
    with SnapshotStore(cfg.store_url) as store:
        assert "crm/contacts" in {r.name for r in store.datasets()}
    assert not ticks.tick().run_requests  # still waiting for the reload, and still remembered
    ticks.reload(build_definitions(cfg))  # what the sensor asked for
    (request,) = ticks.tick().run_requests  # its newest partition, nobody materializing anything
    assert ([k.path for k in request.asset_selection], request.partition_key) == ([["crm", "contacts"]], "2026-11-25")
    assert request.job_name == "lumos_daily_snapshots"
    assert not ticks.tick().run_requests  # asked for once


def test_the_first_tick_snapshots_what_dagster_never_materialized(tmp_path):
    """A first start snapshots the lake at once (issue 41: nothing was snapshotted until the schedule's
    midnight): the current partition of each dataset never materialized, in runs of whole ops as the
    schedules run them; a dataset Dagster has materialized is left to the sensor and the schedules."""
    cfg = make_project(tmp_path)
    for name in ("a", "b", "c"):
        write_parquet(tmp_path / "lake" / "more" / name / "x.parquet", pa.table({"x": [1]}))
    register(cfg)
    defs = build_definitions(cfg)
    ticks = Ticks(defs, "lumos_storage_lake")
    countries = AssetKey(["ref", "countries"])
    ticks.instance.report_runless_asset_event(AssetMaterialization(countries, partition="2026-11-24"))
    first = ticks.tick()
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    # a dated dataset's newest day with files (not an empty today); a dataset without dates, today's
    assert Ticks.wanted(first) == ["more/a@" + today, "more/b@" + today, "more/c@" + today, "sales/orders@2026-11-25"]
    assert len(first.run_requests) == 2  # one op: a run for each partition
    assert {r.tags["lumos/trigger"] for r in first.run_requests} == {"first-start"}
    assert {r.job_name for r in first.run_requests} == {"lumos_daily_snapshots"}
    assert not ticks.tick().run_requests  # then it keeps to changes and the schedules


def test_files_still_being_written_wait_for_a_later_tick(tmp_path, monkeypatch):
    """A file is taken once its size and modification time are the same at two looks, whatever its
    modification time says: a writer appending between the two looks holds it back, and the log names it."""
    cfg = make_project(tmp_path)
    ticks = Ticks(build_definitions(cfg), "lumos_storage_lake")
    ticks.tick()
    torn = tmp_path / "lake" / "sales" / "orders" / "dt=2026-11-25" / "part-7.parquet"
    torn.parent.mkdir(parents=True, exist_ok=True)
    torn.write_bytes(b"PAR1 half of a file")  # a writer is at it

    def a_writer_appends(seconds):  # between the tick's two looks
        with open(torn, "ab") as fh:
            fh.write(b" and more")

    monkeypatch.setattr("lumos_dagster.inventory.watch.time.sleep", a_writer_appends)
    result = ticks.tick()
    assert not result.run_requests
    assert any("still being written" in line and "sales/orders/dt=2026-11-25/part-7.parquet" in line
               for line in ticks.lines)  # fmt: skip
    monkeypatch.setattr("lumos_dagster.inventory.watch.time.sleep", lambda seconds: None)  # the writer is done
    written = os.stat(torn).st_mtime
    os.utime(torn, (written - 3600, written - 3600))  # an old time, a clock behind: the same rule
    assert Ticks.wanted(ticks.tick()) == ["sales/orders@2026-11-25"]


@pytest.mark.parametrize("ahead", [2 * 3600, 86400])
def test_a_file_modified_in_the_future_is_taken_and_said_once(tmp_path, ahead):
    """A writer's clock ahead of the sensor's, or a copy that kept a future time: was never taken (counted as
    still being written while now - mtime < 5 s, forever). Now taken at once, said once, naming the file."""
    cfg = make_project(tmp_path)
    ticks = Ticks(build_definitions(cfg), "lumos_storage_lake")
    ticks.tick()
    future = tmp_path / "lake" / "sales" / "orders" / "dt=2026-11-25" / "part-8.parquet"
    write_parquet(future, pa.table({"id": [1]}))
    os.utime(future, (os.stat(future).st_atime, os.stat(future).st_mtime + ahead))
    assert Ticks.wanted(ticks.tick()) == ["sales/orders@2026-11-25"]
    said = [line for line in ticks.lines if "ahead of this sensor's clock" in line]
    assert len(said) == 1 and "sales/orders/dt=2026-11-25/part-8.parquet" in said[0], ticks.lines
    ticks.lines.clear()
    assert not ticks.tick().run_requests
    assert not [line for line in ticks.lines if "ahead" in line]  # once


def test_a_file_dated_in_a_partition_that_does_not_exist_yet_waits_and_never_fails_the_tick(tmp_path):
    cfg = make_project(tmp_path)
    ticks = Ticks(build_definitions(cfg), "lumos_storage_lake")
    ticks.tick()
    tomorrow = (datetime.now(UTC) + timedelta(days=2)).strftime("%Y-%m-%d")
    write_parquet(tmp_path / "lake" / "sales" / "orders" / f"dt={tomorrow}" / "p.parquet", pa.table({"id": [1]}))
    write_parquet(tmp_path / "lake" / "sales" / "orders" / "dt=2026-11-25" / "p.parquet", pa.table({"id": [1]}))
    assert Ticks.wanted(ticks.tick()) == ["sales/orders@2026-11-25"]  # the rest of the source goes on
    with SnapshotStore(cfg.store_url) as store:  # the early file is kept as unseen: the next tick finds it again
        generation = json.loads(ticks.cursor)["generation"]
        assert not any(tomorrow in path for path in store.file_state("lake", generation))
    assert not ticks.tick().run_requests  # found again, deferred again, no error


def test_a_dataset_whose_files_are_all_gone_is_soft_deleted_at_once_and_its_tombstone_delivered(tmp_path):
    cfg = make_project(tmp_path)
    for name in ("a", "b", "c"):  # enough datasets that one vanishing is below removal.max_share
        write_parquet(tmp_path / "lake" / "more" / name / "x.parquet", pa.table({"x": [1]}))
    register(cfg)
    defs = build_definitions(cfg)
    ticks = Ticks(defs, "lumos_storage_lake")
    ticks.tick()
    (tmp_path / "lake" / "ref" / "countries" / "c.parquet").unlink()
    result = ticks.tick()
    assert [r.job_name for r in result.run_requests] == ["lumos_sync"]  # no snapshot run of a dataset that is gone
    with SnapshotStore(cfg.store_url) as store:
        assert "ref/countries" not in {r.name for r in store.datasets()}
        (tombstone,) = [s for s in store.history("urn:lumos:dataset:file:ref/countries") if s.removed]
        assert store.outbox_counts(f"datahub-lite:{cfg.lite_path}") == {"pending": 1}
    sync = defs.get_job_def("lumos_sync").execute_in_process(instance=ticks.instance)
    assert sync.success
    with SnapshotStore(cfg.store_url) as store:
        assert store.outbox_counts(f"datahub-lite:{cfg.lite_path}") == {"delivered": 1}


def test_a_source_that_loses_too_many_datasets_at_once_removes_none(tmp_path):
    cfg = make_project(tmp_path)
    ticks = Ticks(build_definitions(cfg), "lumos_storage_lake")
    ticks.tick()
    for path in (tmp_path / "lake").rglob("*.parquet"):  # an unmounted disk looks like this
        path.unlink()
    result = ticks.tick()
    assert not [r for r in result.run_requests if r.job_name == "lumos_sync"]
    with SnapshotStore(cfg.store_url) as store:
        assert {r.name for r in store.datasets()} == {"sales/orders", "ref/countries"}


def test_a_preview_tick_shows_what_a_tick_would_request_and_writes_nothing(tmp_path):
    cfg = make_project(tmp_path)
    ticks = Ticks(build_definitions(cfg), "lumos_storage_lake")
    ticks.tick()  # the baseline: generation 1
    write_parquet(tmp_path / "lake" / "sales" / "orders" / "dt=2026-11-25" / "part-9.parquet", pa.table({"id": [1]}))
    write_parquet(tmp_path / "lake" / "crm" / "contacts" / "a.parquet", pa.table({"id": [1]}))
    with SnapshotStore(cfg.store_url) as store:
        before = (store.file_state("lake", 1), store.datasets())
    preview = ticks.tick(preview=True)
    assert Ticks.wanted(preview) == ["sales/orders@2026-11-25"]
    with SnapshotStore(cfg.store_url) as store:
        assert (store.file_state("lake", 1), store.datasets()) == before
        assert not store.file_state("lake", 2)  # the preview's look was not kept
    real = ticks.tick()  # the same changes, now taken and recorded
    assert [r.run_key for r in real.run_requests] == [r.run_key for r in preview.run_requests]
    with SnapshotStore(cfg.store_url) as store:
        assert store.file_state("lake", 2) and "crm/contacts" in {r.name for r in store.datasets()}


def test_s3_objects_rewritten_with_the_same_size_are_seen_by_their_etag(tmp_path, s3):  # noqa: F811
    client = s3["client"]
    client.put_object(Bucket="lake", Key="watched/ev/clicks/a.json", Body=b'{"a": 1}')
    config = {"sources": [{"type": "s3", "name": "bucket", "bucket": "lake", "prefix": "watched/",
                           "endpoint_url": s3["url"], "region": "us-east-1"}],
              "store": {"path": "store.db"}, "catalog": {"path": "lite.db"}}  # fmt: skip
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump(config))
    cfg = load_config(str(tmp_path / "lumos.yaml"))
    register(cfg)
    ticks = Ticks(build_definitions(cfg), "lumos_storage_bucket")
    ticks.tick()
    assert not ticks.tick().run_requests
    client.put_object(Bucket="lake", Key="watched/ev/clicks/a.json", Body=b'{"a": 2}')  # same size
    assert Ticks.wanted(ticks.tick()) == [f"ev/clicks@{datetime.now(UTC):%Y-%m-%d}"]


# -------------------------------------------------------------- release windows

WINDOWS = [
    # (title, released at (UTC), cron, zone, lag, first tick after (local), data ready at (UTC))
    ("daily in UTC, no lag", "2026-11-25T10:00", "0 6 * * *", "UTC", "0", "2026-11-26T06:00+00:00",
     "2026-11-26T06:00"),
    ("lag pushes past midnight", "2026-11-25T10:00", "0 20 * * *", "UTC", "+6h", "2026-11-25T20:00+00:00",
     "2026-11-26T02:00"),
    ("New York evening is the next UTC day", "2026-11-25T23:30", "0 19 * * *", "America/New_York", "+1h",
     "2026-11-25T19:00-05:00", "2026-11-26T01:00"),
    ("Paris spring forward: 02:30 does not exist", "2026-03-28T20:00", "30 2 * * *", "Europe/Paris", "0",
     "2026-03-29T03:00+02:00", "2026-03-29T01:00"),
    ("Paris fall back: the lag is elapsed time", "2026-10-24T22:00", "30 2 * * *", "Europe/Paris", "+1h",
     "2026-10-25T02:30+02:00", "2026-10-25T01:30"),
    ("a release just before a tick waits for it", "2026-11-25T05:59", "0 6 * * *", "UTC", "90m",
     "2026-11-25T06:00+00:00", "2026-11-25T07:30"),
    ("a release exactly at a tick waits for the next", "2026-11-25T06:00", "0 6 * * *", "UTC", "0",
     "2026-11-26T06:00+00:00", "2026-11-26T06:00"),
    ("Sydney, half-day ahead", "2026-11-25T10:00", "0 9 * * 1-5", "Australia/Sydney", "+2h",
     "2026-11-26T09:00+11:00", "2026-11-26T00:00"),
]  # fmt: skip


@pytest.mark.parametrize("title,released,cron,zone,lag,tick,ready", WINDOWS, ids=[w[0] for w in WINDOWS])
def test_release_windows(title, released, cron, zone, lag, tick, ready):
    got_tick, got_ready = next_window(datetime.fromisoformat(released).replace(tzinfo=UTC), cron, zone,
                                      parse_lag(lag))  # fmt: skip
    assert got_tick.isoformat(timespec="minutes") == tick
    assert got_ready == datetime.fromisoformat(ready).replace(tzinfo=UTC)


def test_latest_due_window():
    now = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
    assert latest_due(now, "0 6 * * *", "America/New_York", parse_lag("+6h")).isoformat() == "2026-11-24T06:00:00-05:00"
    assert latest_due(now, "0 6 * * *", "UTC", parse_lag("+4h")).isoformat() == "2026-11-25T06:00:00+00:00"


@pytest.mark.parametrize("text", ["six hours", "+6x", "h"])
def test_bad_lags_are_refused(text):
    with pytest.raises(ValueError, match="not a lag"):
        parse_lag(text)


# ---------------------------------------------------------------- release sensor


def test_a_release_waits_for_its_window_then_requests_that_partition(tmp_path):
    schedule = {"cron": "0 6 * * *", "timezone": "Europe/Paris", "lag": "+2h"}
    cfg = make_project(tmp_path, releases={"watch": "releases"},
                       datasets=[{"name": "sales/orders", "schedule": schedule}])  # fmt: skip
    targets = assemble(cfg).targets
    release = Manifest("S-312", datetime(2026, 11, 25, 9, 0, tzinfo=UTC), ("sales/orders",))
    early, done = release_requests([release], set(), targets, datetime(2026, 11, 26, 6, 59, tzinfo=UTC))
    assert early == [] and done == []  # the 06:00 Paris window's data is ready at 08:00 Paris = 07:00 UTC
    due, done = release_requests([release], set(), targets, datetime(2026, 11, 26, 7, 0, tzinfo=UTC))
    assert done == ["S-312"]
    (request,) = due
    assert (request.partition_key, request.run_key, request.tags["lumos/release"]) == (
        "2026-11-26",
        "release:S-312:sales/orders",
        "S-312",
    )
    assert release_requests([release], {"S-312"}, targets, datetime(2026, 11, 27, tzinfo=UTC)) == ([], [])


def test_lumos_release_writes_the_manifest_the_sensor_picks_up(tmp_path, spark):
    cfg = make_project(tmp_path, releases={"watch": "releases", "prefix": "S-"})
    defs = build_definitions(cfg)
    job = defs.resolve_implicit_global_asset_job_def()
    assert job.execute_in_process(partition_key="2026-11-25", instance=DagsterInstance.ephemeral()).success
    out = CliRunner().invoke(main, ["release", "--datasets", "sales/orders", "-c", str(tmp_path / "lumos.yaml")])
    assert out.exit_code == 0 and "manifest for the release sensor" in out.stdout, out.output
    manifest = json.loads((tmp_path / "releases" / "S-1.json").read_text())
    assert manifest["datasets"] == ["sales/orders"]
    # released now; a daily dataset's next window (midnight) is tomorrow: the sensor waits
    ticks = Ticks(defs, "lumos_releases")
    assert not ticks.tick().run_requests
    # pretend it was released two days ago: the refresh is due, and running it records its version
    manifest["released_at"] = (datetime.now(UTC) - timedelta(days=2)).isoformat()
    (tmp_path / "releases" / "S-1.json").write_text(json.dumps(manifest))
    (request,) = Ticks(defs, "lumos_releases").tick().run_requests
    result = job.execute_in_process(
        instance=DagsterInstance.ephemeral(), partition_key=request.partition_key,
        asset_selection=list(request.asset_selection), tags=request.tags,
    )  # fmt: skip
    assert result.success
    store = SnapshotStore(cfg.store_url)
    (rel,) = store.releases()
    store.close()
    assert rel.name == "S-1" and rel.versions == {"sales/orders": "1.0.0"}


def test_schedule_requests_for_datasets_with_a_declared_schedule(tmp_path):
    schedule = {"cron": "0 6 * * *", "timezone": "UTC", "lag": "+1h"}
    cfg = make_project(tmp_path, datasets=[{"name": "sales/orders", "schedule": schedule}])
    defs = build_definitions(cfg)
    ticks = Ticks(defs, "lumos_dataset_schedules")
    requests = ticks.tick().run_requests
    assert [r.tags["lumos/trigger"] for r in requests] == ["schedule"]
    assert [["/".join(k.path) for k in r.asset_selection] for r in requests] == [["sales/orders"]]
    now = datetime.now(UTC)
    expected = (now - timedelta(hours=7) if now.hour < 7 else now).strftime("%Y-%m-%d")
    assert requests[0].partition_key == expected
    targets = assemble(cfg).targets
    at_5 = schedule_requests(targets, datetime(2026, 11, 25, 5, 0, tzinfo=UTC))  # 06:00 + 1h not reached yet
    at_7 = schedule_requests(targets, datetime(2026, 11, 25, 7, 0, tzinfo=UTC))
    assert [r.partition_key for r in at_5] == ["2026-11-24"] and [r.partition_key for r in at_7] == ["2026-11-25"]
    assert at_7[0].run_key == schedule_requests(targets, datetime(2026, 11, 25, 9, 0, tzinfo=UTC))[0].run_key


def test_an_unchanged_listing_is_settled_by_its_digest_without_touching_the_store(tmp_path):
    from lumos_dagster.inventory.watch import look

    cfg = make_project(tmp_path)
    source = build_sources(cfg)["lake"]
    store = SnapshotStore(cfg.store_url)
    try:
        first = look(source, store, None, ScanReport())

        class Untouchable:
            def __getattr__(self, name):
                raise AssertionError(f"an unchanged look used store.{name}")

        report = ScanReport()
        again = look(source, Untouchable(), first.generation, report, first.state)
        assert (again.generation, again.changes, report.files_read) == (first.generation, [], 0)
        os.remove(tmp_path / "lake" / "ref" / "countries" / "c.parquet")
        changed = look(source, store, first.generation, ScanReport(), first.state)
        assert [(c.kind, c.dataset) for c in changed.changes] == [("deleted", "ref/countries")]
        assert changed.generation == first.generation + 1 and changed.state != first.state
    finally:
        store.close()


def test_a_large_cadence_is_scheduled_as_several_runs_of_whole_ops(tmp_path, monkeypatch):
    from dagster import build_schedule_context

    from lumos_dagster.assets import datasets

    monkeypatch.setattr(datasets, "CHUNK", 2)  # 5 unrelated datasets: ops of 2, 2 and 1
    for name in ("a/one", "a/two", "b/one", "b/two", "c/one"):
        write_parquet(tmp_path / "lake" / name / "x.parquet", pa.table({"x": [1]}))
    config = {"sources": [{"name": "lake", "root": "lake"}], "store": {"path": "store.db"},
              "catalog": {"path": "lite.db"}, "partitions": {"start": "2026-11-01", "datasets_per_run": 3}}  # fmt: skip
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump(config))
    cfg = load_config(str(tmp_path / "lumos.yaml"))
    register(cfg)
    defs = build_definitions(cfg)
    schedule = defs.resolve_schedule_def("lumos_daily_snapshots_schedule")
    assert schedule.cron_schedule == "0 0 * * *"
    tick = datetime(2026, 11, 25, 0, 0, tzinfo=UTC)
    context = build_schedule_context(scheduled_execution_time=tick, repository_def=defs.get_repository_def())
    requests = schedule.evaluate_tick(context).run_requests
    assert [len(r.asset_selection) for r in requests] == [2, 3]  # ops of 2 | 2 + 1: an op is never split
    # the midnight tick snapshots the day that just ended
    assert {r.partition_key for r in requests} == {"2026-11-24"} and len({r.run_key for r in requests}) == 2
    ops = [
        {"/".join(k.path) for k in a.keys}
        for a in defs.assets
        if getattr(a, "op", None) and a.op.name.startswith("lumos_daily")
    ]
    selected = [{"/".join(k.path) for k in r.asset_selection} for r in requests]
    assert all(any(op <= group for group in selected) for op in ops)
    assert set().union(*selected) == {"a/one", "a/two", "b/one", "b/two", "c/one"}


LAGS = [
    ("daily", "0", "0 0 * * *"),
    ("daily", "+2h", "0 2 * * *"),
    ("daily", "14h 23m", "23 14 * * *"),
    ("hourly", "15m", "15 * * * *"),
    ("weekly", "1d 6h", "0 6 * * 1"),
    ("monthly", "2d", "0 0 3 * *"),
]


@pytest.mark.parametrize("cadence,lag,cron", LAGS, ids=[f"{c} {lag}" for c, lag, _ in LAGS])
def test_a_snapshot_schedule_ticks_its_lag_after_each_partition_ends(cadence, lag, cron):
    from lumos_dagster.floor.windows import snapshot_cron

    assert snapshot_cron(cadence, parse_lag(lag)) == cron


def test_a_lag_as_long_as_the_partition_is_refused_naming_the_key(tmp_path):
    from lumos_dagster.floor.config import parse_config
    from lumos_dagster.floor.errors import ConfigError

    with pytest.raises(ConfigError, match="partitions.snapshot_lag|not below a daily partition"):
        parse_config({"partitions": {"snapshot_lag": "25h"}})


def test_the_lagged_schedule_snapshots_the_day_that_ended_before_its_lag(tmp_path):
    from dagster import build_schedule_context

    cfg = make_project(tmp_path, partitions={"start": "2026-11-01", "snapshot_lag": "+3h"})
    defs = build_definitions(cfg)
    schedule = defs.resolve_schedule_def("lumos_daily_snapshots_schedule")
    assert schedule.cron_schedule == "0 3 * * *"
    tick = datetime(2026, 11, 26, 3, 0, tzinfo=UTC)
    context = build_schedule_context(scheduled_execution_time=tick, repository_def=defs.get_repository_def())
    (request,) = schedule.evaluate_tick(context).run_requests
    assert request.partition_key == "2026-11-25"
