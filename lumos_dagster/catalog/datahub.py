"""Snapshot → DataHub aspects, built with DataHub's own classes.

Shared by every DataHub-speaking adapter (Lite, GMS, MCP file). Nested fields get
DataHub's v2 field paths (`[version=2.0].[type=struct].[type=struct].address.[type=string].city`),
which DataHub's own helpers turn back into the flat `address.city`.
"""

from __future__ import annotations

import json
from typing import Iterator

from datahub.emitter.mce_builder import (
    make_data_platform_urn,
    make_dataset_urn,
    make_domain_urn,
    make_group_urn,
    make_tag_urn,
    make_user_urn,
)
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.emitter.mcp_builder import FolderKey, add_dataset_to_container, gen_containers
from datahub.metadata.schema_classes import (
    ArrayTypeClass,
    BooleanTypeClass,
    BytesTypeClass,
    DatasetLineageTypeClass,
    DatasetPropertiesClass,
    DateTypeClass,
    DomainsClass,
    EnumTypeClass,
    GlobalTagsClass,
    MapTypeClass,
    NullTypeClass,
    NumberTypeClass,
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

from lumos_dagster.model import (
    BREAKING,
    Array,
    DatasetRef,
    DataType,
    Decimal,
    Enum,
    Field,
    Fixed,
    Map,
    Primitive,
    Schema,
    Snapshot,
    Struct,
    Time,
    Timestamp,
    UnionType,
    schema_to_json,
    type_str,
)

V2_ROOT = "[version=2.0].[type=struct]"
_NUMBERS = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64"}


def dataset_urn(ref: DatasetRef, env: str) -> str:
    return make_dataset_urn(ref.platform, ref.name, env)


def _type_class(t: DataType) -> SchemaFieldDataTypeClass:
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


def _walk(fields: tuple[Field, ...], prefix: str) -> Iterator[SchemaFieldClass]:
    for f in fields:
        path = ".".join([prefix, *_type_tokens(f.type), f.name])
        yield SchemaFieldClass(
            fieldPath=path,
            type=_type_class(f.type),
            nativeDataType=f.native_type or type_str(f.type),
            nullable=f.nullable,
            description=f.description,
        )
        inner = _inner_struct(f.type)
        if inner is not None:
            yield from _walk(inner.fields, path)


def schema_fields(schema: Schema) -> list[SchemaFieldClass]:
    return list(_walk(schema.fields, V2_ROOT))


def _custom_properties(s: Snapshot) -> dict[str, str]:
    # nothing that changes on every run (like the capture time): the same snapshot
    # content must give the same aspects, or every run would version the catalog
    props = {
        "lumos.partition": s.partition_key or "",
        "lumos.fingerprint": s.fingerprint,
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
    if s.stats.partition_values:
        props["lumos.partition_keys"] = ",".join(s.stats.partition_values)
    if s.errors:
        props["lumos.errors"] = str(len(s.errors))
    return props


MAX_SUMMARY = 2000


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
    parts = ref.name.split("/")[:-1]
    out: list[MetadataChangeProposalWrapper] = []
    parent = None
    for i, part in enumerate(parts):
        key = FolderKey(platform=ref.platform, env=env, folder_abs_path="/".join(parts[: i + 1]))
        out += [wu.metadata for wu in gen_containers(key, part, ["Folder"], parent_container_key=parent)]
        parent = key
    if parent is not None:
        out += [wu.metadata for wu in add_dataset_to_container(parent, dataset_urn(ref, env))]
    return out


def snapshot_aspects(s: Snapshot, env: str = "PROD") -> list[MetadataChangeProposalWrapper]:
    """The aspects Lumos owns for this dataset.

    Lineage and properties are always sent, so removing an edge or a description
    reaches the catalog. Ownership, tags and domain are sent only when declared, so a
    dataset nobody declared keeps what people set in the catalog's UI.
    """
    urn = dataset_urn(s.dataset, env)
    last_modified = s.stats.last_modified
    aspects: list = [
        StatusClass(removed=False),
        DatasetPropertiesClass(
            name=s.dataset.name.rsplit("/", 1)[-1],
            qualifiedName=s.dataset.name,
            description=s.description,
            uri=s.dataset.location,
            customProperties=_custom_properties(s),
            lastModified=TimeStampClass(int(last_modified.timestamp() * 1000)) if last_modified else None,
        ),
        UpstreamLineageClass(
            upstreams=[
                UpstreamClass(dataset=dataset_urn(e.upstream, env), type=DatasetLineageTypeClass.TRANSFORMED)
                for e in s.upstream
            ]
        ),
    ]
    if s.schema.fields:  # an unreadable partition must not blank the catalog's schema
        aspects.append(
            SchemaMetadataClass(
                schemaName=s.dataset.name,
                platform=make_data_platform_urn(s.dataset.platform),
                version=schema_version_number(s.version),
                hash=s.fingerprint,
                platformSchema=OtherSchemaClass(rawSchema=json.dumps(schema_to_json(s.schema), sort_keys=True)),
                fields=schema_fields(s.schema),
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
    return folder_aspects(s.dataset, env) + [MetadataChangeProposalWrapper(entityUrn=urn, aspect=a) for a in aspects]
