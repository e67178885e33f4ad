"""Snapshot → DataHub aspects, built with DataHub's own classes.

Shared by every DataHub-speaking adapter (Lite, GMS, MCP file). Nested fields get
DataHub's v2 field paths (`[version=2.0].[type=struct].[type=struct].address.[type=string].city`),
which DataHub's own helpers turn back into the flat `address.city`.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any, Iterable, Iterator, Mapping, Sequence, cast

from datahub.emitter.mce_builder import (
    datahub_guid,
    make_assertion_urn,
    make_data_flow_urn,
    make_data_job_urn_with_flow,
    make_data_platform_urn,
    make_dataset_urn,
    make_domain_urn,
    make_group_urn,
    make_schema_field_urn,
    make_tag_urn,
    make_term_urn,
    make_user_urn,
)
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.emitter.mcp_builder import FolderKey, add_dataset_to_container, gen_containers
from datahub.ingestion.api.workunit import MetadataWorkUnit
from datahub.metadata.schema_classes import (
    ArrayTypeClass,
    AssertionInfoClass,
    AssertionResultClass,
    AssertionResultTypeClass,
    AssertionRunEventClass,
    AssertionRunStatusClass,
    AssertionSourceClass,
    AssertionSourceTypeClass,
    AssertionStdOperatorClass,
    AssertionTypeClass,
    AuditStampClass,
    BooleanTypeClass,
    BytesTypeClass,
    DataFlowInfoClass,
    DataJobInfoClass,
    DataJobInputOutputClass,
    DataPlatformInstanceClass,
    DatasetAssertionInfoClass,
    DatasetAssertionScopeClass,
    DatasetFieldProfileClass,
    DatasetLineageTypeClass,
    DatasetProfileClass,
    DatasetPropertiesClass,
    DateTypeClass,
    DomainsClass,
    EnumTypeClass,
    FineGrainedLineageClass,
    FineGrainedLineageDownstreamTypeClass,
    FineGrainedLineageUpstreamTypeClass,
    GlobalTagsClass,
    GlossaryTermAssociationClass,
    GlossaryTermInfoClass,
    GlossaryTermsClass,
    MapTypeClass,
    NullTypeClass,
    NumberTypeClass,
    OperationClass,
    OperationTypeClass,
    OtherSchemaClass,
    OwnerClass,
    OwnershipClass,
    RecordTypeClass,
    SchemaFieldClass,
    SchemaFieldDataTypeClass,
    SchemaMetadataClass,
    StatusClass,
    StringTypeClass,
    TagAssociationClass,
    TimeStampClass,
    TimeTypeClass,
    UnionTypeClass,
    UpstreamClass,
    UpstreamLineageClass,
)
from datahub.metadata.urns import DatasetUrn, TagUrn, Urn
from datahub.utilities.urns.field_paths import get_simple_field_path_from_v2_field_path

from lumos_dagster.catalog.base import CURRENT_STATE_ONLY, Undeliverable, content_hash
from lumos_dagster.model import (
    BREAKING,
    OWNERSHIP_TYPES,
    SNAPSHOT_FORMAT,
    Array,
    DatasetRef,
    DataType,
    Decimal,
    Enum,
    Field,
    Fixed,
    JobRef,
    LineageEdge,
    Map,
    Owner,
    Primitive,
    Schema,
    Snapshot,
    Struct,
    Time,
    Timestamp,
    UnionType,
    schema_from_json,
    schema_to_json,
    snapshot_from_json,
    snapshot_to_json,
    type_str,
)
from lumos_dagster.model import dataset_urn as lumos_dataset_urn

V2_ROOT = "[version=2.0].[type=struct]"
_NUMBERS = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64"}


def dataset_urn(ref: DatasetRef, env: str) -> str:
    return _dataset_urn(ref.platform, ref.name, env)


#: what a schema field's type may be (SchemaFieldDataTypeClass's `type`; FixedTypeClass is not used)
_FieldType = (
    BooleanTypeClass | BytesTypeClass | DateTypeClass | NullTypeClass | NumberTypeClass | StringTypeClass
    | TimeTypeClass | EnumTypeClass | RecordTypeClass | ArrayTypeClass | MapTypeClass | UnionTypeClass
)  # fmt: skip


@lru_cache(maxsize=1 << 16)
def _dataset_urn(platform: str, name: str, env: str) -> str:  # a dataset's URN is built several times a write
    return make_dataset_urn(platform, name, env)


def _type_class(t: DataType) -> SchemaFieldDataTypeClass:
    inner: _FieldType
    if isinstance(t, Primitive):
        if t.kind in _NUMBERS:
            inner = NumberTypeClass()
        elif t.kind == "boolean":
            inner = BooleanTypeClass()
        elif t.kind == "binary":
            inner = BytesTypeClass()
        elif t.kind == "date":
            inner = DateTypeClass()
        elif t.kind == "null":
            inner = NullTypeClass()
        elif t.kind == "variant":
            # DataHub has none; its sources that know variant (Snowflake, Doris, ODCS) give a record.
            # Its Delta Lake and Unity Catalog sources give null, as for any type they do not know.
            inner = RecordTypeClass()
        else:  # string, uuid, json, interval, unknown
            inner = StringTypeClass()
    elif isinstance(t, Decimal):
        inner = NumberTypeClass()
    elif isinstance(t, (Timestamp, Time)):
        inner = TimeTypeClass()
    elif isinstance(t, Fixed):
        inner = BytesTypeClass()
    elif isinstance(t, Enum):
        inner = EnumTypeClass()
    elif isinstance(t, Struct):
        inner = RecordTypeClass()
    elif isinstance(t, Array):
        inner = ArrayTypeClass(nestedType=[type_str(t.element)])
    elif isinstance(t, Map):
        inner = MapTypeClass(keyType=type_str(t.key), valueType=type_str(t.value))
    elif isinstance(t, UnionType):
        inner = UnionTypeClass(nestedTypes=[type_str(b) for b in t.branches])
    else:
        raise TypeError(f"not a canonical type: {t!r}")
    return SchemaFieldDataTypeClass(type=inner)


def _type_tokens(t: DataType) -> list[str]:
    if isinstance(t, Array):
        return ["[type=array]"] + _type_tokens(t.element)
    if isinstance(t, Map):
        return ["[type=map]"] + _type_tokens(t.value)
    if isinstance(t, Primitive):
        return [f"[type={t.kind}]"]
    return [f"[type={type(t).__name__.lower().removesuffix('type')}]"]


def _inner_struct(t: DataType) -> Struct | None:
    while isinstance(t, (Array, Map)):
        t = t.element if isinstance(t, Array) else t.value
    return t if isinstance(t, Struct) else None


def _walk(fields: tuple[Field, ...], prefix: str, stamp: AuditStampClass) -> Iterator[SchemaFieldClass]:
    for f in fields:
        path = ".".join([prefix, *_type_tokens(f.type), f.name])
        yield SchemaFieldClass(
            fieldPath=path,
            type=_type_class(f.type),
            nativeDataType=f.native_type or type_str(f.type),
            nullable=f.nullable,
            description=f.description,
            isPartOfKey=f.is_key,  # given, like `recursive`: a default costs a schema lookup, 30 fields a dataset
            recursive=False,
            glossaryTerms=_terms(f.terms, stamp),
        )
        inner = _inner_struct(f.type)
        if inner is not None:
            yield from _walk(inner.fields, path, stamp)


LUMOS_ACTOR = "urn:li:corpuser:lumos"


def audit_stamp(s: Snapshot) -> AuditStampClass:
    """Lumos as the actor, at the data's last modification when the source knows it (files), else
    the capture. Either way a re-run sends nothing new: the outbox hashes the snapshot without its
    capture time, so unchanged content is never sent again."""
    return AuditStampClass(time=_ms(s.stats.last_modified or s.captured_at), actor=LUMOS_ACTOR)


def _terms(terms: Sequence[str], stamp: AuditStampClass) -> GlossaryTermsClass | None:
    if not terms:
        return None
    return GlossaryTermsClass(
        terms=[GlossaryTermAssociationClass(urn=make_term_urn(t)) for t in terms], auditStamp=stamp
    )


def schema_fields(schema: Schema, stamp: AuditStampClass, partition_keys: Sequence[str] = ()) -> list[SchemaFieldClass]:
    """The schema's fields; the top-level ones named in `partition_keys` marked as partitioning keys."""
    fields = list(_walk(schema.fields, V2_ROOT, stamp))
    if partition_keys:
        keys = {".".join([V2_ROOT, *_type_tokens(f.type), f.name]) for f in schema.fields if f.name in partition_keys}
        for sf in fields:
            if sf.fieldPath in keys:
                sf.isPartitioningKey = True
    return fields


