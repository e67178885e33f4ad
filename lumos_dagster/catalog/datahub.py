"""Snapshot → DataHub proposals, built with DataHub's own classes, as one writer among many.

Shared by every DataHub-speaking adapter (Lite, GMS, MCP file). A dataset is the entity DataHub's own
source for its platform makes (`datahub_identity`: URN, containers, browse path, sub-types), with
that source's field paths (`datahub_fields`).

Lumos owns what only it writes and sends it whole: the schema, the dataset's place (container,
browse path, sub-types, platform instance), its status, its profiles and operations, its assertions
and incidents. What people and other tools write too (lineage, tags, owners, terms, domains, the
description, custom properties) it patches with DataHub's patch builder: it adds its own entries,
attributed to Lumos where DataHub keys entries by who added them (tags, owners, terms, domains), and
removes only those it added before (`Claims`, which the outbox keeps per catalog and dataset). The
entities around a dataset that people curate (glossary terms, domains, jobs) are created when
missing and never overwritten (`IfAbsent`). docs/catalogs.md has the table.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, Iterator, Mapping, Sequence, cast
from urllib.parse import unquote

from datahub.emitter.mce_builder import (
    datahub_guid,
    make_assertion_urn,
    make_data_flow_urn,
    make_data_job_urn_with_flow,
    make_data_platform_urn,
    make_domain_urn,
    make_group_urn,
    make_schema_field_urn,
    make_tag_urn,
    make_term_urn,
    make_user_urn,
)
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.emitter.mcp_builder import gen_containers
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
    BrowsePathsV2Class,
    BytesTypeClass,
    ChangeTypeClass,
    ContainerClass,
    CustomAssertionInfoClass,
    DataFlowInfoClass,
    DataJobInfoClass,
    DataJobInputOutputClass,
    DataPlatformInstanceClass,
    DatasetAssertionInfoClass,
    DatasetAssertionScopeClass,
    DatasetFieldProfileClass,
    DatasetLineageTypeClass,
    DatasetProfileClass,
    DateTypeClass,
    DomainAssociationClass,
    DomainPropertiesClass,
    EnumTypeClass,
    FineGrainedLineageClass,
    FineGrainedLineageDownstreamTypeClass,
    FineGrainedLineageUpstreamTypeClass,
    GenericAspectClass,
    GlossaryTermAssociationClass,
    GlossaryTermInfoClass,
    GlossaryTermsClass,
    IncidentInfoClass,
    IncidentSourceClass,
    IncidentSourceTypeClass,
    IncidentStageClass,
    IncidentStateClass,
    IncidentStatusClass,
    IncidentTypeClass,
    MapTypeClass,
    MetadataAttributionClass,
    MetadataChangeProposalClass,
    NullTypeClass,
    NumberTypeClass,
    OperationClass,
    OperationTypeClass,
    OtherSchemaClass,
    OwnerClass,
    PartitionSpecClass,
    PartitionsSummaryClass,
    PartitionSummaryClass,
    PartitionTypeClass,
    RecordTypeClass,
    SchemaFieldClass,
    SchemaFieldDataTypeClass,
    SchemaMetadataClass,
    StatusClass,
    StringTypeClass,
    SubTypesClass,
    TagAssociationClass,
    TimeStampClass,
    TimeTypeClass,
    UnionTypeClass,
    UpstreamClass,
)
from datahub.specific.dataset import DatasetPatchBuilder

from lumos_dagster.catalog.base import CURRENT_STATE_ONLY, Undeliverable, content_hash
from lumos_dagster.catalog.datahub_fields import field_paths, partition_paths
from lumos_dagster.catalog.datahub_identity import Identity, identity
from lumos_dagster.catalog.datahub_moves import legacy_urn, move
from lumos_dagster.catalog.patch_apply import IfAbsent, Proposal
from lumos_dagster.floor.datatypes import (
    Array,
    DataType,
    Decimal,
    Enum,
    Field,
    Fixed,
    Map,
    Primitive,
    Schema,
    Struct,
    Time,
    Timestamp,
    UnionType,
    schema_to_json,
    type_str,
)
from lumos_dagster.floor.model import (
    COMPATIBLE_CHECK,
    READABLE_CHECK,
    CheckResult,
    Commit,
    DatasetRef,
    JobRef,
    LineageEdge,
    Snapshot,
)
from lumos_dagster.floor.snapshot_json import snapshot_to_json

_NUMBERS = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64"}
LUMOS_ACTOR = "urn:li:corpuser:lumos"
#: the attribution of every tag, owner, term and domain Lumos adds: DataHub keys those entries by
#: who added them, so Lumos can remove its own and never another writer's
LUMOS_SOURCE = "urn:li:dataPlatform:lumos"
# a constant time: the same entry sent again must be the same content (a time per run would make
# every delivery a new version of the aspect); when Lumos first added it is in its store
_BY_LUMOS = MetadataAttributionClass(time=0, actor=LUMOS_ACTOR, source=LUMOS_SOURCE)


def dataset_urn(ref: DatasetRef, env: str = "PROD") -> str:
    return identity(ref, env).urn


#: what a schema field's type may be (SchemaFieldDataTypeClass's `type`; FixedTypeClass is not used)
_FieldType = (
    BooleanTypeClass | BytesTypeClass | DateTypeClass | NullTypeClass | NumberTypeClass | StringTypeClass
    | TimeTypeClass | EnumTypeClass | RecordTypeClass | ArrayTypeClass | MapTypeClass | UnionTypeClass
)  # fmt: skip


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


def schema_fields(
    schema: Schema, stamp: AuditStampClass, platform: str = "file", fmt: str | None = None,
    partition_keys: Sequence[str] = (),
) -> list[SchemaFieldClass]:  # fmt: skip
    """The schema's fields at the paths DataHub's source for `platform` and `fmt` gives them; the
    top-level ones named in `partition_keys` marked as partitioning keys."""
    return _schema_fields(field_paths(schema, platform, fmt), stamp, partition_keys)


def _schema_fields(
    pairs: Sequence[tuple[str, Field | None]], stamp: AuditStampClass, partition_keys: Sequence[str]
) -> list[SchemaFieldClass]:
    keys = partition_paths(pairs, partition_keys) if partition_keys else set()
    out = []
    for path, f in pairs:
        if f is None:
            continue  # a path DataHub gives a structure Lumos does not model (an Iceberg map's entries)
        out.append(
            SchemaFieldClass(
                fieldPath=path,
                type=_type_class(f.type),
                nativeDataType=f.native_type or type_str(f.type),
                nullable=f.nullable,
                description=f.description,
                isPartOfKey=f.is_key,  # given, like `recursive`: a default costs a schema lookup, 30 fields a dataset
                recursive=False,
                glossaryTerms=_terms(f.terms, stamp),
                isPartitioningKey=True if path in keys else None,
            )
        )
    return out


def schema_version_number(version: str | None) -> int:
    """DataHub's schemaMetadata.version is a number: semver encoded so that it only grows."""
    if not version:
        return 0
    major, minor, patch = (int(x) for x in version.split("."))
    return major * 1_000_000 + minor * 1_000 + patch


