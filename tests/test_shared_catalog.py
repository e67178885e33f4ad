"""Lumos as one writer among many in a DataHub: what another writer puts on Lumos' datasets, with
DataHub's own classes, survives every kind of snapshot (a new partition, a schema change, a
removal), in DataHub Lite, in the MCP file and through GMS (tests/fake_servers.FakeGMS: no GMS can run
here; it applies patches as GMS does, by Lumos' port of GMS' templates). And an estate Lumos wrote
under its old names moves to DataHub's: nothing duplicated, what people attached carried."""

import contextlib
import pathlib
from dataclasses import replace

import pytest
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.emitter.rest_emitter import DatahubRestEmitter
from datahub.ingestion.sink.file import write_metadata_file
from datahub.ingestion.source.file import read_metadata_file
from datahub.metadata.schema_classes import (
    AuditStampClass,
    DatasetPropertiesClass,
    EditableDatasetPropertiesClass,
    EditableSchemaFieldInfoClass,
    EditableSchemaMetadataClass,
    GlobalTagsClass,
    GlossaryTermAssociationClass,
    GlossaryTermsClass,
    OtherSchemaClass,
    OwnerClass,
    OwnershipClass,
    SchemaFieldClass,
    SchemaFieldDataTypeClass,
    SchemaMetadataClass,
    StatusClass,
    StringTypeClass,
    TagAssociationClass,
    UpstreamClass,
    UpstreamLineageClass,
)

from lumos_dagster.catalog.datahub import dataset_urn
from lumos_dagster.catalog.datahub_file import DataHubFileCatalog
from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog, open_lite
from lumos_dagster.catalog.datahub_moves import legacy_urn
from lumos_dagster.catalog.datahub_rest import DataHubRestCatalog
from lumos_dagster.catalog.patch_apply import patched_json, state_of
from lumos_dagster.delivery.outbox import deliver
from lumos_dagster.floor.datatypes import Field, Primitive, Schema
from lumos_dagster.store import SnapshotStore
from tests.fake_servers import FakeGMS
from tests.test_catalogs import estate

pytestmark = pytest.mark.servers

THEIR_EDGE = "urn:li:dataset:(urn:li:dataPlatform:dbt,analytics.stg_orders,PROD)"
STAMP = AuditStampClass(0, "urn:li:corpuser:them")


class Lite:
    def __init__(self, tmp_path):
        self.path = str(tmp_path / "lite.db")
        self.catalog = DataHubLiteCatalog(self.path)

    def aspects(self, urn: str) -> dict:
        self.catalog.close()
        lite = open_lite(self.path)
        try:
            found = lite.get(urn, None, typed=True) or {}
        finally:
            lite.close()
        found.pop("urn", None)
        return found

    def write(self, mcps) -> None:  # the other writer: DataHub Lite's own write()
        self.catalog.close()
        lite = open_lite(self.path)
        for mcp in mcps:
            lite.write(mcp)
        lite.close()


class File:
    def __init__(self, tmp_path):
        self.path = tmp_path / "mcps.json"
        self.catalog = DataHubFileCatalog(str(self.path))

    def aspects(self, urn: str) -> dict:
        return {n: a for (u, n), a in state_of(read_metadata_file(self.path)).items() if u == urn}

    def write(self, mcps) -> None:  # the other writer appends its records to the shared file
        write_metadata_file(pathlib.Path(self.path), [*read_metadata_file(self.path), *mcps])


class Gms:
    def __init__(self, server):
        self.server = server
        self.catalog = DataHubRestCatalog(server.url, retries=0)

    def aspects(self, urn: str) -> dict:
        return self.server.current(urn)

    def write(self, mcps) -> None:  # the other writer: DataHub's own REST emitter
        with DatahubRestEmitter(self.server.url) as emitter:
            for mcp in mcps:
                emitter.emit_mcp(mcp)


@contextlib.contextmanager
def catalog(kind, tmp_path):
    if kind != "gms":
        yield (Lite if kind == "lite" else File)(tmp_path)
        return
    server = FakeGMS().start()
    try:
        yield Gms(server)
    finally:
        server.stop()