def _custom_properties(s: Snapshot, fingerprint: str) -> dict[str, str]:
    # nothing that changes on every run (like the capture time): the same snapshot
    # content must give the same aspects, or every run would version the catalog
    props = {
        "lumos.partition": s.partition_key or "",
        "lumos.fingerprint": fingerprint,
        "lumos.format": s.dataset.format or "",
        "lumos.location": s.dataset.location,
        "lumos.files": str(s.stats.file_count),
        "lumos.bytes": str(s.stats.total_bytes),
    }
    for key, value in (
        ("lumos.version", s.version),
        ("lumos.previous_version", s.previous_version),
        ("lumos.change_class", s.change_class),
        ("lumos.policy", s.policy),
    ):
        if value:
            props[key] = value
    if s.changes:
        props["lumos.breaking_changes"] = str(sum(c.severity == BREAKING for c in s.changes))
        props["lumos.changes"] = _summary(s.changes)
    if s.stats.row_count is not None:
        props["lumos.rows"] = str(s.stats.row_count)
    if s.cost is not None:
        c = s.cost
        props.update({
            "lumos.cost.period": c.period,
            "lumos.cost.currency": c.currency,
            "lumos.cost.storage": f"{c.storage:.2f}",
            "lumos.cost.compute": f"{c.compute:.2f}",
            "lumos.cost.inherited": f"{c.inherited:.2f}",
            "lumos.cost.total": f"{c.total:.2f}",
            "lumos.cost.method": c.method,
        })  # fmt: skip
    if s.stats.partition_values:
        props["lumos.partition_keys"] = ",".join(s.stats.partition_values)
    if s.table is not None:  # the table format's own version the snapshot saw (a Delta version)
        props["lumos.table_version"] = s.table.version
        for key, values in (("lumos.partition_spec", s.table.partition_spec), ("lumos.sort_order", s.table.sort_order)):
            if values:  # the layout as the format states it (Iceberg: `day(ts)`, `ts DESC NULLS LAST`)
                props[key] = ", ".join(values)
    if s.errors:
        props["lumos.errors"] = str(len(s.errors))
    if s.sla:
        props["lumos.sla"] = s.sla
    if s.quality is not None:
        if s.quality.score is not None:
            props["lumos.quality.score"] = f"{s.quality.score:.3f}"
        props["lumos.freshness"] = s.quality.freshness
    return props


