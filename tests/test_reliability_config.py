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
import pyarrow as pa
import pytest
import sqlalchemy as sa
import yaml
from click.testing import CliRunner

from lumos_dagster.cli import main
from lumos_dagster.floor.config import load_config, parse_config
from lumos_dagster.floor.errors import ConfigError, StoreError
from lumos_dagster.floor.masking import mask_secrets, webhook_shown
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.governance.alerts import alerts_table, queue, send_pending
from lumos_dagster.reports.cost import CostReport, Row, to_csv
from lumos_dagster.reports.csvsafe import cell
from lumos_dagster.reports.render import to_csv_files
from lumos_dagster.sources.builtins import SOURCES
from lumos_dagster.store import SnapshotStore
from tests.fake_servers import FakeGMS, FakeOpenLineage, FakeOpenMetadata, WebhookReceiver, free_port
from tests.lake import partitioned_lake, register, write_parquet

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
        # the sequence whose nine *a4 blow the budget (line 1, column 1 before: the whole file)
        "lumos.yaml: line 6, column 5: not valid YAML: the aliases here expand the file to over 100,0",
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
    from lumos_dagster.floor.plugins import BuildContext

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
        ("\t=1+1", "\\t=1+1"),  # control characters are made visible: no tab to start a formula
        ("\r=1+1", "\\r=1+1"),
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


MASKED = [  # (what, text, as shown)
    ("a URL's password, with an unescaped @", "postgresql+psycopg://postgres:pa@ss@db:5432/test",
     "postgresql+psycopg://postgres:***@db:5432/test"),
    ("a URL quoted in an error", "cannot open the snapshot store at mysql://u:pw@h/x: refused",
     "cannot open the snapshot store at mysql://u:***@h/x: refused"),
    ("libpq, quoted, an escaped quote inside", "host=db user=u password='a b\\' c' dbname=x",
     "host=db user=u password=*** dbname=x"),
    ("libpq, quoted, ending in an escaped backslash", "password='a\\\\' dbname=x", "password=*** dbname=x"),
    ("libpq, unquoted, backslash-escaped space and quote", "host=db password=a\\ b\\'c dbname=x",
     "host=db password=*** dbname=x"),
    ("libpq, unquoted, a quote inside", "password=it's dbname=x", "password=*** dbname=x"),
    ("a query's password", "postgresql://db/x?sslmode=require&password=pw&application_name=a",
     "postgresql://db/x?sslmode=require&password=***&application_name=a"),
    ("token", "https://gms/?token=abc", "https://gms/?token=***"),
    ("access_token", "https://api/v1?page=2&access_token=abc", "https://api/v1?page=2&access_token=***"),
    ("an Azure SAS signature", "https://a.blob.core.windows.net/c?sv=2024-01-01&sig=Ab%2Bc&se=2026",
     "https://a.blob.core.windows.net/c?sv=2024-01-01&sig=***&se=2026"),
    ("an S3 presigned URL", "https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIA%2F1&X-Amz-Signature=dead&"
     "X-Amz-Security-Token=Fwo", "https://b.s3.amazonaws.com/k?X-Amz-Credential=***&X-Amz-Signature=***&"
     "X-Amz-Security-Token=***"),
    ("an API key", "https://maps.example.com/x?key=AIza123&q=a", "https://maps.example.com/x?key=***&q=a"),
    ("api_key, client_secret", "api_key=k1 client_secret=s1", "api_key=*** client_secret=***"),
    ("a MongoDB option", "mongodb://h/?tls=true&tlsCertificateKeyFilePassword=pw",
     "mongodb://h/?tls=true&tlsCertificateKeyFilePassword=***"),
    ("a secret key in another key's value", "url=https://h/x?token=abc", "url=https://h/x?token=***"),
    ("a path, unchanged", "sqlite:////srv/lumos/store.db", "sqlite:////srv/lumos/store.db"),
    ("variables: the password's", "postgresql://${USER}:${PW}@db/x", "postgresql://${USER}:***@db/x"),
    ("addresses, unchanged", "mailto:ann@example.com and bob@localhost", "mailto:ann@example.com and bob@localhost"),
    ("other settings, unchanged", "dt=2026-11-25 mode=ro monkey=1 design=a sslmode=require",
     "dt=2026-11-25 mode=ro monkey=1 design=a sslmode=require"),
    # issue 42: each URL read as its client reads it (lumos_dagster/floor/masking.py)
    ("a database password holding a '/' (SQLAlchemy ends it at the first '@')", "postgresql://u:pa/ss@db/x",
     "postgresql://u:***@db/x"),
    ("a database password holding a '?'", "postgresql+psycopg://u:a?b@db:5432/x", "postgresql+psycopg://u:***@db:5432/x"),
    ("a database password holding '@'s: the host's '@' too", "postgresql+psycopg://postgres:x@Correct@Horse@127.0.0.1/t",
     "postgresql+psycopg://postgres:***@127.0.0.1/t"),
    ("HTTP user information, all of it, and the query's token", "http://gmsuser:SECRET@gms:8080/?token=TOKEN",
     "http://gms:8080/?token=***"),
    ("an HTTP token given as the user", "https://ghp_TOKEN@gms.example.com/api", "https://gms.example.com/api"),
    ("an HTTP password cut at its '/' (requests reads a port)", "http://u:pa/ss@gms", "http://***"),
    ("a MongoDB user and password", "mongodb://lumos:pw@h1,h2/shop?authSource=admin",
     "mongodb://h1,h2/shop?authSource=admin"),
    ("no credentials: unchanged", "postgresql+psycopg://postgres@127.0.0.1:5432/test?options=-csearch_path%3Dx",
     "postgresql+psycopg://postgres@127.0.0.1:5432/test?options=-csearch_path%3Dx"),
    ("an Azure container's '@': unchanged", "abfs://box@acct.dfs.core.windows.net/p",
     "abfs://box@acct.dfs.core.windows.net/p"),
]  # fmt: skip


