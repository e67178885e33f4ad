"""Plug-ins installed from outside the repo, used from lumos.yaml; credentials read when used."""

import json
import logging
import os
import shutil
import subprocess
import sys
import tomllib
import uuid
from datetime import datetime, timezone
from pathlib import Path

import psycopg
import pyarrow as pa
import pytest
import yaml

from lumos_dagster.floor.config import parse_config
from lumos_dagster.floor.errors import ConfigError
from lumos_dagster.floor.plugins import Plugin, PluginRegistry, expand_secrets
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.sources import build_sources, discover
from tests.lake import write_parquet

pytestmark = pytest.mark.dagster

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PG = "postgresql://postgres@127.0.0.1:5432/test"

# a catalog that appends what it receives to a file, and is "down" while `<path>.down` exists
MEMO_CATALOG = """
import json, os
from typing import Literal

from lumos_dagster.floor.plugins import ConfigModel, Plugin


class MemoConfig(ConfigModel):
    type: Literal["memo"] = "memo"
    path: str = "memo.jsonl"


class MemoCatalog:
    def __init__(self, path):
        self.path = path
        self.name = f"memo:{path}"

    def fingerprint(self, snapshot):
        return f"{snapshot.dataset.urn}@{snapshot.version}"

    def emit(self, snapshots):
        if os.path.exists(self.path + ".down"):
            raise ConnectionError("memo is down")
        with open(self.path, "a") as fh:
            for s in snapshots:
                fh.write(json.dumps({"dataset": s.dataset.name, "version": s.version}) + "\\n")
        return len(snapshots)

    def close(self):
        pass


plugin = Plugin("memo", MemoConfig, lambda entry, context: MemoCatalog(context.resolve(entry.path)))
not_a_plugin = object()
"""

# a format: `.kv` files of `column=type` lines
KV_FORMAT = """
from lumos_dagster.formats import FileSchema, Format
from lumos_dagster.floor.datatypes import Field, Primitive, Schema


def read_kv(path, fs=None):
    with open(path) as fh:
        pairs = [line.strip().split("=") for line in fh if line.strip()]
    return FileSchema(Schema(tuple(Field(name, Primitive(kind)) for name, kind in pairs)))


kv = Format("kv", read_kv, (".kv",))
"""


def install(tmp_path: Path, name: str, code: str, entry_points: dict[str, dict[str, str]]) -> Path:
    """A distribution `name` (pyproject.toml and one module), installed into tmp_path/site the way
    pip lays it out: the module, and a .dist-info whose entry_points.txt comes from the pyproject.
    Written here, not by pip: the venv has setuptools but not `wheel`, so pip cannot build it."""
    module = name.replace("-", "_")
    project = tmp_path / name
    (project / module).mkdir(parents=True)
    (project / module / "__init__.py").write_text(code)
    tables = "".join(
        f'\n[project.entry-points."{group}"]\n' + "".join(f'{k} = "{v}"\n' for k, v in eps.items())
        for group, eps in entry_points.items()
    )
    (project / "pyproject.toml").write_text(f'[project]\nname = "{name}"\nversion = "0.1"\n{tables}')

    meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    site = tmp_path / "site"
    shutil.copytree(project / module, site / module)
    info = site / f"{module}-{meta['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {meta['name']}\nVersion: {meta['version']}\n")
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n"
            for group, eps in meta["entry-points"].items()
        )
    )
    return site


def run(site: Path, tmp_path: Path, *args, ok: bool = True) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": str(site),
        "LUMOS_CONFIG": str(tmp_path / "lumos.yaml"),
        "DAGSTER_HOME": str(tmp_path / "dagster"),
    }
    out = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert (out.returncode == 0) == ok, out.stdout[-3000:] + out.stderr[-3000:]
    return out