MAX_SUMMARY = 2000
RECORD_PROPERTY = "lumos.record"


def _summary(changes) -> str:
    """One line per change, e.g. `BREAKING FIELD_REMOVED note (string → -)`, capped in length."""
    lines = [f"{c.severity} {c.kind} {c.path or '(dataset)'} ({c.old or '-'} → {c.new or '-'})" for c in changes]
    text = "\n".join(lines)
    return text if len(text) <= MAX_SUMMARY else text[: MAX_SUMMARY - 1] + "…"


def schema_version_number(version: str | None) -> int:
    """DataHub's schemaMetadata.version is a number: semver encoded so that it only grows."""
    if not version:
        return 0
    major, minor, patch = (int(x) for x in version.split("."))
    return major * 1_000_000 + minor * 1_000 + patch


def _owner_urn(owner_id: str, kind: str) -> str:
    return make_group_urn(owner_id) if kind == "group" else make_user_urn(owner_id)


def folder_aspects(ref: DatasetRef, env: str) -> list[MetadataChangeProposalWrapper]:
    """Folder containers for the dataset's name prefixes (`raw/`, `raw/web/`) and the
    dataset's place in the innermost one: the catalog's browse tree mirrors the lake."""
    containers, parent = _folders(ref.platform, env, _folder_path(ref))
    return containers + _in_folder(parent, ref, env)


def _folder_path(ref: DatasetRef) -> tuple[str, ...]:
    return tuple(ref.name.split("/")[:-1])


def _folders(platform: str, env: str, parts: tuple[str, ...]) -> tuple[list[MetadataChangeProposalWrapper], Any]:
    """The folder containers down to `parts`, and the innermost one's key (None at the top)."""
    out: list[MetadataChangeProposalWrapper] = []
    parent = None
    for i, part in enumerate(parts):
        key = FolderKey(platform=platform, env=env, folder_abs_path="/".join(parts[: i + 1]))
        out += _proposals(gen_containers(key, part, ["Folder"], parent_container_key=parent))
        parent = key
    return out, parent


