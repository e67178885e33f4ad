"""Issue 42, items 1 and 2: one masking rule for every URL Lumos prints or stores, read the way its
client reads it. A store password holding an `@` never shows (the driver's errors quoted its end as a
host), and a catalog server URL with credentials is named by its endpoint in the output, the outbox,
the catalog state and Dagster's storage, event log and compute logs; an outbox written before keeps
delivering under the new name."""

from __future__ import annotations

import os
import subprocess
import uuid
from datetime import date
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml
from click.testing import CliRunner

from lumos_dagster.cli import main
from lumos_dagster.store import SnapshotStore
from tests.fake_servers import FakeGMS
from tests.lake import partitioned_lake
from tests.test_reliability_config import _text, store_rows
from tests.test_store import snap, store_url  # noqa: F401  (the fixture: SQLite and PostgreSQL)

pytestmark = [pytest.mark.dagster, pytest.mark.servers, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
BIN = ROOT / ".venv" / "bin"


def _project(folder: Path, store: str, catalogs: list[dict]) -> Path:
    partitioned_lake(folder / "lake", "raw/orders", days=1, start=date(2026, 11, 25), files_per_day=1)
    config = {"sources": [{"name": "lake", "root": "lake"}], "store": {"url": store}, "catalog": catalogs,
              "partitions": {"start": "2026-11-25"}}  # fmt: skip
    (folder / "lumos.yaml").write_text(yaml.safe_dump(config))
    return folder / "lumos.yaml"


@pytest.mark.parametrize("command", [["summary"], ["discover"], ["sync"], ["export", "-o", "x.json"], ["serve"]])
def test_a_store_password_holding_an_at_never_shows_and_is_refused_in_one_line(tmp_path, command):
    secret = f"CorrectHorse{uuid.uuid4().hex[:6]}"
    config = _project(tmp_path, f"postgresql+psycopg://postgres:x@{secret}@127.0.0.1:5432/test", [])
    result = CliRunner().invoke(main, [*command, "-c", str(config)])
    assert result.exit_code != 0 and secret not in result.output
    assert "store.url: its host holds an '@'" in result.output and "%40" in result.output
    assert "Traceback" not in result.output


def test_a_dagster_run_of_a_store_password_holding_an_at_never_shows_it(tmp_path):
    secret = f"CorrectHorse{uuid.uuid4().hex[:6]}"
    config = _project(tmp_path, f"postgresql+psycopg://postgres:x@{secret}@127.0.0.1:5432/test", [])
    home = tmp_path / "dagster_home"
    home.mkdir()
    env = {**os.environ, "LUMOS_CONFIG": str(config), "DAGSTER_HOME": str(home), "PYTHONPATH": str(ROOT)}
    run = [BIN / "dagster", "asset", "materialize", "-m", "lumos_dagster.definitions", "--select", "*"]
    out = subprocess.run([*map(str, run), "--partition", "2026-11-25"], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=300)  # fmt: skip
    assert out.returncode != 0 and "store.url: its host holds an '@'" in out.stderr, out.stderr[-3000:]
    assert secret not in out.stdout + out.stderr
    assert not [p for p in home.rglob("*") if p.is_file() and secret in _text(p)]


def test_a_store_password_from_the_environment_holding_an_at_is_refused_where_the_store_opens(tmp_path):
    secret = f"CorrectHorse{uuid.uuid4().hex[:6]}"
    config = _project(tmp_path, "postgresql+psycopg://postgres:${LUMOS_TEST_PW}@127.0.0.1:5432/test", [])
    result = CliRunner().invoke(main, ["summary", "-c", str(config)], env={"LUMOS_TEST_PW": f"x@{secret}"})
    assert result.exit_code == 1 and secret not in result.output
    (line,) = result.output.splitlines()
    assert line.startswith("Error: cannot open the snapshot store at postgresql+psycopg://postgres:***@127.0.0.1:5432")


def test_a_catalog_server_with_credentials_is_named_by_its_endpoint_in_every_output_log_and_table(
    tmp_path,
    store_url,  # noqa: F811
):
    """Two datahub-rest catalogs on one GMS: one with a user and password (delivered), one with a
    `?token=` (the emitter cannot use it: its entries wait, with the error). A discovery, a Dagster
    run, `lumos snapshot` and `lumos sync`; then the outputs, every file of the Dagster home and the
    project, and every table of the store are searched for the credentials."""
    tag = uuid.uuid4().hex[:6]
    user, password, token = f"GmsUser{tag}", f"GmsPw{tag}", f"GmsToken{tag}"
    gms = FakeGMS().start()
    host = f"127.0.0.1:{gms.port}"
    catalogs = [{"type": "datahub-rest", "server": f"http://{user}:{password}@{host}", "retries": 0},
                {"type": "datahub-rest", "server": f"http://{host}/?token={token}", "retries": 0}]  # fmt: skip
    work = tmp_path / "project"
    work.mkdir()
    config = _project(work, store_url, catalogs)
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text())
    env = {**os.environ, "LUMOS_CONFIG": str(config), "DAGSTER_HOME": str(home), "PYTHONPATH": str(ROOT)}
    outputs = []

    def run(*args):
        out = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env, cwd=work, timeout=600)
        outputs.append(f"$ {' '.join(map(str, args))}\n{out.stdout}\n{out.stderr}")
        return out

    try:
        assert run(BIN / "lumos", "discover").returncode == 0, outputs[-1][-3000:]
        run(BIN / "dagster", "asset", "materialize", "-m", "lumos_dagster.definitions", "--select", "*",
            "--partition", "2026-11-25")  # fmt: skip
        run(BIN / "lumos", "snapshot", "--partition", "2026-11-25")
        run(BIN / "lumos", "sync")
        status = run(BIN / "lumos", "sync", "--status").stdout
    finally:
        gms.stop()
    assert gms.aspects  # the catalog with a user and password was delivered to
    assert f"datahub-rest:http://{host}: " in status and f"datahub-rest:http://{host}/?token=***: " in status
    engine = sa.create_engine(store_url)
    with engine.connect() as conn:
        named = set(conn.execute(sa.text("SELECT DISTINCT catalog FROM lumos_outbox")).scalars())
    engine.dispose()
    assert named == {f"datahub-rest:http://{host}", f"datahub-rest:http://{host}/?token=***"}
    records = {"store": store_rows(store_url), **{f"output {i}": text for i, text in enumerate(outputs)}}
    for path in [p for base in (work, home) for p in base.rglob("*") if p.is_file() and p != config]:
        records[str(path)] = _text(path)
    assert any("raw/orders" in text for where, text in records.items() if str(home) in where)  # Dagster's run is there
    leaks = {(where, s) for where, text in records.items() for s in (user, password, token) if s in text}
    assert not leaks


