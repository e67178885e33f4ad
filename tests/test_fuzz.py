"""Fuzzing (hypothesis): the file readers, the estate parser, the config loader and the
proposed-schema parsers on generated input, random bytes and mutations of real files. Each gives its
result or its own one-line error (SchemaReadError, EstateError, ConfigError, ProposalError), never
another exception, a hang or a crash; a proposed schema, within its budget of fields and time.

Budget: `make test` runs a small one (the whole module in well under a minute). Set
`LUMOS_FUZZ=long` for `LONG_EXAMPLES` examples per target instead, or `LUMOS_FUZZ=<n>` for n:

    LUMOS_FUZZ=long .venv/bin/pytest -p no:cacheprovider tests/test_fuzz.py

The file readers run as `lumos schema` and discovery run them, in the schema reader's worker
processes (`PoolReader`): a segfault in a native reader becomes that file's `POOL_CRASH`
result, which fails the test, instead of taking pytest down.
"""

import functools
import gzip
import io
import json
import os
import tempfile
import time
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lumos_dagster.estate import portable
from lumos_dagster.floor.config import load_config
from lumos_dagster.floor.errors import ConfigError
from lumos_dagster.formats import FileResult
from lumos_dagster.formats.readers import POOL_CRASH, PoolReader
from lumos_dagster.schema.proposed import FORMATS, ProposalError, parse_proposal
from tests.conftest import TESTDATA, examples
from tests.test_reliability_hostile import avro_bomb
from tests.test_store import snap

ROOT = Path(__file__).resolve().parents[1]
LONG_EXAMPLES = 5000
_BUDGET = os.environ.get("LUMOS_FUZZ", "")
EXAMPLES = LONG_EXAMPLES if _BUDGET == "long" else int(_BUDGET) if _BUDGET.isdigit() else None
# a long budget outlasts the suite's per-test timeout by design
pytestmark = [pytest.mark.timeout(0)] if EXAMPLES else []

#: `make test-fast` reads one seed file in this many
SEED_SAMPLE = 25
# every name a reader is chosen by, and none (the format is sniffed from the first bytes)
NAMES = ("f.parquet", "f.orc", "f.avro", "f.csv", "f.tsv", "f.json", "f.ndjson", "f.csv.gz", "f")


