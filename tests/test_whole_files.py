"""Issue 41: a file is a schema only when it is whole. What writers leave in a lake while they write
(a CSV cut in its header, a header-only file, a file growing while it is read, a Parquet or ORC file
written in place, a file under its in-progress name) gives no version: it is reported unreadable, or
taken with the types the dataset already has. Real files, the real readers, the real run and store."""

import io
from datetime import datetime, timedelta, timezone
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from lumos_dagster.floor.config import parse_config
from lumos_dagster.floor.datatypes import Primitive, type_str, untyped
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.floor.windows import Window
from lumos_dagster.formats import read_file_result
from lumos_dagster.formats.orc import NO_POSTSCRIPT
from lumos_dagster.formats.readers import read_in_process
from lumos_dagster.formats.text import TORN_FIRST_LINE
from lumos_dagster.governance.checks import READABLE_CHECK
from lumos_dagster.lineage.catalogue import resolve_datasets
from lumos_dagster.schema.diff import TYPE_NARROWED, TYPE_PROMOTED
from lumos_dagster.sources import build_sources, discover
from lumos_dagster.sources.discovery import IN_PROGRESS
from lumos_dagster.store import SnapshotStore
from tests.lake import run_in_process

DAY1, DAY2, DAY3 = (datetime(2026, 11, 24, tzinfo=timezone.utc) + timedelta(days=i) for i in range(3))
HEADER = "id,amount,name,score,flag\n"
ROWS = "1,2.5,ann,10,true\n2,3.5,bob,11,false\n"


def window(day: datetime) -> Window:
    return Window(day.date().isoformat(), day, day + timedelta(days=1))


class Lake:
    """One daily CSV (or JSON lines) dataset, its store kept from run to run."""

    def __init__(self, root, name="sales/orders", ext="csv"):
        self.root, self.name, self.ext = root, name, ext
        self.store = SnapshotStore(f"sqlite:///{root}/store.db")

    def write(self, day: datetime, text: str | bytes, part: int = 0):
        path = self.root / "lake" / self.name / f"dt={day.date()}" / f"part-{part}.{self.ext}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        return path

    def run(self, day: datetime, read=None):
        config = parse_config({"sources": [{"name": "lake", "root": str(self.root / "lake")}]})
        sources = build_sources(config)
        catalogue = resolve_datasets(config, discover(sources, ScanReport()).records, {"lake": str(self.root)})
        self.urn = catalogue.by_name()[self.name].ref.urn
        done = run_in_process(config, catalogue, sources, [window(day)], read=read, store=self.store)
        (snapshot,) = done.snapshots[self.name].values()
        (readable,) = [c for c in done.judgements[self.name].checks if c.name == READABLE_CHECK]
        return snapshot, readable

    def versions(self) -> list[str]:
        return [s.version for s in self.store.history(self.urn)]

    def types(self, snapshot) -> dict[str, str]:
        return {p: type_str(f.type) for p, f in snapshot.schema.flatten()}


@pytest.fixture
def lake(tmp_path):
    found = Lake(tmp_path)
    yield found
    found.store.close()


TYPES = {"id": "int64", "amount": "float64", "name": "string", "score": "int64", "flag": "boolean"}


def test_a_csv_cut_in_its_header_is_unreadable_and_no_version(lake):
    lake.write(DAY1, HEADER + ROWS)
    assert lake.run(DAY1)[0].version == "1.0.0"
    torn = lake.write(DAY2, "id,amount,nam")  # a writer that died, or a copy still in flight
    snapshot, readable = lake.run(DAY2)
    # was 2.0.0: FIELD_REMOVED name, score and flag, FIELD_ADDED nam, id and amount TYPE_NARROWED to null
    assert lake.versions() == ["1.0.0", "1.0.0"] and snapshot.changes == ()
    assert [(e.path, e.reason) for e in snapshot.errors] == [(str(torn), TORN_FIRST_LINE)]
    assert not readable.passed and readable.description != "every file was read"
    assert readable.metadata["lumos/errors"].rows[0][1] == TORN_FIRST_LINE


@pytest.mark.parametrize("beside", [False, True])
def test_a_header_only_csv_has_the_types_the_dataset_already_has(lake, beside):
    lake.write(DAY1, HEADER + ROWS)
    lake.run(DAY1)
    lake.write(DAY2, HEADER)  # a partition's only file, or one beside a file with rows
    if beside:
        lake.write(DAY2, HEADER + ROWS, part=1)
    snapshot, readable = lake.run(DAY2)
    # was 2.0.0: every column TYPE_NARROWED to null
    assert lake.versions() == ["1.0.0", "1.0.0"] and snapshot.changes == ()
    assert lake.types(snapshot) == TYPES and readable.passed
    assert not any(untyped(f) for _, f in snapshot.schema.flatten())


def test_a_new_datasets_header_only_file_is_untyped_and_its_types_come_as_a_minor_version(lake):
    lake.write(DAY1, HEADER)
    first, _ = lake.run(DAY1)
    assert lake.types(first) == dict.fromkeys(TYPES, "unknown")  # never null
    assert all(untyped(f) for f in first.schema.fields)
    lake.write(DAY2, HEADER + ROWS)
    second, _ = lake.run(DAY2)
    assert lake.types(second) == TYPES and lake.versions() == ["1.0.0", "1.1.0"]
    assert {(c.kind, c.backward, c.forward) for c in second.changes} == {(TYPE_PROMOTED, True, True)}