def test_an_outbox_written_with_credentials_in_a_catalog_name_is_renamed_and_delivered(
    tmp_path,
    store_url,  # noqa: F811
):
    """A store of schema version 3 kept `datahub-rest:http://user:SECRET@host` in its outbox and catalog
    state; opened now, its rows take the endpoint's name, and `lumos sync` delivers what waited."""
    gms = FakeGMS().start()
    host = f"127.0.0.1:{gms.port}"
    server = f"http://ann:Secret{uuid.uuid4().hex[:6]}@{host}"
    old = f"datahub-rest:{server}"
    store = SnapshotStore(store_url)
    store.put([snap("raw/a", "2026-11-20"), snap("raw/b", "2026-11-20")], catalogs=[old])
    store.record_delivery(old, "urn:li:dataset:(urn:li:dataPlatform:file,raw/z,PROD)", "2026-11-19", "h")
    with store.engine.begin() as conn:  # and an error quoting the server, as the emitter's did
        conn.execute(sa.text("UPDATE lumos_outbox SET last_error = :e"), {"e": f"OperationalError: {server}/config"})
        conn.execute(sa.text("UPDATE lumos_meta SET value = '3' WHERE key = 'schema_version'"))
    store.close()
    config = _project(tmp_path, store_url, [{"type": "datahub-rest", "server": server, "retries": 0}])
    try:
        result = CliRunner().invoke(main, ["sync", "-c", str(config)])
    finally:
        gms.stop()
    assert result.exit_code == 0, result.output
    assert f"datahub-rest:http://{host}: 2 delivered" in result.output
    assert {urn.split(",")[1] for urn, _ in gms.aspects if urn.startswith("urn:li:dataset:")} == {"raw/a", "raw/b"}
    rows = store_rows(store_url)
    assert "Secret" not in rows and f"datahub-rest:http://{host}" in rows