def fuzz(default: int):
    """Hypothesis settings with `default` examples, or the LUMOS_FUZZ budget; no deadline (a
    loaded machine is slow), the reads themselves are bounded by the readers' own limits."""
    return settings(
        max_examples=EXAMPLES or examples(default),
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def _small_files(root: Path, *patterns: str, limit: int = 16_384) -> list[bytes]:
    files = (p for pattern in patterns for p in sorted(root.rglob(pattern)) if p.is_file())
    return [p.read_bytes() for p in files if p.stat().st_size <= limit]


@functools.cache
def file_seeds() -> tuple[bytes, ...]:
    """Small real files of every format: generated ones, and the shared test data."""
    table = pa.table(
        {
            "id": [1, 2, None],
            "name": ["a", "é", None],
            "tags": [["x"], [], None],
            "user": [{"k": 1.5}, None, {"k": 2.0}],
        }
    )
    parquet, orc_file, avro = io.BytesIO(), io.BytesIO(), io.BytesIO()
    pq.write_table(table, parquet)
    orc.write_table(table.select(["id", "name"]), orc_file)
    fastavro.writer(
        avro,
        fastavro.parse_schema(
            {
                "type": "record",
                "name": "r",
                "fields": [
                    {"name": "id", "type": "long"},
                    {"name": "tags", "type": {"type": "array", "items": "string"}},
                    {
                        "name": "u",
                        "type": ["null", {"type": "record", "name": "u", "fields": [{"name": "k", "type": "double"}]}],
                    },
                ],
            }
        ),
        [{"id": 1, "tags": ["a"], "u": None}, {"id": 2, "tags": [], "u": {"k": 1.0}}],
    )
    rows = [{"id": 1, "name": "a", "user": {"tags": ["x"]}}, {"id": 2, "name": None, "v": 1.5}]
    generated = [
        parquet.getvalue(),
        orc_file.getvalue(),
        avro.getvalue(),
        b'id,name,when\n1,"a, b",2026-11-25\n2,"multi\nline",2026-11-26T10:00:00\n',
        b"id\tname\n1\tx\n",
        "".join(json.dumps(r) + "\n" for r in rows).encode(),
        json.dumps(rows).encode(),
        gzip.compress(b"a,b\n1,2\n"),
    ]
    shared = _small_files(TESTDATA, "*.parquet", "*.avro", "*.orc") + _small_files(ROOT / "tests" / "data", "*")
    return tuple(generated + shared)


def mutated(seeds: tuple[bytes, ...]) -> st.SearchStrategy[bytes]:
    """A seed with a few random edits: bytes overwritten, spans cut, inserted, duplicated; or truncated."""

    @st.composite
    def build(draw) -> bytes:
        data = bytearray(draw(st.sampled_from(seeds)))
        for _ in range(draw(st.integers(1, 6))):
            at = draw(st.integers(0, len(data)))
            edit = draw(st.sampled_from(["set", "cut", "insert", "repeat", "truncate"]))
            if edit == "set" and at < len(data):
                data[at] = draw(st.integers(0, 255))
            elif edit == "cut":
                del data[at : at + draw(st.integers(1, 64))]
            elif edit == "insert":
                data[at:at] = draw(
                    st.binary(min_size=1, max_size=32) | st.sampled_from([b"{", b"[", b'"', b"\n", b","])
                )
            elif edit == "repeat":
                data[at:at] = data[at : at + draw(st.integers(1, 16))] * draw(st.integers(2, 200))
            elif edit == "truncate":
                del data[at:]
        return bytes(data)

    return build()


def file_inputs() -> st.SearchStrategy[bytes]:
    return st.one_of(st.binary(max_size=512), mutated(file_seeds()))


_READ = PoolReader(workers=1)


def read_everywhere(data: bytes) -> dict[str, FileResult]:
    """`data` under every name a format is chosen by, read as `lumos schema` reads it."""
    with tempfile.TemporaryDirectory(prefix="lumos-fuzz-") as tmp:
        paths = []
        for name in NAMES:
            path = os.path.join(tmp, name)
            with open(path, "wb") as fh:
                fh.write(data)
            paths.append(path)
        return _READ([(p, None) for p in paths])


@fuzz(default=60)
@given(file_inputs())
def test_a_reader_gives_a_schema_or_a_one_line_error(data):
    for path, result in read_everywhere(data).items():
        assert result.error != POOL_CRASH, f"{os.path.basename(path)} crashed its reader process on {data[:200]!r}"
        assert (result.schema is None) != (result.error is None), result
        if result.error is not None:
            assert "\n" not in result.error and result.error.strip(), result.error
        assert result.damaged is None or "\n" not in result.damaged, result.damaged  # a damaged file: one line too


V1_ESTATE = ROOT / "tests/data/portable/estate_v1.json"  # the previous format: migrated as it is read


@functools.cache
def estate_seed() -> bytes:
    estate = portable.from_snapshots([snap("sales/orders", "2026-11-25", 2), snap("web/logs", "2026-11-25")], "fuzz")
    return json.dumps(portable.to_json(estate)).encode()


@fuzz(default=40)
@given(st.one_of(st.binary(max_size=256), mutated((estate_seed(), V1_ESTATE.read_bytes()))))
def test_the_estate_parser_gives_an_estate_or_a_one_line_error(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("estate") / "estate.json"
    path.write_bytes(data)
    try:
        doc = portable.load(str(path))
    except portable.EstateError as exc:
        assert "\n" not in str(exc)
        return
    problems = portable.validate(doc).problems
    assert all("\n" not in p for p in problems)
    if not problems:
        portable.from_json(doc)


@fuzz(default=40)
@given(st.one_of(st.binary(max_size=256), mutated(((ROOT / "lumos.yaml").read_bytes(),))))
def test_the_config_loader_gives_a_config_or_an_error_naming_the_file(tmp_path_factory, data):
    """A config error names the file on its first line, then one line per problem (several may be listed)."""
    path = tmp_path_factory.mktemp("config") / "lumos.yaml"
    path.write_bytes(data)
    try:
        load_config(str(path))
    except ConfigError as exc:
        first, *problems = str(exc).strip().split("\n")
        assert first.startswith(str(path))
        assert all(p.startswith("  ") for p in problems)


@pytest.mark.parametrize(
    "seed",
    # every seed in `make test`; one in SEED_SAMPLE of them in the inner loop's `make test-fast` (the sweep
    # is a process pool's read of each file under 9 names: 100 CPU-seconds whole)
    [pytest.param(i, marks=() if i % SEED_SAMPLE == 0 else pytest.mark.slow) for i in range(len(file_seeds()))],
)
def test_every_seed_file_reads_without_a_crash(seed):
    """The seeds themselves, unmutated: the fuzzer's starting points are sound inputs."""
    results = read_everywhere(file_seeds()[seed])
    assert POOL_CRASH not in {r.error for r in results.values()}


#: a small budget, so that expanding inputs reach it within an example
FUZZ_FIELDS = 1000
_WIDE = [f"c{i}" for i in range(FUZZ_FIELDS + 1)]
# per format: a sound proposal (a named type used twice, an enum, a union, a map, nested structs), and
# one past the budget (for Avro, 2 KB that expand to 2,111,111 fields)
PROPOSALS = {
    "spark-ddl": (
        "id BIGINT NOT NULL, tags ARRAY<STRING>, s STRUCT<a: INT, m: MAP<STRING, DECIMAL(10,2)>> COMMENT 'x'",
        ", ".join(f"{name} INT" for name in _WIDE),
    ),
    "avro": (
        {"type": "record", "name": "r", "fields": [
            {"name": "a", "type": {"type": "record", "name": "p", "fields": [{"name": "x", "type": ["null", "long"]}]}},
            {"name": "b", "type": {"type": "array", "items": "p"}},
            {"name": "e", "type": {"type": "enum", "name": "e", "symbols": ["A", "B"]}, "doc": "d"},
            {"name": "u", "type": ["null", "int", "string", {"type": "map", "values": "p"}]},
        ]},
        avro_bomb(6),
    ),
    "json-schema": (
        {"type": "object", "required": ["a"], "properties": {
            "a": {"type": "string", "format": "date"}, "t": {"type": "array", "items": {"type": "integer"}},
            "o": {"type": "object", "properties": {"k": {"enum": ["x", "y"]}}}}},
        {"type": "object", "properties": {name: {"type": "integer"} for name in _WIDE}},
    ),
    "lumos": (
        [{"name": "a", "type": {"kind": "struct", "fields": [{"name": "b", "type": "int64", "nullable": False}]},
          "nullable": True}],
        [{"name": name, "type": "int32", "nullable": True} for name in _WIDE],
    ),
}  # fmt: skip
DDL_WORDS = ("a", "`b c`", "INT", "STRING", "STRUCT", "ARRAY", "MAP", "DECIMAL", "<", ">", "(", ")", ",", ":", "10",
             "NOT", "NULL", "COMMENT", "'x'", "'\\'")  # fmt: skip
JSON_WORDS = ("type", "name", "fields", "items", "values", "symbols", "properties", "required", "record", "array",
              "map", "enum", "int", "long", "string", "p", "r", "object", "integer", "kind", "struct", "nullable",
              "\udfff")  # fmt: skip
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 20) | st.sampled_from(JSON_WORDS),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.sampled_from(JSON_WORDS), inner, max_size=6),
    max_leaves=40,
)


