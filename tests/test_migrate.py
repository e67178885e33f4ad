"""`lumos migrate`: DataHub Lite → OpenMetadata → Apache Atlas of the demo estate plus 1,000
generated datasets, each leg verified by reading the target back, with the design's report.

DataHub Lite is the real thing, written by a Dagster run over the demo lake. No OpenMetadata
server can run here (no Docker, no network): the target is tests/fake_servers.py's
FakeOpenMetadata, which keeps what is PUT and serves it back in the shapes OpenMetadata's API
documents, and can lose one table's lineage (an injected loss). Nor can an Atlas server: the
last leg goes to tests/fake_atlas.py's FakeAtlas, which validates request bodies against Atlas'
documented v2 model."""

import random
from datetime import date, datetime, timezone

import pytest
import yaml
from click.testing import CliRunner
from dagster import DagsterInstance

from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog
from lumos_dagster.cli import main
from lumos_dagster.definitions import build_definitions
from lumos_dagster.floor.config import load_config
from lumos_dagster.floor.datatypes import Field, Primitive, Schema
from lumos_dagster.floor.model import DatasetRef, LineageEdge, Owner, Snapshot
from tests.fake_atlas import FakeAtlas
from tests.fake_servers import FakeOpenMetadata
from tests.lake import demo_project

pytestmark = [pytest.mark.dagster, pytest.mark.servers, pytest.mark.slow]

DAY = date(2026, 11, 25)
GENERATED = 1000


def generated(n: int, seed: int = 17) -> list[Snapshot]:
    """`n` datasets in a lineage forest whose order is not their names' (so an import that writes a
    dataset before its upstream would lose the edge), with owners, tags, terms and versions."""
    rng = random.Random(seed)
    order = list(range(n))
    rng.shuffle(order)
    refs = [DatasetRef("file", f"generated/t{i:04d}", f"/lake/generated/t{i:04d}", "parquet") for i in range(n)]
    out = []
    for position, i in enumerate(order):
        ups = rng.sample(order[:position], min(position, rng.choice((0, 1, 1, 2))))
        out.append(Snapshot(
            refs[i], str(DAY), datetime(2026, 11, 25, tzinfo=timezone.utc),
            schema=Schema((Field("id", Primitive("int64"), False), Field(f"v{i % 5}", Primitive("string")))),
            description=f"generated table {i}" if i % 3 else None,
            owners=(Owner(f"user{i % 7}@example.com"),) + ((Owner(f"team{i % 3}", "group"),) if i % 2 else ()),
            tags=("finance",) if i % 4 == 0 else ("pii", "gold") if i % 4 == 1 else (),
            terms=("Order Identifier",) if i % 10 == 0 else (),
            upstream=tuple(LineageEdge(refs[u]) for u in ups),
            version=f"{1 + i % 3}.{i % 5}.0",
        ))  # fmt: skip
    return out


@pytest.fixture(scope="module")
def lite(tmp_path_factory):
    """A DataHub Lite file holding the demo estate (a Dagster run over the demo lake) and 1,000
    generated datasets; and every owner it names, as OpenMetadata would need them."""
    tmp = tmp_path_factory.mktemp("migrate")
    demo_project(tmp, DAY)
    assert CliRunner().invoke(main, ["discover", "--config", str(tmp / "lumos.yaml")]).exit_code == 0
    job = build_definitions(load_config(str(tmp / "lumos.yaml"))).resolve_implicit_global_asset_job_def()
    assert job.execute_in_process(partition_key=str(DAY), instance=DagsterInstance.ephemeral()).success
    catalog = DataHubLiteCatalog(str(tmp / "catalog.db"))
    demo = list(catalog.read_all())
    assert len(demo) == 8 and sum(len(s.upstream) for s in demo) > 0
    catalog.emit(generated(GENERATED))
    catalog.close()
    owners = {(o.kind, o.id) for s in DataHubLiteCatalog(str(tmp / "catalog.db")).read_all() for o in s.owners}
    return tmp / "catalog.db", owners


def _migrate(tmp_path, lite_path, server, atlas=None, leg=("datahub-lite", "openmetadata")):
    config = tmp_path / "migrate.yaml"
    catalogs = [{"type": "datahub-lite", "path": str(lite_path)}, {"type": "openmetadata", "server": server.url}]
    if atlas is not None:
        catalogs.append({"type": "atlas", "url": atlas.url, "username": "admin"})
    config.write_text(yaml.safe_dump({"catalog": catalogs}))
    return CliRunner().invoke(main, ["migrate", "--from", leg[0], "--to", leg[1], "-c", str(config)])


def _server(owners, leave_out=()):
    users = tuple(i for k, i in owners if k == "user" and i not in leave_out)
    return FakeOpenMetadata(users=users, teams=tuple(i for k, i in owners if k == "group")).start()


