"""Snapshot → DataHub aspects, checked with DataHub's own classes and golden-file helpers."""

import json
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.ingestion.sink.file import write_metadata_file
from datahub.metadata.schema_classes import (
    ArrayTypeClass,
    MapTypeClass,
    NumberTypeClass,
    OwnershipClass,
    RecordTypeClass,
    SchemaMetadataClass,
    UnionTypeClass,
    UpstreamLineageClass,
)
from datahub.testing.mce_helpers import check_golden_file
from datahub.utilities.urns.field_paths import get_simple_field_path_from_v2_field_path

from lumos_dagster.catalog.datahub import LUMOS_ACTOR, audit_stamp, schema_fields, snapshot_aspects
from lumos_dagster.model import (
    Array,
    AssertionResult,
    ColumnMapping,
    ColumnProfile,
    Cost,
    DatasetRef,
    Decimal,
    Enum,
    Field,
    FileError,
    JobRef,
    LineageEdge,
    Map,
    OperationalStats,
    Owner,
    Primitive,
    Profile,
    Quality,
    Schema,
    SchemaChange,
    Snapshot,
    Struct,
    Timestamp,
    UnionType,
)

GOLDEN = Path(__file__).parent / "golden"
ITEM = Struct((Field("sku", Primitive("string")), Field("qty", Primitive("int32"), nullable=False)))
SCHEMA = Schema(
    (
        Field(
            "order_id",
            Primitive("int64"),
            nullable=False,
            description="Unique order number",
            native_type="long",
            terms=("Order Identifier",),
        ),
        Field("amount", Decimal(10, 2)),
        Field("placed_at", Timestamp("ms", "UTC")),
        Field("status", Enum(("NEW", "PAID"), "Status")),
        Field(
            "customer",
            Struct((Field("id", Primitive("int64")), Field("address", Struct((Field("city", Primitive("string")),))))),
        ),
        Field("items", Array(ITEM)),
        Field("attrs", Map(Primitive("string"), Struct((Field("v", Primitive("float64")),)))),
        Field("code", UnionType((Primitive("int32"), Primitive("string")))),
    )
)


def snapshot(**changes) -> Snapshot:
    base = dict(
        dataset=DatasetRef("file", "sales/orders", "/lake/sales/orders", "avro"),
        partition_key="2026-11-25",
        captured_at=datetime(2026, 11, 25, 6, 0, tzinfo=timezone.utc),
        schema=SCHEMA,
        stats=OperationalStats(
            3, 12345, 1000, datetime(2026, 11, 25, 5, 0, tzinfo=timezone.utc), {"dt": ["2026-11-25"]}
        ),
        description="Orders as checkout writes them.",
        domain="sales",
        owners=(Owner("ann@example.com"), Owner("data-eng", "group", "TECHNICAL_OWNER")),
        tags=("pii",),
        upstream=(
            LineageEdge(
                DatasetRef("file", "raw/orders", "/lake/raw/orders", "avro"),
                (ColumnMapping("order_id", "id"), ColumnMapping("amount", "total")),
                JobRef("sql", "sql", "staging/load_orders.sql"),
            ),
        ),
        terms=("Order Identifier",),
        sla="6h",
        quality=Quality(
            0.75,
            "fresh",
            1.0,
            (
                AssertionResult(
                    "not_null_orders_order_id",
                    "pass",
                    "completeness",
                    "order_id",
                    "dbt",
                    None,
                    "2026-11-25T05:30:00+00:00",
                ),
                AssertionResult(
                    "expect_table_row_count_to_be_between",
                    "fail",
                    "consistency",
                    None,
                    "great_expectations",
                    "observed 1000",
                    "2026-11-25T05:40:00+00:00",
                ),
            ),  # fmt: skip
        ),
        profile=Profile(1000, 1.0, (ColumnProfile("order_id", 0.0, 998, "1", "1000"),)),
        version="1.2.0",
        previous_version="1.1.0",
        change_class="minor",
        policy="FULL",
        changes=(SchemaChange("code", "UNION_BRANCHES_ADDED", "int32", "union<int32, string>", True, False),),
        cost=Cost("2026-11", storage=12.5, compute=300, inherited=40.25, method="lineage_weighted", basis="mixed"),
        errors=(FileError("/lake/sales/orders/dt=2026-11-25/bad.avro", "cannot read avro: truncated"),),
    )
    return Snapshot(**{**base, **changes})