def _owner_urn(owner_id: str, kind: str) -> str:
    return make_group_urn(owner_id) if kind == "group" else make_user_urn(owner_id)


def _ms(moment) -> int:
    return int(moment.timestamp() * 1000)


# ------------------------------------------------------------------ what Lumos claims


@dataclass(frozen=True)
class Claims:
    """What Lumos added to a dataset's shared aspects in one catalog: it removes these, and only
    these, when a later snapshot no longer has them."""

    urn: str  # the dataset in the catalog
    upstreams: tuple[str, ...] = ()
    fine: tuple[tuple[str, str], ...] = ()  # (downstream field, upstream field), schemaField URNs
    tags: tuple[str, ...] = ()
    terms: tuple[str, ...] = ()
    owners: tuple[tuple[str, str], ...] = ()  # (owner URN, ownership type)
    domains: tuple[str, ...] = ()
    properties: tuple[str, ...] = ()  # custom property keys
    description: bool = False
    incidents: tuple[tuple[str, str], ...] = ()  # (incident URN, its incidentInfo as raised): open ones

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Claims:
        def tupled(v: Any) -> Any:  # JSON's lists back to the tuples (of tuples) the fields hold
            return tuple(map(tupled, v)) if isinstance(v, list) else v

        return cls(**{k: tupled(v) for k, v in json.loads(text).items()})


#: what DataHub's `s3` source calls the table's file count and size (the whole table's), on its platforms
FILES_PROPERTY, BYTES_PROPERTY = "number_of_files", "size_in_bytes"
_FILE_PLATFORMS = frozenset({"file", "s3", "gcs", "abs", "hdfs"})


def _properties(s: Snapshot) -> dict[str, str]:
    """The at most eight short `lumos.*` custom properties Lumos keeps on a dataset (the rest is in its
    store and API): its name in Lumos and format, what its latest snapshot was, two figures; and the
    table's size and version where DataHub's own source for the platform gives them."""
    # nothing that changes on every run (like the capture time): the same snapshot content must give
    # the same proposals, or every run would version the catalog
    values = {
        "lumos.dataset": s.dataset.name,
        "lumos.format": s.dataset.format,
        "lumos.partition": s.partition_key,
        "lumos.version": s.version,
        "lumos.change_class": s.change_class,
        "lumos.errors": str(len(s.errors)) if s.errors else None,
        "lumos.cost": f"{s.cost.total:.2f} {s.cost.currency}/month" if s.cost is not None else None,
        "lumos.quality": f"{s.quality.score:.3f}" if s.quality is not None and s.quality.score is not None else None,
    }
    files, size = (s.totals.file_count, s.totals.total_bytes) if s.totals else (s.stats.file_count, s.stats.total_bytes)
    if s.dataset.platform in _FILE_PLATFORMS:  # the whole table's, as DataHub's `s3` source gives them
        values.update({FILES_PROPERTY: str(files), BYTES_PROPERTY: str(size)})
    if s.table is not None:  # the table's version where DataHub's delta-lake and iceberg sources put it
        values.update(
            {"version": s.table.version, FILES_PROPERTY: str(files)}
            if s.table.format == "delta"
            else {"snapshot-id": s.table.version}
        )
    return {k: v for k, v in values.items() if v}


