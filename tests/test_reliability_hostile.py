"""Issue 30, hostile schemas and files: a schema that expands without limit, a parser that is
quadratic, a character no encoder takes, an Avro proposal that is not Avro, and a stream behind a
file name cost a bounded amount of work and give one-line errors."""

import json
import os
import resource
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import fastavro
import pytest
import yaml
from click.testing import CliRunner
from fastapi.testclient import TestClient

from lumos_dagster.api.app import create_app
from lumos_dagster.api.auth import hash_token, new_token
from lumos_dagster.api.service import Lumos
from lumos_dagster.cli import main
from lumos_dagster.estate import portable
from lumos_dagster.floor.config import load_config
from lumos_dagster.floor.datatypes import SchemaTooLarge
from lumos_dagster.floor.errors import SchemaReadError
from lumos_dagster.floor.limits import MAX_FIELDS
from lumos_dagster.formats import avro, json_schema, read_file_schema
from lumos_dagster.lineage.catalogue import load_catalogue
from lumos_dagster.schema.proposed import ProposalError, parse_proposal
from lumos_dagster.sources import build_sources
from lumos_dagster.store import SnapshotStore
from tests.lake import backdate, register, run_in_process
from tests.test_store import snap

LUMOS = Path(sys.executable).parent / "lumos"
BUDGET = f"{MAX_FIELDS:,}"


def avro_bomb(levels: int, width: int = 10) -> dict:
    """A record whose every level uses the next level's record `width` times: about 2 KB for six levels,
    which expand to 2,111,111 fields."""
    inner: dict = {"type": "record", "name": f"L{levels}", "fields": [{"name": "x", "type": "long"}]}
    for level in range(levels - 1, -1, -1):
        uses = [{"name": f"f{i}", "type": f"L{level + 1}"} for i in range(1, width)]
        fields = [{"name": "x", "type": "long"}, {"name": "f0", "type": inner}, *uses]
        inner = {"type": "record", "name": f"L{level}", "fields": fields}
    return inner


def write_avro(path: Path, schema: dict, records=()) -> Path:
    with open(path, "wb") as fh:
        fastavro.writer(fh, fastavro.parse_schema(schema), list(records))
    return path


@pytest.fixture
def fields_built(monkeypatch):
    """How many fields the Avro and JSON Schema converters build: the work a schema costs."""
    built = [0]
    for module in (avro, json_schema):
        real = module.Field

        def counting(*args, real=real, **kwargs):
            built[0] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, "Field", counting)
    return lambda: built[0]


# ------------------------------------------------------------------ 1. named types that expand without limit


@pytest.mark.slow  # seconds of its own (a budget reached, a build, a process): make test
def test_an_avro_file_whose_named_types_expand_past_the_budget_is_refused_having_built_few_fields(
    tmp_path, fields_built
):
    path = write_avro(tmp_path / "bomb.avro", avro_bomb(6))
    assert path.stat().st_size < 2500
    with pytest.raises(SchemaReadError) as err:
        read_file_schema(str(path))
    assert str(err.value) == (
        f"{path}: its schema expands to more than {BUDGET} fields and nested types "
        "(each use of a named type counted), more than Lumos reads"
    )
    assert fields_built() <= MAX_FIELDS  # 2,111,111 before: 55 s and 1.4 GB