def test_datahub_lite_to_openmetadata_to_atlas_carries_everything_and_a_second_run_changes_nothing(
    lite, tmp_path, monkeypatch
):
    lite_path, owners = lite
    source = list(DataHubLiteCatalog(str(lite_path)).read_all())
    n, edges = len(source), sum(len(s.upstream) for s in source)
    counts = {w: sum(len(getattr(s, w)) for s in source) for w in ("owners", "tags", "terms")}
    versions, described = sum(bool(s.version) for s in source), sum(bool(s.description) for s in source)
    assert n == GENERATED + 8 and edges > GENERATED // 2 and all(counts.values())

    server = _server(owners)
    try:
        result = _migrate(tmp_path, lite_path, server)
        assert result.exit_code == 0, result.output
        lines = result.stdout.splitlines()
        assert lines[1:] == [
            f"{n:,}/{n:,} datasets migrated, {edges:,}/{edges:,} lineage edges migrated",
            f"{versions:,}/{versions:,} versions, {counts['owners']:,}/{counts['owners']:,} owners, "
            f"{counts['tags']:,}/{counts['tags']:,} tags, "
            f"{counts['terms']:,}/{counts['terms']:,} glossary terms carried",
            f"{n:,}/{n:,} schemas, {described:,}/{described:,} descriptions identical",
        ]
        assert lines[0].startswith(f"exported from datahub-lite:{lite_path}: {n} datasets, {versions} versions")
        assert len(server.entities["tables"]) == n and len(server.lineage) == edges

        state, writes = dict(server.versions), len([r for r in server.requests if r[0] != "GET"])
        again = _migrate(tmp_path, lite_path, server)
        assert again.exit_code == 0, again.output
        assert again.stdout.splitlines()[0] == f"nothing to migrate: openmetadata:{server.url} already holds everything"
        assert server.versions == state and len([r for r in server.requests if r[0] != "GET"]) == writes

        monkeypatch.setenv("ATLAS_PASSWORD", "admin")
        atlas = FakeAtlas().start()
        try:
            onward = _migrate(tmp_path, lite_path, server, atlas, leg=("openmetadata", "atlas"))
        finally:
            atlas.stop()
        assert onward.exit_code == 0, onward.output
        assert onward.stdout.splitlines()[1:] == lines[1:]  # every count equal on the second leg too
    finally:
        server.stop()


def test_a_lost_lineage_edge_or_an_unknown_owner_fails_the_migration_and_says_what(lite, tmp_path):
    lite_path, owners = lite
    source = {s.dataset.name: s for s in DataHubLiteCatalog(str(lite_path)).read_all()}
    edges = sum(len(s.upstream) for s in source.values())
    victim = next(s for s in source.values() if len(s.upstream) == 2 and s.dataset.name.startswith("generated/"))
    user = "user3@example.com"
    uses = sum(Owner(user) in s.owners for s in source.values())
    server = _server(owners, leave_out=(user,))
    server.drop_lineage_to = {f"lumos.lake.generated.{victim.dataset.name.split('/')[1]}"}
    try:
        result = _migrate(tmp_path, lite_path, server)
    finally:
        server.stop()
    assert result.exit_code == 1
    out = result.stdout
    assert f"{edges - 2:,}/{edges:,} lineage edges migrated" in out
    ups = sorted(e.upstream.name for e in victim.upstream)
    assert f"lost: 2 lineage edges ({victim.dataset.name} ← {ups[0]}, {victim.dataset.name} ← {ups[1]})" in out
    assert f"  owner {user} (user): openmetadata:{server.url} lacks it ({uses} datasets)" in out
    assert f"lost: {uses} owners (" in out and "1 item requires manual mapping:" in out


def test_a_catalog_lumos_cannot_read_back_cannot_be_a_verified_target(tmp_path):
    config = tmp_path / "lumos.yaml"
    catalogs = [{"type": "datahub-lite", "path": str(tmp_path / "lite.db")},
                {"type": "openlineage", "path": str(tmp_path / "ol.jsonl")}]  # fmt: skip
    config.write_text(yaml.safe_dump({"catalog": catalogs}))
    lite = DataHubLiteCatalog(str(tmp_path / "lite.db"))
    lite.emit(generated(3))
    lite.close()
    result = CliRunner().invoke(main, ["migrate", "--from", "datahub-lite", "--to", "openlineage", "-c", str(config)])
    assert result.exit_code == 1
    assert "openlineage: Lumos cannot read this catalog back, so a migration into it cannot be" in result.output
    assert not (tmp_path / "ol.jsonl").exists()


def test_generated_datasets_are_not_in_name_order():
    """The generator's premise: some dataset sorts before one of its upstreams."""
    snapshots = generated(50)
    assert any(e.upstream.name > s.dataset.name for s in snapshots for e in s.upstream)


def test_from_the_store_into_a_catalog_the_history_is_reported_as_not_carried(tmp_path):
    """The store keeps earlier versions and releases; a catalog cannot: said, and failing unless
    `--allow-limits` accepts what the target cannot hold."""
    from tests.test_catalog_roundtrip import _store_with_history

    _store_with_history(tmp_path / "store.db").close()
    config = tmp_path / "lumos.yaml"
    config.write_text(yaml.safe_dump({"store": {"path": "store.db"}}))
    target = f"datahub-lite:{tmp_path / 'lite.db'}"
    first = CliRunner().invoke(main, ["migrate", "--from", "store", "--to", target, "-c", str(config)])
    assert first.exit_code == 1, first.output
    assert f"{target} keeps no version history: 1 earlier version not carried" in first.stdout
    assert f"{target} keeps no releases: 1 release not carried" in first.stdout
    assert "3/3 datasets migrated, 2/2 lineage edges migrated" in first.stdout and "lost:" not in first.stdout
    args = ["migrate", "--from", "store", "--to", target, "-c", str(config), "--allow-limits"]
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0, again.output
    assert again.stdout.startswith(f"nothing to migrate: {target} already holds everything\n")