def claims(s: Snapshot, env: str = "PROD") -> Claims:
    """What `s` has Lumos add to its dataset's shared aspects."""
    urn = dataset_urn(s.dataset, env)
    if s.removed:  # a tombstone changes the status and two properties, and takes nothing away
        return Claims(urn, properties=("lumos.version", "lumos.change_class"))
    return Claims(
        urn,
        upstreams=tuple(dict.fromkeys(dataset_urn(e.upstream, env) for e in s.upstream)),
        fine=tuple(dict.fromkeys((down, up) for down, up in _column_pairs(urn, s.upstream, env))),
        tags=tuple(make_tag_urn(t) for t in s.tags),
        terms=tuple(make_term_urn(t) for t in s.terms),
        owners=tuple((_owner_urn(o.id, o.kind), o.type) for o in s.owners),
        domains=(make_domain_urn(s.domain),) if s.domain else (),
        properties=tuple(sorted(_properties(s))),
        description=bool(s.description),
        incidents=tuple((u, json.dumps(i.to_obj(), sort_keys=True)) for u, i in _incidents(s, urn)),
    )


def _column_pairs(urn: str, edges: Sequence[LineageEdge], env: str) -> Iterator[tuple[str, str]]:
    for e in edges:
        up = dataset_urn(e.upstream, env)
        for c in e.columns:
            yield make_schema_field_urn(urn, c.downstream), make_schema_field_urn(up, c.upstream)


def _shared_patches(s: Snapshot, now: Claims, before: Claims | None, stamp: AuditStampClass) -> list[Proposal]:
    """Lumos' entries in the aspects others write too: added, and those it added before and no longer
    has removed."""
    b = DatasetPatchBuilder(now.urn)
    before = before if before is not None and before.urn == now.urn else Claims(now.urn)
    props = _properties(s)
    if s.removed:
        for key in now.properties:
            if key in props:
                b.add_custom_property(key, props[key])
        return list(b.build())
    b.set_display_name(display_name(s.dataset))
    if s.description:
        b.set_description(s.description)
    elif before.description:  # the patch builder removes no description: the path it would take
        b._add_patch("datasetProperties", "remove", path=("description",), value={})
    if s.stats.last_modified is not None:
        b.set_last_modified(TimeStampClass(_ms(s.stats.last_modified)))
    for key, value in props.items():
        b.add_custom_property(key, value)
    for key in _gone(before.properties, now.properties):
        b.remove_custom_property(key)
    for up in now.upstreams:
        b.add_upstream_lineage(UpstreamClass(dataset=up, type=DatasetLineageTypeClass.TRANSFORMED, auditStamp=stamp))
    for up in _gone(before.upstreams, now.upstreams):
        b.remove_upstream_lineage(up)
    for down, up in now.fine:
        b.add_fine_grained_lineage(_fine(down, up))
    for down, up in _gone(before.fine, now.fine):
        b.remove_fine_grained_lineage(_fine(down, up))
    attributed = _attributed(now.tags, before.tags, now.terms, before.terms, now.owners, before.owners,
                             now.domains, before.domains)  # fmt: skip
    own: list[Proposal] = list(b.build())
    return own + [
        MetadataChangeProposalClass(entityType="dataset", entityUrn=now.urn, changeType=ChangeTypeClass.PATCH,
                                    aspectName=name, aspect=GenericAspectClass(value=value, contentType=PATCH_CONTENT))
        for name, value in attributed
    ]  # fmt: skip


def _gone(before: Sequence, now: Sequence) -> list:
    """What `before` has and `now` has not, in a stable order (the same claims: the same patch)."""
    return sorted(set(before) - set(now))


