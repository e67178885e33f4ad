"""Issue 42, items 4, 5 and 6: walks that survive the file system, and what the store can keep.
A link in a loop, to itself or to nothing, a folder that cannot be listed, and a name longer than
the store keeps are each one reported skip with its reason, and the rest of the source is recorded,
on SQLite and PostgreSQL; a row count past 64 bits (two Parquet footers of 2^62 rows) is not kept, so
`lumos export`, `datahub lite export`, a typed `datahub lite get` and `GET /v1/export` stay valid."""

from __future__ import annotations

import json
import os
import struct
import subprocess
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa
import yaml
from click.testing import CliRunner

from lumos_dagster.cli import main
from lumos_dagster.floor.limits import MAX_COUNT, MAX_NAME
from tests.lake import write_parquet
from tests.test_api import HASHES, SCOPES, TOKENS, Server, free_port
from tests.test_store import store_url  # noqa: F401  (the fixture: SQLite and PostgreSQL)

pytestmark = [pytest.mark.dagster, pytest.mark.servers, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
BIN = ROOT / ".venv" / "bin"
DAY = "2026-11-25"


def _config(folder: Path, store: str, **more) -> Path:
    config = {"sources": [{"name": "lake", "root": "lake"}], "store": {"url": store},
              "catalog": {"path": "catalog.db"}, "partitions": {"start": DAY}, **more}  # fmt: skip
    (folder / "lumos.yaml").write_text(yaml.safe_dump(config))
    return folder / "lumos.yaml"


def _table(column: str = "id") -> pa.Table:
    return pa.table({column: pa.array([1, 2], pa.int64())})


def _lumos(config: Path, *args: str):
    return CliRunner().invoke(main, [*args, "-c", str(config)])


def _names(url: str) -> set[str]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return set(conn.execute(sa.text("SELECT name FROM lumos_datasets WHERE removed_at IS NULL")).scalars())
    finally:
        engine.dispose()


# ------------------------------------------------------------------ links


def test_links_in_a_loop_or_to_nothing_are_one_skip_each_and_the_source_goes_on(tmp_path, store_url):  # noqa: F811
    lake = tmp_path / "lake"
    write_parquet(lake / "sales" / "orders" / f"dt={DAY}" / "p.parquet", _table())
    write_parquet(lake / "raw" / "events" / f"dt={DAY}" / "p.parquet", _table("event"))
    inside = lake / "sales" / "orders" / f"dt={DAY}"
    os.symlink("self.parquet", inside / "self.parquet")  # to itself
    os.symlink("b.parquet", inside / "a.parquet")  # a pair pointing at each other
    os.symlink("a.parquet", inside / "b.parquet")
    os.symlink("gone.parquet", inside / "dangling.parquet")  # to nothing
    os.symlink(".", lake / "raw" / "loop")  # a folder loop: not followed, as before
    config = _config(tmp_path, store_url)
    result = _lumos(config, "discover")
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    assert "skipped      3  symlink in a loop (to itself, or back to itself through others)" in result.output
    assert "skipped      1  dangling symlink, or a file gone since it was listed" in result.output
    assert _names(store_url) == {"sales/orders", "raw/events"}
    result = _lumos(config, "snapshot", "--partition", DAY)  # a run lists the dataset's folder again
    assert result.exit_code == 0, result.output
    assert "sales/orders" in _lumos(config, "summary").output


def test_a_dagster_run_over_a_folder_with_a_link_to_itself_succeeds(tmp_path):
    lake = tmp_path / "lake"
    write_parquet(lake / "sales" / "orders" / f"dt={DAY}" / "p.parquet", _table())
    config = _config(tmp_path, f"sqlite:///{tmp_path}/store.db")
    assert _lumos(config, "discover").exit_code == 0
    os.symlink("self", lake / "sales" / "orders" / f"dt={DAY}" / "self")  # after discovery: the run meets it
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text())
    env = {**os.environ, "LUMOS_CONFIG": str(config), "DAGSTER_HOME": str(home), "PYTHONPATH": str(ROOT)}
    run = [BIN / "dagster", "asset", "materialize", "-m", "lumos_dagster.definitions", "--select", "*"]
    out = subprocess.run([*map(str, run), "--partition", DAY], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "symlink in a loop" in out.stderr  # the scan report, in the step's log


def test_a_folder_that_cannot_be_listed_is_a_skip_and_removes_nothing(tmp_path):
    """A folder the command may not list (the tests run as root, who may list anything: the command
    runs without the capabilities that override permissions): it is one skip, the rest is recorded,
    and the datasets found under it before are not soft-deleted."""
    lake = tmp_path / "lake"
    write_parquet(lake / "sales" / "orders" / f"dt={DAY}" / "p.parquet", _table())
    write_parquet(lake / "hr" / "salaries" / f"dt={DAY}" / "p.parquet", _table("pay"))
    config = _config(tmp_path, f"sqlite:///{tmp_path}/store.db")
    assert _lumos(config, "discover").exit_code == 0
    (lake / "hr").chmod(0o000)
    unprivileged = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
    try:
        out = subprocess.run([*unprivileged, str(BIN / "lumos"), "discover", "-c", str(config)], capture_output=True,
                             text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)  # fmt: skip
    finally:
        (lake / "hr").chmod(0o755)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "skipped      1  folder that cannot be listed: its datasets are kept" in out.stdout
    assert "(Permission denied) (e.g. hr/)" in out.stdout and "no dataset new or removed" in out.stdout
    assert _names(f"sqlite:///{tmp_path}/store.db") == {"sales/orders", "hr/salaries"}


# ------------------------------------------------------------------ names past the store's limits


def test_a_folder_path_longer_than_the_store_keeps_is_a_skip_and_the_estate_exports(tmp_path, store_url):  # noqa: F811
    """A 200-level tree: its dataset's name is past varchar(1024). On PostgreSQL discovery crashed and
    recorded nothing; on SQLite it was stored, and `lumos export` then refused the whole estate."""
    lake = tmp_path / "lake"
    deep = lake.joinpath(*[f"level{i:03d}" for i in range(200)])
    write_parquet(deep / "p.parquet", _table())
    write_parquet(lake / "sales" / "orders" / f"dt={DAY}" / "p.parquet", _table("order"))
    config = _config(tmp_path, store_url)
    result = _lumos(config, "discover")
    assert result.exit_code == 0, result.output
    assert f"a name longer than the store keeps (its URN past {MAX_NAME:,} characters) (e.g. level000/" in result.output
    assert _names(store_url) == {"sales/orders"}
    assert _lumos(config, "snapshot", "--partition", DAY).exit_code == 0
    exported = _lumos(config, "export", "-o", str(tmp_path / "estate.json"))
    assert exported.exit_code == 0, exported.output
    assert [d["snapshot"]["dataset"]["name"] for d in json.loads((tmp_path / "estate.json").read_text())["datasets"]] \
        == ["sales/orders"]  # fmt: skip


# ------------------------------------------------------------------ counts past 64 bits


def claiming(path: Path, rows: int) -> None:
    """A Parquet file of 1,000 rows whose footer claims `rows` (its FileMetaData's and its row group's
    num_rows, thrift compact varints, rewritten)."""

    def varint(n: int) -> bytes:
        out = bytearray()
        while True:
            out.append((n & 0x7F) | (0x80 if n >> 7 else 0))
            n >>= 7
            if not n:
                return bytes(out)

    write_parquet(path, pa.table({"id": pa.array(range(1000), pa.int64())}))
    raw = path.read_bytes()
    size = struct.unpack("<i", raw[-8:-4])[0]
    footer = raw[-8 - size : -8].replace(b"\x16" + varint(2000), b"\x16" + varint(rows << 1))  # zigzag
    path.write_bytes(raw[: -8 - size] + footer + struct.pack("<i", len(footer)) + b"PAR1")
    assert pq.ParquetFile(path).metadata.num_rows == rows


def test_a_row_count_past_64_bits_is_not_kept_and_every_export_stays_valid(tmp_path, store_url):  # noqa: F811
    lake = tmp_path / "lake"
    for n in range(2):
        claiming(lake / "sales" / "orders" / f"dt={DAY}" / f"part-{n}.parquet", 2**62)
    tokens = [{"name": "reader", "hash": HASHES["reader"], "scopes": SCOPES["reader"]}]
    config = _config(tmp_path, store_url, api={"tokens": tokens})
    assert _lumos(config, "discover").exit_code == 0
    result = _lumos(config, "snapshot", "--partition", DAY)
    summary = _lumos(config, "summary").output
    assert "sales/orders: a row count of 9,223,372,036,854,775,808, which no 64-bit count holds: not kept" in summary
    assert " ? " in summary.splitlines()[1]  # the rows column: unknown
    exported = _lumos(config, "export", "-o", str(tmp_path / "estate.json"))
    assert exported.exit_code == 0, exported.output + result.output
    assert CliRunner().invoke(main, ["validate", str(tmp_path / "estate.json")]).exit_code == 0
    # DataHub Lite, with DataHub's own CLI: its export, and a typed read of the dataset's aspects
    urn = "urn:li:dataset:(urn:li:dataPlatform:file,sales/orders,PROD)"
    for args in (["export", "--file", str(tmp_path / "mcps")], ["get", "--urn", urn]):
        lite = subprocess.run([str(BIN / "lumos"), "lite", "-c", str(config), *args], capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)  # fmt: skip
        assert lite.returncode == 0 and "Traceback" not in lite.stderr, lite.stderr[-3000:]
    # and the API's export, which `lumos validate` takes
    server = Server(config, free_port(), tmp_path / "serve.log")
    try:
        answer = httpx.get(f"{server.url}/v1/export", headers={"Authorization": f"Bearer {TOKENS['reader']}"})
    finally:
        server.stop()
    assert answer.status_code == 200
    (tmp_path / "api.json").write_bytes(answer.content)
    assert CliRunner().invoke(main, ["validate", str(tmp_path / "api.json")]).exit_code == 0
    counts = [d["snapshot"]["stats"].get("row_count") for d in answer.json()["datasets"]]
    assert counts == [None] and MAX_COUNT == 2**63 - 1
