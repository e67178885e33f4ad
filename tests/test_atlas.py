"""The Apache Atlas adapter against FakeAtlas, a stand-in that validates every request body
against Atlas' documented v2 model (no Atlas server can run here)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import requests
import yaml
from click.testing import CliRunner

from lumos_dagster.catalog.atlas import AtlasCatalog
from lumos_dagster.catalog.base import Undeliverable
from lumos_dagster.cli import main
from lumos_dagster.delivery.catalogs import catalogs_from_entries
from lumos_dagster.delivery.outbox import deliver
from lumos_dagster.floor.datatypes import Field, Primitive, Schema
from lumos_dagster.floor.errors import CatalogError
from lumos_dagster.floor.model import LineageEdge
from lumos_dagster.floor.snapshot_json import snapshot_to_json
from lumos_dagster.store import SnapshotStore
from tests.fake_atlas import FakeAtlas
from tests.test_catalogs import estate

pytestmark = pytest.mark.servers


@pytest.fixture
def atlas():
    server = FakeAtlas(password="s3cret").start()
    yield server
    server.stop()


def comparable(s) -> dict:
    doc = snapshot_to_json(s)
    doc.pop("captured_at")
    return doc


def test_round_trip_store_to_atlas_to_store_is_identical(atlas):
    snapshots = estate()
    catalog = AtlasCatalog(atlas.url, "admin", "s3cret", retries=0)
    catalog.emit(snapshots)
    back = {s.dataset.name: s for s in catalog.read_all()}
    assert sorted(back) == sorted(s.dataset.name for s in snapshots)
    for s in snapshots:
        assert comparable(back[s.dataset.name]) == comparable(s), s.dataset.name


def test_atlas_holds_them_in_its_own_model(atlas):
    """What an Atlas user sees: typed entities, columns, Process lineage, classifications, terms."""
    raw, orders, mart = estate()
    catalog = AtlasCatalog(atlas.url, "admin", "s3cret", retries=0)
    catalog.emit([raw, orders, mart])
    table = atlas.find("DataSet", "file://sales/orders@lumos")
    assert table["typeName"] == "lumos_dataset"
    assert table["attributes"]["owner"] == "ann@example.com,data-eng"
    assert [c["typeName"] for c in table["classifications"]] == ["pii"]
    columns = sorted(atlas.entities[g]["attributes"]["name"] for g, o in atlas.owner.items() if o == table["guid"])
    assert columns == sorted(f.name for f in orders.schema.fields)
    processes = [e for e in atlas.entities.values() if e["typeName"] == "lumos_process"]
    edges = sorted(
        (p["attributes"]["inputs"][0]["uniqueAttributes"]["qualifiedName"],
         p["attributes"]["outputs"][0]["uniqueAttributes"]["qualifiedName"]) for p in processes
    )  # fmt: skip
    assert edges == [("file://raw/orders@lumos", "file://sales/orders@lumos"),
                     ("file://sales/orders@lumos", "file://marts/revenue@lumos")]  # fmt: skip
    assigned = {
        (atlas.terms[t]["name"], atlas.entities[g]["attributes"]["name"]) for t, g in atlas.assignments.values()
    }
    assert ("Order Identifier", "sales/orders") in assigned
    # what people edit in Atlas is what comes back
    table["attributes"]["description"] = "edited in Atlas"
    table["classifications"] = []
    back = next(s for s in catalog.read_all() if s.dataset.name == "sales/orders")
    assert (back.description, back.tags) == ("edited in Atlas", ())


def test_a_second_emit_changes_nothing_and_edits_replace_what_was_there(atlas):
    raw, orders, mart = estate()
    catalog = AtlasCatalog(atlas.url, "admin", "s3cret", retries=0)
    catalog.emit([raw, orders, mart])
    versions = dict(atlas.versions)
    catalog.emit([raw, orders, mart])
    assert atlas.versions == versions  # nothing rewritten, no duplicate entity, no second term assignment
    assert len(atlas.assignments) == len({*atlas.assignments.values()})
    # a tag, a term, a column and a lineage edge dropped in Lumos are dropped in Atlas too
    fewer = Schema(orders.schema.fields[:2])
    orders2 = replace(orders, tags=(), terms=(), schema=fewer, upstream=())
    catalog.emit([orders2])
    back = {s.dataset.name: s for s in catalog.read_all()}
    assert comparable(back["sales/orders"]) == comparable(orders2)
    assert comparable(back["marts/revenue"]) == comparable(mart)


def test_a_removed_dataset_is_soft_deleted_and_comes_back(atlas):
    raw, orders, mart = estate()
    catalog = AtlasCatalog(atlas.url, "admin", "s3cret", retries=0)
    catalog.emit([raw, orders, mart])
    catalog.emit([replace(raw, removed=True)])
    back = {s.dataset.name: s.removed for s in catalog.read_all()}
    assert back == {"raw/orders": True, "sales/orders": False, "marts/revenue": False}
    catalog.emit([raw])
    assert not any(s.removed for s in catalog.read_all())


def test_the_stand_in_refuses_what_atlas_refuses(atlas):
    def post(path, body):
        return requests.post(f"{atlas.url}/api/atlas/v2/{path}", json=body, auth=("admin", "s3cret"), timeout=5)

    AtlasCatalog(atlas.url, "admin", "s3cret", retries=0).emit(estate()[:1])
    no_name = {"entities": [{"typeName": "lumos_dataset", "attributes": {"qualifiedName": "x", "platform": "file"}}]}
    assert post("entity/bulk", no_name).status_code == 400  # Asset.name is mandatory
    assert post("entity/bulk", {"entities": [{"attributes": {}}]}).status_code == 400  # no typeName
    assert post("types/typedefs", {"entityDefs": [{"typeName": "x"}]}).status_code == 400  # a def has a name
    assert post("types/typedefs", {"classificationDefs": [{"name": "pii"}]}).status_code == 200
    assert post("types/typedefs", {"classificationDefs": [{"name": "pii"}]}).status_code == 409
    bad_end = {"relationshipDefs": [{"name": "r", "relationshipCategory": "OWNS", "endDef1": {}, "endDef2": {}}]}
    assert post("types/typedefs", bad_end).status_code == 400
    assert requests.get(f"{atlas.url}/api/atlas/v2/types/typedefs/headers", timeout=5).status_code == 401


def test_delivery_quarantines_what_atlas_can_never_take_and_delivers_the_rest(tmp_path, atlas):
    raw, orders, mart = estate()
    bad = replace(mart, tags=("finance-2026",))  # '-' is not in an Atlas classification name
    catalog = AtlasCatalog(atlas.url, "admin", "s3cret", retries=0)
    store = SnapshotStore(f"sqlite:///{tmp_path / 'lumos.db'}")
    store.put([raw, orders, bad], catalogs=[catalog.name])
    report = deliver(store, catalog)
    assert report.delivered == 2 and not report.failed
    assert list(report.quarantined.values()) == [
        "marts/revenue: tag(s) ['finance-2026'] are not Atlas classification names (letters, digits, _, space)"
    ]
    assert {s.dataset.name for s in catalog.read_all()} == {"raw/orders", "sales/orders"}
    assert deliver(store, catalog).delivered == 0  # quarantined stays out; the rest is unchanged
    store.close()


def test_a_column_atlas_refuses_is_quarantined_not_retried(atlas):
    odd = replace(estate()[0], schema=Schema((Field("", Primitive("string")),)))  # a column needs a name
    catalog = AtlasCatalog(atlas.url, "admin", "s3cret", retries=0)
    with pytest.raises(Undeliverable, match="HTTP 400") as caught:
        catalog.emit([odd])
    assert list(caught.value.rejected) == [0]


def test_atlas_down_or_a_wrong_password_is_an_error_to_retry(atlas):
    with pytest.raises(CatalogError, match="HTTP 401"):
        AtlasCatalog(atlas.url, "admin", "wrong", retries=0).emit(estate())
    atlas.mode = "drop"
    with pytest.raises(requests.ConnectionError):  # not Undeliverable: the outbox keeps the batch
        AtlasCatalog(atlas.url, "admin", "s3cret", retries=0).emit(estate())


def test_a_dataset_gone_right_after_its_write_is_an_error_to_retry(atlas, monkeypatch):
    catalog = AtlasCatalog(atlas.url, "admin", "s3cret", retries=0)
    monkeypatch.setattr(catalog, "_get", lambda type_name, qn: None)  # another writer deleted it in between
    with pytest.raises(CatalogError, match="right after it was written"):  # not a TypeError on None
        catalog.emit(estate())


def test_lumos_yaml_configures_atlas_and_lumos_export_reads_it(tmp_path, monkeypatch, atlas):
    entry = {"type": "atlas", "url": atlas.url, "username": "admin"}
    with pytest.raises(CatalogError, match="ATLAS_PASSWORD is not set"):
        catalogs_from_entries([entry])
    monkeypatch.setenv("ATLAS_PASSWORD", "s3cret")
    [catalog] = catalogs_from_entries([entry])
    snapshots = estate()
    catalog.emit([replace(s, upstream=s.upstream[:1]) for s in snapshots])
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump({"catalog": entry}))
    args = ["export", "--from", "atlas", "-o", str(tmp_path / "atlas.json"), "-c", str(tmp_path / "lumos.yaml")]
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 0, out.output
    assert "3 datasets" in out.stdout and "2 lineage edges" in out.stdout and "s3cret" not in out.stdout


def test_lineage_to_a_dataset_atlas_lacks_waits(atlas):
    raw, orders, _ = estate()
    catalog = AtlasCatalog(atlas.url, "admin", "s3cret", retries=0)
    catalog.emit([orders])  # its upstream raw/orders is not in Atlas yet: no Process to nowhere
    assert not [e for e in atlas.entities.values() if e["typeName"] == "lumos_process"]
    catalog.emit([raw, orders])
    [edge] = next(s for s in catalog.read_all() if s.dataset.name == "sales/orders").upstream
    assert edge == LineageEdge(raw.dataset, orders.upstream[0].columns, orders.upstream[0].job)


def test_a_bearer_token_from_the_environment():
    server = FakeAtlas(token="t0ken").start()
    try:
        entry = {"type": "atlas", "url": server.url, "token_env": "LUMOS_TEST_ATLAS_TOKEN"}
        with pytest.raises(CatalogError, match="LUMOS_TEST_ATLAS_TOKEN is not set"):
            catalogs_from_entries([entry])
        with pytest.MonkeyPatch.context() as env:
            env.setenv("LUMOS_TEST_ATLAS_TOKEN", "t0ken")
            [catalog] = catalogs_from_entries([entry])
        catalog.emit(estate())
        assert len(list(catalog.read_all())) == 3
    finally:
        server.stop()
