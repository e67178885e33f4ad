"""Iceberg row counts under row-level deletes: the live data files' records less what the live delete files
remove, where the manifests tell how many, and unknown where only reading files would (the rule's cases
below); and a table with position deletes (merge-on-read, as Iceberg's Spark writer deletes) counted as
pyiceberg's scan reads it. pyiceberg itself deletes copy-on-write only, so the test commits the delete
files with pyiceberg's own manifest, manifest-list and summary writers. The corpus' Delta tables with
deletion vectors and Iceberg tables with equality deletes: tests/test_conformance_corpus.py."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestWriterV2,
)
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update.snapshot import _FastAppendFiles
from pyiceberg.typedef import Record

from lumos_dagster.table_formats.iceberg_history import IcebergHistory, live_rows
from tests.test_tables_s3 import iceberg_catalog

#: the columns of a position delete file (field ids the Iceberg spec reserves)
FILE_PATH, POS = 2147483546, 2147483545


def data_file(
    content: DataFileContent, path: str, records: int, bounds=None, fmt=FileFormat.PARQUET, size=1
) -> DataFile:
    """A manifest's file; `bounds`: the (lower, upper) paths of a position delete file's `file_path` column."""
    lower, upper = ({FILE_PATH: bounds[0].encode()}, {FILE_PATH: bounds[1].encode()}) if bounds else ({}, {})
    found = DataFile.from_args(
        content=content, file_path=path, file_format=fmt, partition=Record(), record_count=records,
        file_size_in_bytes=size, lower_bounds=lower, upper_bounds=upper,
    )  # fmt: skip
    found.spec_id = 0
    return found


def entry(file: DataFile, sequence: int) -> ManifestEntry:
    return ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=1, sequence_number=sequence,
                                   file_sequence_number=sequence, data_file=file)  # fmt: skip


def position(of: str, records: int, sequence: int, bounds: tuple[str, str] | None = None) -> ManifestEntry:
    return entry(data_file(DataFileContent.POSITION_DELETES, f"del-{of}", records, bounds or (of, of)), sequence)


#: two live data files: `a` (5 rows, written at sequence number 1), `b` (3 rows, at 2)
DATA = [entry(data_file(DataFileContent.DATA, "a", 5), 1), entry(data_file(DataFileContent.DATA, "b", 3), 2)]
EQUALITY = entry(data_file(DataFileContent.EQUALITY_DELETES, "eq", 1), 3)
VECTOR = entry(data_file(DataFileContent.POSITION_DELETES, "dv.puffin", 1, fmt=FileFormat.PUFFIN), 3)
LIVE_ROWS = [
    # the snapshot's live delete files → its rows (None: only reading files would tell)
    ("no delete file", [], 8),
    ("a position delete file for one data file", [position("a", 2, 3)], 6),
    ("one for each data file", [position("a", 2, 3), position("b", 1, 3)], 5),
    ("one written with its data file (equal sequence numbers: it applies)", [position("a", 2, 1)], 6),
    ("one written before its data file: it does not apply", [position("b", 1, 1)], 8),
    ("one for a data file removed since: it removes nothing", [position("gone", 4, 3)], 8),
    ("two for one data file: they may name the same row", [position("a", 2, 3), position("a", 1, 4)], None),
    ("one for several data files (partition-scoped)", [position("a", 2, 3, ("a", "b"))], None),
    ("one naming more rows than its data file has", [position("b", 4, 3)], None),
    ("an equality delete file", [EQUALITY], None),
    ("a v3 deletion vector (its data file named where pyiceberg does not read)", [VECTOR], None),
]


@pytest.mark.parametrize("deletes, rows", [c[1:] for c in LIVE_ROWS], ids=[c[0] for c in LIVE_ROWS])
def test_live_rows_subtract_what_the_manifests_say_is_deleted(deletes, rows):
    assert live_rows(8, deletes, lambda: DATA) == rows


class _DeleteManifest(ManifestWriterV2):
    """pyiceberg's v2 manifest writer, writing a delete manifest."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class _AddDeletes(_FastAppendFiles):
    """pyiceberg's fast append, committing its files in a delete manifest (its summary counts them)."""

    def new_manifest_writer(self, spec):
        return _DeleteManifest(spec, self.schema(), self.new_manifest_output(), self._snapshot_id, self._compression)


def delete_positions(table, data_path: str, positions: list[int]) -> None:
    """Commit a position delete file removing `positions` of the data file at `data_path`."""
    schema = pa.schema([pa.field("file_path", pa.string(), False, {"PARQUET:field_id": str(FILE_PATH)}),
                        pa.field("pos", pa.int64(), False, {"PARQUET:field_id": str(POS)})])  # fmt: skip
    location = f"{table.location()}/data/deletes-{len(table.metadata.snapshots)}.parquet"
    with table.io.new_output(location).create() as out:
        pq.write_table(pa.table({"file_path": [data_path] * len(positions), "pos": positions}, schema), out)
    size = len(table.io.new_input(location))
    deletes = data_file(DataFileContent.POSITION_DELETES, location, len(positions), (data_path, data_path), size=size)
    with table.transaction() as tx:
        _AddDeletes(operation=Operation.DELETE, transaction=tx, io=table.io).append_data_file(deletes).commit()


def test_a_table_with_position_deletes_counts_the_rows_pyiceberg_reads(tmp_path):
    catalog = iceberg_catalog(f"file://{tmp_path / 'warehouse'}", tmp_path / "catalog.db")
    catalog.create_namespace("web")
    table = catalog.create_table("web.events", schema=pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": pa.array(range(5), pa.int64())}))
    (first,) = table.inspect.data_files().column("file_path").to_pylist()
    table.append(pa.table({"id": pa.array(range(5, 8), pa.int64())}))
    second = next(p for p in table.inspect.data_files().column("file_path").to_pylist() if p != first)
    delete_positions(table, first, [0, 2])
    delete_positions(catalog.load_table("web.events"), second, [1])
    delete_positions(catalog.load_table("web.events"), first, [4])  # a second delete file for the first data file
    table = catalog.load_table("web.events")

    history = IcebergHistory(table.metadata, table.io)
    read = [history.with_partitions(s) for s in history.states]
    reference = [table.scan(snapshot_id=int(s.table.version)).to_arrow().num_rows for s in read]
    assert reference == [5, 8, 6, 5, 4]
    # each count pyiceberg's scan reads, but where two delete files apply to one data file
    assert [s.stats.row_count for s in read] == [5, 8, 6, 5, None]
    for state in read:  # files and bytes: the live data files', as pyiceberg lists them; the summary's count deletes
        files = table.inspect.data_files(snapshot_id=int(state.table.version))
        assert (state.stats.file_count, state.stats.total_bytes) == (
            files.num_rows, sum(files.column("file_size_in_bytes").to_pylist()))  # fmt: skip
    summary = table.current_snapshot().summary.additional_properties
    assert int(summary["total-files-size"]) > read[-1].stats.total_bytes and summary["total-position-deletes"] == "4"
    assert history.states[-1].stats.row_count is None  # the summary alone says nothing better
    catalog.engine.dispose()