def theirs(urn: str, now: dict) -> list[MetadataChangeProposalWrapper]:
    """Another tool's additions, each its own entry beside what is there (read, add, write whole, as a
    tool using DataHub's MCPs does)."""

    def add(name, default, field, entry):
        aspect = now.get(name) or default
        getattr(aspect, field).append(entry)
        return MetadataChangeProposalWrapper(entityUrn=urn, aspect=aspect)

    props = now.get("datasetProperties") or DatasetPropertiesClass()
    props.description = "Their description of the orders."
    props.customProperties = {**(props.customProperties or {}), "team": "finance", "sla_tier": "gold"}
    return [
        add("upstreamLineage", UpstreamLineageClass(upstreams=[]), "upstreams",
            UpstreamClass(THEIR_EDGE, "TRANSFORMED")),
        add("globalTags", GlobalTagsClass(tags=[]), "tags", TagAssociationClass("urn:li:tag:gold")),
        add("ownership", OwnershipClass(owners=[]), "owners", OwnerClass("urn:li:corpuser:fin-lead", "BUSINESS_OWNER")),
        add("glossaryTerms", GlossaryTermsClass(terms=[], auditStamp=STAMP), "terms",
            GlossaryTermAssociationClass("urn:li:glossaryTerm:Revenue")),
        MetadataChangeProposalWrapper(entityUrn=urn, aspect=props),
    ]  # fmt: skip


def assert_theirs_kept(aspects: dict, when: str) -> None:
    assert THEIR_EDGE in [u.dataset for u in aspects["upstreamLineage"].upstreams], when
    assert "urn:li:tag:gold" in [t.tag for t in aspects["globalTags"].tags], when
    assert "urn:li:corpuser:fin-lead" in [o.owner for o in aspects["ownership"].owners], when
    assert "urn:li:glossaryTerm:Revenue" in [t.urn for t in aspects["glossaryTerms"].terms], when
    props = aspects["datasetProperties"]
    assert props.customProperties["team"] == "finance" and props.customProperties["sla_tier"] == "gold", when


@pytest.mark.parametrize("kind", ["lite", "file", "gms"])
def test_what_another_writer_adds_survives_every_snapshot(kind, tmp_path):
    raw, orders, mart = estate()
    urn = dataset_urn(orders.dataset)
    with catalog(kind, tmp_path) as c, SnapshotStore(f"sqlite:///{tmp_path}/store.db") as store:

        def snapshot(s) -> dict:
            store.put([s], catalogs=[c.catalog.name])
            report = deliver(store, c.catalog)
            assert not report.failed and not report.quarantined, report
            return c.aspects(urn)

        first = snapshot(orders)
        c.write(theirs(urn, first))
        # Lumos' own entries are there beside theirs, attributed to Lumos
        assert_theirs_kept(c.aspects(urn), "after they wrote")

        later = snapshot(replace(orders, partition_key="2026-11-26", captured_at=orders.captured_at.replace(day=26)))
        assert_theirs_kept(later, "a new partition")
        assert later["datasetProperties"].customProperties["lumos.partition"] == "2026-11-26"

        narrower = Schema(orders.schema.fields[:-1] + (Field("channel", Primitive("string")),))
        changed = replace(orders, partition_key="2026-11-27", schema=narrower, version="2.0.0", tags=(), owners=())
        after = snapshot(changed)
        assert_theirs_kept(after, "a schema change")
        # what Lumos no longer says it removed, and only that: its pii tag and its owners
        assert [t.tag for t in after["globalTags"].tags] == ["urn:li:tag:gold"]
        assert [o.owner for o in after["ownership"].owners] == ["urn:li:corpuser:fin-lead"]
        assert after["datasetProperties"].description == "Orders as checkout writes them."  # Lumos' declared one

        gone = snapshot(replace(changed, partition_key="2026-11-28", removed=True, version="3.0.0",
                                change_class="major"))  # fmt: skip
        assert_theirs_kept(gone, "a removal")
        assert gone["status"].removed is True
        # one version everywhere: the removal's, as the store records it
        props = gone["datasetProperties"].customProperties
        assert (props["lumos.version"], props["lumos.change_class"]) == ("3.0.0", "major")
        c.catalog.close()


