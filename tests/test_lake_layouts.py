"""Hive-style layouts and formats known by content, on a real lake: `lumos discover` and
`lumos schema` on real Parquet, ORC, Avro and compressed text files, named or not."""

import gzip
import io
import json
import os
import re
from datetime import datetime

import fastavro
import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest
import yaml
import zstandard
from click.testing import CliRunner

from lumos_dagster.cli import main
from lumos_dagster.floor.config import parse_config
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.formats import format_from
from lumos_dagster.run.contents import files_in_window
from lumos_dagster.sources import build_sources

pytestmark = pytest.mark.servers

TABLE = pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"]})
AVRO_SCHEMA = {"type": "record", "name": "Refund", "fields": [{"name": "id", "type": "long"}]}


def _write(path, data: bytes) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data)
    return str(path)


def _parquet() -> bytes:
    buf = io.BytesIO()
    pq.write_table(TABLE, buf)
    return buf.getvalue()


def _orc() -> bytes:
    buf = io.BytesIO()
    orc.write_table(TABLE, buf)
    return buf.getvalue()


def _avro() -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, AVRO_SCHEMA, [{"id": 1}])
    return buf.getvalue()


def _gzip_named(name: str, data: bytes) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(filename=name, mode="wb", fileobj=buf) as fh:  # the header keeps `name`
        fh.write(data)
    return buf.getvalue()


@pytest.fixture
def lake(tmp_path):
    root = tmp_path / "lake"
    files = {
        # Spark and Hive writers often leave part files without an extension
        "web/visits/year=2026/month=01/day=30/hour=00/part-00000": _parquet(),
        "web/visits/year=2026/month=01/day=30/hour=01/part-00000": _parquet(),
        "sales/orders/region=eu/date=2026-01-30/part-00000": _orc(),
        "sales/orders/region=us/date=2026-01-31/part-00000": _orc(),
        "sales/refunds/ds=20260130/part-00000": _avro(),
        "raw/exports/dt=2026-01-30/export": gzip.compress(b"id,amount\n1,2.5\n"),
        "raw/events/dt=2026-01-30/events": zstandard.ZstdCompressor().compress(b'{"id": 1, "kind": "click"}\n'),
        "raw/dump/dt=2026-01-30/dump-001": _gzip_named("dump.tsv", b"id\tname\n1\ta\n"),
        "misc/prices/prices.csv": _parquet(),  # a Parquet file with a wrong extension
        "misc/notes/README": b"Just some words.\n",
    }
    paths = {rel: _write(root / rel, data) for rel, data in files.items()}
    config = tmp_path / "lumos.yaml"
    config.write_text(yaml.safe_dump({"sources": [{"root": "lake"}], "store": {"path": "s.db"}}))
    return {"root": root, "paths": paths, "config": str(config)}


def _summary(stdout: str) -> dict[str, tuple[str, int, str]]:
    """dataset → (format, files, partition text) from `lumos discover`'s table (new ones marked so)."""
    rows = re.findall(r"^  (\S+)\s+(\S+)\s+(\d+) files?  (.+?)(?:  \(new\))?$", stdout, re.M)
    return {name: (fmt, int(n), part) for name, fmt, n, part in rows}


def test_discover_finds_hive_time_partitions_and_extensionless_files(lake):
    result = CliRunner().invoke(main, ["discover", "-c", lake["config"]])
    assert result.exit_code == 0, result.output
    assert _summary(result.stdout) == {
        "web/visits": ("parquet", 2, "partitioned by year/month/day/hour (hourly)"),
        "sales/orders": ("orc", 2, "partitioned by date (daily), keys region"),
        "sales/refunds": ("avro", 1, "partitioned by ds (daily)"),
        "raw/exports": ("csv", 1, "partitioned by dt (daily)"),
        "raw/events": ("json", 1, "partitioned by dt (daily)"),
        "raw/dump": ("tsv", 1, "partitioned by dt (daily)"),
        "misc/prices": ("parquet", 1, "not partitioned"),
    }
    assert (
        "note         1  named as csv, read as parquet (its first bytes) (e.g. misc/prices/prices.csv)" in result.stdout
    )
    assert "skipped      1  unrecognised format (e.g. misc/notes/README)" in result.stdout