def test_a_catalog_installed_from_outside_the_repo_gets_the_snapshots(tmp_path):
    site = install(tmp_path, "lumos-memo", MEMO_CATALOG, {"lumos.catalogs": {"memo": "lumos_memo:plugin"}})
    write_parquet(tmp_path / "lake" / "sales" / "orders" / "part-0.parquet", pa.table({"id": [1, 2]}))
    (tmp_path / "lumos.yaml").write_text(
        yaml.safe_dump(
            {"sources": [{"root": "lake"}], "store": {"path": "store.db"}, "catalog": {"type": "memo", "path": "memo"}}
        )
    )
    (tmp_path / "dagster").mkdir()
    (tmp_path / "memo.down").touch()
    today = datetime.now(timezone.utc).strftime("%Y-%m-%d")

    run(site, tmp_path, BIN / "lumos", "discover")
    # the run builds the plug-in from lumos.yaml; it is down, so the snapshot waits in the outbox
    run(site, tmp_path, BIN / "dagster", "asset", "materialize", "-m", "lumos_dagster.definitions",
        "--select", "*", "--partition", today)  # fmt: skip
    assert not (tmp_path / "memo").exists()
    assert f"memo:{tmp_path}/memo: 1 pending" in run(site, tmp_path, BIN / "lumos", "sync", "--status").stdout

    (tmp_path / "memo.down").unlink()
    out = run(site, tmp_path, BIN / "lumos", "sync").stdout
    assert f"memo:{tmp_path}/memo: 1 delivered" in out
    received = [json.loads(line) for line in (tmp_path / "memo").read_text().splitlines()]
    assert received == [{"dataset": "sales/orders", "version": "1.0.0"}]


def test_an_unknown_type_lists_the_installed_plugins(tmp_path):
    site = install(tmp_path, "lumos-memo", MEMO_CATALOG, {"lumos.catalogs": {"memo": "lumos_memo:plugin"}})
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump({"catalog": {"type": "gms"}}))
    out = run(site, tmp_path, BIN / "lumos", "discover", ok=False)
    assert "catalog[0].type: unknown type 'gms' (known: 'datahub-lite', 'datahub-rest', " in out.stderr
    assert "'openmetadata', 'atlas', 'amundsen', 'memo')" in out.stderr


def test_a_format_plugin_adds_a_reader(tmp_path):
    site = install(tmp_path, "lumos-kv", KV_FORMAT, {"lumos.formats": {"kv": "lumos_kv:kv"}})
    (tmp_path / "t.kv").write_text("id=int64\nname=string\n")
    out = run(site, tmp_path, BIN / "lumos", "schema", "--flat", tmp_path / "t.kv")
    assert out.stdout.splitlines()[1:] == ["id: int64", "name: string"]


def test_a_broken_plugin_is_skipped_with_a_warning(tmp_path, monkeypatch, caplog):
    site = install(
        tmp_path,
        "lumos-mixed",
        MEMO_CATALOG,
        {
            "lumos.catalogs": {
                "memo": "lumos_mixed:plugin",
                "gone": "lumos_nowhere:plugin",
                "odd": "lumos_mixed:not_a_plugin",
                "renamed": "lumos_mixed:plugin",
            }
        },
    )
    monkeypatch.syspath_prepend(str(site))
    registry = PluginRegistry("lumos.catalogs", Plugin)
    with caplog.at_level(logging.WARNING, logger="lumos_dagster.floor.plugins"):
        assert registry.names() == ("memo",)
        assert registry.names() == ("memo",)  # loaded once: no second round of warnings
    warnings = sorted(r.getMessage() for r in caplog.records)
    assert len(warnings) == 3
    assert warnings[0].startswith("skipped the plug-in gone = lumos_nowhere:plugin (entry point group lumos.catalogs)")
    assert "ModuleNotFoundError: No module named 'lumos_nowhere'" in warnings[0]
    assert warnings[1].startswith("skipped the plug-in odd = lumos_mixed:not_a_plugin") and "TypeError" in warnings[1]
    assert warnings[2].startswith("skipped the plug-in renamed = lumos_mixed:plugin")
    assert "ValueError: lumos.catalogs: type 'memo' is already registered" in warnings[2]


# ------------------------------------------------------------------ secrets


def test_building_the_sources_reads_no_credential(monkeypatch):
    monkeypatch.delenv("PG_PASSWORD", raising=False)
    monkeypatch.delenv("MONGO_URI", raising=False)
    cfg = parse_config(
        {
            "sources": [
                {"type": "postgres", "dsn": "postgresql://lumos:${PG_PASSWORD}@db:5432/app"},
                {"type": "mongodb", "uri": "${MONGO_URI}", "databases": ["shop"]},
            ]
        }
    )
    sources = build_sources(cfg)  # what loading the code location does
    assert (sources["postgres"].root, sources["mongodb"].root) == ("postgresql://db:5432/app", "mongodb://${MONGO_URI}")