def test_aspects_match_the_golden_file(pytestconfig, tmp_path):
    out = tmp_path / "aspects.json"
    write_metadata_file(out, snapshot_aspects(snapshot()))
    check_golden_file(pytestconfig, out, GOLDEN / "sales_orders_aspects.json")


def test_audit_stamps_name_lumos_at_the_datas_time_or_the_capture():
    s = snapshot()
    aspects = {m.aspectName: m.aspect for m in snapshot_aspects(s) if m.entityUrn.startswith("urn:li:dataset:")}
    schema, lineage = aspects["schemaMetadata"], aspects["upstreamLineage"]
    stamps = [schema.created, schema.lastModified, *(u.auditStamp for u in lineage.upstreams)]
    stamps += [f.glossaryTerms.auditStamp for f in schema.fields if f.glossaryTerms]
    assert len(stamps) > 3
    modified = int(s.stats.last_modified.timestamp() * 1000)
    assert {(st.time, st.actor) for st in stamps} == {(modified, LUMOS_ACTOR)}
    # a database table has no modification time: the capture's
    table = replace(s, stats=replace(s.stats, last_modified=None))
    assert audit_stamp(table).time == int(s.captured_at.timestamp() * 1000)


def test_every_aspect_survives_datahubs_own_serialization():
    for mcp in snapshot_aspects(snapshot()):
        assert mcp.validate(), mcp
        assert MetadataChangeProposalWrapper.from_obj(mcp.to_obj()) == mcp


def test_v2_field_paths_give_back_the_flat_paths():
    fields = schema_fields(SCHEMA, audit_stamp(snapshot()))
    assert [get_simple_field_path_from_v2_field_path(f.fieldPath) for f in fields] == [p for p, _ in SCHEMA.flatten()]
    by_flat = {get_simple_field_path_from_v2_field_path(f.fieldPath): f for f in fields}
    assert (
        by_flat["items.sku"].fieldPath
        == "[version=2.0].[type=struct].[type=array].[type=struct].items.[type=string].sku"
    )
    assert isinstance(by_flat["items"].type.type, ArrayTypeClass)
    assert isinstance(by_flat["attrs"].type.type, MapTypeClass)
    assert isinstance(by_flat["customer.address"].type.type, RecordTypeClass)
    assert isinstance(by_flat["code"].type.type, UnionTypeClass)
    assert isinstance(by_flat["amount"].type.type, NumberTypeClass)
    assert by_flat["order_id"].nativeDataType == "long" and by_flat["order_id"].nullable is False
    assert by_flat["order_id"].description == "Unique order number"
    assert by_flat["items.qty"].nullable is False


def _aspects(s: Snapshot) -> dict:
    urn = "urn:li:dataset:(urn:li:dataPlatform:file,sales/orders,PROD)"
    return {m.aspectName: m.aspect for m in snapshot_aspects(s) if m.entityUrn == urn}


def test_lineage_ownership_and_properties():
    aspects = _aspects(snapshot())
    lineage: UpstreamLineageClass = aspects["upstreamLineage"]
    assert [u.dataset for u in lineage.upstreams] == ["urn:li:dataset:(urn:li:dataPlatform:file,raw/orders,PROD)"]
    owners: OwnershipClass = aspects["ownership"]
    assert [(o.owner, o.type) for o in owners.owners] == [
        ("urn:li:corpuser:ann@example.com", "DATAOWNER"),
        ("urn:li:corpGroup:data-eng", "TECHNICAL_OWNER"),
    ]
    props = aspects["datasetProperties"].customProperties
    assert props["lumos.version"] == "1.2.0" and props["lumos.rows"] == "1000" and props["lumos.errors"] == "1"
    assert (props["lumos.previous_version"], props["lumos.change_class"], props["lumos.policy"]) == (
        "1.1.0",
        "minor",
        "FULL",
    )
    assert props["lumos.changes"] == "NON_BREAKING UNION_BRANCHES_ADDED code (int32 → union<int32, string>)"
    assert props["lumos.breaking_changes"] == "0"
    assert (props["lumos.cost.total"], props["lumos.cost.method"]) == ("352.75", "lineage_weighted")
    assert aspects["container"].container.startswith("urn:li:container:")


