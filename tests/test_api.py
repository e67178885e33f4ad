"""`lumos serve` on loopback against a real store (SQLite, PostgreSQL), populated by the snapshot
pipeline: every endpoint through the SDK, the error paths through plain HTTP, the audit log, the
committed OpenAPI document."""

import json
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pyarrow as pa
import pytest
import sqlalchemy as sa
import yaml

from lumos_dagster.api import audit, auth, limits
from lumos_dagster.api.auth import Throttled, TokenVerifier, hash_token, new_token, parse_hash, token_id, verify
from lumos_dagster.client import ApiError, LumosClient
from lumos_dagster.floor.api_config import ApiToken
from lumos_dagster.floor.config import load_config
from lumos_dagster.lineage.catalogue import load_catalogue
from lumos_dagster.schema.proposed import ProposalError, parse_proposal
from lumos_dagster.sources import build_sources
from lumos_dagster.store import SnapshotStore
from tests.lake import backdate, partitioned_lake, register, run_in_process, write_parquet
from tests.test_store import PG

pytestmark = pytest.mark.servers

ROOT = Path(__file__).resolve().parents[1]
LUMOS = str(Path(sys.executable).with_name("lumos"))
DAYS = [datetime(2026, 11, 23, tzinfo=timezone.utc) + timedelta(days=d) for d in range(3)]
TOKENS = {name: new_token() for name in ("reader", "checker", "writer")}
SCOPES = {"reader": ["read"], "checker": ["read", "check"], "writer": ["read", "check", "write"]}
HASHES = {name: hash_token(token) for name, token in TOKENS.items()}

# ------------------------------------------------------------------ a project, its store, its server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_lake(root: Path) -> None:
    partitioned_lake(root, "sales/orders", days=3, extra_field_from=2)  # a nullable column on day 3: minor
    for i, day in enumerate(DAYS):  # `status` goes on day 3: breaking under FULL
        cols = {"id": pa.array([1, 2], pa.int64())}
        if i < 2:
            cols["status"] = pa.array(["a", "b"], pa.string())
        write_parquet(root / "raw" / "events" / f"dt={day.date()}" / "part-0.parquet", pa.table(cols))
    backdate(write_parquet(root / "sales" / "summary" / "s.parquet", pa.table({"total": pa.array([1.0])})))


def write_config(path: Path, root: Path, url: str, writes: bool) -> Path:
    config = {
        "sources": [{"name": "lake", "root": str(root)}],
        "store": {"url": url},
        "catalog": {"type": "datahub-file", "path": str(path.parent / "mcps.json")},
        "datasets": [
            {"name": "raw/events", "owners": ["ann@example.com"], "tags": ["pii"], "description": "Raw events"},
            {"name": "sales/orders", "upstream": ["raw/events"], "owners": ["group:sales"], "domain": "sales"},
            {"name": "sales/summary", "upstream": ["sales/orders"]},
        ],
        "api": {
            "writes": writes,
            "tokens": [{"name": n, "hash": HASHES[n], "scopes": SCOPES[n]} for n in TOKENS],
            "limits": {"max_body_bytes": 4096, "request_timeout": 20},
        },
    }
    path.write_text(yaml.safe_dump(config))
    return path


def materialize(config_path: Path) -> None:
    """What daily materializations do: the snapshot run, into the store, a run a day for each dataset
    (a dataset is held back only by an upstream that fails in the same run: sales/orders gets its
    day-3 column although raw/events breaks that day)."""
    config = load_config(str(config_path))
    register(config)
    sources = build_sources(config)
    with SnapshotStore(config.store_url) as store:
        catalogue = load_catalogue(config, store, {n: s.root for n, s in sources.items()})
        for day in DAYS:
            for d in catalogue.datasets:
                window = [(str(day.date()), day, day + timedelta(days=1))]
                run_in_process(config, catalogue, sources, window, store=store, datasets=[d])