def test_json_lines_follow_the_same_rule(tmp_path):
    lake = Lake(tmp_path, "web/events", "jsonl")
    try:
        lake.write(DAY1, '{"id": 1, "kind": "view", "meta": {"ua": "x"}}\n')
        lake.run(DAY1)
        torn = lake.write(DAY2, '{"id": 2, "ki')
        snapshot, readable = lake.run(DAY2)
        assert [(e.path, e.reason) for e in snapshot.errors] == [(str(torn), TORN_FIRST_LINE)]
        # keys only ever null: the types the dataset has, not TYPE_NARROWED to null
        lake.write(DAY3, '{"id": 3, "kind": null, "meta": {"ua": null}}\n')
        snapshot, readable = lake.run(DAY3)
        assert lake.types(snapshot) == {"id": "int64", "kind": "string", "meta": "struct<ua: string>",
                                        "meta.ua": "string"}  # fmt: skip
        assert TYPE_NARROWED not in {c.kind for c in snapshot.changes}
        assert lake.versions() == ["1.0.0", "1.0.0", "1.0.0"]
        whole = read_file_result((str(lake.write(DAY3, '{"id": 3}')), None))  # no line end, but one whole record
        assert whole.schema.fields[0].type == Primitive("int64")
    finally:
        lake.store.close()


def test_a_file_growing_between_its_listing_and_its_reading_is_not_taken(lake):
    lake.write(DAY1, HEADER + ROWS)
    lake.run(DAY1)
    growing = lake.write(DAY2, HEADER.replace("flag", "flag,extra") + "1,2.5,ann,10,true,x\n")

    def read_while_it_grows(items):
        with open(growing, "ab") as fh:  # the writer appends between the listing and the read
            fh.write(b"2,3.5,bob,11,false,y\n")
        return read_in_process(items)

    snapshot, readable = lake.run(DAY2, read=read_while_it_grows)
    assert lake.versions() == ["1.0.0", "1.0.0"]
    (error,) = snapshot.errors
    assert error.path == str(growing) and error.reason.startswith("still being written: ")
    assert not readable.passed
    lake.run(DAY2)  # the next run, once it stopped changing, takes it
    assert lake.versions() == ["1.0.0", "1.0.0", "1.1.0"]


def _cut(data: bytes) -> bytes:
    return data[: len(data) // 2]


def test_parquet_orc_and_avro_written_in_place(tmp_path):
    """A Parquet or ORC file holds its schema in its footer: cut short, it is unreadable and says why; an
    Avro file holds it in its header, so a file cut short keeps it (and says it is damaged)."""
    table = pa.table({"id": list(range(2000)), "s": ["x"] * 2000})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    (tmp_path / "cut.parquet").write_bytes(_cut(sink.getvalue()))
    sink = io.BytesIO()
    orc.write_table(table, sink)
    (tmp_path / "cut.orc").write_bytes(_cut(sink.getvalue()))
    sink = io.BytesIO()
    avro_schema = {"type": "record", "name": "r", "fields": [{"name": "id", "type": "long"}]}
    fastavro.writer(sink, fastavro.parse_schema(avro_schema), [{"id": i} for i in range(5000)])
    (tmp_path / "cut.avro").write_bytes(_cut(sink.getvalue()))
    parquet, orc_file, avro = (read_file_result((str(tmp_path / f"cut.{x}"), None)) for x in ("parquet", "orc", "avro"))
    assert parquet.schema is None and "no PAR1 footer" in parquet.error
    assert orc_file.schema is None and orc_file.error == f"cannot read orc: ValueError: {NO_POSTSCRIPT}"
    assert [f.name for f in avro.schema.fields] == ["id"] and "cut short" in avro.damaged


@pytest.mark.parametrize(
    "name",
    ["part-0.parquet._COPYING_", "part-0-1.inprogress.7d1c-4a", "part-0.csv.tmp", "+tmp/part-0.parquet",
     ".part-0-1.inprogress.7d1c", "_temporary/0/part-0.parquet"],
)  # fmt: skip
def test_files_under_a_writers_in_progress_name_are_not_data(tmp_path, name):
    (tmp_path / "t").mkdir()
    pq.write_table(pa.table({"id": [1]}), tmp_path / "t" / "part-1.parquet")
    path = tmp_path / "t" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"PAR1" + b"\0" * 100)  # a Parquet file begun, not ended
    config = parse_config({"sources": [{"name": "lake", "root": str(tmp_path)}]})
    report = ScanReport()
    found = build_sources(config)["lake"].discover(report)
    assert [f.entry.path for d in found.values() for f in d.files] == ["t/part-1.parquet"]
    assert report.failures == []
    if not name.startswith((".", "_")):  # those are hidden, as Spark's and Hadoop's own are
        assert report.skipped[IN_PROGRESS] == 1, report.render()


def test_the_rule_is_documented():
    text = (Path(__file__).parents[1] / "docs" / "sources.md").read_text()
    assert "Files still being written" in text
    for said in ("_COPYING_", "_temporary", ".inprogress", "header-only", "two looks"):
        assert said in text, said