def test_unreadable_and_undeclared_parts_are_not_sent():
    aspects = _aspects(snapshot(schema=Schema(), owners=(), tags=(), domain=None, upstream=()))
    assert "schemaMetadata" not in aspects  # an unreadable partition must not blank the catalog's schema
    assert not {"ownership", "globalTags", "domains"} & set(aspects)
    assert aspects["upstreamLineage"].upstreams == []  # lineage removal does reach the catalog


def test_schema_hash_is_the_fingerprint():
    s = snapshot()
    schema: SchemaMetadataClass = _aspects(s)["schemaMetadata"]
    assert schema.hash == s.fingerprint


def _by_entity(s: Snapshot) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for m in snapshot_aspects(s):
        out.setdefault(m.entityUrn, {})[m.aspectName] = m.aspect
    return out


def test_column_lineage_goes_to_the_dataset_and_to_the_job_that_builds_it():
    entities = _by_entity(snapshot())
    orders = "urn:li:dataset:(urn:li:dataPlatform:file,sales/orders,PROD)"
    raw = "urn:li:dataset:(urn:li:dataPlatform:file,raw/orders,PROD)"
    fine = entities[orders]["upstreamLineage"].fineGrainedLineages
    assert [(f.upstreams, f.downstreams) for f in fine] == [
        ([f"urn:li:schemaField:({raw},id)"], [f"urn:li:schemaField:({orders},order_id)"]),
        ([f"urn:li:schemaField:({raw},total)"], [f"urn:li:schemaField:({orders},amount)"]),
    ]
    job = "urn:li:dataJob:(urn:li:dataFlow:(sql,sql,PROD),staging/load_orders.sql)"
    io = entities[job]["dataJobInputOutput"]
    assert (io.inputDatasets, io.outputDatasets) == ([raw], [orders])
    assert entities[job]["dataJobInfo"].flowUrn == "urn:li:dataFlow:(sql,sql,PROD)"
    assert entities["urn:li:dataFlow:(sql,sql,PROD)"]["dataFlowInfo"].name == "sql"


def test_glossary_terms_profile_and_assertions():
    entities = _by_entity(snapshot())
    orders = entities["urn:li:dataset:(urn:li:dataPlatform:file,sales/orders,PROD)"]
    by_flat = {get_simple_field_path_from_v2_field_path(f.fieldPath): f for f in orders["schemaMetadata"].fields}
    assert [t.urn for t in by_flat["order_id"].glossaryTerms.terms] == ["urn:li:glossaryTerm:Order Identifier"]
    assert by_flat["amount"].glossaryTerms is None
    assert [t.urn for t in orders["glossaryTerms"].terms] == ["urn:li:glossaryTerm:Order Identifier"]
    assert entities["urn:li:glossaryTerm:Order Identifier"]["glossaryTermInfo"].name == "Order Identifier"
    field = orders["datasetProfile"].fieldProfiles[0]
    assert (field.fieldPath, field.nullProportion, field.uniqueCount, field.min, field.max) == (
        "order_id", 0.0, 998, "1", "1000"
    )  # fmt: skip
    assert orders["datasetProperties"].customProperties["lumos.quality.score"] == "0.750"
    runs = {
        a["assertionInfo"].datasetAssertion.nativeType: a["assertionRunEvent"].result.type
        for a in entities.values()
        if "assertionInfo" in a
    }
    assert runs == {"not_null_orders_order_id": "SUCCESS", "expect_table_row_count_to_be_between": "FAILURE"}