@pytest.mark.parametrize("what, text, shown", MASKED, ids=[m[0] for m in MASKED])
def test_mask_secrets_hides_passwords_and_tokens_and_nothing_else(what, text, shown):
    assert mask_secrets(text) == shown


def test_mask_secrets_is_linear_on_hostile_text():
    """One long word, or many dotted words, without `://`: the URL pattern was tried from every
    character to the end (200,000 characters took ~100 s). And URLs made to cost their parsers."""
    urls = ("a://" + "b." * 100_000, "a://" + ":" * 100_000, "http://" + "@:" * 100_000,
            "postgresql://" + "u:p@" * 50_000)  # fmt: skip
    for text in ("a" * 200_000, "a." * 100_000, "a=" * 100_000, *urls):
        started = time.monotonic()
        masked = mask_secrets(text)
        assert time.monotonic() - started < 5
        assert masked == text or text in urls


WEBHOOKS = [  # (url, as shown): scheme, host and port; never the user, password, path or query
    ("https://hooks.slack.com/services/T0/B0/XYZ", "https://hooks.slack.com/…"),
    ("http://ann:pw@127.0.0.1:8080/report?token=t#x", "http://127.0.0.1:8080/…"),
    ("https://h.example.com", "https://h.example.com"),
    ("https://h.example.com/", "https://h.example.com"),
    ("https://h.example.com?token=t", "https://h.example.com/…"),
    ("https://tok@[::1]:9/x", "https://[::1]:9/…"),
    ("not a url", "(a URL that does not parse)"),
    ("http://[::1/x", "(a URL that does not parse)"),
]


@pytest.mark.parametrize("url, shown", WEBHOOKS)
def test_a_webhook_is_shown_by_its_host_only(url, shown):
    assert webhook_shown(url) == shown


def test_a_store_that_cannot_open_never_shows_its_password_and_says_why_in_one_line():
    url = "postgresql+psycopg://postgres:hunter2@127.0.0.1:1/test"
    with pytest.raises(StoreError) as err:
        SnapshotStore(url)
    assert "hunter2" not in str(err.value)
    assert "\n" not in str(err.value) and "Connection refused" in str(err.value)
    assert str(err.value).startswith("cannot open the snapshot store at postgresql+psycopg://postgres:***@127.0.0.1:1/")


class RefusingWebhook(WebhookReceiver):
    """A webhook that fails every post (HTTP 500)."""

    def handle(self, method, path, query, body, headers):
        return 500, {"error": "down"}


def secret_webhook(port: int, tag: str) -> tuple[str, set[str]]:
    """A webhook URL on 127.0.0.1:`port` with a user, password, path and token; and those four."""
    user, password, path, token = (f"Hook{what}{tag}" for what in ("User", "Pw", "Path", "Token"))
    return f"http://{user}:{password}@127.0.0.1:{port}/services/{path}?token={token}", {user, password, path, token}


