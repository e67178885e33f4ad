"""Issue 14, file readers: hostile files give a one-line error naming the file, never a crash
of `lumos schema` or of a scan; long first rows and truncated JSON are read correctly or refused."""

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest

from lumos_dagster.estate import portable
from lumos_dagster.floor.config import parse_config
from lumos_dagster.floor.datatypes import untyped
from lumos_dagster.floor.errors import SchemaReadError
from lumos_dagster.floor.limits import MAX_NESTING
from lumos_dagster.floor.model import DatasetRef, Snapshot
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.formats import read_file_schema
from lumos_dagster.formats.readers import POOL_CRASH, PoolReader, auto_reader
from lumos_dagster.formats.text import TORN_FIRST_LINE
from lumos_dagster.lineage.catalogue import resolve_datasets
from lumos_dagster.sources import build_sources, discover
from tests.lake import run_in_process, write_parquet
from tests.test_plugins import install, run

pytestmark = pytest.mark.slow

LUMOS = Path(sys.executable).parent / "lumos"
TOO_DEEP = f"nested more than {MAX_NESTING} levels deep"


def deep_object(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def deep_struct(depth: int) -> pa.DataType:
    t = pa.int64()
    for _ in range(depth - 1):
        t = pa.struct([("a", t)])
    return t


def lumos_schema(*files) -> subprocess.CompletedProcess:
    return subprocess.run([LUMOS, "schema", "--flat", *map(str, files)], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "name,text",
    [
        ("deep.ndjson", deep_object(100_000) + "\n"),  # segfaulted Arrow's JSON parser (exit 139)
        ("deep.json", "[" + deep_object(100_000) + "]"),
        ("pickles_badly.ndjson", deep_object(200) + "\n"),  # read, but too deep to pass between processes
    ],
)
def test_lumos_schema_on_a_deeply_nested_json_file_is_a_one_line_error(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    (tmp_path / "ok.csv").write_text("id,name\n1,a\n")
    out = lumos_schema(path, tmp_path / "ok.csv")
    assert out.returncode == 1
    assert out.stderr.splitlines() == [f"Error: {path}: {TOO_DEEP} (Lumos reads at most {MAX_NESTING})"]
    assert out.stdout.splitlines() == [f"# {tmp_path / 'ok.csv'}", "id: int64", "name: string"]


def test_nesting_up_to_the_limit_is_read_and_one_more_level_is_refused_in_every_format(tmp_path):
    (tmp_path / "limit.ndjson").write_text(deep_object(MAX_NESTING) + "\n")
    (tmp_path / "over.ndjson").write_text(deep_object(MAX_NESTING + 1) + "\n")
    assert len(read_file_schema(str(tmp_path / "limit.ndjson")).schema.flatten()) == MAX_NESTING
    write_parquet(tmp_path / "limit.parquet", pa.table({"a": pa.nulls(1, deep_struct(MAX_NESTING))}))
    write_parquet(tmp_path / "over.parquet", pa.table({"a": pa.nulls(1, deep_struct(MAX_NESTING + 1))}))
    assert len(read_file_schema(str(tmp_path / "limit.parquet")).schema.flatten()) == MAX_NESTING
    for name in ("over.ndjson", "over.parquet"):
        with pytest.raises(SchemaReadError, match=TOO_DEEP):
            read_file_schema(str(tmp_path / name))


def test_a_deep_avro_schema_costs_that_file_not_the_pool(tmp_path):
    """A 300-level schema once made the pool worker fail to send its result: a RecursionError out of the scan."""
    schema = {"type": "long"}
    for i in range(300):
        schema = {"type": "record", "name": f"r{i}", "fields": [{"name": "a", "type": schema}]}
    deep = str(tmp_path / "deep.avro")
    with open(deep, "wb") as fh:
        fastavro.writer(fh, fastavro.parse_schema(schema), [])
    ok = write_parquet(tmp_path / "ok.parquet", pa.table({"a": [1]}))
    results = PoolReader(workers=2)([(deep, None), (ok, None)])
    assert TOO_DEEP in results[deep].error
    assert results[ok].error is None and results[ok].row_count == 1


def test_a_scan_fails_only_the_dataset_of_a_deeply_nested_file(tmp_path):
    day = datetime(2026, 11, 25, tzinfo=timezone.utc)
    write_parquet(tmp_path / "sales" / "orders" / "dt=2026-11-25" / "part-0.parquet", pa.table({"id": [1, 2]}))
    deep = tmp_path / "web" / "events" / "dt=2026-11-25" / "part-0.ndjson"
    deep.parent.mkdir(parents=True)
    deep.write_text(deep_object(100_000) + "\n")
    config = parse_config({"sources": [{"root": str(tmp_path), "name": "lake"}]})
    sources = build_sources(config)
    catalogue = resolve_datasets(config, discover(sources, ScanReport()).records, {"lake": str(tmp_path)})
    done = run_in_process(
        config, catalogue, sources, [("2026-11-25", day, day + timedelta(days=1))], read=auto_reader()
    )
    events = done.snapshots["web/events"]["2026-11-25"]
    assert [(e.path, e.reason) for e in events.errors] == [
        (str(deep), f"{TOO_DEEP} (Lumos reads at most {MAX_NESTING})")
    ]
    orders = done.snapshots["sales/orders"]["2026-11-25"]
    assert [f.name for f in orders.schema.fields] == ["id"] and not orders.errors


SEGFAULTING_FORMAT = """
import ctypes
from lumos_dagster.formats import Format


def read_seg(path, fs=None):
    ctypes.string_at(0)  # a native reader dereferencing a bad pointer


seg = Format("seg", read_seg, (".seg",))
"""


def test_a_native_crash_in_a_reader_is_a_one_line_error_from_lumos_schema(tmp_path):
    site = install(tmp_path, "lumos-seg", SEGFAULTING_FORMAT, {"lumos.formats": {"seg": "lumos_seg:seg"}})
    (tmp_path / "x.seg").write_text("anything")
    (tmp_path / "ok.csv").write_text("id\n1\n")
    out = run(site, tmp_path, LUMOS, "schema", "--flat", tmp_path / "x.seg", tmp_path / "ok.csv", ok=False)
    assert out.returncode == 1  # was 139, the segfault of the command itself
    assert out.stderr.splitlines() == [f"Error: {tmp_path / 'x.seg'}: {POOL_CRASH}"]
    assert out.stdout.splitlines() == [f"# {tmp_path / 'ok.csv'}", "id: int64"]


def one_line(columns: int, width: int, end: str = "") -> str:
    return ",".join(f"c{i}_".ljust(width, "x") for i in range(columns)) + end


def test_a_50_mb_one_line_csv_is_read(tmp_path):
    path = tmp_path / "wide.csv"
    path.write_text(one_line(50_000, 1_000, "\n"))  # 50 MB: was "Empty CSV file or block"; names of MAX_FIELD_NAME
    fields = read_file_schema(str(path)).schema.fields
    assert len(fields) == 50_000 and fields[-1].name.startswith("c49999_") and untyped(fields[0])
    path.write_text(one_line(50_000, 1_000))  # its line end not written yet
    with pytest.raises(SchemaReadError) as err:
        read_file_schema(str(path))
    assert err.value.reason == TORN_FIRST_LINE


@pytest.mark.parametrize(
    "content,first",
    [
        ("id,blob\n1," + "x" * 3_000_000 + "\n2,y\n", ("id", "int64")),  # a first data row beyond the block
        ('note,n\n"' + "line\n" * 400_000 + '",1\n', ("note", "string")),  # a quoted value with line breaks
        ("a,b,c\n", ("a", "unknown")),  # a header alone: no value types its columns
    ],
)
def test_csv_rows_the_first_block_cannot_hold_are_read(tmp_path, content, first):
    path = tmp_path / "t.csv"
    path.write_text(content)
    field = read_file_schema(str(path)).schema.fields[0]
    assert (field.name, field.type.kind) == first


@pytest.mark.parametrize(
    "content,reason",
    [
        (one_line(200_000, 8, "\n"), "the first row has more than 100,000 columns"),
        (one_line(10, 7_000_000, "\n"), "the first row is longer than 64 MiB"),
    ],
)
def test_a_first_csv_row_too_big_to_read_is_a_clear_error(tmp_path, content, reason):
    path = tmp_path / "huge.csv"
    path.write_text(content)
    with pytest.raises(SchemaReadError) as err:
        read_file_schema(str(path))
    assert err.value.path == str(path) and err.value.reason == f"cannot read csv: ValueError: {reason}"


def test_a_first_ndjson_line_longer_than_the_block_is_read(tmp_path):
    path = tmp_path / "t.ndjson"
    path.write_text(json.dumps({"blob": "x" * 3_000_000}) + "\n" + json.dumps({"blob": "y", "n": 1.5}) + "\n")
    assert [f.name for f in read_file_schema(str(path)).schema.fields] == ["blob", "n"]


ROWS = [{"id": i, "name": f"n{i}"} for i in range(500)]


@pytest.mark.parametrize(
    "content,reason",
    [
        (json.dumps(ROWS)[:-1], "truncated JSON array: the file ends before its closing ]"),
        (json.dumps(ROWS)[:-10], "JSONDecodeError: "),  # cut inside an object
        (json.dumps(ROWS) + ' {"id": 1}', "extra data after the JSON array"),
    ],
)
def test_a_truncated_json_array_is_an_error_naming_the_file(tmp_path, content, reason):
    path = tmp_path / "rows.json"
    path.write_text(content)  # ~12 KB: the whole file is in the first block
    with pytest.raises(SchemaReadError) as err:
        read_file_schema(str(path))
    assert err.value.path == str(path) and reason in err.value.reason
    (tmp_path / "whole.json").write_text(json.dumps(ROWS) + "\n")
    assert [f.name for f in read_file_schema(str(tmp_path / "whole.json")).schema.fields] == ["id", "name"]


def test_a_file_as_deep_as_the_readers_allow_is_a_valid_portable_document(tmp_path):
    """The readers and the portable document share one limit: what Lumos snapshots it can export."""
    write_parquet(tmp_path / "deep.parquet", pa.table({"a": pa.nulls(1, deep_struct(MAX_NESTING))}))
    (tmp_path / "deep.ndjson").write_text(deep_object(MAX_NESTING) + "\n")
    for name in ("deep.parquet", "deep.ndjson"):
        schema = read_file_schema(str(tmp_path / name)).schema
        snapshot = Snapshot(
            DatasetRef("file", name, str(tmp_path), "parquet"), "2026-11-20", datetime.now(timezone.utc), schema
        )
        assert portable.validate(portable.to_json(portable.from_snapshots([snapshot], "test"))).problems == []