@pytest.mark.parametrize(
    ("rel", "fmt", "names"),
    [
        ("web/visits/year=2026/month=01/day=30/hour=00/part-00000", "parquet", ["id", "name"]),
        ("sales/orders/region=eu/date=2026-01-30/part-00000", "orc", ["id", "name"]),
        ("sales/refunds/ds=20260130/part-00000", "avro", ["id"]),
        ("raw/exports/dt=2026-01-30/export", "csv", ["id", "amount"]),
        ("raw/events/dt=2026-01-30/events", "json", ["id", "kind"]),
        ("raw/dump/dt=2026-01-30/dump-001", "tsv", ["id", "name"]),
        ("misc/prices/prices.csv", "parquet", ["id", "name"]),
    ],
)
def test_lumos_schema_reads_each_file_as_discovery_classed_it(lake, rel, fmt, names):
    result = CliRunner().invoke(main, ["schema", lake["paths"][rel]])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["format"], [f["name"] for f in doc["fields"]]) == (fmt, names)


def test_an_hourly_partition_window_holds_that_hour_only(lake):
    (source,) = build_sources(parse_config({"sources": [{"root": str(lake["root"])}]})).values()
    ds = source.dataset("web/visits", "parquet", ScanReport())
    hour = files_in_window(ds, datetime(2026, 1, 30, 1), datetime(2026, 1, 30, 2))
    day = files_in_window(ds, datetime(2026, 1, 30), datetime(2026, 1, 31))
    assert [f.entry.path for f in hour] == ["web/visits/year=2026/month=01/day=30/hour=01/part-00000"]
    assert len(day) == 2


@pytest.mark.parametrize(
    ("name", "head", "expected"),
    [
        ("part-0", b"PAR1\x15\x04", ("parquet", None)),
        ("part-0", b"ORC\x0a", ("orc", None)),
        ("part-0", b"Obj\x01\x04", ("avro", None)),
        ("x.json", b"PAR1", ("parquet", "named as json, read as parquet (its first bytes)")),
        ("x.parquet", b"a,b\n", ("parquet", None)),  # a binary name is trusted: its reader says what is wrong
        ("x.csv", b"a,b\n", ("csv", None)),
        ("x.csv.gz", gzip.compress(b"{}"), ("csv", None)),  # the name wins over what the content looks like
        ("export", gzip.compress(b"[1, 2]"), ("json", None)),
        ("export", gzip.compress(b"a;b\n"), (None, None)),  # neither comma nor tab: not guessed
        ("export", _gzip_named("x.parquet", b"PAR1"), (None, None)),  # a gzipped Parquet file is unreadable
        ("README", b"Just some words, no data.\n", (None, None)),  # plain text is never guessed
        ("blob", b"\x00\x01\x02", (None, None)),
    ],
)
def test_format_from_name_and_first_bytes(name, head, expected):
    assert format_from(name, head) == expected


def test_s3_looks_at_objects_whose_name_says_nothing(monkeypatch):
    """One ranged request per extensionless object; a named object is taken at its word."""
    from moto.server import ThreadedMotoServer

    from tests.conftest import S3_TEST_CREDENTIALS

    for key, value in S3_TEST_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        url = f"http://{host}:{port}"
        config = parse_config({"sources": [{"type": "s3", "name": "lake", "bucket": "lake", "endpoint_url": url,
                                            "region": "us-east-1"}]})  # fmt: skip
        (source,) = build_sources(config).values()
        source.client.create_bucket(Bucket="lake")
        for day in ("2026-01-30", "2026-01-31"):
            source.client.put_object(Bucket="lake", Key=f"web/visits/ds={day}/part-00000", Body=_parquet())
        source.client.put_object(Bucket="lake", Key="misc/prices/prices.csv", Body=_parquet())
        found = source.discover(ScanReport())
    finally:
        server.stop()
    visits = found["web/visits"]
    assert (visits.format, len(visits.files), visits.time_partition_key) == ("parquet", 2, "ds")
    assert found["misc/prices"].format == "csv"