@pytest.mark.parametrize("webhook", ["takes the post", "answers 500", "is down"])
def test_lumos_report_names_a_webhook_by_its_host_only(tmp_path, webhook):
    server = {"takes the post": WebhookReceiver, "answers 500": RefusingWebhook}.get(webhook)
    server = server().start() if server else None
    port = server.port if server else free_port()
    url, secrets = secret_webhook(port, uuid.uuid4().hex[:6])
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump({
        "sources": [], "store": {"path": "store.db"}, "catalog": [], "reports": {"dir": "reports"},
        "governance": {"webhook": url},
    }))  # fmt: skip
    try:
        result = CliRunner().invoke(main, ["report", "-c", str(tmp_path / "lumos.yaml")])
    finally:
        if server:
            server.stop()
    shown = f"http://127.0.0.1:{port}/…"
    last = result.output.splitlines()[-1]
    if webhook == "takes the post":
        assert result.exit_code == 0 and last == f"  posted the missing-context list to {shown}"
        assert server.requests[0][1].endswith("?token=" + [s for s in secrets if "Token" in s][0])  # sent as given
    else:
        why = "HTTP 500 Internal Server Error" if server else "Connection refused"
        assert result.exit_code == 1 and last == f"Error: governance.webhook: could not post to {shown}: {why}"
    assert not {s for s in secrets if s in result.output}


def test_an_alert_the_webhook_refuses_keeps_an_error_without_the_webhook_credentials(tmp_path):
    server = RefusingWebhook().start()
    url, secrets = secret_webhook(server.port, uuid.uuid4().hex[:6])
    alert = {"dataset": "raw/orders", "version": "2.0.0", "previous_version": "1.0.0", "owners": [], "changes": [],
             "consumers": [], "unaffected": 0}  # fmt: skip
    try:
        with SnapshotStore(f"sqlite:///{tmp_path}/store.db") as store:
            with store.engine.begin() as conn:
                queue(conn, [alert])
            assert send_pending(store.engine, url, "slack") == (0, 1)
            with store.engine.connect() as conn:
                (error,) = conn.execute(sa.select(alerts_table.c.error)).scalars()
    finally:
        server.stop()
    assert error == f"governance.alerts.webhook: could not post to http://127.0.0.1:{server.port}/…: " \
        "HTTP 500 Internal Server Error"  # fmt: skip
    assert server.requests  # it was tried, with the credentials


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


class SwitchableWebhook(WebhookReceiver):
    """A webhook that answers `status` (200: takes the post)."""

    status = 200

    def handle(self, method, path, query, body, headers):
        return self.status, {}