def _in_folder(parent, ref: DatasetRef, env: str) -> list[MetadataChangeProposalWrapper]:
    if parent is None:
        return []
    return _proposals(add_dataset_to_container(parent, dataset_urn(ref, env)))


def _proposals(units: Iterable[MetadataWorkUnit]) -> list[MetadataChangeProposalWrapper]:
    # DataHub's container builders make each work unit of a MetadataChangeProposalWrapper
    return [cast(MetadataChangeProposalWrapper, wu.metadata) for wu in units]


MAX_RECORDED_ERRORS = 100
#: carried by other aspects (schemaMetadata), or different on every run (the capture time)
_NOT_IN_RECORD = ("schema", "fingerprint", "captured_at")


def _record(s: Snapshot) -> str:
    """The rest of the Lumos snapshot, so that metadata can leave the catalog intact."""
    # without its schema's fields: schemaMetadata carries them, and its fingerprint would be hashed again;
    # its name and aliases (an Avro record's) stay, as `schema_name`, `schema_aliases`: schemaMetadata's
    # raw schema is the fields alone
    doc = {k: v for k, v in snapshot_to_json(replace(s, schema=replace(s.schema, fields=()))).items()
           if k not in _NOT_IN_RECORD}  # fmt: skip
    doc["errors"] = doc["errors"][:MAX_RECORDED_ERRORS]
    if doc.get("quality"):  # the age grows on every run: re-sending it would version the catalog for nothing
        doc["quality"] = {**doc["quality"], "age_hours": None}
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def _ms(moment) -> int:
    return int(moment.timestamp() * 1000)


def snapshot_aspects(s: Snapshot, env: str = "PROD") -> list[MetadataChangeProposalWrapper]:
    """The aspects Lumos owns for this dataset.

    Lineage and properties are always sent, so removing an edge or a description
    reaches the catalog. Ownership, tags and domain are sent only when declared, so a
    dataset nobody declared keeps what people set in the catalog's UI. A tombstone
    sends only `status.removed` (a soft delete). Profile and operation are stamped with
    the data's last modification, not the capture, so a re-run sends the same thing.
    """
    if s.removed:
        return dataset_aspects(s, env)
    return folder_aspects(s.dataset, env) + dataset_aspects(s, env)


def dataset_aspects(s: Snapshot, env: str = "PROD") -> list[MetadataChangeProposalWrapper]:
    """`snapshot_aspects` without the folder containers: the dataset's own aspects and the
    entities around it (jobs, terms, assertions)."""
    urn = dataset_urn(s.dataset, env)
    if s.removed:
        return [MetadataChangeProposalWrapper(entityUrn=urn, aspect=StatusClass(removed=True))]
    fingerprint = s.fingerprint  # hashes the schema: once
    last_modified = s.stats.last_modified
    stamp = audit_stamp(s)
    aspects: list = [
        StatusClass(removed=False),
        DatasetPropertiesClass(
            name=s.dataset.name.rsplit("/", 1)[-1],
            qualifiedName=s.dataset.name,
            description=s.description,
            uri=s.dataset.location,
            customProperties={**_custom_properties(s, fingerprint), RECORD_PROPERTY: _record(s)},
            lastModified=TimeStampClass(_ms(last_modified)) if last_modified else None,
        ),
        UpstreamLineageClass(
            upstreams=[
                UpstreamClass(
                    dataset=dataset_urn(e.upstream, env), type=DatasetLineageTypeClass.TRANSFORMED, auditStamp=stamp
                )
                for e in s.upstream
            ],
            fineGrainedLineages=_column_lineage(urn, s.upstream, env) or None,
        ),
    ]
    if s.schema.fields:  # an unreadable partition must not blank the catalog's schema
        aspects.append(
            SchemaMetadataClass(
                schemaName=s.dataset.name,
                platform=make_data_platform_urn(s.dataset.platform),
                version=schema_version_number(s.version),
                hash=fingerprint,
                platformSchema=OtherSchemaClass(rawSchema=json.dumps(schema_to_json(s.schema), sort_keys=True)),
                fields=schema_fields(s.schema, stamp, tuple(s.stats.partition_values)),
                primaryKeys=[p for p, f in s.schema.flatten() if f.is_key] or None,
                created=stamp,
                lastModified=stamp,
            )
        )
    if s.owners:
        aspects.append(
            OwnershipClass(owners=[OwnerClass(owner=_owner_urn(o.id, o.kind), type=o.type) for o in s.owners])
        )
    if s.tags:
        aspects.append(GlobalTagsClass(tags=[TagAssociationClass(tag=make_tag_urn(t)) for t in s.tags]))
    if s.domain:
        aspects.append(DomainsClass(domains=[make_domain_urn(s.domain)]))
    if s.terms:  # the columns' terms, on the dataset too: DataHub's sidebar and term pages show these
        aspects.append(_terms(s.terms, stamp))
    if last_modified is not None:
        aspects.append(
            DatasetProfileClass(
                timestampMillis=_ms(last_modified),
                rowCount=s.stats.row_count,
                columnCount=len(s.schema.fields) or None,
                sizeInBytes=s.stats.total_bytes,
                fieldProfiles=_field_profiles(s),
            )
        )
        aspects.append(
            OperationClass(
                timestampMillis=_ms(last_modified),
                lastUpdatedTimestamp=_ms(last_modified),
                operationType=OperationTypeClass.UPDATE,
                numAffectedRows=s.stats.row_count,
            )
        )
    own = [MetadataChangeProposalWrapper(entityUrn=urn, aspect=a) for a in aspects]
    return own + governance_aspects(s, urn, env)