@lru_cache(maxsize=4096)
def _attributed(
    tags, old_tags, terms, old_terms, owners, old_owners, domains, old_domains
) -> tuple[tuple[str, bytes], ...]:
    """The patches of the entries DataHub keys by who added them (tags, terms, owners, domains): they name
    no dataset, so datasets with the same ones share them, built once."""
    b = DatasetPatchBuilder(_ANY_DATASET)
    for tag in tags:
        b.add_tag(TagAssociationClass(tag=tag, attribution=_BY_LUMOS))
    for tag in _gone(old_tags, tags):
        b.remove_tag(tag, attribution_source=LUMOS_SOURCE)
    for term in terms:
        b.add_term(GlossaryTermAssociationClass(urn=term, attribution=_BY_LUMOS))
    for term in _gone(old_terms, terms):
        b.remove_term(term, attribution_source=LUMOS_SOURCE)
    for owner, kind in owners:
        b.add_owner(OwnerClass(owner=owner, type=kind, attribution=_BY_LUMOS))
    for owner, kind in _gone(old_owners, owners):
        b.remove_owner(owner, owner_type=kind, attribution_source=LUMOS_SOURCE)
    for domain in domains:
        b.add_domain(DomainAssociationClass(domain=domain, attribution=_BY_LUMOS))
    for domain in _gone(old_domains, domains):
        b.remove_domain(domain, attribution_source=LUMOS_SOURCE)
    return tuple((cast(str, m.aspectName), cast(GenericAspectClass, m.aspect).value) for m in b.build())


_ANY_DATASET = "urn:li:dataset:(urn:li:dataPlatform:lumos,any,PROD)"
PATCH_CONTENT = "application/json-patch+json"


def display_name(ref: DatasetRef) -> str:
    """The table's own name, as DataHub's sources name it: a folder's, a table's, a topic's."""
    last = unquote(ref.name.rsplit("/", 1)[-1])
    return last.rsplit(".", 1)[-1] if ref.platform == "iceberg" else last


def _fine(down: str, up: str) -> FineGrainedLineageClass:
    return FineGrainedLineageClass(
        upstreamType=FineGrainedLineageUpstreamTypeClass.FIELD_SET, upstreams=[up],
        downstreamType=FineGrainedLineageDownstreamTypeClass.FIELD, downstreams=[down],
    )  # fmt: skip


# ------------------------------------------------------------------ what Lumos owns


def place_proposals(where: Identity) -> Iterator[MetadataChangeProposalWrapper]:
    """The containers the dataset is in, each with its browse path, as DataHub's source makes them."""
    parent = None
    for depth, c in enumerate(where.containers):
        for wu in gen_containers(c.key, c.name, [c.sub_type], parent_container_key=parent):
            yield wu.metadata  # type: ignore[misc]  # gen_containers' work units each hold a wrapper
        yield MetadataChangeProposalWrapper(
            entityUrn=c.key.as_urn(), aspect=BrowsePathsV2Class(path=where.browse_path(depth))
        )
        parent = c.key


def _owned(s: Snapshot, where: Identity, stamp: AuditStampClass) -> list:
    aspects: list = [StatusClass(removed=False)]
    if where.containers:
        aspects.append(ContainerClass(container=where.containers[-1].key.as_urn()))
    aspects.append(BrowsePathsV2Class(path=where.browse_path()))
    if where.sub_types:
        aspects.append(SubTypesClass(typeNames=list(where.sub_types)))
    if where.platform_instance is not None:
        aspects.append(where.platform_instance)
    if s.schema.fields:  # an unreadable partition must not blank the catalog's schema
        pairs = field_paths(s.schema, s.dataset.platform, s.dataset.format)
        aspects.append(
            SchemaMetadataClass(
                schemaName=s.dataset.name,
                platform=make_data_platform_urn(s.dataset.platform),
                version=schema_version_number(s.version),
                hash=s.fingerprint,
                platformSchema=OtherSchemaClass(rawSchema=raw_schema(s.schema)),
                fields=_schema_fields(pairs, stamp, tuple(s.stats.partition_values)),
                primaryKeys=[p for p, f in pairs if f is not None and f.is_key] or None,
                created=stamp,
                lastModified=stamp,
            )
        )
    if s.readable or s.stats.file_count:
        aspects += _profiles(s)
    if s.table is not None and s.table.commits:  # the table's history: an operation per commit
        aspects += [_operation(c) for c in s.table.commits]
    elif s.stats.last_modified is not None:
        aspects.append(
            OperationClass(
                timestampMillis=_ms(s.stats.last_modified),
                lastUpdatedTimestamp=_ms(s.stats.last_modified),
                operationType=OperationTypeClass.UPDATE,
                numAffectedRows=s.stats.row_count,
            )
        )
    return aspects


#: a table format's operations as DataHub's delta-lake source names them (others: CUSTOM, by their own name)
OPERATION_TYPES = {
    "INSERT": OperationTypeClass.INSERT, "APPEND": OperationTypeClass.INSERT, "UPDATE": OperationTypeClass.UPDATE,
    "DELETE": OperationTypeClass.DELETE, "MERGE": OperationTypeClass.UPDATE, "OVERWRITE": OperationTypeClass.UPDATE,
    "CREATE": OperationTypeClass.CREATE, "CREATE_TABLE_AS_SELECT": OperationTypeClass.CREATE,
    "CREATE_SCHEMA": OperationTypeClass.CREATE, "DROP_TABLE": OperationTypeClass.DROP,
    "REPLACE TABLE AS SELECT": OperationTypeClass.UPDATE, "COPY INTO": OperationTypeClass.UPDATE,
}  # fmt: skip
#: the metric of each format that counts the rows a commit wrote
_ROWS_METRICS = ("operationMetrics_num_added_rows", "added-records")


