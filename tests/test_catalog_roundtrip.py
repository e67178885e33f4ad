"""Store → catalog → store, for every catalog Lumos reads back: the current state comes back
identical, and what the catalog cannot hold (its `cannot_hold` declaration: version history,
releases…) is reported with exact counts, never silently dropped.

DataHub Lite and the MCP file are the real thing (DataHub's own SQLite store and file sink).
No DataHub GMS or OpenMetadata server can run here (no Docker, no network): those run against
the stand-ins of tests/fake_servers.py, which keep what is written and serve it back in the
shapes the vendors document (OpenMetadata: paged `GET /tables`, the lineage API, custom
properties of the `table` type).

A new catalog adds a row to ROUND_TRIPS: a context manager giving its adapter, built on
whatever stand-in it needs."""

import contextlib
import json
from dataclasses import replace
from datetime import timedelta

import pytest
import yaml
from click.testing import CliRunner

from lumos_dagster.catalog.amundsen import AmundsenCatalog
from lumos_dagster.catalog.atlas import AtlasCatalog
from lumos_dagster.catalog.base import HISTORY, RELEASES
from lumos_dagster.catalog.datahub_file import DataHubFileCatalog
from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog
from lumos_dagster.catalog.datahub_rest import DataHubRestCatalog
from lumos_dagster.catalog.openmetadata import OpenMetadataCatalog
from lumos_dagster.cli import main
from lumos_dagster.estate import carry, portable
from lumos_dagster.floor.datatypes import Field, Fixed, Schema
from lumos_dagster.floor.model import DatasetRecord
from lumos_dagster.floor.snapshot_json import snapshot_to_json
from lumos_dagster.store import SnapshotStore
from tests.fake_atlas import FakeAtlas
from tests.fake_servers import FakeGMS, FakeOpenMetadata
from tests.test_catalogs import estate as three_datasets
from tests.test_catalogs import held

pytestmark = pytest.mark.servers

#: the owners of three_datasets(), as OpenMetadata must know them to take them
USERS, TEAMS = ("ann@example.com", "ghost@example.com"), ("data-eng",)


@contextlib.contextmanager
def _lite(tmp_path):
    yield DataHubLiteCatalog(str(tmp_path / "lite.db"))


@contextlib.contextmanager
def _file(tmp_path):
    yield DataHubFileCatalog(str(tmp_path / "mcps.json"))


@contextlib.contextmanager
def _gms(tmp_path):
    server = FakeGMS().start()
    try:
        yield DataHubRestCatalog(server.url, retries=0)
    finally:
        server.stop()


@contextlib.contextmanager
def _openmetadata(tmp_path):
    server = FakeOpenMetadata(users=USERS, teams=TEAMS).start()
    try:
        yield OpenMetadataCatalog(server.url, retries=0)
    finally:
        server.stop()


@contextlib.contextmanager
def _atlas(tmp_path):
    server = FakeAtlas().start()  # Atlas' v2 model, every request body validated (tests/fake_atlas.py)
    try:
        yield AtlasCatalog(server.url, "admin", "admin", retries=0)
    finally:
        server.stop()


@contextlib.contextmanager
def _amundsen(tmp_path):  # databuilder's node and relationship CSVs, what its publisher loads
    yield AmundsenCatalog(str(tmp_path / "amundsen"))


ROUND_TRIPS = {
    "datahub-lite": _lite,
    "datahub-file": _file,
    "datahub-rest": _gms,
    "openmetadata": _openmetadata,
    "atlas": _atlas,
    "amundsen": _amundsen,
}


def _avro_names(schema: Schema) -> Schema:
    """`schema` as an Avro file gives it: the top-level record, a nested record and a fixed named, and
    aliased (their old names)."""
    customer = [replace(f, type=replace(f.type, name="shop.Customer", aliases=("shop.Buyer",)))
                if f.name == "customer" else f for f in schema.fields]  # fmt: skip
    return Schema((*customer, Field("digest", Fixed(16, "shop.Md5", ("shop.Hash",)))), "shop.Order", ("shop.Sale",))


def _store_with_history(path) -> SnapshotStore:
    """Three related datasets; sales/orders has an earlier version, and a release names it; raw/orders,
    an Avro dataset, names its records and fixed."""
    store = SnapshotStore(f"sqlite:///{path}")
    snapshots = three_datasets()
    snapshots[0] = replace(snapshots[0], schema=_avro_names(snapshots[0].schema))
    orders = snapshots[1]
    earlier = replace(orders, version="1.1.0", captured_at=orders.captured_at - timedelta(days=1))
    store.upsert_datasets(
        [DatasetRecord(s.dataset.name, s.dataset.platform, "lake", s.dataset.location, s.dataset.format, s.domain)
         for s in snapshots]
    )  # fmt: skip
    store.put([earlier])
    store.put(snapshots)
    store.add_release("R-1", {"sales/orders": "1.1.0"})
    return store