def _containers(doc) -> list:
    """Every dict and list of a parsed JSON document."""
    found, stack = [], [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, (dict, list)):
            found.append(node)
            stack.extend(node.values() if isinstance(node, dict) else node)
    return found


@st.composite
def edited(draw, doc):
    """`doc` (parsed JSON) with a few values replaced by generated ones, or items of a list repeated."""
    doc = json.loads(json.dumps(doc))
    for _ in range(draw(st.integers(1, 3))):
        node = draw(st.sampled_from([c for c in _containers(doc) if c]))
        if isinstance(node, dict):
            node[draw(st.sampled_from(sorted(node)))] = draw(json_values)
        elif draw(st.booleans()):
            node[draw(st.integers(0, len(node) - 1))] = draw(json_values)
        else:
            node.append(node[draw(st.integers(0, len(node) - 1))])  # a field listed twice
    return doc


def proposals() -> st.SearchStrategy:
    """(format, proposal): the format's seeds, edited or with bytes mutated; a soup of DDL words; or JSON
    built of the formats' words."""

    def of(fmt: str) -> st.SearchStrategy:
        seeds = PROPOSALS[fmt]
        texts = tuple(s if isinstance(s, str) else json.dumps(s) for s in seeds)
        garbled = mutated(tuple(t.encode() for t in texts)).map(lambda b: b.decode("utf-8", "replace"))
        made = st.lists(st.sampled_from(DDL_WORDS), max_size=40).map(" ".join) if fmt == "spark-ddl" else json_values
        edits = st.sampled_from(seeds).flatmap(edited) if fmt != "spark-ddl" else st.nothing()
        return st.tuples(st.just(fmt), st.one_of(st.sampled_from(texts), garbled, made, edits))

    return st.sampled_from(FORMATS).flatmap(of)


@fuzz(default=150)
@given(proposals())
def test_a_proposed_schema_parser_gives_a_schema_or_a_one_line_error_within_its_budget(proposal):
    fmt, text = proposal
    started = time.monotonic()
    try:
        schema = parse_proposal(fmt, text, max_fields=FUZZ_FIELDS)
    except ProposalError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(f"{fmt}: "), str(exc)
    else:
        assert 0 < len(schema.flatten()) <= FUZZ_FIELDS
    assert time.monotonic() - started < 5  # milliseconds; the 2 KB Avro seed took 55 s before its budget