def _operation(c: Commit) -> OperationClass:
    kind = OPERATION_TYPES.get(c.operation.upper(), OperationTypeClass.CUSTOM)
    metrics = dict(c.metrics)
    rows = next((metrics[m] for m in _ROWS_METRICS if m in metrics), None)
    return OperationClass(
        timestampMillis=_ms(c.committed_at),
        lastUpdatedTimestamp=_ms(c.committed_at),
        operationType=kind,
        customOperationType=c.operation if kind == OperationTypeClass.CUSTOM else None,
        numAffectedRows=int(rows) if rows is not None and rows.isdigit() else None,
        customProperties={"version": c.version, **metrics},
    )


def partition_id(s: Snapshot) -> str:
    """The partition as DataHub names one (`dt=2026-11-25`, `k=v/k=v`); the partition key without folders."""
    values = s.stats.partition_values
    if values and all(len(v) == 1 for v in values.values()):
        return "/".join(f"{k}={v[0]}" for k, v in values.items())
    return s.partition_key or ""


def profiled_rows(s: Snapshot) -> int | None:
    """The partition's rows: those its profile counted over all its data (CSV and JSON files carry no row
    count of their own), else its files' statistics (Parquet footers, a table's log). A sampled profile
    counted only its sample, a partial one (`profile.max_bytes`) only the files it read."""
    if s.profile is not None and s.profile.whole:
        return s.profile.row_count
    return s.stats.row_count


def _profiles(s: Snapshot) -> list:
    """The partition's profile labelled with its partition, then the whole table's: DataHub shows the
    latest whole-table profile on the dataset (DataHub Lite keeps the last one written). Stamped with the
    data's last modification, or (a database table) the capture that first saw this content."""
    ms = audit_stamp(s).time
    columns = len(s.schema.fields) or None
    rows = profiled_rows(s)
    if s.totals is None:  # the partition is the table
        return [DatasetProfileClass(timestampMillis=ms, rowCount=rows, columnCount=columns,
                                    sizeInBytes=s.stats.total_bytes, fieldProfiles=_field_profiles(s))]  # fmt: skip
    spec = PartitionSpecClass(partition=partition_id(s), type=PartitionTypeClass.PARTITION)
    out: list = [
        DatasetProfileClass(timestampMillis=ms, rowCount=rows, columnCount=columns,
                            sizeInBytes=s.stats.total_bytes, fieldProfiles=_field_profiles(s), partitionSpec=spec),
        DatasetProfileClass(timestampMillis=ms, columnCount=columns, sizeInBytes=s.totals.total_bytes),
    ]  # fmt: skip
    if s.totals.first_partition and len(s.stats.partition_values) == 1:
        key = next(iter(s.stats.partition_values))
        out.append(
            PartitionsSummaryClass(
                minPartition=PartitionSummaryClass(f"{key}={s.totals.first_partition}"),
                maxPartition=PartitionSummaryClass(partition_id(s), lastModifiedTime=ms),
            )
        )
    return out


def raw_schema(schema: Schema) -> str:
    """The schema as Lumos reads it back: its fields, and the Avro record's name and aliases when it has them."""
    doc: dict[str, Any] = {"fields": schema_to_json(schema)}
    if schema.name is not None:
        doc["name"] = schema.name
    if schema.aliases:
        doc["aliases"] = list(schema.aliases)
    return json.dumps(doc, sort_keys=True)


def _incidents(s: Snapshot, urn: str) -> list[tuple[str, IncidentInfoClass]]:
    """The incident a breaking change nobody accepted raises on the dataset: one per version."""
    failed = next((c for c in s.checks if c.name == COMPATIBLE_CHECK and not c.passed), None)
    if failed is None or s.removed:
        return []
    stamp = audit_stamp(s)
    affected = f"; downstream: {', '.join(failed.affected)}" if failed.affected else ""
    info = IncidentInfoClass(
        type=IncidentTypeClass.DATA_SCHEMA,
        title=f"Breaking schema change: {s.dataset.name} {s.version}",
        description=f"{failed.description}{affected}",
        entities=[urn],
        priority=1,  # HIGH: a consumer may break
        status=IncidentStatusClass(
            state=IncidentStateClass.ACTIVE, stage=IncidentStageClass.TRIAGE, lastUpdated=stamp
        ),  # fmt: skip
        source=IncidentSourceClass(
            type=IncidentSourceTypeClass.ASSERTION_FAILURE, sourceUrn=check_assertion_urn(urn, COMPATIBLE_CHECK)
        ),  # fmt: skip
        startedAt=stamp.time,
        created=stamp,
    )
    return [(f"urn:li:incident:{datahub_guid({'dataset': urn, 'version': s.version or ''})}", info)]