def _current(estate: portable.Estate) -> dict[str, dict]:
    """Each dataset's current snapshot, but for when it was captured and the data's age then."""
    out = {}
    for e in estate.entries:
        doc = snapshot_to_json(e.snapshot)
        doc.pop("captured_at")
        if doc["quality"]:
            doc["quality"]["age_hours"] = None
        out[e.snapshot.dataset.name] = doc
    return out


@pytest.mark.parametrize("name", sorted(ROUND_TRIPS))
def test_store_to_catalog_to_store(name, tmp_path):
    store = _store_with_history(tmp_path / "store.db")
    source = portable.from_store(store)
    store.close()
    assert len(source.entries[0].history) + len(source.entries[1].history) + len(source.entries[2].history) == 1

    with ROUND_TRIPS[name](tmp_path) as catalog:
        portable.import_into_catalog(source, catalog)
        back = portable.from_snapshots(catalog.read_all(), catalog.name)
        catalog.close()

    assert portable.compare(source, back).same
    # DataHub holds each dataset's current state without what only Lumos' store keeps (changes, errors…)
    same = (lambda d: {k: held(v) for k, v in d.items()}) if name.startswith("datahub") else (lambda d: d)
    assert same(_current(back)) == same(_current(source))
    raw = next(e.snapshot for e in back.entries if e.snapshot.dataset.name == "raw/orders")
    assert (raw.schema.name, raw.schema.aliases) == ("shop.Order", ("shop.Sale",))
    assert raw.schema.field("digest").type == Fixed(16, "shop.Md5", ("shop.Hash",))
    assert raw.schema.field("customer").type.aliases == ("shop.Buyer",)
    report = carry.carried(source, back, name, catalog.cannot_hold)
    assert report.lost == {} and report.complete
    # exactly what it cannot hold, counted: one earlier version, one release
    assert report.not_held == {w: n for w, n in {HISTORY: 1, RELEASES: 1}.items() if w in catalog.cannot_hold}
    assert report.expected["history"] == 1 and report.expected["releases"] == 1

    # and back into a fresh store: the current state as it was
    again = SnapshotStore(f"sqlite:///{tmp_path / 'again.db'}")
    portable.import_into_store(back, again)
    assert same(_current(portable.from_store(again))) == same(_current(source))
    again.close()


def test_openmetadata_export_and_compare_through_the_cli(tmp_path):
    """`lumos export --from openmetadata` and `lumos compare DOC openmetadata` (they used to fail
    with "Lumos cannot read this catalog back"); compare says what OpenMetadata cannot hold."""
    store = _store_with_history(tmp_path / "store.db")
    source = portable.from_store(store)
    store.close()
    server = FakeOpenMetadata(users=USERS, teams=TEAMS).start()
    try:
        portable.import_into_catalog(source, OpenMetadataCatalog(server.url, retries=0))
        config = tmp_path / "lumos.yaml"
        config.write_text(yaml.safe_dump({"catalog": {"type": "openmetadata", "server": server.url}}))
        doc = tmp_path / "store.json"
        doc.write_text(json.dumps(portable.to_json(source)))
        out = CliRunner().invoke(main, ["export", "--from", "openmetadata", "-o", str(tmp_path / "om.json"),
                                        "-c", str(config)])  # fmt: skip
        assert out.exit_code == 0, out.output
        assert f"3 datasets, 3 versions, 2 lineage edges, 0 releases (from openmetadata:{server.url})" in out.stdout
        assert "keeps no earlier versions, releases: export from the store for those" in out.stdout
        compared = CliRunner().invoke(main, ["compare", str(doc), "openmetadata", "-c", str(config)])
        assert compared.exit_code == 0, compared.output
        assert compared.stdout.splitlines() == [
            "the same",
            "  openmetadata keeps no version history: 1 earlier version not carried",
            "  openmetadata keeps no releases: 1 release not carried",
        ]
        # a description edited in OpenMetadata is what comes back, and compare shows it
        fqn = "lumos.lake.sales.orders"
        server.entities["tables"][fqn]["description"] = "edited in OpenMetadata"
        changed = CliRunner().invoke(main, ["compare", str(doc), "openmetadata", "-c", str(config)])
        assert changed.exit_code == 1
        edited = "  sales/orders: description: 'Orders as checkout writes them.' ≠ 'edited in OpenMetadata'"
        assert edited in changed.stdout
    finally:
        server.stop()
