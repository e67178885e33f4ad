"""Writes estate_v1.json: the demo estate as Lumos wrote portable snapshots in format 1 (commit
68722c4, before format 2), to test that such documents still validate, import and migrate.

Run it with that commit's code, never the current one (the point is an old writer):
    git archive 68722c4 | tar -x -C /tmp/lumos-v1
    cd /tmp/lumos-v1 && PYTHONPATH=. /work/main/.venv/bin/python \
        /work/main/tests/data/portable/make_v1_document.py /work/main/tests/data/portable/estate_v1.json

The project is tests/test_cli_golden.py's: the demo lake materialized for 2026-11-24, then for
2026-11-25 after clean/orders lost its `status` column (a second version), and a release.
"""

import json
import sys
import tempfile
from datetime import date, timedelta
from pathlib import Path

import pyarrow.orc as orc
import yaml
from click.testing import CliRunner
from dagster import DagsterInstance

from lumos_dagster.cli import main
from lumos_dagster.cli.demo_lake import build_demo_lake
from lumos_dagster.definitions import build_definitions
from lumos_dagster.floor.config import load_config
from tests.lake import demo_config

DAY = date(2026, 11, 25)


def lumos(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def main_(out: str) -> None:
    tmp = Path(tempfile.mkdtemp())
    build_demo_lake(str(tmp / "lake"), today=DAY)
    config = demo_config()
    config["sources"][0]["root"] = "lake"
    config["store"], config["catalog"]["path"] = {"path": "store.db"}, "catalog.db"
    config["partitions"]["start"] = "2026-11-01"
    for d in config["datasets"]:
        d.pop("profile", None)  # profiling needs Spark
    (tmp / "lumos.yaml").write_text(yaml.safe_dump(config))
    path = str(tmp / "lumos.yaml")
    lumos("discover", "--config", path)
    instance = DagsterInstance.ephemeral()
    for day in (DAY - timedelta(days=1), DAY):
        job = build_definitions(load_config(path)).resolve_implicit_global_asset_job_def()
        job.execute_in_process(partition_key=str(day), instance=instance, raise_on_error=False)
        if day != DAY:
            orders = tmp / "lake" / "clean" / "orders" / f"dt={DAY}" / "part-00000.orc"
            orc.write_table(orc.read_table(orders).drop_columns(["status"]), orders)
    lumos("release", "--config", path)
    lumos("export", "--config", path, "-o", str(tmp / "estate.json"))
    doc = json.loads((tmp / "estate.json").read_text())
    doc["source"] = "store:sqlite:///<project>/store.db"  # no temporary path in a committed file
    Path(out).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main_(sys.argv[1])