class Server:
    def __init__(self, config: Path, port: int, log: Path):
        self.url = f"http://127.0.0.1:{port}"
        self.log = log
        self.proc = subprocess.Popen(
            [LUMOS, "serve", "-c", str(config), "--port", str(port)],
            stdout=open(log, "wb"), stderr=subprocess.STDOUT, cwd=ROOT,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"lumos serve did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)

    def client(self, who: str | None = "writer") -> LumosClient:
        return LumosClient(self.url, TOKENS[who] if who else None)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def served(request, tmp_path_factory):
    """A materialized project and `lumos serve` on it (the same store URL shapes as tests/test_store)."""
    tmp = tmp_path_factory.mktemp(request.param)
    schema = None
    if request.param == "sqlite":
        url = f"sqlite:///{tmp}/store.db"
    else:
        schema = f"lumos_test_{uuid.uuid4().hex[:10]}"
        admin = sa.create_engine(PG)
        with admin.begin() as conn:
            conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        url = f"{PG}?options=-csearch_path%3D{schema}"
    build_lake(tmp / "lake")
    config = write_config(tmp / "lumos.yaml", tmp / "lake", url, writes=True)
    materialize(config)
    server = Server(config, free_port(), tmp / "serve.log")
    server.config, server.store_url, server.tmp = config, url, tmp
    yield server
    server.stop()
    if schema is not None:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


# ------------------------------------------------------------------ through the SDK


def test_health_needs_no_token(served):
    h = served.client(None).health()
    assert (h.status, h.store, h.writes) == ("ok", "ok", True)


def test_datasets_filter_and_paginate(served):
    with served.client("reader") as c:
        page = c.datasets()
        assert page.total == 3 and [d.name for d in page.items] == ["raw/events", "sales/orders", "sales/summary"]
        assert {d.name: d.version for d in page.items} == {
            "raw/events": "2.0.0",
            "sales/orders": "1.1.0",
            "sales/summary": "1.0.0",
        }
        second = c.datasets(offset=1, limit=1)
        assert (second.total, [d.name for d in second.items]) == (3, ["sales/orders"])
        assert [d.name for d in c.datasets(q="SALES").items] == ["sales/orders", "sales/summary"]
        assert [d.name for d in c.datasets(domain="raw").items] == ["raw/events"]
        assert c.datasets(platform="s3").total == 0
        assert [d.name for d in c.all_datasets(limit=2)] == ["raw/events", "sales/orders", "sales/summary"]


def test_dataset_detail(served):
    with served.client("reader") as c:
        d = c.dataset("sales/orders")
    assert (d.version, d.previous_version, d.change_class, d.partition) == ("1.1.0", "1.0.0", "minor", "2026-11-25")
    assert [f.path for f in d.fields][:1] == ["id"] and "coupon" in [f.path for f in d.fields]
    assert [o.id for o in d.owners] == ["sales"] and d.domain == "sales" and d.policy == "FULL"
    assert d.upstream == ["raw/events"] and d.stats.file_count == 2
    assert d.cost is not None and d.cost.method == "lineage_weighted"
    assert d.snapshot["format_version"] == "lumos.snapshot/1" and d.snapshot["version"] == "1.1.0"
    with served.client("reader") as c:
        events = c.dataset("raw/events")
    assert events.tags == ["pii"] and events.description == "Raw events"


def test_history_diff_impact_fan_out(served):
    with served.client("reader") as c:
        history = c.history("raw/events")
        assert [(v.version, v.captures) for v in history] == [("1.0.0", 2), ("2.0.0", 1)]
        assert [(ch.kind, ch.path, ch.severity) for ch in history[1].changes] == [
            ("FIELD_REMOVED", "status", "BREAKING")
        ]
        diff = c.diff("raw/events", "1.0.0")
        assert not diff.passed and diff.breaking == 1
        assert diff.downstream_affected == ["sales/orders", "sales/summary"]
        assert c.diff("raw/events", "1.0.0", policy="BACKWARD").passed  # a removal: new readers cope
        impact = c.impact("raw/events")
        assert [(a.name, a.depth, a.reached_by) for a in impact.downstream] == [
            ("sales/orders", 1, ["FIELD_REMOVED status"]),
            ("sales/summary", 2, ["FIELD_REMOVED status"]),
        ]
        assert [a.name for a in c.impact("raw/events", depth=1).downstream] == ["sales/orders"]
        assert [(f.dataset, f.downstream) for f in c.fan_out(top=2)] == [("raw/events", 2), ("sales/orders", 1)]


def test_search_cost_export_releases(served):
    with served.client("reader") as c:
        hits = c.search("coupon")
        assert [h.dataset for h in hits] == ["sales/orders"] and "field:coupon" in hits[0].matched
        assert [h.dataset for h in c.search("", owner="ann@example.com")] == ["raw/events"]
        cost = c.cost()
        assert cost.month == "2026-11" and {r.dataset for r in cost.datasets} == {
            "raw/events",
            "sales/orders",
            "sales/summary",
        }
        estate = c.export()
        assert estate["lumos_snapshot_version"] and len(estate["datasets"]) == 3
        assert estate["source"] == "lumos-api"  # not the store's address
        assert isinstance(c.releases(), list)


def test_check_a_proposed_schema_in_each_format(served):
    avro = {"type": "record", "name": "E", "fields": [{"name": "id", "type": ["null", "long"], "default": None},
            {"name": "note", "type": ["null", "string"], "default": None}]}  # fmt: skip
    json_schema = {"type": "object", "properties": {"id": {"type": "integer"},
                   "note": {"type": ["string", "null"]}}}  # fmt: skip
    lumos = [{"name": "id", "type": "int64", "nullable": True}, {"name": "note", "type": "string", "nullable": True}]
    with served.client("checker") as c:
        ddl = "id BIGINT, note STRING"
        for fmt, schema in [("avro", json.dumps(avro)), ("json-schema", json_schema), ("spark-ddl", ddl),
                            ("lumos", {"fields": lumos})]:  # fmt: skip
            verdict = c.check("raw/events", fmt, schema)
            (ds,) = verdict.datasets
            assert ds.old_version == "2.0.0" and (ds.new_version, ds.change_class) == ("2.1.0", "minor"), (fmt, ds)
            assert verdict.passed, (fmt, verdict)
        broken = c.check("sales/orders", "spark-ddl", "id BIGINT")  # user and coupon go
        assert not broken.passed and broken.breaking >= 1 and broken.downstream_affected == ["sales/summary"]
        assert c.check("sales/orders", "spark-ddl", "id BIGINT", policy="BACKWARD").passed
        against = c.check("raw/events", "spark-ddl", "id BIGINT, status STRING", against="1.0.0")
        assert against.passed and against.datasets[0].old_version == "1.0.0"


def test_gate_accept_release_and_the_audit_log(served):
    with served.client("writer") as c:
        gate = c.gate()
        assert not gate.passed and [d.name for d in gate.datasets if d.changes] == ["raw/events", "sales/orders"]
        assert c.gate(datasets=["sales/orders"]).passed
        assert c.gate(since=datetime(2030, 1, 1, tzinfo=timezone.utc)).passed
        a = c.accept("raw/events", "2.0.0", reason="consumers migrated (JIRA-1)", path="status", kind="FIELD_REMOVED")
        assert (a.dataset, a.version, a.accepted_by) == ("raw/events", "2.0.0", "writer")
        after = c.gate(datasets=["raw/events"])
        assert after.passed
        assert after.datasets[0].changes[0].accepted == "accepted by writer: consumers migrated (JIRA-1)"
        # `lumos gate` honours it too
        out = subprocess.run([LUMOS, "gate", "-c", str(served.config), "--datasets", "raw/events"],
                             capture_output=True, text=True, cwd=ROOT)  # fmt: skip
        assert out.returncode == 0, out.stdout + out.stderr
        with pytest.raises(ApiError) as err:
            c.accept("raw/events", "9.0.0", reason="no such version")
        assert err.value.status == 404
        rel = c.release("S-1", ["raw/events", "sales/orders"])
        assert rel.versions == {"raw/events": "2.0.0", "sales/orders": "1.1.0"}
        with pytest.raises(ApiError) as err:
            c.release("S-1")
        assert (err.value.status, err.value.code) == (409, "conflict")
        assert [r.name for r in c.releases()] == ["S-1"]
        assert [v.releases for v in c.history("raw/events")] == [[], ["S-1"]]
    engine = sa.create_engine(served.store_url)
    try:
        log = [(e["principal"], e["action"], e["target"], e["outcome"], e["status"]) for e in audit.entries(engine)]
    finally:
        engine.dispose()
    assert log[-4:] == [
        ("writer", "accept", "raw/events", "ok", 200),
        ("writer", "accept", "raw/events", "not_found", 404),
        ("writer", "release", "/v1/releases", "ok", 200),
        ("writer", "release", "/v1/releases", "conflict", 409),
    ]
    assert not any(token in json.dumps(audit_rows, default=str) for token in TOKENS.values()
                   for audit_rows in [log])  # fmt: skip


# ------------------------------------------------------------------ error paths, by plain HTTP


def _error(response: httpx.Response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and body["error"]["status"] == status and body["error"]["code"] == code, body
    assert body["error"]["request_id"] == response.headers["x-request-id"]
    text = response.text
    assert "Traceback" not in text and 'File "' not in text
    assert not any(t in text for t in TOKENS.values()) and not any(h in text for h in HASHES.values())
    assert "postgres@" not in text and "store.db" not in text
    return body["error"]


def test_error_paths(served):
    url = served.url
    auth = {name: {"Authorization": f"Bearer {t}"} for name, t in TOKENS.items()}
    check = {"format": "spark-ddl", "schema": "id BIGINT"}
    with httpx.Client(base_url=url, timeout=30) as http:
        # no token, a wrong one, a malformed header
        e = _error(http.get("/v1/datasets"), 401, "unauthorized")
        assert "token" in e["message"]
        assert http.get("/v1/datasets").headers["www-authenticate"] == "Bearer"
        _error(
            http.get("/v1/datasets", headers={"Authorization": "Bearer " + TOKENS["reader"] + "x"}), 401, "unauthorized"
        )
        _error(http.get("/v1/datasets", headers={"Authorization": TOKENS["reader"]}), 401, "unauthorized")
        _error(http.get("/v1/datasets", headers={"Authorization": "Bearer " + HASHES["reader"]}), 401, "unauthorized")
        # the wrong scope
        e = _error(http.post("/v1/datasets/raw/events/check", json=check, headers=auth["reader"]), 403, "forbidden")
        assert "'check'" in e["message"]
        _error(http.get("/v1/gate", headers=auth["reader"]), 403, "forbidden")
        _error(http.post("/v1/releases", json={}, headers=auth["checker"]), 403, "forbidden")
        _error(http.post("/v1/datasets/raw/events/acceptances", json={"version": "2.0.0", "reason": "x"},
                         headers=auth["reader"]), 403, "forbidden")  # fmt: skip
        # an oversized body: by its Content-Length, and sent in chunks without one
        big = {"format": "spark-ddl", "schema": "x STRING, " * 1000 + "id BIGINT"}
        e = _error(http.post("/v1/datasets/raw/events/check", json=big, headers=auth["checker"]), 413, "too_large")
        assert "4096 bytes" in e["message"]
        chunks = iter([json.dumps(big).encode()[i : i + 1000] for i in range(0, 12_000, 1000)])
        as_json = {**auth["checker"], "Content-Type": "application/json"}
        _error(http.post("/v1/datasets/raw/events/check", content=chunks, headers=as_json), 413, "too_large")
        # schemas unreadable in their format: a verdict (the document allows the body), not a refusal
        for body, words in [
            ({"format": "spark-ddl", "schema": "id BIGINTEGER"}, "unknown type"),
            ({"format": "avro", "schema": "{not json"}, "not JSON"),
            ({"format": "json-schema", "schema": {"type": "object"}}, "properties"),
            ({"format": "lumos", "schema": [{"name": "a"}]}, "lumos"),
            ({"format": "spark-ddl", "schema": "a " + "STRUCT<b: " * 150 + "INT" + ">" * 150}, "nested deeper"),
        ]:
            verdict = http.post("/v1/datasets/raw/events/check", json=body, headers=auth["checker"])
            assert verdict.status_code == 200 and not verdict.json()["passed"], verdict.text
            (problem,) = verdict.json()["problems"]
            assert words in problem, problem
        # what the document refuses: an unknown format, a body that is not JSON at all
        e = _error(http.post("/v1/datasets/raw/events/check", json={"format": "cobol", "schema": "x"},
                             headers=auth["checker"]), 422, "invalid")  # fmt: skip
        assert "format" in e["message"] and "cobol" not in e["message"]  # the input is not echoed
        _error(http.post("/v1/datasets/raw/events/check", content=b"{oops", headers={**auth["checker"],
               "Content-Type": "application/json"}), 422, "invalid")  # fmt: skip
        # unknown datasets, versions, paths
        e = _error(http.get("/v1/datasets/no/such", headers=auth["reader"]), 404, "not_found")
        assert "unknown dataset" in e["message"]
        _error(http.get("/v1/datasets/no/such/history", headers=auth["reader"]), 404, "not_found")
        _error(http.post("/v1/datasets/no/such/check", json=check, headers=auth["checker"]), 404, "not_found")
        e = _error(http.get("/v1/datasets/raw/events/diff?old=7.0.0", headers=auth["reader"]), 404, "not_found")
        assert "known versions: 1.0.0, 2.0.0" in e["message"]
        _error(http.get("/v2/nothing", headers=auth["reader"]), 404, "not_found")
        _error(http.get("/v1/cost?month=garbage", headers=auth["reader"]), 422, "invalid")
        _error(http.delete("/v1/releases", headers=auth["writer"]), 405, "method_not_allowed")


def test_openapi_document_is_committed_and_served(served):
    committed = json.loads((ROOT / "docs" / "openapi.json").read_text())
    served_doc = httpx.get(f"{served.url}/openapi.json", headers={"Authorization": f"Bearer {TOKENS['reader']}"},
                           timeout=10).json()  # fmt: skip
    assert served_doc == committed, "docs/openapi.json is stale: lumos serve --openapi > docs/openapi.json"


def test_writes_are_refused_when_disabled_and_audited(served, tmp_path):
    config = yaml.safe_load(served.config.read_text())
    config["api"]["writes"] = False
    path = tmp_path / "lumos.yaml"
    path.write_text(yaml.safe_dump(config))
    server = Server(path, free_port(), tmp_path / "serve.log")
    try:
        with server.client("writer") as c:
            assert c.health().writes is False
            with pytest.raises(ApiError) as err:
                c.release("S-99")
            assert (err.value.status, err.value.code) == (403, "writes_disabled")
            with pytest.raises(ApiError) as err:
                c.accept("raw/events", "2.0.0", reason="x")
            assert err.value.code == "writes_disabled"
            assert "S-99" not in [r.name for r in c.releases()]
            assert c.dataset("raw/events").version == "2.0.0"  # reads go on
    finally:
        server.stop()
    engine = sa.create_engine(served.store_url)
    try:
        log = [(e["principal"], e["action"], e["outcome"], e["status"]) for e in audit.entries(engine)]
    finally:
        engine.dispose()
    assert log[-2:] == [("writer", "release", "refused", 403), ("writer", "accept", "refused", 403)]


# ------------------------------------------------------------------ parts


def test_token_hashes():
    token = new_token()
    stored = hash_token(token)
    assert stored.startswith(f"scrypt-id$16384$8$1${token_id(token)}$") and token.split(".")[1] not in stored
    assert verify(token, stored) and not verify(token + "x", stored)
    mine = hash_token("s3cret")  # a token of one's own, without an id
    assert mine.startswith("scrypt$16384$8$1$") and verify("s3cret", mine) and hash_token("s3cret") != mine  # salted
    with pytest.raises(ValueError):
        parse_hash("sha256:abcd")
    with pytest.raises(ValueError):
        parse_hash("scrypt$2$8$1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5a2V5")  # N too small
    check = TokenVerifier([ApiToken(name="ci", hash=stored, scopes=["read", "check"])])
    assert check(token).name == "ci" and check(token).scopes == {"read", "check"}
    assert check("nope") is None and check(None) is None and check("x" * 10_000) is None


def test_serve_hash_token_and_openapi_commands():
    out = subprocess.run([LUMOS, "serve", "--hash-token"], input="s3cret\n", capture_output=True, text=True)
    assert out.returncode == 0 and verify("s3cret", out.stdout.strip())
    out = subprocess.run([LUMOS, "serve", "--new-token"], capture_output=True, text=True)
    token = out.stdout.split("token: ")[1].split()[0]
    assert verify(token, out.stdout.split("hash:  ")[1].split()[0])


@pytest.mark.parametrize(
    "fmt, text, fields",
    [
        ("spark-ddl", "id BIGINT NOT NULL, `a b` DECIMAL(10,2) COMMENT 'x', m MAP<STRING, ARRAY<INT>>",
         [("id", "int64", False), ("a b", "decimal(10,2)", True), ("m", "map<string, array<int32>>", True)]),
        ("spark-ddl", "s STRUCT<x: TIMESTAMP_NTZ, y: VARCHAR(3)>",
         [("s", "struct<x: timestamp(us), y: string>", True)]),
        ("json-schema", {"type": "object", "required": ["d"], "properties": {"d": {"type": "string", "format": "date"},
                         "t": {"type": "array", "items": {"type": "string"}}}},
         [("d", "date", False), ("t", "array<string>", True)]),
        ("avro", {"type": "record", "name": "r", "fields": [{"name": "n", "type": "int"}]}, [("n", "int32", False)]),
    ],
)  # fmt: skip
def test_proposed_schemas(fmt, text, fields):
    from lumos_dagster.floor.datatypes import type_str

    schema = parse_proposal(fmt, text)
    assert [(f.name, type_str(f.type), f.nullable) for f in schema.fields] == fields


@pytest.mark.parametrize(
    "fmt, text",
    [("spark-ddl", ""), ("spark-ddl", "a INT,"), ("spark-ddl", "a INT, a INT"), ("avro", "[]"), ("json-schema", "{}"),
     ("lumos", "{}"), ("xml", "<a/>")],
)  # fmt: skip
def test_malformed_proposals(fmt, text):
    with pytest.raises(ProposalError):
        parse_proposal(fmt, text)


def test_the_api_imports_neither_dagster_nor_spark():
    code = (
        "import sys, lumos_dagster.api.app, lumos_dagster.client, lumos_dagster.cli.serve; "
        "print([m for m in sys.modules if m.split('.')[0] in ('dagster', 'pyspark')])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert out.stdout.strip() == "[]", out.stderr


# ------------------------------------------------------------------ hostile requests (docs/reliability.md)

HOSTILE_TIMEOUT = 3
#: 16 tokens: the three of TOKENS and 13 more
MORE_TOKENS = [new_token() for _ in range(13)]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """`lumos serve` with 16 tokens, writes off, a 3 s deadline, on datasets whose names look like the API's
    paths: `sales`, `sales/history`, `sales/orders`."""
    from lumos_dagster.floor.datatypes import Field as F
    from lumos_dagster.floor.datatypes import Primitive
    from lumos_dagster.floor.datatypes import Schema as S
    from lumos_dagster.floor.model import DatasetRecord, DatasetRef, Snapshot
    from lumos_dagster.run.record import store_versioned

    tmp = tmp_path_factory.mktemp("hostile")
    (tmp / "lake").mkdir()
    url = f"sqlite:///{tmp}/store.db"
    names = ["sales", "sales/history", "sales/orders"]
    with SnapshotStore(url) as store:
        store.upsert_datasets(DatasetRecord(n, "file", "lake", n, "parquet") for n in names)
        for day, fields in enumerate([("id",), ("id", "note")]):
            store_versioned(store, [
                Snapshot(DatasetRef("file", n, n, "parquet"), f"2026-11-0{day + 1}",
                         datetime(2026, 11, day + 1, tzinfo=timezone.utc),
                         schema=S(tuple(F(f, Primitive("int64")) for f in fields)))
                for n in names
            ])  # fmt: skip
    tokens = [{"name": n, "hash": HASHES[n], "scopes": SCOPES[n]} for n in TOKENS]
    tokens += [{"name": f"other{i}", "hash": hash_token(t), "scopes": ["read"]} for i, t in enumerate(MORE_TOKENS)]
    config = {
        "sources": [{"name": "lake", "root": str(tmp / "lake")}],
        "store": {"url": url},
        "api": {"writes": False, "tokens": tokens,
                "limits": {"request_timeout": HOSTILE_TIMEOUT, "max_fields": 2000}},
    }  # fmt: skip
    (tmp / "lumos.yaml").write_text(yaml.safe_dump(config))
    server = Server(tmp / "lumos.yaml", free_port(), tmp / "serve.log")
    server.store_url = url
    yield server
    server.stop()


def _audit_rows(url: str) -> int:
    engine = sa.create_engine(url)
    try:
        return len(audit.entries(engine, limit=1_000_000))
    finally:
        engine.dispose()


def _counting_scrypt(monkeypatch) -> list:
    calls = []
    real = auth._scrypt

    def counted(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(auth, "_scrypt", counted)
    return calls


def test_a_wrong_token_costs_no_hash_check_whatever_the_number_of_tokens(monkeypatch):
    """It used to cost one scrypt per configured token: 0.87 s of CPU with 16 tokens."""
    tokens = [new_token() for _ in range(16)]
    verifier = TokenVerifier([ApiToken(name=f"t{i}", hash=hash_token(t)) for i, t in enumerate(tokens)])
    calls = _counting_scrypt(monkeypatch)
    for wrong in [new_token(), new_token(), "lumos_" + "x" * 43, "nope", "Bearer " + tokens[0]]:
        assert verifier(wrong) is None
    assert len(calls) == 0
    assert verifier(tokens[3][:-2] + "xx") is None and len(calls) == 1  # its id is known: that hash only
    assert verifier(tokens[3]).name == "t3" and len(calls) == 2
    assert verifier(tokens[3]).name == "t3" and len(calls) == 2  # remembered


def test_tokens_without_an_id_still_work_and_their_failed_checks_are_rationed(monkeypatch):
    mine = [f"s3cret-{i}" for i in range(4)]  # `--hash-token` of tokens of one's own: no id
    verifier = TokenVerifier([ApiToken(name=f"old{i}", hash=hash_token(t)) for i, t in enumerate(mine)],
                             burst=8, per_second=0.001)  # fmt: skip
    calls = _counting_scrypt(monkeypatch)
    assert verifier(mine[2]).name == "old2" and len(calls) == 3  # a good token's checks are not failures
    assert verifier("guess-1") is None and verifier("guess-2") is None and len(calls) == 3 + 8
    with pytest.raises(Throttled):
        verifier("guess-3")
    assert len(calls) == 11  # refused without hashing
    assert verifier(mine[2]).name == "old2" and len(calls) == 11  # a token verified before still gets in
    assert verifier(new_token()) is None and len(calls) == 11  # an unknown id needs no check at all


def test_a_request_without_a_valid_token_writes_nothing_to_the_store(served, hostile):
    """Every POST to a write endpoint without a token used to add an audit row, even with `writes: false`."""
    accept = {"version": "2.0.0", "reason": "x" * 1000}
    for server in (served, hostile):  # writes on (a writer exists), writes off
        before = _audit_rows(server.store_url)
        with httpx.Client(base_url=server.url, timeout=30) as http:
            for headers in ({}, {"Authorization": f"Bearer {new_token()}"}, {"Authorization": "Bearer nope"},
                            {"Authorization": f"Basic {TOKENS['writer']}"}):  # fmt: skip
                _error(http.post("/v1/releases", json={"name": "S-anon"}, headers=headers), 401, "unauthorized")
                for path in ("/v1/dataset/acceptances?name=sales/orders", "/v1/datasets/sales/orders/acceptances"):
                    _error(http.post(path, json=accept, headers=headers), 401, "unauthorized")
        assert _audit_rows(server.store_url) == before
    with hostile.client("writer") as c, pytest.raises(ApiError):  # a token's refusal is still audited
        c.release("S-1")
    assert _audit_rows(hostile.store_url) == before + 1


def test_every_dataset_is_reachable_whatever_its_name(hostile):
    """`GET /v1/datasets/sales/history` was the history of `sales`: the dataset `sales/history` was out of
    reach, `%2F` included."""
    with hostile.client("checker") as c:
        assert c.dataset("sales/history").name == "sales/history"
        assert c.dataset("sales").name == "sales"
        assert [v.version for v in c.history("sales")] == ["1.0.0", "1.1.0"]
        assert [v.version for v in c.history("sales/history")] == ["1.0.0", "1.1.0"]
        assert c.impact("sales/history").dataset == "sales/history"
        assert c.diff("sales/history", "1.0.0").datasets[0].name == "sales/history"
        assert c.check("sales/history", "spark-ddl", "id BIGINT, note BIGINT").datasets[0].name == "sales/history"
    auth_ = {"Authorization": f"Bearer {TOKENS['checker']}"}
    with httpx.Client(base_url=hostile.url, headers=auth_, timeout=30) as http:
        # the former paths, where they are unambiguous
        assert http.get("/v1/datasets/sales/orders").json()["name"] == "sales/orders"
        assert [v["version"] for v in http.get("/v1/datasets/sales/orders/history").json()] == ["1.0.0", "1.1.0"]
        assert http.get("/v1/datasets/sales/impact").json()["dataset"] == "sales"
        assert http.get("/v1/datasets/sales/orders/diff", params={"old": "1.0.0"}).json()["passed"] is not None
        body = {"format": "spark-ddl", "schema": "id BIGINT, note BIGINT"}
        assert http.post("/v1/datasets/sales/history/check", json=body).json()["datasets"][0]["name"] == "sales/history"
        # and where they are not: both `sales/history` and the history of `sales` would answer
        for path in ("/v1/datasets/sales/history", "/v1/datasets/sales%2Fhistory"):
            e = _error(http.get(path), 409, "ambiguous")
            assert "/v1/dataset?name=" in e["message"]


def test_only_health_answers_without_a_token_and_head_health_is_200(hostile):
    with httpx.Client(base_url=hostile.url, timeout=30) as http:
        head = http.head("/health")
        assert head.status_code == 200 and head.content == b""
        assert http.get("/health").json()["status"] == "ok"
        for path in ("/docs", "/openapi.json", "/redoc", "/v1/datasets"):
            _error(http.get(path), 401, "unauthorized")
        reader = {"Authorization": f"Bearer {TOKENS['reader']}"}
        assert http.get("/openapi.json", headers=reader).json()["info"]["title"] == "Lumos API"
        docs = http.get("/docs", headers=reader)
        assert docs.status_code == 404 and "cdn" not in docs.text  # no page that loads scripts from a CDN


def test_error_bodies_never_echo_the_input(hostile):
    auth_ = {"Authorization": f"Bearer {TOKENS['checker']}"}
    check = "/v1/dataset/check?name=sales"
    with httpx.Client(base_url=hostile.url, headers=auth_, timeout=30) as http:
        for body, words in [
            ({"format": "json-schema", "schema": {"type": "object", "properties": {"a": {"type": "SECRETVALUE123"}}}},
             "unknown type"),
            ({"format": "spark-ddl", "schema": "id BIGINT, a SECRETVALUE123"}, "at token 5"),
            ({"format": "lumos", "schema": [{"name": "a", "type": "int64"}]}, "not a valid schema"),
            ({"format": "json-schema", "schema": {"type": "object", "properties": {"a": {"type": "string"}},
                                                  "required": 5}}, "not a valid schema"),
            ({"format": "spark-ddl", "schema": "id BIGINT", "SECRETVALUE123": 1}, "unknown field"),
        ]:  # fmt: skip
            answer = http.post(check, json=body)  # a verdict on a schema that does not read, a refusal of a key
            said = (
                _error(answer, 422, "invalid")["message"] if answer.status_code == 422 else answer.json()["problems"][0]
            )
            assert words in said, said
            for echo in ("secretvalue123", "keyerror", "typeerror", "not iterable", "'nullable'"):
                assert echo not in said.lower(), said
        avro = {"type": "record", "name": "r", "fields": [{"name": "a", "type": "SECRETVALUE123"}]}
        assert "SECRETVALUE123" not in http.post(check, json={"format": "avro", "schema": avro}).text
        for response in [
            http.get("/v1/dataset", params={"name": "../../etc/passwd"}),
            http.get("/v1/datasets/..%2F..%2Fetc%2Fpasswd"),
            http.get("/v1/dataset/history", params={"name": "../../etc/passwd"}),
            http.get("/v1/gate", params={"datasets": "sales,../../etc/passwd"}),
            http.get("/v1/dataset/diff", params={"name": "sales", "old": "passwd"}),
        ]:
            e = _error(response, 404, "not_found")
            assert "passwd" not in e["message"] and ("unknown dataset" in e["message"] or "version" in e["message"])


def test_work_in_a_worker_process_is_killed_at_its_deadline():
    assert limits.call(parse_proposal, "spark-ddl", "id BIGINT", at=time.monotonic() + 30).fields[0].name == "id"
    with pytest.raises(ProposalError):  # its exceptions are raised here
        limits.call(parse_proposal, "spark-ddl", "", at=time.monotonic() + 30)
    start = time.monotonic()
    with pytest.raises(limits.Expired):  # exponential backtracking: minutes of CPU in one C call
        limits.call(re.match, "(a*)*b", "a" * 40, at=start + 1)
    assert time.monotonic() - start < 5
    from multiprocessing import forkserver

    workers = forkserver._forkserver._forkserver_pid
    before = _tree(workers)
    time.sleep(0.5)
    assert sum(cpu - before.get(pid, 0.0) for pid, cpu in _tree(workers).items()) < 0.1  # nothing computes on
    assert limits.call(parse_proposal, "spark-ddl", "id BIGINT", at=time.monotonic() + 30).fields


def test_a_worker_that_overruns_ends_by_itself_even_if_nobody_kills_it():
    """What bounds the work if the server is killed mid-call: the worker's own CPU limit."""
    limits.start()
    worker = limits._Worker()
    worker.conn.send((re.match, ("(a*)*b", "a" * 40), 1.0))
    worker.process.join(10)
    assert not worker.process.is_alive()
    worker.stop()


def _processes() -> dict[int, tuple[int, float]]:
    """pid → (parent pid, CPU seconds), from /proc."""
    tick, out = os.sysconf("SC_CLK_TCK"), {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out[int(d.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    return out


def _tree(pid: int) -> dict[int, float]:
    """pid and its live descendants → CPU seconds each."""
    procs, found, todo = _processes(), {}, [pid]
    while todo:
        p = todo.pop()
        if p in procs:
            found[p] = procs[p][1]
            todo += [c for c, (parent, _) in procs.items() if parent == p]
    return found


def test_a_check_past_its_deadline_stops_there_and_health_stays_fast(hostile):
    """Eight 470 KB DDL checks kept a core busy for 2 minutes after their 504s, and /health took 9 s."""
    ddl = ", ".join(f"c{i} STRING" for i in range(40_000))
    avro: dict = {"type": "record", "name": "L0", "fields": [{"name": "x", "type": "long"}]}
    for level in range(1, 6):  # each named record used ten times per level: 10^5 fields expanded
        avro = {"type": "record", "name": f"L{level}", "fields": [{"name": "f0", "type": avro}]
                + [{"name": f"f{i}", "type": f"L{level - 1}"} for i in range(1, 10)]}  # fmt: skip
    bodies = [{"format": "spark-ddl", "schema": ddl}] * 6 + [{"format": "avro", "schema": avro}] * 2
    auth_ = {"Authorization": f"Bearer {TOKENS['checker']}"}

    def post(body):
        start = time.monotonic()
        r = httpx.post(f"{hostile.url}/v1/dataset/check?name=sales", json=body, headers=auth_, timeout=60)
        return r.status_code, time.monotonic() - start

    from concurrent.futures import ThreadPoolExecutor

    health = []
    with ThreadPoolExecutor(len(bodies)) as pool:
        answers = [pool.submit(post, b) for b in bodies]
        while not all(a.done() for a in answers):
            start = time.monotonic()
            assert httpx.get(f"{hostile.url}/health", timeout=30).status_code == 200
            health.append(time.monotonic() - start)
            time.sleep(0.05)
    answered = time.monotonic()
    results = [a.result() for a in answers]
    assert all(status in (200, 504) and took < HOSTILE_TIMEOUT + 1 for status, took in results), results
    assert max(health) < 1.0, sorted(health)[-5:]  # generous: 9 s before
    time.sleep(max(0.0, answered + 1 - time.monotonic()))  # the work may outlive its deadline by 1 s at most
    before = _tree(hostile.proc.pid)
    time.sleep(1.0)
    after = _tree(hostile.proc.pid)
    busy = sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())
    assert busy < 0.3, f"the server still computes: {busy:.2f} s of CPU in 1 s"
    assert len(after) <= 3 + (os.cpu_count() or 1), after  # the server, its fork server and tracker, idle workers


def test_a_proposed_schema_with_too_many_fields_is_refused(hostile):
    with hostile.client("checker") as c:
        assert c.check("sales", "spark-ddl", ", ".join(f"c{i} INT" for i in range(2000))).datasets
        verdict = c.check("sales", "spark-ddl", "s STRUCT<" + ", ".join(f"c{i}: INT" for i in range(2000)) + ">")
    assert not verdict.passed and "more than 2000 fields" in verdict.problems[0]
