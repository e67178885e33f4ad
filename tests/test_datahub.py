"""Snapshot → DataHub aspects, checked with DataHub's own classes and golden-file helpers."""

import json
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest
from datahub.ingestion.sink.file import write_metadata_file
from datahub.metadata.schema_classes import (
    ArrayTypeClass,
    MapTypeClass,
    NumberTypeClass,
    OwnershipClass,
    RecordTypeClass,
    SchemaMetadataClass,
    TagAssociationClass,
    UnionTypeClass,
    UpstreamClass,
    UpstreamLineageClass,
)
from datahub.testing.mce_helpers import check_golden_file
from datahub.utilities.urns.field_paths import get_simple_field_path_from_v2_field_path

from lumos_dagster.catalog.datahub import (
    LUMOS_ACTOR,
    LUMOS_SOURCE,
    Claims,
    DataHubCatalog,
    audit_stamp,
    schema_fields,
    snapshot_proposals,
)
from lumos_dagster.catalog.patch_apply import state_of
from lumos_dagster.floor.datatypes import (
    Array,
    Decimal,
    Enum,
    Field,
    Map,
    Primitive,
    Schema,
    Struct,
    Timestamp,
    UnionType,
)
from lumos_dagster.floor.model import (
    AssertionResult,
    CheckResult,
    ColumnMapping,
    ColumnProfile,
    Cost,
    DatasetRef,
    FileError,
    JobRef,
    LineageEdge,
    OperationalStats,
    Owner,
    Profile,
    Quality,
    SchemaChange,
    Snapshot,
    TableTotals,
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


DS = "urn:li:dataset:(urn:li:dataPlatform:file,lake/sales/orders,PROD)"
RAW = "urn:li:dataset:(urn:li:dataPlatform:file,lake/raw/orders,PROD)"


def _state(s: Snapshot, before: Claims | None = None, state: dict | None = None) -> dict:
    """(entity, aspect) → aspect, as a catalog holds them once the snapshot's proposals are applied."""
    return state_of(snapshot_proposals(s, before=before), state)


def _aspects(s: Snapshot, before: Claims | None = None) -> dict:
    return {name: a for (urn, name), a in _state(s, before).items() if urn == DS}


def test_aspects_match_the_golden_file(pytestconfig, tmp_path):
    out = tmp_path / "aspects.json"
    write_metadata_file(out, snapshot_proposals(snapshot()))
    check_golden_file(pytestconfig, out, GOLDEN / "sales_orders_aspects.json")


def test_audit_stamps_name_lumos_at_the_datas_time_or_the_capture():
    s = snapshot()
    aspects = _aspects(s)
    schema, lineage = aspects["schemaMetadata"], aspects["upstreamLineage"]
    stamps = [schema.created, schema.lastModified, *(u.auditStamp for u in lineage.upstreams)]
    stamps += [f.glossaryTerms.auditStamp for f in schema.fields if f.glossaryTerms]
    assert len(stamps) > 3
    modified = int(s.stats.last_modified.timestamp() * 1000)
    assert {(st.time, st.actor) for st in stamps} == {(modified, LUMOS_ACTOR)}
    # a database table has no modification time: the capture's
    table = replace(s, stats=replace(s.stats, last_modified=None))
    assert audit_stamp(table).time == int(s.captured_at.timestamp() * 1000)


def test_every_proposal_survives_datahubs_own_serialization():
    proposals = snapshot_proposals(snapshot())
    assert {p.changeType for p in proposals} == {"UPSERT", "PATCH"}
    for p in proposals:
        assert p.validate(), p
        assert type(p).from_obj(p.to_obj()) == p
    for aspect in _state(snapshot()).values():  # and what the patches leave
        assert aspect.validate(), aspect


def test_field_paths_are_datahubs_for_the_format():
    """Avro: v2 paths (DataHub's Avro converter); Parquet and the rest: DataHub's simple ones, nested fields
    in the dotted style. Either way the flat path of every field comes back, and what Lumos knows rides on it."""
    avro = schema_fields(SCHEMA, audit_stamp(snapshot()), "file", "avro")
    flat = [p for p, _ in SCHEMA.flatten()]
    assert list(dict.fromkeys(get_simple_field_path_from_v2_field_path(f.fieldPath) for f in avro)) == flat
    by_flat = {get_simple_field_path_from_v2_field_path(f.fieldPath): f for f in avro}
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
    parquet = schema_fields(SCHEMA, audit_stamp(snapshot()), "file", "parquet", ("status",))
    assert [f.fieldPath for f in parquet] == flat
    assert [f.fieldPath for f in parquet if f.isPartitioningKey] == ["status"]


def test_lineage_ownership_and_properties():
    aspects = _aspects(snapshot())
    lineage: UpstreamLineageClass = aspects["upstreamLineage"]
    assert [u.dataset for u in lineage.upstreams] == [RAW]
    owners: OwnershipClass = aspects["ownership"]
    assert [(o.owner, o.type, o.attribution.source) for o in owners.owners] == [
        ("urn:li:corpuser:ann@example.com", "DATAOWNER", LUMOS_SOURCE),
        ("urn:li:corpGroup:data-eng", "TECHNICAL_OWNER", LUMOS_SOURCE),
    ]
    props = aspects["datasetProperties"]
    assert (props.name, props.description) == ("orders", "Orders as checkout writes them.")
    assert props.customProperties == {
        "lumos.dataset": "sales/orders", "lumos.format": "avro", "lumos.partition": "2026-11-25",
        "lumos.version": "1.2.0", "lumos.change_class": "minor", "lumos.errors": "1",
        "lumos.cost": "352.75 USD/month", "lumos.quality": "0.750", "number_of_files": "3", "size_in_bytes": "12345",
    }  # fmt: skip
    ours = {k: v for k, v in props.customProperties.items() if k.startswith("lumos.")}
    assert len(ours) <= 8 and all(len(v) < 40 for v in ours.values())
    assert aspects["container"].container.startswith("urn:li:container:")
    assert [e.id for e in aspects["browsePathsV2"].path][-1] == aspects["container"].container


def test_unreadable_and_undeclared_parts_are_not_sent_and_what_lumos_no_longer_says_is_removed():
    before = Claims.from_json(DataHubCatalog("test").claims(snapshot()))
    bare = snapshot(schema=Schema(), owners=(), tags=(), domain=None, upstream=(), description=None, terms=())
    proposals = snapshot_proposals(bare)
    assert "schemaMetadata" not in {p.aspectName for p in proposals}  # an unreadable partition must not blank it
    assert not {"ownership", "globalTags", "domains", "upstreamLineage"} & {p.aspectName for p in proposals}
    # what Lumos added before, and no longer has, goes; what someone else added stays
    theirs = UpstreamClass(dataset="urn:li:dataset:(urn:li:dataPlatform:dbt,stg.orders,PROD)", type="TRANSFORMED")
    state = _state(snapshot())
    state[DS, "upstreamLineage"].upstreams.append(theirs)
    state[DS, "globalTags"].tags.append(TagAssociationClass("urn:li:tag:gold"))
    after = _state(bare, before, state)
    assert [u.dataset for u in after[DS, "upstreamLineage"].upstreams] == [theirs.dataset]
    assert after[DS, "upstreamLineage"].fineGrainedLineages == []
    assert [t.tag for t in after[DS, "globalTags"].tags] == ["urn:li:tag:gold"]
    assert after[DS, "ownership"].owners == [] and after[DS, "domains"].domains == []
    assert after[DS, "datasetProperties"].description is None


def test_schema_hash_is_the_fingerprint():
    s = snapshot()
    schema: SchemaMetadataClass = _aspects(s)["schemaMetadata"]
    assert schema.hash == s.fingerprint


def _by_entity(s: Snapshot) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for (urn, name), aspect in _state(s).items():
        out.setdefault(urn, {})[name] = aspect
    return out


def test_column_lineage_goes_to_the_dataset_and_to_the_job_that_builds_it():
    entities = _by_entity(snapshot())
    fine = entities[DS]["upstreamLineage"].fineGrainedLineages
    assert [(f.upstreams, f.downstreams) for f in fine] == [
        ([f"urn:li:schemaField:({RAW},id)"], [f"urn:li:schemaField:({DS},order_id)"]),
        ([f"urn:li:schemaField:({RAW},total)"], [f"urn:li:schemaField:({DS},amount)"]),
    ]
    job = "urn:li:dataJob:(urn:li:dataFlow:(sql,sql,PROD),staging/load_orders.sql)"
    io = entities[job]["dataJobInputOutput"]
    assert (io.inputDatasets, io.outputDatasets) == ([RAW], [DS])
    assert entities[job]["dataJobInfo"].flowUrn == "urn:li:dataFlow:(sql,sql,PROD)"
    assert entities["urn:li:dataFlow:(sql,sql,PROD)"]["dataFlowInfo"].name == "sql"


def test_glossary_terms_profile_and_assertions():
    entities = _by_entity(snapshot())
    orders = entities[DS]
    by_flat = {get_simple_field_path_from_v2_field_path(f.fieldPath): f for f in orders["schemaMetadata"].fields}
    assert [t.urn for t in by_flat["order_id"].glossaryTerms.terms] == ["urn:li:glossaryTerm:Order Identifier"]
    assert by_flat["amount"].glossaryTerms is None
    assert [t.urn for t in orders["glossaryTerms"].terms] == ["urn:li:glossaryTerm:Order Identifier"]
    assert entities["urn:li:glossaryTerm:Order Identifier"]["glossaryTermInfo"].name == "Order Identifier"
    assert entities["urn:li:domain:sales"]["domainProperties"].name == "sales"  # the domain Lumos names exists
    field = orders["datasetProfile"].fieldProfiles[0]
    assert (field.fieldPath, field.nullProportion, field.uniqueCount, field.min, field.max) == (
        "order_id", 0.0, 998, "1", "1000"
    )  # fmt: skip
    runs = {
        a["assertionInfo"].datasetAssertion.nativeType: a["assertionRunEvent"].result.type
        for a in entities.values()
        if "assertionInfo" in a and a["assertionInfo"].datasetAssertion
    }
    assert runs == {"not_null_orders_order_id": "SUCCESS", "expect_table_row_count_to_be_between": "FAILURE"}


def test_the_fingerprint_changes_with_what_is_sent_not_with_when_lumos_looked(monkeypatch):
    from dataclasses import replace

    from lumos_dagster.catalog import datahub
    from lumos_dagster.floor.snapshot_json import snapshot_dumps

    def sent(s):
        return [m.to_obj() for m in snapshot_proposals(s)]

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
    orders = snapshot()
    twin = replace(orders, dataset=DatasetRef("file", "sales/orders_eu", "/lake/sales/orders_eu", "avro"))
    mcps = DataHubCatalog("test").aspects([orders, twin])
    keys = [(m.entityUrn, m.aspectName) for m in mcps]
    folder = next(m.entityUrn for m in mcps if m.aspectName == "containerProperties")
    assert keys.count((folder, "containerProperties")) == 1  # the same folder: once
    job = "urn:li:dataJob:(urn:li:dataFlow:(sql,sql,PROD),staging/load_orders.sql)"
    assert keys.count((job, "dataJobInfo")) == 1
    assert keys.count((job, "dataJobInputOutput")) == 2  # two outputs: two contents, both sent, in order
    every = [m for s in (orders, twin) for m in snapshot_proposals(s)]
    assert len(mcps) == len({json.dumps(m.to_obj(), sort_keys=True) for m in every})


def test_a_folder_container_goes_once_across_the_batches_of_a_run_and_again_after_a_failed_batch():
    """A run delivers in batches; the datasets of one folder in two batches send its container once.
    A batch the catalog refused is not remembered: its shared aspects go with the next try."""

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


def test_a_partition_has_its_own_profile_and_the_table_its_totals():
    day = snapshot(totals=TableTotals(30, 999_999, "2026-11-01"))
    aspects = _state(day)
    props = aspects[DS, "datasetProperties"].customProperties
    assert (props["number_of_files"], props["size_in_bytes"]) == ("30", "999999")  # the table's, as DataHub's source
    profiles = [p.aspect for p in snapshot_proposals(day) if p.aspectName == "datasetProfile"]
    partition, table = profiles
    assert (partition.partitionSpec.type, partition.partitionSpec.partition) == ("PARTITION", "dt=2026-11-25")
    assert (partition.rowCount, partition.sizeInBytes) == (1000, 12345)
    assert table.partitionSpec.partition == "FULL_TABLE_SNAPSHOT" and table.sizeInBytes == 999_999
    assert aspects[DS, "datasetProfile"] == table  # the last one written: what DataHub Lite shows
    summary = aspects[DS, "partitionsSummary"]
    assert (summary.minPartition.partition, summary.maxPartition.partition) == ("dt=2026-11-01", "dt=2026-11-25")


CHECKS = (
    CheckResult("files_readable", True, "WARN", "every file was read"),
    CheckResult("schema_compatible", False, "ERROR", "1 breaking change under FULL (FIELD_REMOVED note)",
                ("marts/revenue",)),
)  # fmt: skip


def test_checks_are_custom_assertions_with_their_results():
    entities = _by_entity(snapshot(checks=CHECKS))
    results = {}
    for aspects in entities.values():
        info = aspects.get("assertionInfo")
        if info is not None and info.type == "CUSTOM":
            assert info.source.type == "EXTERNAL" and info.customAssertion.entity == DS
            assert aspects["dataPlatformInstance"].platform == LUMOS_SOURCE
            results[info.customAssertion.type] = aspects["assertionRunEvent"].result.type
    assert results == {"files_readable": "SUCCESS", "schema_compatible": "FAILURE"}
    # a partition whose files failed: its result names them
    failed = snapshot(checks=(CheckResult("files_readable", False, "WARN", "1 file(s) could not be read"),))
    (run,) = [a["assertionRunEvent"] for a in _by_entity(failed).values()
              if "assertionInfo" in a and a["assertionInfo"].type == "CUSTOM"]  # fmt: skip
    assert (
        run.result.type == "FAILURE"
        and run.result.nativeResults["files"]
        == "/lake/sales/orders/dt=2026-11-25/bad.avro: cannot read avro: truncated"
    )


def test_an_unaccepted_breaking_change_raises_one_incident_that_a_compatible_snapshot_resolves():
    broken = snapshot(checks=CHECKS)
    raised = Claims.from_json(DataHubCatalog("test").claims(broken))
    incidents = {u: a for (u, n), a in _state(broken).items() if n == "incidentInfo"}
    assert len(incidents) == 1
    ((urn, info),) = incidents.items()
    assert (info.type, info.status.state, info.priority, info.entities) == ("DATA_SCHEMA", "ACTIVE", 1, [DS])
    assert "FIELD_REMOVED note" in info.description and "marts/revenue" in info.description
    again = snapshot(checks=CHECKS, partition_key="2026-11-26")  # still unaccepted: the same incident, still open
    assert {u for (u, n) in _state(again, raised) if n == "incidentInfo"} == {urn}
    accepted = snapshot(checks=(CHECKS[0], replace(CHECKS[1], passed=True, description="compatible under FULL")))
    state = _state(accepted, raised, _state(broken))
    assert state[urn, "incidentInfo"].status.state == "RESOLVED"
    assert state[urn, "incidentInfo"].title == info.title
    assert Claims.from_json(DataHubCatalog("test").claims(accepted)).incidents == ()