def _column_lineage(urn: str, edges: Sequence[LineageEdge], env: str) -> list[FineGrainedLineageClass]:
    out = []
    for e in edges:
        up = dataset_urn(e.upstream, env)
        for c in e.columns:
            out.append(
                FineGrainedLineageClass(
                    upstreamType=FineGrainedLineageUpstreamTypeClass.FIELD_SET,
                    upstreams=[make_schema_field_urn(up, c.upstream)],
                    downstreamType=FineGrainedLineageDownstreamTypeClass.FIELD,
                    downstreams=[make_schema_field_urn(urn, c.downstream)],
                )
            )
    return out


def _field_profiles(s: Snapshot) -> list[DatasetFieldProfileClass] | None:
    if s.profile is None:
        return None
    return [
        DatasetFieldProfileClass(
            fieldPath=c.path,
            nullProportion=c.null_fraction,
            uniqueCount=c.distinct,
            min=c.min,
            max=c.max,
        )
        for c in s.profile.columns
    ]


_RESULT = {
    "pass": AssertionResultTypeClass.SUCCESS,
    "warn": AssertionResultTypeClass.FAILURE,
    "fail": AssertionResultTypeClass.FAILURE,
    "error": AssertionResultTypeClass.ERROR,
}
_TOOL_PLATFORM = {"dbt": "dbt", "great_expectations": "great-expectations"}