def _incident_proposals(s: Snapshot, now: Claims, before: Claims | None) -> list[Proposal]:
    """Raised: the incidents of `now`; resolved: those Lumos raised before that `now` has not (the
    change accepted, or reverted)."""
    out: list[Proposal] = [MetadataChangeProposalWrapper(entityUrn=u, aspect=IncidentInfoClass.from_obj(json.loads(i)))
                           for u, i in now.incidents]  # fmt: skip
    raised = {u for u, _ in now.incidents}
    for u, text in before.incidents if before is not None else ():
        if u not in raised:
            info = IncidentInfoClass.from_obj(json.loads(text))
            message = "accepted or reverted: the dataset's schema is compatible again"
            info.status = IncidentStatusClass(state=IncidentStateClass.RESOLVED, stage=IncidentStageClass.FIXED,
                                              message=message, lastUpdated=audit_stamp(s))  # fmt: skip
            out.append(MetadataChangeProposalWrapper(entityUrn=u, aspect=info))
    return out


def check_assertion_urn(dataset: str, check: str) -> str:
    return make_assertion_urn(datahub_guid({"platform": "lumos", "dataset": dataset, "check": check}))


def check_proposals(s: Snapshot, urn: str) -> list[Proposal]:
    """Lumos' checks as DataHub asks external tools to report theirs: a custom assertion each
    (`assertionInfo` of type CUSTOM, source EXTERNAL, platform lumos), and its result for the
    snapshot's partition (`assertionRunEvent`)."""
    out: list[Proposal] = []
    stamp = audit_stamp(s)
    spec = PartitionSpecClass(partition=partition_id(s), type=PartitionTypeClass.PARTITION) if s.totals else None
    for c in s.checks:
        assertion = check_assertion_urn(urn, c.name)
        out += [
            MetadataChangeProposalWrapper(
                entityUrn=assertion,
                aspect=AssertionInfoClass(
                    type=AssertionTypeClass.CUSTOM,
                    customAssertion=CustomAssertionInfoClass(type=c.name, entity=urn, logic=CHECK_LOGIC.get(c.name)),
                    source=AssertionSourceClass(type=AssertionSourceTypeClass.EXTERNAL),
                    description=c.name.replace("_", " "),
                ),
            ),
            MetadataChangeProposalWrapper(entityUrn=assertion, aspect=_LUMOS_PLATFORM),
            MetadataChangeProposalWrapper(
                entityUrn=assertion,
                aspect=AssertionRunEventClass(
                    timestampMillis=stamp.time,
                    runId=f"lumos-{s.partition_key or 'now'}-{stamp.time}",
                    asserteeUrn=urn,
                    assertionUrn=assertion,
                    status=AssertionRunStatusClass.COMPLETE,
                    result=AssertionResultClass(
                        type=AssertionResultTypeClass.SUCCESS if c.passed else AssertionResultTypeClass.FAILURE,
                        nativeResults=_results(s, c),
                    ),
                    partitionSpec=spec,
                ),
            ),
        ]
    return out


#: the unreadable files a result names (the store keeps them all)
SHOWN_ERRORS = 10


def _results(s: Snapshot, c: CheckResult) -> dict[str, str]:
    """A check's result as DataHub shows it: its message and severity, and for unreadable files which."""
    out = {"message": c.description[:2000], "severity": c.severity}
    if c.name == READABLE_CHECK and s.errors:
        out["files"] = "\n".join(f"{e.path}: {e.reason}" for e in s.errors[:SHOWN_ERRORS])
        if len(s.errors) > SHOWN_ERRORS:
            out["files"] += f"\n… and {len(s.errors) - SHOWN_ERRORS} more"
    return out


#: what each of Lumos' checks verifies, as DataHub shows a custom assertion's logic
CHECK_LOGIC = {
    "files_readable": "every file of the partition gives its schema",
    "schema_compatible": "no breaking change under the dataset's compatibility policy, unless accepted",
    "metadata_complete": "the documentation lumos.yaml requires is there",
    "data_quality": "the dataset's tests pass and its data is fresh",
}
_LUMOS_PLATFORM = DataPlatformInstanceClass(platform=LUMOS_SOURCE)


def dataset_proposals(s: Snapshot, env: str = "PROD", before: Claims | None = None) -> list[Proposal]:
    """The dataset's own proposals: what Lumos owns, sent whole, and its entries in shared aspects,
    patched (removing what `before` added that `s` no longer has); then the entities around it (jobs,
    terms, domain, assertions). A tombstone (`removed`) marks the dataset removed and gives its version."""
    where = identity(s.dataset, env)
    now = claims(s, env)
    stamp = audit_stamp(s)
    if s.removed:
        own: list[Proposal] = [MetadataChangeProposalWrapper(entityUrn=where.urn, aspect=StatusClass(removed=True))]
        return own + _shared_patches(s, now, before, stamp)
    own = [MetadataChangeProposalWrapper(entityUrn=where.urn, aspect=a) for a in _owned(s, where, stamp)]
    return (own + _shared_patches(s, now, before, stamp) + around(s, where.urn, env) + check_proposals(s, where.urn)
            + _incident_proposals(s, now, before))  # fmt: skip


