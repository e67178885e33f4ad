"""The Amundsen adapter: databuilder's node and relationship CSVs, written and read back.

The files under tests/golden/amundsen/ are the contract with Amundsen's publisher; regenerate
them after a deliberate change with
    .venv/bin/pytest tests/test_amundsen.py --update-golden-files
and review the diff.
"""

from __future__ import annotations

import csv
import filecmp
import shutil
from dataclasses import replace
from pathlib import Path

import yaml
from click.testing import CliRunner

from lumos_dagster.catalog.amundsen import AmundsenCatalog
from lumos_dagster.cli import main
from lumos_dagster.delivery.catalogs import catalogs_from_entries
from lumos_dagster.delivery.outbox import deliver
from lumos_dagster.floor.model import Owner
from lumos_dagster.floor.snapshot_json import snapshot_to_json
from lumos_dagster.store import SnapshotStore
from tests.test_catalogs import estate

GOLDEN = Path(__file__).parent / "golden" / "amundsen"


def comparable(s) -> dict:
    doc = snapshot_to_json(s)
    doc.pop("captured_at")
    return doc


def rows(folder: Path, prefix: str) -> list[dict]:
    out = []
    for path in sorted(folder.glob(f"{prefix}*.csv")):
        with path.open(newline="", encoding="utf8") as f:
            out += list(csv.DictReader(f))
    return out


def test_the_files_match_their_golden_copy(pytestconfig, tmp_path):
    AmundsenCatalog(str(tmp_path / "amundsen")).emit(estate())
    if pytestconfig.getoption("update_golden_files"):
        shutil.rmtree(GOLDEN, ignore_errors=True)
        shutil.copytree(tmp_path / "amundsen", GOLDEN)
    compared = filecmp.dircmp(tmp_path / "amundsen", GOLDEN)
    for sub in ("nodes", "relationships"):
        d = compared.subdirs[sub]
        assert (d.left_only, d.right_only, d.diff_files) == ([], [], []), sub


def test_records_are_databuilders(tmp_path):
    """Keys, labels, relationship types and the UNQUOTED columns of databuilder's TableMetadata,
    TableOwner and TableLineage, as FsNeo4jCSVLoader writes them."""
    AmundsenCatalog(str(tmp_path / "a")).emit(estate())
    nodes, rels = tmp_path / "a" / "nodes", tmp_path / "a" / "relationships"
    header = (nodes / "Table_0.csv").read_text().splitlines()[0]
    assert header.startswith('"LABEL","KEY","name","is_view:UNQUOTED","lumos_name"')
    tables = {r["KEY"]: r for r in rows(nodes, "Table")}
    assert sorted(tables) == ["file://lumos.marts/revenue", "file://lumos.raw/orders", "file://lumos.sales/orders"]
    columns = [r for r in rows(nodes, "Column") if r["KEY"].startswith("file://lumos.sales/orders/")]
    order = {c["name"]: int(c["sort_order:UNQUOTED"]) for c in columns}
    assert order == {f.name: i for i, f in enumerate(estate()[1].schema.fields)}
    assert {c["name"]: c["col_type"] for c in columns}["amount"] == "decimal(10,2)"
    lineage = {(r["START_KEY"], r["END_KEY"]) for r in rows(rels, "Table_Table_HAS_DOWNSTREAM")}
    assert lineage == {("file://lumos.raw/orders", "file://lumos.sales/orders"),
                       ("file://lumos.sales/orders", "file://lumos.marts/revenue")}  # fmt: skip
    owners = {(r["START_KEY"], r["END_KEY"], r["REVERSE_TYPE"]) for r in rows(rels, "Table_User_OWNER")}
    assert ("file://lumos.sales/orders", "data-eng", "OWNER_OF") in owners
    assert {r["KEY"] for r in rows(nodes, "Tag")} == {"pii", "finance"}
    assert {r["TYPE"] for r in rows(rels, "Schema_Table")} == {"TABLE"}


def test_round_trip_store_to_amundsen_to_store_is_identical(tmp_path):
    snapshots = estate()
    catalog = AmundsenCatalog(str(tmp_path / "amundsen"))
    catalog.emit(snapshots)
    back = {s.dataset.name: s for s in catalog.read_all()}
    assert {n: comparable(s) for n, s in back.items()} == {s.dataset.name: comparable(s) for s in snapshots}


def test_what_amundsen_lowercases_comes_back_as_lumos_spelled_it_and_edits_win(tmp_path):
    raw, orders, mart = estate()
    orders = replace(orders, tags=("PII",), owners=(Owner("Ann@Example.com"),))
    catalog = AmundsenCatalog(str(tmp_path / "a"))
    catalog.emit([raw, orders, mart])
    assert {r["KEY"] for r in rows(tmp_path / "a" / "nodes", "Tag")} == {"pii", "finance"}
    back = {s.dataset.name: s for s in catalog.read_all()}
    assert back["sales/orders"].tags == ("PII",) and back["sales/orders"].owners == (Owner("Ann@Example.com"),)
    # a description edited in Amundsen (its Description node) is what comes back
    path = next((tmp_path / "a" / "nodes").glob("Description_*.csv"))
    path.write_text(path.read_text().replace("Orders as checkout writes them.", "edited in Amundsen"))
    assert {s.dataset.name: s.description for s in catalog.read_all()}["sales/orders"] == "edited in Amundsen"


def test_emits_merge_into_the_current_state_and_a_removal_drops_the_table(tmp_path):
    raw, orders, mart = estate()
    catalog = AmundsenCatalog(str(tmp_path / "a"))
    catalog.emit([raw, orders])
    catalog.emit([mart])
    first = {p.name: p.read_bytes() for p in (tmp_path / "a").rglob("*.csv")}
    catalog.emit([orders])  # the same content again: the same files
    assert {p.name: p.read_bytes() for p in (tmp_path / "a").rglob("*.csv")} == first
    catalog.emit([replace(raw, removed=True), replace(orders, tags=())])
    back = {s.dataset.name: s for s in catalog.read_all()}
    assert sorted(back) == ["marts/revenue", "sales/orders"] and back["sales/orders"].tags == ()
    assert {r["KEY"] for r in rows(tmp_path / "a" / "nodes", "Tag")} == {"finance"}


def test_lumos_yaml_and_delivery_and_lumos_export(tmp_path):
    entry = {"type": "amundsen", "path": str(tmp_path / "amundsen")}
    [catalog] = catalogs_from_entries([entry])
    store = SnapshotStore(f"sqlite:///{tmp_path / 'lumos.db'}")
    store.put(estate(), catalogs=[catalog.name])
    assert deliver(store, catalog).delivered == 3
    store.close()
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump({"catalog": entry}))
    args = ["export", "--from", "amundsen", "-o", str(tmp_path / "a.json"), "-c", str(tmp_path / "lumos.yaml")]
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 0, out.output
    assert "3 datasets, 3 versions, 2 lineage edges" in out.stdout
