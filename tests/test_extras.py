"""A light install: Lumos without its extras loads its code location, runs its command line and reads
local files; each part that needs an extra says which one to install (issue 44)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from lumos_dagster.floor.extras import EXTRAS

ROOT = Path(__file__).resolve().parents[1]

#: the modules of the extras that no hard dependency brings (boto3, fsspec, httpx and uvicorn come with
#: dagster-aws, pyarrow's and dagster-webserver's own dependencies): absent from a bare `pip install lumos`
ABSENT = (
    "adlfs", "gcsfs", "pymongo", "bson", "pyiceberg", "deltalake", "psycopg", "dagster_postgres", "duckdb",
    "snowflake", "databricks", "google.cloud.bigquery", "confluent_kafka", "grpc_tools", "openlineage",
    "fastapi", "openpyxl", "supervisor", "dagster_dg_cli", "create_dagster",
)  # fmt: skip

SCRIPT = textwrap.dedent(
    """
    import json, sys
    for name in sys.argv[1].split(","):
        sys.modules[name] = None  # as if not installed: importing it raises ModuleNotFoundError
    out = {}

    def said(key, fn):
        try:
            fn()
            out[key] = None
        except Exception as exc:
            out[key] = f"{type(exc).__name__}: {exc}"

    from lumos_dagster.floor.config import load_config
    from lumos_dagster.definitions import build_definitions

    config = load_config(sys.argv[2])
    defs = build_definitions(config)
    out["assets"] = len(list(defs.resolve_all_asset_keys()))

    from lumos_dagster.formats.base import fsspec_filesystem
    said("azure", lambda: fsspec_filesystem(("abfs", "account", "", "")))
    from lumos_dagster.table_formats.delta import DELTA
    said("delta", lambda: DELTA.open(sys.argv[3], None, ()))
    from lumos_dagster.store import SnapshotStore
    said("postgres", lambda: SnapshotStore("postgresql+psycopg://127.0.0.1/test").previous("x", None))
    from lumos_dagster.cli import main
    said("serve", lambda: main(["serve", "--openapi"], standalone_mode=False))
    from lumos_dagster.reports.render import to_xlsx
    said("excel", lambda: to_xlsx({}, sys.argv[3] + "/x.xlsx"))
    out["loaded"] = sorted(n for n in sys.argv[1].split(",") if sys.modules.get(n) is not None)
    print(json.dumps(out))
    """
)


def test_every_module_of_an_extra_is_named_by_one_extra_of_pyproject():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(EXTRAS) <= set(extras), set(EXTRAS) - set(extras)
    assert len(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]) <= 15


def test_without_its_extras_lumos_loads_and_names_the_extra_each_part_needs(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, ",".join(ABSENT), str(ROOT / "lumos.yaml"), str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["assets"] > 0
    assert out["loaded"] == []
    for key, extra in (("azure", "azure"), ("delta", "delta"), ("postgres", "postgres"), ("serve", "api"),
                       ("excel", "excel")):  # fmt: skip
        assert out[key] is not None and f"pip install 'lumos[{extra}]'" in out[key], (key, out[key])
        assert out[key].startswith("ClickException: " if key == "serve" else "MissingExtra: "), out[key]


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_a_missing_library_of_an_extra_is_one_line_naming_it(extra, monkeypatch):
    from lumos_dagster.floor.extras import MissingExtra, needs

    module = EXTRAS[extra][0]
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingExtra) as raised, needs(extra, "reading the thing"):
        __import__(module)
    assert str(raised.value) == (
        f"reading the thing needs Lumos' `{extra}` extra ({module} is not installed): pip install 'lumos[{extra}]'"
    )
    assert isinstance(raised.value, ModuleNotFoundError)


def test_a_missing_module_of_no_extra_is_raised_as_it_is(monkeypatch):
    from lumos_dagster.floor.extras import MissingExtra, needs

    monkeypatch.setitem(sys.modules, "deltalake", None)
    with pytest.raises(ModuleNotFoundError) as raised, needs("s3", "reading S3"):
        import deltalake  # noqa: F401
    assert not isinstance(raised.value, MissingExtra)