def test_the_mcp_file_keeps_every_record_it_did_not_write(tmp_path):
    from datahub.metadata.schema_classes import DatasetSnapshotClass, MetadataChangeEventClass

    path = tmp_path / "mcps.json"
    other = "urn:li:dataset:(urn:li:dataPlatform:hive,other.table,PROD)"
    mce = MetadataChangeEventClass(
        proposedSnapshot=DatasetSnapshotClass(urn=other, aspects=[StatusClass(removed=False)])
    )
    second = "urn:li:dataset:(urn:li:dataPlatform:hive,other.t2,PROD)"
    mcp = MetadataChangeProposalWrapper(entityUrn=second, aspect=StatusClass(removed=False))
    write_metadata_file(path, [mce, mcp])
    catalog = DataHubFileCatalog(str(path))
    catalog.emit(estate())
    catalog.emit([replace(s, description="Reworded.") for s in estate()])
    records = list(read_metadata_file(path))
    assert records[:2] == [mce, mcp]  # another team's MCE and proposal: kept, first, as they were


def _legacy_estate(lite_path: str, s) -> str:
    """DataHub Lite as an older Lumos left it: the dataset under Lumos' own URN, with what people added
    there (a description, a field's documentation and a tag, in DataHub's UI aspects)."""
    old = legacy_urn(s.dataset, "PROD")
    lite = open_lite(lite_path)
    field = "[version=2.0].[type=struct].[type=long].order_id"  # the v2 path older Lumos gave every field
    for aspect in (
        SchemaMetadataClass(schemaName=s.dataset.name, platform="urn:li:dataPlatform:file", version=0, hash="",
                            platformSchema=OtherSchemaClass(rawSchema=""),
                            fields=[SchemaFieldClass(field, SchemaFieldDataTypeClass(StringTypeClass()), "long")]),
        DatasetPropertiesClass(customProperties={"lumos.record": "{}"}, name="orders"),
        EditableDatasetPropertiesClass(description="Curated: one row per order."),
        EditableSchemaMetadataClass(editableSchemaFieldInfo=[EditableSchemaFieldInfoClass(field, "The order's key.")]),
        GlobalTagsClass(tags=[TagAssociationClass("urn:li:tag:certified")]),
    ):  # fmt: skip
        lite.write(MetadataChangeProposalWrapper(entityUrn=old, aspect=aspect))
    lite.close()
    return old


def test_an_estate_written_with_the_old_names_moves_once(tmp_path):
    raw, orders, mart = estate()
    orders = replace(orders, dataset=replace(orders.dataset, format="parquet"))
    lite_path = str(tmp_path / "lite.db")
    old = _legacy_estate(lite_path, orders)
    new = dataset_urn(orders.dataset)
    assert new != old
    catalog = DataHubLiteCatalog(lite_path)
    with SnapshotStore(f"sqlite:///{tmp_path}/store.db") as store:
        store.put([orders], catalogs=[catalog.name])
        store.record_deliveries(catalog.name, [(orders.dataset.urn, "2026-11-24", "old")])  # an older Lumos' delivery
        store.put([replace(orders, captured_at=orders.captured_at.replace(hour=7))], catalogs=[catalog.name])
        assert deliver(store, catalog).delivered == 1
        assert deliver(store, catalog).delivered == 0  # moved once
    catalog.close()
    lite = open_lite(lite_path)
    try:
        moved = lite.get(new, None, typed=True)
        left = lite.get(old, None, typed=True)
    finally:
        lite.close()
    assert moved["editableDatasetProperties"].description == "Curated: one row per order."
    doc = moved["editableSchemaMetadata"].editableSchemaFieldInfo
    assert [(i.fieldPath, i.description) for i in doc] == [("order_id", "The order's key.")]  # at DataHub's path
    assert "urn:li:tag:certified" in [t.tag for t in moved["globalTags"].tags]
    assert left["status"].removed is True  # the old entity soft-deleted: one dataset, not two
    assert not moved["status"].removed


def test_a_patch_of_an_aspect_the_entity_lacks_starts_from_its_default():
    from datahub.specific.dataset import DatasetPatchBuilder

    (mcp,) = DatasetPatchBuilder("urn:li:dataset:(urn:li:dataPlatform:file,x,PROD)").add_tag(
        TagAssociationClass("urn:li:tag:t")).build()  # fmt: skip
    assert [t.tag for t in patched_json(mcp, None).tags] == ["urn:li:tag:t"]