def governance_aspects(s: Snapshot, urn: str, env: str) -> list[MetadataChangeProposalWrapper]:
    """The entities around the dataset: the jobs that build it (dataFlow/dataJob), the glossary
    terms its columns carry, and the quality checks run on it (assertions and their results)."""
    out: list[MetadataChangeProposalWrapper] = []
    jobs: dict[JobRef, list[LineageEdge]] = {}
    for e in s.upstream:
        if e.job is not None:
            jobs.setdefault(e.job, []).append(e)
    for job, edges in jobs.items():
        flow = make_data_flow_urn(job.orchestrator, job.flow, env)
        job_urn = make_data_job_urn_with_flow(flow, job.name)
        out += [
            MetadataChangeProposalWrapper(entityUrn=flow, aspect=DataFlowInfoClass(name=job.flow)),
            MetadataChangeProposalWrapper(
                entityUrn=job_urn,
                aspect=DataJobInfoClass(
                    name=job.name, type="SQL" if job.orchestrator == "sql" else "COMMAND", flowUrn=flow
                ),
            ),  # fmt: skip
            MetadataChangeProposalWrapper(
                entityUrn=job_urn,
                aspect=DataJobInputOutputClass(
                    inputDatasets=[dataset_urn(e.upstream, env) for e in edges],
                    outputDatasets=[urn],
                    fineGrainedLineages=_column_lineage(urn, edges, env) or None,
                ),
            ),
        ]
    for term in sorted({t for _, f in s.schema.flatten() for t in f.terms}):
        out.append(
            MetadataChangeProposalWrapper(
                entityUrn=make_term_urn(term),
                aspect=GlossaryTermInfoClass(definition=term, termSource="INTERNAL", name=term),
            )
        )
    for a in s.quality.assertions if s.quality else ():
        assertion = make_assertion_urn(datahub_guid({"dataset": urn, "source": a.source, "name": a.name,
                                                     "column": a.column}))  # fmt: skip
        out += [
            MetadataChangeProposalWrapper(
                entityUrn=assertion,
                aspect=AssertionInfoClass(
                    type=AssertionTypeClass.DATASET,
                    datasetAssertion=DatasetAssertionInfoClass(
                        dataset=urn,
                        scope=DatasetAssertionScopeClass.DATASET_COLUMN
                        if a.column
                        else DatasetAssertionScopeClass.DATASET_ROWS,
                        fields=[make_schema_field_urn(urn, a.column)] if a.column else None,
                        operator=AssertionStdOperatorClass._NATIVE_,
                        nativeType=a.name,
                    ),
                    source=AssertionSourceClass(type=AssertionSourceTypeClass.EXTERNAL),
                    customProperties={"lumos.dimension": a.dimension},
                    description=a.name,
                ),
            ),
            MetadataChangeProposalWrapper(
                entityUrn=assertion,
                aspect=DataPlatformInstanceClass(
                    platform=make_data_platform_urn(_TOOL_PLATFORM.get(a.source, a.source or "lumos"))
                ),
            ),
        ]
        if a.status in _RESULT:  # a skipped check has no result to show
            moment = a.observed_at or (s.stats.last_modified.isoformat() if s.stats.last_modified else None)
            millis = _ms(datetime.fromisoformat(moment)) if moment else 0
            out.append(
                MetadataChangeProposalWrapper(
                    entityUrn=assertion,
                    aspect=AssertionRunEventClass(
                        timestampMillis=millis,
                        runId=f"{a.source}-{millis}",
                        asserteeUrn=urn,
                        assertionUrn=assertion,
                        status=AssertionRunStatusClass.COMPLETE,
                        result=AssertionResultClass(
                            type=_RESULT[a.status],
                            nativeResults={"message": a.message} if a.message else None,
                        ),
                    ),
                )
            )
    return out


# ---------------------------------------------------------- the adapters' base

#: The version of the snapshot → aspects mapping above (`snapshot_aspects` and what it calls).
#: Fingerprints hash the snapshot, not the aspects, so they cannot see the mapping change: bump
#: this whenever the same snapshot would give other aspects (an aspect added or dropped, a property
#: renamed, a URN or field-path scheme changed, an acryl-datahub upgrade that serializes aspects
#: differently). Every dataset is then sent once more; without the bump, catalogs would keep the
#: old aspects until each dataset's own content changed.
ASPECT_MAPPING_VERSION = "lumos-datahub-aspects/2"  # 2: audit stamps by Lumos, at the data's time


def canonical_document(doc: Mapping[str, Any]) -> dict:
    """A snapshot's document (`snapshot_to_json`) without what changes on every run and is never
    sent (the capture time, the data's age): equal documents give equal aspects."""
    out = {k: v for k, v in doc.items() if k != "captured_at"}
    if out.get("quality"):
        out["quality"] = {**out["quality"], "age_hours": None}
    return out


#: the shared aspects (folders, jobs, terms) an adapter remembers having sent
SHARED_REMEMBERED = 50_000


