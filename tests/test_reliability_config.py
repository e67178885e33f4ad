"""Issue 14, configuration and secrets: every bad lumos.yaml is a one-line error naming the file
and key, owners Dagster rejects stay out of Dagster, CSV cells never run as formulas, and no
password or token of a run ends up in any output, file or catalog record."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import time
import uuid
from datetime import date
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
import yaml

from lumos_dagster.config import load_config, parse_config
from lumos_dagster.errors import ConfigError, StoreError
from lumos_dagster.plugins import mask_secrets
from lumos_dagster.report import ScanReport
from lumos_dagster.reports.cost import CostReport, Row, to_csv
from lumos_dagster.reports.csvsafe import cell
from lumos_dagster.reports.render import to_csv_files
from lumos_dagster.sources.registry import SOURCES
from lumos_dagster.store import SnapshotStore
from tests.fake_servers import FakeGMS, FakeOpenLineage
from tests.lake import partitioned_lake, register

pytestmark = [pytest.mark.dagster, pytest.mark.servers, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
BIN = ROOT / ".venv" / "bin"
PG = "postgresql://postgres@127.0.0.1:5432/test"

# ------------------------------------------------------------------ config errors

BAD = [
    ("empty dataset name", {"datasets": [{"name": ""}]}, "datasets[0].name: String should have at least 1 character"),
    (
        "empty owner",
        {"datasets": [{"name": "a", "owners": [""]}]},
        "datasets[0].owners[0].id: String should have at least 1 character",
    ),
    (
        "cyclic upstream",
        {"datasets": [{"name": "x"}, {"name": "a", "upstream": ["b"]}, {"name": "b", "upstream": ["x", "a"]}]},
        "datasets[1].upstream: lineage has a cycle: a → b → a",
    ),
    ("empty root", {"sources": [{"root": ""}]}, "sources[0].root: empty: name a folder (`.` is the folder of"),
    (
        "malformed libpq DSN",
        {"sources": [{"type": "postgres", "dsn": "host=db port"}]},
        "sources[0].dsn: not a libpq connection string (`host=… dbname=…`) or URL (`postgresql://…`)",
    ),
    (
        "unknown libpq option",
        {"sources": [{"type": "postgres", "dsn": "postgresql://u:pw@db/app?bogus=1"}]},
        "sources[0].dsn: not a libpq connection string",
    ),
]


@pytest.mark.parametrize("title,data,message", BAD, ids=[b[0] for b in BAD])
def test_bad_values_are_errors_naming_the_key(title, data, message):
    with pytest.raises(ConfigError) as err:
        parse_config(data, file="conf/lumos.yaml", env={})
    assert str(err.value).startswith(f"conf/lumos.yaml: invalid configuration:\n  {message}")


def test_a_dsn_kept_in_a_variable_is_checked_when_read():
    cfg = parse_config({"sources": [{"type": "postgres", "dsn": "${PG_DSN}"}]}, env={})
    assert cfg.sources[0].dsn == "${PG_DSN}"


def _bomb(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + f"\ndatasets:\n  - name: x\n    tags: *a{levels - 1}\n"


BAD_FILES = [
    ("not UTF-8", b"sources:\n  - root: caf\xe9\n", "lumos.yaml: line 2: not UTF-8 text (byte 0xe9): save it as UTF-8"),
    (
        "duplicate top-level key",
        b"sources:\n  - root: a\ndatasets: []\nsources: []\n",
        "lumos.yaml: line 4, column 1: not valid YAML: duplicate key 'sources' (lines 1 and 4)",
    ),
    (
        "duplicate nested key",
        b"datasets:\n  - name: a\n    sla: 1d\n    name: b\n",
        "lumos.yaml: line 4, column 5: not valid YAML: duplicate key 'name' (lines 2 and 4)",
    ),
    (
        "alias bomb",
        _bomb().encode(),
        "lumos.yaml: line 1, column 1: not valid YAML: its aliases expand it to over 100,0",
    ),
]


@pytest.mark.parametrize("title,content,message", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_bad_files_are_one_line_errors(tmp_path, title, content, message):
    path = tmp_path / "lumos.yaml"
    path.write_bytes(content)
    started = time.monotonic()
    with pytest.raises(ConfigError) as err:
        load_config(str(path))
    assert time.monotonic() - started < 2  # an alias bomb is refused, not expanded
    assert str(err.value).startswith(f"{tmp_path}/{message}")
    assert "\n" not in str(err.value)


def test_a_config_path_that_is_a_folder(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_config(str(tmp_path))
    assert str(err.value) == f"{tmp_path}: is a folder, not a configuration file"


def test_anchors_aliases_and_merge_keys_still_work(tmp_path):
    path = tmp_path / "lumos.yaml"
    path.write_text(
        "x-owners: &owners [ann@example.com]\n"
        "x-base: &base {domain: sales, owners: *owners}\n"
        "datasets:\n"
        "  - {<<: *base, name: a}\n"
        "  - {<<: *base, name: b, domain: ops}\n"
    )
    with pytest.raises(ConfigError, match="x-owners: unknown key"):  # anchors need a home lumos.yaml knows
        load_config(str(path))
    path.write_text(
        "datasets:\n"
        "  - &base {name: a, domain: sales, owners: [ann@example.com], tags: [core]}\n"
        "  - {<<: *base, name: b, domain: ops}\n"
    )
    a, b = load_config(str(path)).datasets
    assert (a.domain, b.domain, b.owners[0].id, b.tags) == ("sales", "ops", "ann@example.com", ["core"])


def test_a_root_that_is_a_file_is_reported_as_such(tmp_path):
    (tmp_path / "lake").write_text("not a folder")
    cfg = parse_config({"sources": [{"root": "lake"}]}, base_dir=str(tmp_path))
    source = SOURCES.get("local").build(cfg.sources[0], _context(tmp_path))
    report = ScanReport()
    assert not source.reachable(report)
    assert report.failures == [("source local", f"root folder {tmp_path}/lake is a file, not a folder")]


def _context(tmp_path):
    from lumos_dagster.plugins import BuildContext

    return BuildContext("lumos.yaml: sources[0]", str(tmp_path))


# ------------------------------------------------------------------ owners


def test_owners_dagster_rejects_stay_in_the_catalog_and_the_code_location_loads(tmp_path):
    from lumos_dagster.definitions import build_definitions

    for name in ("raw/orders", "raw/users"):
        partitioned_lake(tmp_path / "lake", name, days=1, files_per_day=1)
    owners = ["bob@localhost", "jürgen@exämple.com", "ann@example.com", "bob", "group:data-eng", "team:ops"]
    (tmp_path / "lumos.yaml").write_text(
        yaml.safe_dump(
            {
                "sources": [{"name": "lake", "root": "lake"}],
                "datasets": [{"name": "raw/orders", "owners": owners}, {"name": "raw/users", "owners": ["bob"]}],
                "store": {"path": "store.db"},
                "catalog": {"path": "catalog.db"},
            },
            allow_unicode=True,
        )
    )
    cfg = load_config(str(tmp_path / "lumos.yaml"))
    register(cfg)
    graph = build_definitions(cfg).resolve_asset_graph()
    assert graph.get(_key("raw/orders")).owners == ["ann@example.com", "team:data-eng", "team:ops"]
    assert graph.get(_key("raw/users")).owners == []
    # the catalog gets every owner as written
    assert [o.id for o in cfg.declaration("raw/orders").owners] == owners[:4] + ["data-eng", "team:ops"]


def _key(name: str):
    from dagster import AssetKey

    return AssetKey(name.split("/"))


# ------------------------------------------------------------------ CSV


@pytest.mark.parametrize(
    "value,written",
    [
        ("=1+1", "'=1+1"),
        ("+1+1", "'+1+1"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1:A2)", "'@SUM(A1:A2)"),
        ("\t=1+1", "'\t=1+1"),
        ("\r=1+1", "'\r=1+1"),
        ("-3.5", "-3.5"),
        ("+1e3", "+1e3"),
        ("a=1+1", "a=1+1"),
        ("ann@example.com", "ann@example.com"),
        (-4, -4),
        (None, None),
    ],
)
def test_csv_cells_never_start_a_formula(value, written):
    assert cell(value) == written


def test_the_cost_and_overview_csvs_neutralize_formulas(tmp_path):
    row = Row(inherited=0.0, dataset="=HYPERLINK(\"http://x\")", owners=("=1+1",), domain="@d",
              platform="file", storage=1.0, compute=0.0, consumers=0, basis="-x")  # fmt: skip
    (got,) = list(csv.reader(io.StringIO(to_csv(CostReport("2026-11", "USD", [row])))))[1:]
    assert got[1:5] == ['\'=HYPERLINK("http://x")', "'=1+1", "'@d", "file"] and got[-1] == "'-x"
    overview = {
        "inventory": {"by_team": {"=1+1": 2}},
        "coverage": {},
        **{s: [] for s in ("stale", "changes_this_week", "risky")},
        "unowned": [{"dataset": "=SUM(1,2)", "platform": "file", "domain": "+x"}],
        "downstream": {},
    }
    to_csv_files(overview, tmp_path)
    assert _rows(tmp_path / "unowned.csv")[1] == ["'=SUM(1,2)", "file", "'+x"]
    assert ["team", "'=1+1", "2"] in _rows(tmp_path / "inventory.csv")


def _rows(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


# ------------------------------------------------------------------ secrets


def test_mask_secrets_hides_passwords_and_tokens_and_nothing_else():
    cases = {
        "postgresql+psycopg://postgres:pa@ss@db:5432/test": "postgresql+psycopg://postgres:***@db:5432/test",
        "cannot open the snapshot store at mysql://u:pw@h/x: refused": "cannot open the snapshot store at "
        "mysql://u:***@h/x: refused",
        "host=db user=u password='a b\\' c' dbname=x": "host=db user=u password=*** dbname=x",
        "postgresql://db/x?sslmode=require&password=pw&application_name=a": "postgresql://db/x?sslmode=require&"
        "password=***&application_name=a",
        "https://gms/?token=abc": "https://gms/?token=***",
        "sqlite:////srv/lumos/store.db": "sqlite:////srv/lumos/store.db",
        "postgresql://${USER}:${PW}@db/x": "postgresql://${USER}:***@db/x",
        "mailto:ann@example.com and bob@localhost": "mailto:ann@example.com and bob@localhost",
    }
    assert {text: mask_secrets(text) for text in cases} == cases


def test_a_store_that_cannot_open_never_shows_its_password_and_says_why_in_one_line():
    url = "postgresql+psycopg://postgres:hunter2@127.0.0.1:1/test"
    with pytest.raises(StoreError) as err:
        SnapshotStore(url)
    assert "hunter2" not in str(err.value)
    assert "\n" not in str(err.value) and "Connection refused" in str(err.value)
    assert str(err.value).startswith("cannot open the snapshot store at postgresql+psycopg://postgres:***@127.0.0.1:1/")


@pytest.fixture
def pg_schemas():
    """Three fresh schemas: the store's and two sources' (a table each)."""
    names = [f"lumos_secret_{uuid.uuid4().hex[:8]}" for _ in range(3)]
    with psycopg.connect(PG, autocommit=True) as conn:
        for i, name in enumerate(names):
            conn.execute(f"CREATE SCHEMA {name}")
            if i:
                conn.execute(f"CREATE TABLE {name}.accounts (id int PRIMARY KEY, holder text)")
    yield names
    with psycopg.connect(PG, autocommit=True) as conn:
        for name in names:
            conn.execute(f"DROP SCHEMA {name} CASCADE")


def test_no_secret_of_a_run_ends_up_in_any_output_file_or_catalog_record(tmp_path, pg_schemas):
    """A run with a credential in every place lumos.yaml takes one — written out, and through
    `${VAR}` — discovered, materialized through Dagster, synced, exported and reported; then every
    output, every file and every catalog record is searched for them."""
    store_schema, url_schema, kv_schema = pg_schemas
    tag = uuid.uuid4().hex[:6]
    written = {"store": f"StorePw{tag}", "pg_kv": f"PgKvPw{tag}"}  # in lumos.yaml as they are
    from_env = {  # in the environment, named in lumos.yaml
        "LUMOS_TEST_PG_PW": f"PgEnvPw{tag}",
        "LUMOS_TEST_STORE_USER": "postgres",
        "LUMOS_TEST_GMS_TOKEN": f"GmsToken{tag}",
        "LUMOS_TEST_OL_KEY": f"OlKey{tag}",
    }
    secrets = {*written.values(), *(v for k, v in from_env.items() if k != "LUMOS_TEST_STORE_USER")}
    gms, lineage = FakeGMS(token=from_env["LUMOS_TEST_GMS_TOKEN"]).start(), FakeOpenLineage().start()
    lineage.token = from_env["LUMOS_TEST_OL_KEY"]
    work = tmp_path / "project"
    partitioned_lake(work / "lake", "raw/orders", days=1, start=date(2026, 11, 25), files_per_day=1)
    config = {
        "sources": [
            {"name": "lake", "root": "lake"},
            {
                "type": "postgres",
                "name": "pg_url",
                "schemas": [url_schema],
                "dsn": "postgresql://postgres:${LUMOS_TEST_PG_PW}@127.0.0.1:5432/test",
            },
            {
                "type": "postgres",
                "name": "pg_kv",
                "schemas": [kv_schema],
                "dsn": f"host=127.0.0.1 port=5432 dbname=test user=postgres password={written['pg_kv']}",
            },
        ],  # fmt: skip
        "store": {
            "url": f"postgresql+psycopg://${{LUMOS_TEST_STORE_USER}}:{written['store']}@127.0.0.1:5432/test"
            f"?options=-csearch_path%3D{store_schema}"
        },
        "catalog": [
            {"type": "datahub-lite", "path": "catalog.db"},
            {"type": "datahub-rest", "server": gms.url, "token_env": "LUMOS_TEST_GMS_TOKEN", "retries": 0},
            {"type": "openlineage", "url": lineage.url, "api_key_env": "LUMOS_TEST_OL_KEY"},
        ],
        "reports": {"dir": "reports"},
        "partitions": {"start": "2026-11-25"},
    }
    work.mkdir(exist_ok=True)
    (work / "lumos.yaml").write_text(yaml.safe_dump(config))
    broken = {**config, "store": {"url": f"postgresql+psycopg://postgres:{written['store']}@127.0.0.1:1/test"}}
    (work / "broken.yaml").write_text(yaml.safe_dump(broken))
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text())
    env = {**os.environ, **from_env, "LUMOS_CONFIG": str(work / "lumos.yaml"), "DAGSTER_HOME": str(home),
           "PYTHONPATH": str(ROOT)}  # fmt: skip
    outputs = []

    def run(*args, ok=True):
        out = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env, cwd=work, timeout=600)
        assert (out.returncode == 0) == ok, out.stdout[-3000:] + out.stderr[-3000:]
        outputs.append(f"$ {' '.join(map(str, args))}\n{out.stdout}\n{out.stderr}")
        return out.stdout

    try:
        run(BIN / "lumos", "discover")
        run(BIN / "dagster", "asset", "materialize", "-m", "lumos_dagster.definitions", "--select", "*",
            "--partition", "2026-11-25")  # fmt: skip
        run(BIN / "lumos", "sync")
        run(BIN / "lumos", "sync", "--status")
        exported = run(BIN / "lumos", "export", "-o", work / "estate.json")
        run(BIN / "lumos", "summary")
        run(BIN / "lumos", "cost", "--format", "csv")
        run(BIN / "lumos", "report")
        failed = run(BIN / "lumos", "summary", "-c", work / "broken.yaml", ok=False)
    finally:
        gms.stop(), lineage.stop()
    assert "from store:postgresql+psycopg://${LUMOS_TEST_STORE_USER}:***@127.0.0.1:5432/test" in exported
    assert "cannot open the snapshot store at postgresql+psycopg://postgres:***@127.0.0.1:1/test" in outputs[-1]
    assert failed == ""
    assert {p.name for p in (work / "reports").rglob("*")} >= {"overview.html", "overview.xlsx"}
    assert gms.requests and lineage.events  # the catalogs were written to

    records = {"gms": json.dumps(gms.requests), "openlineage": json.dumps(lineage.events)}
    records["store"] = _dump_schema(store_schema)
    configs = {work / "lumos.yaml", work / "broken.yaml"}  # hold the written secrets by design
    for path in [p for base in (work, home) for p in base.rglob("*") if p.is_file() and p not in configs]:
        records[str(path)] = _text(path)
    records.update({f"output {i}": text for i, text in enumerate(outputs)})
    leaks = {(where, s) for where, text in records.items() for s in secrets if s in text}
    assert not leaks
    assert any(f"test/{url_schema}/accounts" in text for text in records.values())  # what was searched holds the run


def _dump_schema(schema: str) -> str:
    engine = sa.create_engine(f"postgresql+psycopg://postgres@127.0.0.1:5432/test?options=-csearch_path%3D{schema}")
    try:
        with engine.connect() as conn:
            tables = sa.inspect(conn).get_table_names()
            return "\n".join(str(row) for t in tables for row in conn.execute(sa.text(f'SELECT * FROM "{t}"')))
    finally:
        engine.dispose()


def _text(path: Path) -> str:
    """A file's text; a SQLite database's rows (Dagster keeps its snapshots zlib-compressed)."""
    raw = path.read_bytes()
    if not raw.startswith(b"SQLite format 3\0"):
        return raw.decode("utf-8", "replace")
    import sqlite3
    import zlib

    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        out = [raw.decode("utf-8", "replace")]
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                for value in row:
                    if isinstance(value, bytes):
                        try:
                            value = zlib.decompress(value)
                        except zlib.error:
                            pass
                        value = value.decode("utf-8", "replace")
                    out.append(str(value))
        return "\n".join(out)
    finally:
        conn.close()