@pytest.mark.slow  # seconds of its own (a budget reached, a build, a process): make test
def test_lumos_schema_on_the_avro_bomb_is_one_line_naming_the_file_and_the_budget(tmp_path):
    path = write_avro(tmp_path / "bomb.avro", avro_bomb(6))
    out = subprocess.run([LUMOS, "schema", path], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    (line,) = out.stderr.strip().splitlines()
    assert str(path) in line and f"more than {BUDGET} fields" in line


@pytest.mark.slow  # seconds of its own (a budget reached, a build, a process): make test
def test_a_proposed_avro_schema_that_expands_past_the_budget_is_refused_having_built_few_fields(fields_built):
    with pytest.raises(ProposalError) as err:
        parse_proposal("avro", avro_bomb(6))
    assert str(err.value).startswith(f"avro: the proposed schema expands to more than {BUDGET} fields")
    assert fields_built() <= MAX_FIELDS


def test_named_types_reused_within_the_budget_are_expanded(tmp_path):
    schema = read_file_schema(str(write_avro(tmp_path / "ok.avro", avro_bomb(3)))).schema
    assert len(schema.flatten()) == 11 + 10 * 11 + 100 * 11 + 1000  # every use of L1, L2, L3 expanded


@pytest.mark.slow  # seconds of its own (a budget reached, a build, a process): make test
def test_json_schema_refs_that_expand_past_the_budget_are_refused(fields_built):
    """A schema registry's JSON Schema subject: `$ref`s are expanded at each use, as Avro's named types are."""
    defs = {"d0": {"type": "object", "properties": {"x": {"type": "integer"}}}}
    for level in range(1, 7):
        defs[f"d{level}"] = {"type": "object", "properties": {f"p{i}": {"$ref": f"#/$defs/d{level - 1}"}
                                                              for i in range(10)}}  # fmt: skip
    with pytest.raises(SchemaTooLarge):
        json_schema.from_json_schema({"$defs": defs, "$ref": "#/$defs/d6"})
    assert fields_built() <= MAX_FIELDS


# ------------------------------------------------------------------ 2. the proposed-schema parsers: linear, bounded


@pytest.mark.slow  # seconds of its own (a budget reached, a build, a process): make test
def test_a_wide_spark_ddl_parses_in_linear_time():
    ddl = ", ".join(f"c{i} BIGINT NOT NULL COMMENT 'x'" for i in range(80_000))  # 2.9 MB
    started = time.monotonic()
    schema = parse_proposal("spark-ddl", ddl)
    assert time.monotonic() - started < 10  # about 1 s; the repeated-name check was quadratic (40,000: 12.7 s)
    assert len(schema.fields) == 80_000


def flat(fmt: str, n: int):
    """A proposal of `n` integer fields in `fmt`."""
    names = [f"c{i}" for i in range(n)]
    return {
        "spark-ddl": ", ".join(f"{name} INT" for name in names),
        "avro": {"type": "record", "name": "r", "fields": [{"name": name, "type": "int"} for name in names]},
        "json-schema": {"type": "object", "properties": {name: {"type": "integer"} for name in names}},
        "lumos": [{"name": name, "type": "int32", "nullable": True} for name in names],
    }[fmt]


@pytest.mark.parametrize("fmt", ["spark-ddl", "avro", "json-schema", "lumos"])
def test_every_proposed_schema_format_has_a_field_budget(fmt):
    assert len(parse_proposal(fmt, flat(fmt, 50), max_fields=50).fields) == 50
    with pytest.raises(ProposalError) as err:
        parse_proposal(fmt, flat(fmt, 51), max_fields=50)
    assert str(err.value).startswith(f"{fmt}: the proposed schema expands to more than 50 fields")
    nested = {"type": "record", "name": "r", "fields": [{"name": "s", "type": flat("avro", 50)}]}
    with pytest.raises(ProposalError):  # nested fields count
        parse_proposal("avro", nested, max_fields=50)


# ------------------------------------------------------------------ 12. proposed Avro schemas are Avro


@pytest.mark.parametrize(
    "schema, message",
    [
        ({"type": "record", "name": "r", "fields": [{"name": "a", "type": "lonng"}]},
         "avro: not a valid Avro schema: unknown type 'lonng'"),
        ({"type": "record", "name": "r", "fields": [{"name": "a", "type": "long"}, {"name": "a", "type": "int"}]},
         "avro: fields: the field name 'a' is repeated"),
        ({"type": "record", "name": "r", "fields": [{"name": "s", "type": {"type": "record", "name": "s", "fields": [
            {"name": "b", "type": "int"}, {"name": "b", "type": "int"}]}}]},
         "avro: s: the field name 'b' is repeated"),
        ({"type": "record", "name": "r", "fields": [{"name": "a", "type": "long", "default": "x"}]},
         "avro: not a valid Avro schema: Default value <x> must match schema type: long"),
    ],
)  # fmt: skip
def test_a_proposed_avro_schema_with_an_unknown_type_or_a_repeated_field_is_refused(schema, message):
    with pytest.raises(ProposalError) as err:
        parse_proposal("avro", schema)
    assert str(err.value) == message


def test_a_repeated_field_name_is_refused_in_every_format():
    with pytest.raises(ProposalError, match="the field name 'a' is repeated"):
        parse_proposal("lumos", flat("lumos", 1) + [{"name": "a", "type": "int32", "nullable": True}] * 2)
    with pytest.raises(ProposalError, match=r"s: the field name 'x' is repeated"):
        parse_proposal("spark-ddl", "s STRUCT<x: INT, x: STRING>")


# ------------------------------------------------------------------ 5. a character no encoder takes


def test_a_lone_surrogate_in_an_avro_file_is_replaced_where_it_is_read(tmp_path):
    schema = {"type": "record", "name": "r", "fields": [
        {"name": "id", "type": "long", "doc": "the key \udfff"},
        {"name": "e", "type": {"type": "enum", "name": "e", "symbols": ["A"], "doc": "\ud800"}, "default": "A"},
    ]}  # fmt: skip
    path = write_avro(tmp_path / "s.avro", schema, [{"id": 1, "e": "A"}])
    fields = read_file_schema(str(path)).schema.fields
    assert fields[0].description == "the key \ufffd"
    json.dumps([f.description for f in fields], ensure_ascii=False).encode("utf-8")  # what an HTTP response does


def test_a_snapshotted_avro_file_with_a_lone_surrogate_is_served_by_the_api(tmp_path):
    """GET /v1/datasets/{name} and /v1/export answered 500 once such a doc was in the store."""
    lake = tmp_path / "lake"
    (lake / "raw" / "events").mkdir(parents=True)
    schema = {"type": "record", "name": "r", "fields": [{"name": "id", "type": "long", "doc": "\udfff"}]}
    write_avro(lake / "raw" / "events" / "part-0.avro", schema, [{"id": 1}])
    backdate(lake)
    token = new_token()
    config_path = tmp_path / "lumos.yaml"
    config_path.write_text(yaml.safe_dump({
        "sources": [{"name": "lake", "root": str(lake)}],
        "store": {"url": f"sqlite:///{tmp_path / 'store.db'}"},
        "api": {"tokens": [{"name": "t", "hash": hash_token(token), "scopes": ["read"]}]},
    }))  # fmt: skip
    config = load_config(str(config_path))
    register(config)
    sources = build_sources(config)
    day = datetime(2026, 11, 25, tzinfo=timezone.utc)
    with SnapshotStore(config.store_url) as store:
        catalogue = load_catalogue(config, store, {n: s.root for n, s in sources.items()})
        run_in_process(config, catalogue, sources, [("2026-11-25", day, day + timedelta(days=1))], store=store)
    lumos = Lumos(config)
    try:
        client = TestClient(create_app(lumos), raise_server_exceptions=False)
        headers = {"Authorization": f"Bearer {token}"}
        detail = client.get("/v1/datasets/raw/events", headers=headers)
        assert detail.status_code == 200, detail.text
        assert "\ufffd" in detail.text
        assert client.get("/v1/export", headers=headers).status_code == 200
    finally:
        lumos.close()


def _estate_file(path: Path, description: str) -> Path:
    doc = portable.to_json(portable.from_snapshots([snap("raw/a", "2026-11-25")], "test"))
    doc["datasets"][0]["snapshot"]["description"] = description
    path.write_text(json.dumps(doc))  # ensure_ascii: the lone surrogate is written as the escape \ud800
    return path


def test_a_lone_surrogate_in_a_document_is_refused_by_validate_and_import(tmp_path):
    bad = _estate_file(tmp_path / "e.json", "orders \ud800")
    assert "\\ud800" in bad.read_text()
    problem = "datasets[0].snapshot.description: holds a lone UTF-16 surrogate, which the store cannot keep"
    validated = CliRunner().invoke(main, ["validate", str(bad)])
    assert validated.exit_code == 1 and f"  invalid: {problem}" in validated.stderr, validated.output
    store = tmp_path / "store.db"
    config = tmp_path / "lumos.yaml"
    config.write_text(f"store:\n  url: 'sqlite:///{store}'\n")
    imported = CliRunner().invoke(main, ["import", str(bad), "--to", "store", "-c", str(config)])
    assert imported.exit_code == 1 and problem in imported.stderr
    assert len(imported.stderr.strip().splitlines()) == 1
    if store.exists():
        with SnapshotStore(f"sqlite:///{store}") as written:
            assert written.datasets() == []
    paired = _estate_file(tmp_path / "ok.json", "🙂")  # written as the pair \ud83d\ude42: one character
    assert CliRunner().invoke(main, ["validate", str(paired)]).exit_code == 0


@pytest.mark.parametrize(
    "fmt, schema, message",
    [
        ("avro", {"type": "record", "name": "r", "fields": [{"name": "a", "type": "int", "doc": "\udfff"}]},
         "fields[0].doc: holds"),
        ("json-schema", {"type": "object", "properties": {"a\ud800": {"type": "integer"}}}, "properties: a key holds"),
        ("spark-ddl", "a INT COMMENT '\udfff'", "the schema text holds"),
        ("lumos", '[{"name": "a\\ud800", "type": "int32", "nullable": true}]', "[0].name: holds"),
    ],
)  # fmt: skip
def test_a_lone_surrogate_in_a_proposed_schema_is_refused(fmt, schema, message):
    with pytest.raises(ProposalError) as err:
        parse_proposal(fmt, schema)
    assert str(err.value) == f"{fmt}: {message} a lone UTF-16 surrogate, which Lumos cannot keep"


# ------------------------------------------------------------------ 11. streams and --max-bytes


def _limited_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # the unbounded read got to 23 GB


@pytest.mark.slow  # seconds of its own (a budget reached, a build, a process): make test
def test_validate_reads_at_most_max_bytes_of_an_endless_device():
    out = subprocess.run([LUMOS, "validate", "/dev/zero", "--max-bytes", "1000"], capture_output=True, text=True,
                         timeout=120, preexec_fn=_limited_memory)  # fmt: skip
    assert out.returncode == 1
    assert out.stderr.strip() == (
        "Error: /dev/zero: more than the limit of 1,000 bytes (raise --max-bytes if the file is meant to be that large)"
    )


def fifo_fed(path: Path, data: bytes) -> threading.Thread:
    """A FIFO at `path` that a thread writes `data` into once a reader opens it."""
    os.mkfifo(path)

    def feed():
        try:
            with open(path, "wb") as fh:
                fh.write(data)
        except BrokenPipeError:  # the reader stopped at its limit
            pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    return writer


def test_validate_reads_at_most_max_bytes_of_a_fifo(tmp_path):
    fifo = tmp_path / "doc.fifo"
    writer = fifo_fed(fifo, b" " * 100_000 + b"{}")
    result = CliRunner().invoke(main, ["validate", str(fifo), "--max-bytes", "10000"])
    writer.join(10)
    assert result.exit_code == 1
    assert f"{fifo}: more than the limit of 10,000 bytes" in result.stderr


def test_a_fifo_named_as_a_data_file_is_no_regular_file(tmp_path):
    """Its size says 0: "empty file (0 bytes)" before, although rows came through it."""
    fifo = tmp_path / "rows.csv"
    writer = fifo_fed(fifo, b"id,name\n1,a\n")
    with pytest.raises(SchemaReadError) as err:
        read_file_schema(str(fifo))
    writer.join(10)
    assert str(err.value) == f"{fifo}: not a regular file (a device, pipe, socket or folder)"


# ------------------------------------------------------------------ 18. smaller


@pytest.mark.parametrize("command", ["cost", "savings"])
def test_a_month_that_does_not_exist_is_refused(command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no lumos.yaml: the month is refused before one is looked for
    args = [command, "--month", "2026-13"] + (["--datasets", "a"] if command == "savings" else [])
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert "Invalid value for '--month': 2026-13 is not a month (YYYY-MM, 01 to 12)" in result.output