def test_the_fingerprint_changes_with_what_is_sent_not_with_when_lumos_looked(monkeypatch):
    from dataclasses import replace

    from lumos_dagster.catalog import datahub
    from lumos_dagster.catalog.datahub import DataHubCatalog
    from lumos_dagster.model import snapshot_dumps

    def sent(s):
        return [m.to_obj() for m in snapshot_aspects(s)]

    catalog, s = DataHubCatalog("test"), snapshot()
    later = replace(
        s, captured_at=datetime(2030, 1, 1, tzinfo=timezone.utc), quality=replace(s.quality, age_hours=99.0)
    )
    assert sent(later) == sent(s)  # what the fingerprint leaves out is in no aspect
    assert catalog.fingerprint(later) == catalog.fingerprint(s)
    others = (
        replace(s, description="Reworded."),
        replace(s, tags=()),
        replace(s, stats=replace(s.stats, row_count=1)),
        replace(s, schema=Schema(SCHEMA.fields[:-1])),
        replace(s, removed=True),
    )
    for other in others:
        assert sent(other) != sent(s) and catalog.fingerprint(other) != catalog.fingerprint(s)
    for each in (s, later, *others, replace(s, quality=None, cost=None)):
        stored = json.loads(snapshot_dumps(each))  # delivery hashes the document the store holds
        assert catalog.fingerprint_document(stored) == catalog.fingerprint(each)
    assert DataHubCatalog("test", env="DEV").fingerprint(s) != catalog.fingerprint(s)  # other URNs
    before = catalog.fingerprint(s)
    monkeypatch.setattr(datahub, "ASPECT_MAPPING_VERSION", "a new mapping")
    assert catalog.fingerprint(s) != before  # a new mapping sends every dataset again


def test_shared_aspects_are_sent_once_per_distinct_content():
    from dataclasses import replace

    from lumos_dagster.catalog.datahub import DataHubCatalog

    orders = snapshot()
    twin = replace(orders, dataset=DatasetRef("file", "sales/orders_eu", "/lake/sales/orders_eu", "avro"))
    mcps = DataHubCatalog("test").aspects([orders, twin])
    keys = [(m.entityUrn, m.aspectName) for m in mcps]
    folder = next(m.entityUrn for m in mcps if m.aspectName == "containerProperties")
    assert keys.count((folder, "containerProperties")) == 1  # the same folder: once
    job = "urn:li:dataJob:(urn:li:dataFlow:(sql,sql,PROD),staging/load_orders.sql)"
    assert keys.count((job, "dataJobInfo")) == 1
    assert keys.count((job, "dataJobInputOutput")) == 2  # two outputs: two contents, both sent, in order
    every = [(m.entityUrn, m.aspectName, m.aspect) for s in (orders, twin) for m in snapshot_aspects(s)]
    assert len(mcps) == len({(u, a, json.dumps(x.to_obj(), sort_keys=True)) for u, a, x in every})


def test_a_folder_container_goes_once_across_the_batches_of_a_run_and_again_after_a_failed_batch():
    """A run delivers in batches; the datasets of one folder in two batches send its container once.
    A batch the catalog refused is not remembered: its shared aspects go with the next try."""
    from lumos_dagster.catalog.datahub import DataHubCatalog

    class Recording(DataHubCatalog):  # the transport only: what the adapter hands to DataHub
        def __init__(self):
            super().__init__("recording")
            self.sent, self.down = [], False

        def _send(self, mcps):
            if self.down:
                raise ConnectionError("catalog down")
            self.sent += [(m.entityUrn, m.aspectName) for m in mcps]

    orders = snapshot()
    batches = [
        [replace(orders, dataset=DatasetRef("file", f"sales/t{i}", f"/lake/sales/t{i}", "csv"))] for i in range(3)
    ]
    catalog = Recording()
    catalog.down = True
    with pytest.raises(ConnectionError):
        catalog.emit(batches[0])
    catalog.down = False
    for batch in batches:
        catalog.emit(batch)
    folders = [k for k in catalog.sent if k[1] == "containerProperties"]
    assert folders and len(folders) == len(set(folders))  # each folder's container once, after the failure
    assert sum(1 for k in catalog.sent if k[1] == "schemaMetadata") == 3