def test_no_secret_of_a_run_ends_up_in_any_output_file_or_catalog_record(tmp_path, pg_schemas):
    """A run with a credential in every place lumos.yaml takes one — written out, and through
    `${VAR}` — discovered, materialized through Dagster, synced, exported and reported; with both
    webhooks (the report's, which takes a post and then fails, and the breaking-change alerts', which
    fails) carrying a user, password, path and token; then every output, every file (Dagster's event
    log and compute logs, DataHub Lite), every table of the store and every catalog record is searched
    for them."""
    store_schema, url_schema, kv_schema = pg_schemas
    tag = uuid.uuid4().hex[:6]
    written = {"store": f"StorePw{tag}", "pg_kv": f"PgKvPw{tag}",  # in lumos.yaml as they are
               "mongo": f"MongoPw{tag}", "mongo_option": f"MongoOpt{tag}"}  # fmt: skip
    from_env = {  # in the environment, named in lumos.yaml
        "LUMOS_TEST_PG_PW": f"PgEnvPw{tag}",
        "LUMOS_TEST_STORE_USER": "postgres",
        "LUMOS_TEST_GMS_TOKEN": f"GmsToken{tag}",
        "LUMOS_TEST_OL_KEY": f"OlKey{tag}",
        "LUMOS_TEST_OM_TOKEN": f"OmToken{tag}",
    }
    gms, lineage = FakeGMS(token=from_env["LUMOS_TEST_GMS_TOKEN"]).start(), FakeOpenLineage().start()
    lineage.token = from_env["LUMOS_TEST_OL_KEY"]
    om = FakeOpenMetadata(token=from_env["LUMOS_TEST_OM_TOKEN"]).start()
    report_hook, alerts_hook = SwitchableWebhook().start(), RefusingWebhook().start()
    report_url, report_secrets = secret_webhook(report_hook.port, f"R{tag}")
    alerts_url, alerts_secrets = secret_webhook(alerts_hook.port, f"A{tag}")
    secrets = {*written.values(), *(v for k, v in from_env.items() if k != "LUMOS_TEST_STORE_USER"), *report_secrets,
               *alerts_secrets}  # fmt: skip
    work = tmp_path / "project"
    partitioned_lake(work / "lake", "raw/orders", days=1, start=date(2026, 11, 25), files_per_day=1)
    for day, ids in (("2026-11-24", pa.array([1], pa.int64())), ("2026-11-25", pa.array(["1"]))):  # a breaking change
        write_parquet(work / "lake" / "raw" / "events" / f"dt={day}" / "p.parquet", pa.table({"id": ids}))
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
            {  # refused at once (an option without TLS): its error and its root are shown
                "type": "mongodb",
                "name": "mongo",
                "databases": ["shop"],
                "uri": f"mongodb://lumos:{written['mongo']}@127.0.0.1:{free_port()}/shop?tls=false&"
                f"tlsCertificateKeyFilePassword={written['mongo_option']}",
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
            {"type": "openmetadata", "server": om.url, "token_env": "LUMOS_TEST_OM_TOKEN", "retries": 0},
        ],
        "governance": {
            "webhook": report_url,
            "alerts": {"webhook": alerts_url},
            "required": {"fields": ["description"]},  # every dataset lacks one: the nudge posts
            "nudge": {"schedule": "0 8 * * 1"},
        },
        "reports": {"dir": "reports"},
        "partitions": {"start": "2026-11-24"},
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
        run(BIN / "lumos", "discover", ok=False)  # the MongoDB source fails
        run(BIN / "dagster", "asset", "materialize", "-m", "lumos_dagster.definitions", "--select", "*",
            "--partition-range", "2026-11-24...2026-11-25")  # fmt: skip
        run(BIN / "lumos", "sync", ok=False)  # the alert still waits
        run(BIN / "lumos", "sync", "--status")
        exported = run(BIN / "lumos", "export", "-o", work / "estate.json")
        run(BIN / "lumos", "summary")
        run(BIN / "lumos", "cost", "--format", "csv")
        posted = run(BIN / "lumos", "report")
        report_hook.status = 500
        run(BIN / "lumos", "report", ok=False)
        run(BIN / "dagster", "job", "execute", "-m", "lumos_dagster.definitions", "-j", "lumos_nudge", ok=False)
        failed = run(BIN / "lumos", "summary", "-c", work / "broken.yaml", ok=False)
    finally:
        for server in (gms, lineage, om, report_hook, alerts_hook):
            server.stop()
    assert "from store:postgresql+psycopg://${LUMOS_TEST_STORE_USER}:***@127.0.0.1:5432/test" in exported
    assert "cannot open the snapshot store at postgresql+psycopg://postgres:***@127.0.0.1:1/test" in outputs[-1]
    assert failed == ""
    assert {p.name for p in (work / "reports").rglob("*")} >= {"overview.html", "overview.xlsx"}
    assert gms.requests and lineage.events and om.requests  # the catalogs were written to
    hook = f"http://127.0.0.1:{report_hook.port}/…"
    assert f"posted the missing-context list to {hook}" in posted
    assert f"governance.webhook: could not post to {hook}: HTTP 500 Internal Server Error" in outputs[-3]
    assert len(report_hook.requests) >= 3 and alerts_hook.requests  # each webhook was posted to, with its credentials

    records = {"gms": json.dumps(gms.requests), "openlineage": json.dumps(lineage.events),
               "openmetadata": json.dumps(om.requests)}  # fmt: skip
    records["store"] = store_rows(
        f"postgresql+psycopg://postgres@127.0.0.1:5432/test?options=-csearch_path%3D{store_schema}"
    )
    configs = {work / "lumos.yaml", work / "broken.yaml"}  # hold the written secrets by design
    for path in [p for base in (work, home) for p in base.rglob("*") if p.is_file() and p not in configs]:
        records[str(path)] = _text(path)
    records.update({f"output {i}": text for i, text in enumerate(outputs)})
    leaks = {(where, s) for where, text in records.items() for s in secrets if s in text}
    assert not leaks
    assert any(f"test/{url_schema}/accounts" in text for text in records.values())  # what was searched holds the run
    alert_error = f"governance.alerts.webhook: could not post to http://127.0.0.1:{alerts_hook.port}/…: HTTP 500"
    assert alert_error in records["store"]  # lumos_alerts keeps why the alert waits
    in_dagster = [
        where for where, text in records.items() if str(home) in where and f"could not post to {hook}" in text
    ]
    assert in_dagster  # the nudge's failure is in Dagster's event log and compute logs
    assert any("cannot list collections at mongodb://127.0.0.1:" in text for text in outputs)


def store_rows(url: str) -> str:
    """Every row of every table of the store at `url`, as text."""
    engine = sa.create_engine(url)
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
