"""`lumos changed`: the datasets a change to the repository touches, as CI's asset selection."""

import pyarrow as pa
import pytest
import yaml
from click.testing import CliRunner
from dagster import AssetKey, AssetSelection, AssetSpec, Definitions

from lumos_dagster.cli import main
from lumos_dagster.floor.naming import asset_paths
from lumos_dagster.lineage.changed import EVERYTHING, selection
from tests.lake import write_parquet
from tests.test_governance_pipeline import CUSTOMER_VALUE, MARTS_ORDERS

pytestmark = pytest.mark.dagster


@pytest.fixture
def project(tmp_path, monkeypatch):
    for name in ("raw/orders", "raw/customers", "marts/orders", "marts/customer_value"):
        write_parquet(tmp_path / "lake" / name / "part.parquet", pa.table({"order_id": [1], "customer_id": [1]}))
    (tmp_path / "sql" / "marts").mkdir(parents=True)
    (tmp_path / "sql" / "marts" / "orders.sql").write_text(MARTS_ORDERS)
    (tmp_path / "sql" / "customer_value.sql").write_text(CUSTOMER_VALUE)
    (tmp_path / "sql" / "ingest.sql").write_text("INSERT INTO raw.orders SELECT id FROM external_db.src")
    (tmp_path / "README.md").write_text("not code")
    config = {"sources": [{"name": "lake", "root": "lake"}], "lineage": {"sql": [{"path": "sql"}]},
              "store": {"path": "store.db"}, "catalog": {"path": "lite.db"}}  # fmt: skip
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.chdir(tmp_path)  # CI runs it in the repository, with the paths git prints
    assert CliRunner().invoke(main, ["discover"]).exit_code == 0
    return tmp_path


@pytest.mark.parametrize(
    "files, expected",
    [
        (["sql/marts/orders.sql"], 'key:"marts/orders"+'),
        (["sql/customer_value.sql", "sql/marts/orders.sql"], 'key:"marts/customer_value"+ or key:"marts/orders"+'),
        (["sql/ingest.sql"], 'key:"raw/orders"+'),  # it reads nothing Lumos knows, it still builds raw/orders
        (["README.md"], ""),  # touches no dataset: nothing to snapshot
        (["sql/customer_value.sql", "lumos.yaml"], "*"),  # the configuration: everything
    ],
)
def test_changed_files_select_the_datasets_they_build_and_their_consumers(project, files, expected):
    result = CliRunner().invoke(main, ["changed", *files])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == expected


def test_the_selection_names_asset_keys_as_dagster_parses_them():
    paths = asset_paths(["sales/orders-v2", "2024/events", "raw/orders"])
    assert selection(EVERYTHING, paths) == "*" and selection(set(), paths) == ""
    chosen = selection({"sales/orders-v2", "2024/events"}, paths)
    assert chosen == 'key:"2024/events"+ or key:"sales/orders_v2"+'
    assets = [AssetSpec(AssetKey(list(p))) for p in paths.values()]
    graph = Definitions(assets=assets).resolve_asset_graph()
    assert AssetSelection.from_string(chosen).resolve(graph) == {AssetKey(["2024", "events"]),
                                                                 AssetKey(["sales", "orders_v2"])}  # fmt: skip