class DataHubCatalog:
    """What every DataHub-speaking adapter shares; subclasses only differ in `_send`."""

    #: `lumos.record` brings back all of a dataset's current snapshot; its earlier versions stay in the store
    cannot_hold = CURRENT_STATE_ONLY

    def __init__(self, name: str, env: str = "PROD"):
        self.name = name
        self.env = env
        #: shared aspects this adapter has delivered, as `aspects` keeps them: a run delivers in batches,
        #: and a folder's container need not go again with the next batch's datasets of that folder
        self._shared_sent: dict[tuple, list] = {}

    def aspects(
        self, snapshots: Sequence[Snapshot], known: Mapping[tuple, list] | None = None
    ) -> list[MetadataChangeProposalWrapper]:
        """Every snapshot's aspects; what datasets share (folder containers, jobs, terms) is sent once,
        and not at all when `known` ((entity, aspect) → contents) holds it already."""
        out: list[MetadataChangeProposalWrapper] = []
        # (entity, aspect) → the distinct contents sent
        seen: dict[tuple[str | None, str | None], list] = {k: list(v) for k, v in (known or {}).items()}
        folders: dict[tuple, Any] = {}  # (platform, folder path) → its innermost key: built once a batch
        rejected: dict[int, str] = {}
        for i, s in enumerate(snapshots):
            try:
                urn = dataset_urn(s.dataset, self.env)
                if s.removed:  # a tombstone: only its status (snapshot_aspects)
                    mcps = dataset_aspects(s, self.env)
                else:
                    where = (s.dataset.platform, _folder_path(s.dataset))
                    containers: list[MetadataChangeProposalWrapper] = []
                    if where in folders:
                        parent = folders[where]  # sent with an earlier dataset of the batch
                    else:
                        containers, parent = _folders(where[0], self.env, where[1])
                        folders[where] = parent
                    mcps = containers + _in_folder(parent, s.dataset, self.env) + dataset_aspects(s, self.env)
            except Exception as exc:  # building is pure: what fails for this snapshot fails every time
                rejected[i] = f"{type(exc).__name__}: {exc}"
                continue
            for mcp in mcps:
                if mcp.entityUrn != urn:  # shared: compared as DataHub objects (nested equality), not serialized
                    sent = seen.setdefault((mcp.entityUrn, mcp.aspectName), [])
                    if any(mcp.aspect == a for a in sent):
                        continue
                    sent.append(mcp.aspect)
                out.append(mcp)
        if rejected:
            raise Undeliverable(rejected)
        return out

    def fingerprint(self, snapshot: Snapshot) -> str:
        """A hash of the snapshot as the aspects are built from it, not of the aspects: building
        and serializing a dozen DataHub objects costs ~4 ms a dataset, this ~0.15 ms."""
        return self.fingerprint_document(snapshot_to_json(snapshot))

    def fingerprint_document(self, document: Mapping[str, Any]) -> str:
        """`fingerprint` of the snapshot whose document (as the store keeps it) this is."""
        return content_hash([ASPECT_MAPPING_VERSION, self.env, canonical_document(document)])

    def emit(self, snapshots: Sequence[Snapshot]) -> int:
        mcps = self.aspects(snapshots, self._shared_sent)
        self._send(mcps)
        if len(self._shared_sent) > SHARED_REMEMBERED:  # a long-lived process: forget, send again
            self._shared_sent.clear()
        own = {dataset_urn(s.dataset, self.env) for s in snapshots}
        for mcp in mcps:  # only once delivered: a batch that failed sends them again
            if mcp.entityUrn not in own:
                self._shared_sent.setdefault((mcp.entityUrn, mcp.aspectName), []).append(mcp.aspect)
        return len(mcps)

    def deprecate(self, refs: Sequence[DatasetRef], note: str, deprecated: bool = True) -> None:
        """Mark datasets deprecated, or no longer (governance's nudge escalation). Not part of the
        snapshot's aspects: people may deprecate a dataset in DataHub's UI, and a run must not undo it."""
        from datahub.metadata.schema_classes import DeprecationClass

        self._send(
            [
                MetadataChangeProposalWrapper(
                    entityUrn=dataset_urn(r, self.env),
                    aspect=DeprecationClass(deprecated=deprecated, note=note, actor="urn:li:corpuser:lumos"),
                )
                for r in refs
            ]
        )

    def _send(self, mcps: list[MetadataChangeProposalWrapper]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Nothing held between emits by default."""


#: the aspects a snapshot is read back from (`snapshot_from_aspects`)
READ_ASPECTS = (
    "datasetProperties", "schemaMetadata", "ownership", "globalTags", "domains", "upstreamLineage", "status"
)  # fmt: skip


def snapshots_from_entities(entities: Iterable[tuple[str, Mapping[str, Any]]]) -> Iterator[Snapshot]:
    """Datasets among (urn, typed aspects by name) pairs, as snapshots (others are skipped)."""
    now = datetime.now(timezone.utc)
    for urn, aspects in entities:
        if urn.startswith("urn:li:dataset:"):
            yield snapshot_from_aspects(urn, aspects, now)


# ------------------------------------------------------------ reading back


def _schema_from_aspect(schema: SchemaMetadataClass | None) -> Schema:
    if schema is None:
        return Schema()
    raw = getattr(schema.platformSchema, "rawSchema", None)
    if isinstance(raw, str):
        try:
            return schema_from_json(json.loads(raw))  # written by Lumos: exact
        except (TypeError, ValueError, KeyError, AttributeError):
            pass
    # written by something else: top-level fields, types as the catalog spells them
    fields = []
    for f in schema.fields:
        path = get_simple_field_path_from_v2_field_path(f.fieldPath)
        if "." not in path:
            fields.append(
                Field(path, Primitive("unknown"), f.nullable, description=f.description, native_type=f.nativeDataType)
            )
    return Schema(tuple(fields))


def _owner_from(owner: OwnerClass) -> Owner:
    urn = Urn.from_string(owner.owner)
    kind = "group" if urn.entity_type == "corpGroup" else "user"
    return Owner(urn.entity_ids[0], kind, owner.type if owner.type in OWNERSHIP_TYPES else "NONE")


def snapshot_from_aspects(urn: str, aspects: Mapping[str, Any], captured_at: datetime) -> Snapshot:
    """A Lumos snapshot of what the catalog holds for a dataset (typed aspects by name).

    `lumos.record` gives back what only Lumos knows (versions, changes, errors…); the
    standard aspects win for what people may have edited in the catalog (description,
    owners, tags, domain, lineage, schema)."""
    parsed = DatasetUrn.from_string(urn)
    platform, name = parsed.get_data_platform_urn().platform_name, parsed.name
    props: DatasetPropertiesClass | None = aspects.get("datasetProperties")
    custom = dict(props.customProperties) if props else {}
    doc = json.loads(custom[RECORD_PROPERTY]) if RECORD_PROPERTY in custom else _bare_record(platform, name, props)
    doc["captured_at"] = captured_at.isoformat()
    doc["schema"] = schema_to_json(_schema_from_aspect(aspects.get("schemaMetadata")))
    doc["description"] = props.description if props else None
    ownership = aspects.get("ownership")
    doc["owners"] = (
        [{"id": o.id, "kind": o.kind, "type": o.type} for o in map(_owner_from, ownership.owners)] if ownership else []
    )
    tags = aspects.get("globalTags")
    doc["tags"] = [TagUrn.from_string(t.tag).name for t in tags.tags] if tags else []
    domains = aspects.get("domains")
    doc["domain"] = Urn.from_string(domains.domains[0]).entity_ids[0] if domains and domains.domains else None
    known = {e["upstream"]["name"]: e for e in doc.get("upstream", [])}
    lineage = aspects.get("upstreamLineage")
    doc["upstream"] = [
        known.get(u.name)
        or {
            "upstream": {
                "urn": dataset_urn_of(u),
                "platform": u.get_data_platform_urn().platform_name,
                "name": u.name,
                "location": "",
                "format": None,
            }
        }
        for u in (DatasetUrn.from_string(x.dataset) for x in (lineage.upstreams if lineage else []))
    ]
    status = aspects.get("status")
    doc["removed"] = bool(status and status.removed)
    return snapshot_from_json(doc)


def dataset_urn_of(urn: DatasetUrn) -> str:
    """The Lumos URN of a DataHub dataset URN."""
    return lumos_dataset_urn(urn.get_data_platform_urn().platform_name, urn.name)


def _bare_record(platform: str, name: str, props: DatasetPropertiesClass | None) -> dict:
    """A snapshot document for a dataset Lumos never wrote: only what any catalog has."""
    custom = props.customProperties if props else {}
    modified = props.lastModified.time if props and props.lastModified else None
    return {
        "format_version": SNAPSHOT_FORMAT,
        "dataset": {
            "platform": platform,
            "name": name,
            "location": (props.uri if props else None) or "",
            "format": custom.get("lumos.format") or None,
        },
        "partition_key": None,
        "version": None,
        "stats": {
            "file_count": 0,
            "total_bytes": 0,
            "row_count": None,
            "partition_values": {},
            "last_modified": datetime.fromtimestamp(modified / 1000, timezone.utc).isoformat() if modified else None,
        },
        "errors": [],
        "conflicts": [],
        "changes": [],
        "previous_version": None,
        "change_class": None,
        "policy": None,
    }