def snapshot_proposals(s: Snapshot, env: str = "PROD", before: Claims | None = None) -> list[Proposal]:
    """`dataset_proposals` with the containers the dataset is in, first."""
    place = [] if s.removed else list(place_proposals(identity(s.dataset, env)))
    return place + dataset_proposals(s, env, before)


def _field_profiles(s: Snapshot) -> list[DatasetFieldProfileClass] | None:
    """Each column's measures; null counts only where the profile read every row (datasetProfile has no
    field saying that a profile is sampled or partial: its proportions, distincts, min and max are those
    of what was read)."""
    p = s.profile
    if p is None:
        return None
    return [
        DatasetFieldProfileClass(
            fieldPath=c.path,
            nullCount=round(c.null_fraction * p.row_count) if p.whole and c.null_fraction is not None else None,
            nullProportion=c.null_fraction,
            uniqueCount=c.distinct,
            min=c.min,
            max=c.max,
        )
        for c in p.columns
    ]


_RESULT = {
    "pass": AssertionResultTypeClass.SUCCESS,
    "warn": AssertionResultTypeClass.FAILURE,
    "fail": AssertionResultTypeClass.FAILURE,
    "error": AssertionResultTypeClass.ERROR,
}
_TOOL_PLATFORM = {"dbt": "dbt", "great_expectations": "great-expectations"}