def test_expanding_a_credential_when_it_is_used():
    url = "postgresql+psycopg://lumos:${PW}@db/${DB:-lumos}?x=$$"
    assert (
        expand_secrets(url, "lumos.yaml: store.url", {"PW": "s3cret"})
        == "postgresql+psycopg://lumos:s3cret@db/lumos?x=$"
    )
    with pytest.raises(ConfigError) as err:
        expand_secrets(url, "lumos.yaml: store.url", {})
    assert str(err.value) == (
        "lumos.yaml: store.url: environment variable PW is not set (set it, or write ${PW:-default})"
    )


def test_an_unset_credential_fails_its_source_when_it_connects(monkeypatch):
    monkeypatch.delenv("LUMOS_TEST_PG_PASSWORD", raising=False)
    monkeypatch.delenv("LUMOS_TEST_MONGO_URI", raising=False)
    cfg = parse_config(
        {
            "sources": [
                {"type": "postgres", "dsn": "postgresql://lumos:${LUMOS_TEST_PG_PASSWORD}@127.0.0.1:1/app"},
                {"type": "mongodb", "uri": "${LUMOS_TEST_MONGO_URI}", "databases": ["shop"]},
            ]
        },
        file="conf/lumos.yaml",
    )
    report = ScanReport()
    assert discover(build_sources(cfg), report).scanned == []
    assert [f"{where}: {why}" for where, why in report.failures] == [
        "source postgres: cannot read the catalog of postgresql://127.0.0.1:1/app: conf/lumos.yaml: sources[0].dsn: "
        "environment variable LUMOS_TEST_PG_PASSWORD is not set (set it, or write ${LUMOS_TEST_PG_PASSWORD:-default})",
        "source mongodb: cannot list collections at mongodb://${LUMOS_TEST_MONGO_URI}: conf/lumos.yaml: "
        "sources[1].uri: environment variable LUMOS_TEST_MONGO_URI is not set "
        "(set it, or write ${LUMOS_TEST_MONGO_URI:-default})",
    ]


def test_sources_read_their_credentials_when_they_connect(monkeypatch):
    schema = f"lumos_secret_{uuid.uuid4().hex[:8]}"
    monkeypatch.delenv("LUMOS_TEST_PG_USER", raising=False)
    monkeypatch.delenv("LUMOS_TEST_MONGO_HOST", raising=False)
    cfg = parse_config(
        {
            "sources": [
                {
                    "type": "postgres",
                    "dsn": "postgresql://${LUMOS_TEST_PG_USER}@127.0.0.1:5432/test",
                    "schemas": [schema],
                },
                {"type": "mongodb", "uri": "mongodb://${LUMOS_TEST_MONGO_HOST}:27017", "databases": ["shop"]},
            ]
        }
    )
    sources = build_sources(cfg)
    monkeypatch.setenv("LUMOS_TEST_PG_USER", "postgres")
    monkeypatch.setenv("LUMOS_TEST_MONGO_HOST", "mongo.invalid")
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"CREATE TABLE {schema}.orders (id int)")
    try:
        report = ScanReport()
        assert [r.name for r in sources["postgres"].discover(report)] == [f"test/{schema}/orders"]
    finally:
        with psycopg.connect(PG, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    client = sources["mongodb"].client  # the driver connects in the background: no server needed to see where to
    try:
        assert list(client.topology_description.server_descriptions()) == [("mongo.invalid", 27017)]
    finally:
        client.close()


def test_entry_points_are_read_once_and_again_when_a_package_is_installed(tmp_path, monkeypatch):
    """Registries share one read of the installed packages' metadata, yet a package installed later
    (into a folder on the path, or put on the path: a notebook's pip install, sys.path.append) is found."""
    from lumos_dagster.floor import plugins

    group = f"lumos.test_{uuid.uuid4().hex[:8]}"
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    assert PluginRegistry(group, Plugin).names() == ()
    hits = plugins._entry_points.cache_info().hits
    assert PluginRegistry(group, Plugin).names() == () and plugins._entry_points.cache_info().hits == hits + 1
    install(tmp_path, "lumos-late", MEMO_CATALOG, {group: {"memo": "lumos_late:plugin"}})  # into `site`
    assert PluginRegistry(group, Plugin).names() == ("memo",)
    other = f"{group}_b"
    elsewhere = install(tmp_path / "b", "lumos-later", MEMO_CATALOG, {other: {"memo": "lumos_later:plugin"}})
    assert PluginRegistry(other, Plugin).names() == ()
    monkeypatch.syspath_prepend(str(elsewhere))
    assert PluginRegistry(other, Plugin).names() == ("memo",)
