"""Honest backfills (issue 28): a partition of an undated dataset holds what existed by the end of its
window, files by modification time as tables by commit time, so a dataset created today has no
history before today."""

import os
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.csv as pcsv
import pytest
from deltalake import write_deltalake

from lumos_dagster.floor.config import parse_config
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.floor.windows import Window
from lumos_dagster.governance.checks import has_data
from lumos_dagster.lineage.catalogue import resolve_datasets
from lumos_dagster.run.contents import files_in_window
from lumos_dagster.sources import build_sources, discover
from lumos_dagster.sources.discovery import DatasetFile, DiscoveredDataset, FileEntry
from tests.lake import run_in_process

DAY = datetime(2026, 11, 20, tzinfo=timezone.utc)
H = 3600.0


def _undated(*mtimes: float) -> DiscoveredDataset:
    files = [DatasetFile(FileEntry(f"raw/x/part-{i}.csv", 10, m, str(m))) for i, m in enumerate(mtimes)]
    return DiscoveredDataset("raw/x", "raw/x", "csv", files=files)


@pytest.mark.parametrize(
    "mtimes, window_days, expected",
    [
        # (hours after DAY's midnight of each file's mtime), (window: days after DAY, length), files in it
        ((1,), (0, 1), ["part-0"]),  # modified inside the window: there by its end
        ((1,), (-1, 1), []),  # the day before: it did not exist yet
        ((24,), (0, 1), []),  # modified exactly at the window's end: after it
        ((23.99,), (0, 1), ["part-0"]),
        ((-100,), (0, 1), ["part-0"]),  # old files are in every later window
        ((-100, 30), (0, 1), ["part-0"]),  # a file added the next day is not in today's window
        ((-100, 30), (1, 1), ["part-0", "part-1"]),
        ((-100, 30), (0, 7), ["part-0", "part-1"]),  # a week-long window holds both by its end
    ],
)
def test_an_undated_window_holds_the_files_modified_before_its_end(mtimes, window_days, expected):
    ds = _undated(*(DAY.timestamp() + h * H for h in mtimes))
    start = DAY + timedelta(days=window_days[0])
    got = files_in_window(ds, start, start + timedelta(days=window_days[1]))
    assert [f.entry.path.rsplit("/", 1)[1].removesuffix(".csv") for f in got] == expected


def test_a_run_without_windows_sees_every_file():
    ds = _undated(DAY.timestamp() + 1000 * H)
    assert files_in_window(ds, None, None) == ds.files


def test_a_backfill_of_undated_datasets_created_today_shows_no_history_before_today(tmp_path):
    """A CSV and a Delta table made now, backfilled over the last four days: each has today's
    partition only, the file by its modification time as the table by its commit time."""
    lake = tmp_path / "lake"
    (lake / "raw" / "customers").mkdir(parents=True)
    table = pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"]})
    pcsv.write_csv(table, lake / "raw" / "customers" / "customers.csv")
    write_deltalake(str(lake / "raw" / "accounts"), table)
    old = lake / "raw" / "legacy"  # an undated file from long ago is in every window
    old.mkdir()
    pcsv.write_csv(table, old / "legacy.csv")
    long_ago = (datetime.now(timezone.utc) - timedelta(days=30)).timestamp()
    os.utime(old / "legacy.csv", (long_ago, long_ago))

    config = parse_config({"sources": [{"root": str(lake), "name": "lake"}]})
    sources = build_sources(config)
    catalogue = resolve_datasets(config, discover(sources, ScanReport()).records, {"lake": str(lake)})
    today = datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    windows = [Window(str((today - timedelta(days=n)).date()), today - timedelta(days=n),
                      today - timedelta(days=n - 1)) for n in range(3, -1, -1)]  # fmt: skip
    done = run_in_process(config, catalogue, sources, windows)

    def days_with_data(name: str) -> list[str]:
        return [pk for pk, s in sorted(done.snapshots[name].items()) if has_data(s)]

    assert days_with_data("raw/customers") == days_with_data("raw/accounts") == [windows[-1].key]
    assert days_with_data("raw/legacy") == [w.key for w in windows]
    assert [f.name for f in done.snapshots["raw/customers"][windows[-1].key].schema.fields] == ["id", "name"]