def around(s: Snapshot, urn: str, env: str) -> list[Proposal]:
    """The entities around the dataset: the jobs that build it (dataFlow/dataJob), its domain, the
    glossary terms its columns carry, and the quality checks run on it (assertions and results)."""
    out: list[Proposal] = []
    jobs: dict[JobRef, list[LineageEdge]] = {}
    for e in s.upstream:
        if e.job is not None:
            jobs.setdefault(e.job, []).append(e)
    for job, edges in jobs.items():
        flow = make_data_flow_urn(job.orchestrator, job.flow, env)
        job_urn = make_data_job_urn_with_flow(flow, job.name)
        kind = "SQL" if job.orchestrator == "sql" else "COMMAND"
        out += [
            IfAbsent(entityUrn=flow, aspect=DataFlowInfoClass(name=job.flow)),
            IfAbsent(entityUrn=job_urn, aspect=DataJobInfoClass(name=job.name, type=kind, flowUrn=flow)),
            MetadataChangeProposalWrapper(
                entityUrn=job_urn,
                aspect=DataJobInputOutputClass(
                    inputDatasets=[dataset_urn(e.upstream, env) for e in edges],
                    outputDatasets=[urn],
                    fineGrainedLineages=[_fine(d, u) for d, u in _column_pairs(urn, edges, env)] or None,
                ),
            ),
        ]
    if s.domain:
        out.append(IfAbsent(entityUrn=make_domain_urn(s.domain), aspect=DomainPropertiesClass(name=s.domain)))
    for term in sorted({t for _, f in s.schema.flatten() for t in f.terms} | set(s.terms)):
        out.append(
            IfAbsent(
                entityUrn=make_term_urn(term),
                aspect=GlossaryTermInfoClass(definition=term, termSource="INTERNAL", name=term),  # fmt: skip
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

#: The version of the snapshot → proposals mapping above (`snapshot_proposals` and what it calls).
#: Fingerprints hash the snapshot, not the proposals, so they cannot see the mapping change: bump
#: this whenever the same snapshot would give other proposals (an aspect added or dropped, a property
#: renamed, a URN or field-path scheme changed, an acryl-datahub upgrade that serializes aspects
#: differently). Every dataset is then sent once more; without the bump, catalogs would keep the
#: old aspects until each dataset's own content changed.
ASPECT_MAPPING_VERSION = "lumos-datahub-aspects/3"  # 3: DataHub's own URNs, field paths and places; patches


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
    """What every DataHub-speaking adapter shares; subclasses differ in `_send` (and `_absent`)."""

    #: DataHub keeps each dataset's current state; its earlier versions, releases, and what only Lumos
    #: keeps of a snapshot (its changes, its errors, its cost breakdown) stay in the store
    cannot_hold = CURRENT_STATE_ONLY

    def __init__(self, name: str, env: str = "PROD"):
        self.name = name
        self.env = env
        #: shared aspects this adapter has delivered, as `aspects` keeps them: a run delivers in batches,
        #: and a folder's container need not go again with the next batch's datasets of that folder
        self._shared_sent: dict[tuple, list] = {}

    def claims(self, snapshot: Snapshot, before: str | None = None) -> str:
        """What delivering `snapshot` leaves Lumos having added to its dataset here (`Claiming`)."""
        if snapshot.removed and before:  # a tombstone takes nothing away: what Lumos added stays known
            return before
        return claims(snapshot, self.env).to_json()

    def _before(self, snapshot: Snapshot, text: str | None) -> Claims | None:
        if text is None:
            return None
        if not text:  # delivered by a Lumos that named datasets its own way: nothing of it was patched
            return Claims(legacy_urn(snapshot.dataset, self.env))
        return Claims.from_json(text)

    def aspects(
        self,
        snapshots: Sequence[Snapshot],
        known: Mapping[tuple, list] | None = None,
        before: Sequence[Claims | None] | None = None,
    ) -> list[Proposal]:
        """Every snapshot's proposals (`before`: what each one's dataset got from Lumos in this catalog
        last time); what datasets share (containers, jobs, terms) is sent once, and not at all when
        `known` ((entity, aspect) → contents) holds it already. A dataset whose entity moved brings
        what the old one holds (`datahub_moves`)."""
        out: list[Proposal] = []
        # (entity, aspect) → the distinct contents sent
        seen: dict[tuple[str | None, str | None], list] = {k: list(v) for k, v in (known or {}).items()}
        places: set[tuple[str, ...]] = set()  # the containers built: once a batch
        rejected: dict[int, str] = {}
        for i, s in enumerate(snapshots):
            previous = before[i] if before else None
            try:
                where = identity(s.dataset, self.env)
                proposals: list[Proposal] = []
                place = tuple(c.key.as_urn() for c in where.containers)
                if not s.removed and place not in places:
                    places.add(place)
                    proposals += place_proposals(where)
                proposals += dataset_proposals(s, self.env, previous)
                if previous is not None and previous.urn != where.urn:
                    now = claims(s, self.env)
                    ours = {*now.tags, *now.terms, *(o for o, _ in now.owners), *now.domains, *now.upstreams}
                    proposals += move(s, previous.urn, where.urn, self._read(previous.urn), ours, self.env)
            except Exception as exc:  # building is pure: what fails for this snapshot fails every time
                rejected[i] = f"{type(exc).__name__}: {exc}"
                continue
            for p in proposals:
                if isinstance(p, MetadataChangeProposalWrapper) and p.entityUrn != where.urn:
                    # shared: compared as DataHub objects (nested equality), not serialized
                    sent = seen.setdefault((p.entityUrn, p.aspectName), [])
                    if any(p.aspect == a for a in sent):
                        continue
                    sent.append(p.aspect)
                out.append(p)
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

    def emit(self, snapshots: Sequence[Snapshot], before: Sequence[str | None] | None = None) -> int:
        previous = [self._before(s, b) for s, b in zip(snapshots, before, strict=True)] if before else None
        proposals = self.aspects(snapshots, self._shared_sent, previous)
        self._send(proposals)
        if len(self._shared_sent) > SHARED_REMEMBERED:  # a long-lived process: forget, send again
            self._shared_sent.clear()
        own = {dataset_urn(s.dataset, self.env) for s in snapshots}
        for p in proposals:  # only once delivered: a batch that failed sends them again
            if isinstance(p, MetadataChangeProposalWrapper) and p.entityUrn not in own:
                self._shared_sent.setdefault((p.entityUrn, p.aspectName), []).append(p.aspect)
        return len(proposals)

    def emit_partitions(self, snapshots: Sequence[Snapshot]) -> int:
        """What older partitions hold that the dataset's current state does not: each one's check
        results and its partition's profile (a backfill; a partition that failed before a newer one)."""
        proposals: list[Proposal] = []
        for s in snapshots:
            urn = dataset_urn(s.dataset, self.env)
            proposals += [p for p in check_proposals(s, urn) if p.aspectName == "assertionRunEvent"]
            if s.totals is not None and s.stats.last_modified is not None:
                proposals.append(MetadataChangeProposalWrapper(entityUrn=urn, aspect=_profiles(s)[0]))
        self._send(proposals)
        return len(proposals)

    def deprecate(self, refs: Sequence[DatasetRef], note: str, deprecated: bool = True) -> None:
        """Mark datasets deprecated, or no longer (governance's nudge escalation). Not part of the
        snapshot's aspects: people may deprecate a dataset in DataHub's UI, and a run must not undo it."""
        from datahub.metadata.schema_classes import DeprecationClass

        self._send(
            [
                MetadataChangeProposalWrapper(
                    entityUrn=dataset_urn(r, self.env),
                    aspect=DeprecationClass(deprecated=deprecated, note=note, actor=LUMOS_ACTOR),
                )
                for r in refs
            ]
        )

    def _send(self, proposals: list[Proposal]) -> None:
        raise NotImplementedError

    def _read(self, urn: str) -> dict[str, Any]:
        """The entity's aspects as the catalog holds them, typed, by name (a moved dataset's old entity)."""
        raise NotImplementedError

    def close(self) -> None:
        """Nothing held between emits by default."""
