"""A profile's row count reaches DataHub: CSV and JSON files carry no row count of their own, so the rows
DataHub shows (`datasetProfile.rowCount`) are those the profile counted; a sampled profile counted only
its sample, and the files' statistics stand then."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pyarrow as pa
import pyarrow.csv as pcsv
import pytest
import yaml
from click.testing import CliRunner
from dagster import DagsterInstance

from lumos_dagster.catalog.datahub import profiled_rows
from lumos_dagster.catalog.datahub_lite import open_lite
from lumos_dagster.cli import main
from lumos_dagster.definitions import build_definitions
from lumos_dagster.floor.config import load_config
from lumos_dagster.floor.model import Profile
from tests.lake import backdate, catalog_urn, write_parquet
from tests.test_datahub import snapshot

PARTITION = "2026-11-25"


@pytest.mark.parametrize(
    "file_rows, profile, rows",
    [
        (None, Profile(3, 1.0), 3),  # CSV, JSON: only the profile counted them
        (1000, Profile(1000, 1.0), 1000),  # Parquet: both agree
        (None, Profile(30, 0.1), None),  # a sample's count is not the partition's
        (1000, Profile(98, 0.1), 1000),
        (1000, None, 1000),  # not profiled
        (None, None, None),
    ],
)
def test_the_rows_datahub_gets_are_the_profiles_when_it_counted_them_all(file_rows, profile, rows):
    s = snapshot(profile=profile)
    s = replace(s, stats=replace(s.stats, row_count=file_rows))
    assert profiled_rows(s) == rows


@pytest.mark.dagster
def test_csv_and_json_profiles_row_counts_reach_datahub_lite(tmp_path, spark):
    lake = tmp_path / "lake"
    os.makedirs(lake / "raw" / "customers")
    pcsv.write_csv(pa.table({"id": [1, 2, 3], "country": ["FR", None, "US"]}), lake / "raw" / "customers" / "c.csv")
    os.makedirs(lake / "raw" / "clicks")
    (lake / "raw" / "clicks" / "c.json").write_text("".join(json.dumps({"id": i}) + "\n" for i in range(5)))
    write_parquet(lake / "raw" / "orders" / "o.parquet", pa.table({"id": [1, 2]}))
    backdate(lake)
    config = {
        "sources": [{"name": "lake", "root": "lake"}],
        "datasets": [{"name": n, "profile": True} for n in ("raw/customers", "raw/clicks", "raw/orders")],
        "store": {"path": "store.db"},
        "catalog": {"path": "lite.db"},
        "partitions": {"start": "2026-11-01"},
    }
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump(config))
    assert CliRunner().invoke(main, ["discover", "-c", str(tmp_path / "lumos.yaml")]).exit_code == 0
    loaded = load_config(str(tmp_path / "lumos.yaml"))
    job = build_definitions(loaded).resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(partition_key=PARTITION, instance=DagsterInstance.ephemeral())
    assert result.success
    lite = open_lite(str(tmp_path / "lite.db"), read_only=True)
    try:
        got = {n: lite.get(catalog_urn(loaded, n), None)["datasetProfile"]["rowCount"]
               for n in ("raw/customers", "raw/clicks", "raw/orders")}  # fmt: skip
    finally:
        lite.close()
    assert got == {"raw/customers": 3, "raw/clicks": 5, "raw/orders": 2}
