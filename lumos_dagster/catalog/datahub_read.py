"""What a DataHub catalog holds, read back as Lumos snapshots (`lumos export --from`, `compare`,
`migrate`): each dataset's current state as DataHub keeps it.

Lumos' own properties (`lumos.dataset`, `lumos.version`…) give back its name, version and partition;
its schema comes back exactly from `schemaMetadata`'s raw schema, which Lumos owns; the aspects
people may have edited (description, owners, tags, terms, domain, lineage) are read as the catalog
has them, whoever wrote them. What only Lumos' store keeps (changes, errors, the cost breakdown,
earlier versions) is not in DataHub.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, Iterable, Iterator, Mapping

from datahub.metadata.schema_classes import (
    DatasetProfileClass,
    DatasetPropertiesClass,
    OwnerClass,
    SchemaMetadataClass,
    UpstreamLineageClass,
)
from datahub.metadata.urns import DataJobUrn, DatasetUrn, GlossaryTermUrn, SchemaFieldUrn, TagUrn, Urn
from datahub.utilities.urns.field_paths import get_simple_field_path_from_v2_field_path

from lumos_dagster.floor.datatypes import Field, Primitive, Schema, schema_from_json, schema_to_json
from lumos_dagster.floor.model import OWNERSHIP_TYPES, Snapshot
from lumos_dagster.floor.snapshot_json import SNAPSHOT_FORMAT, snapshot_from_json

#: the aspects a snapshot is read back from (`snapshot_from_aspects`)
READ_ASPECTS = ("datasetProperties", "schemaMetadata", "ownership", "globalTags", "glossaryTerms", "domains",
                "upstreamLineage", "status", "datasetProfile")  # fmt: skip
#: where files of each platform are, in front of the path DataHub names them by
_SCHEMES = {"file": "/", "s3": "s3://", "gcs": "gs://", "abs": "abfs://", "delta-lake": "/"}


def snapshots_from_entities(entities: Iterable[tuple[str, Mapping[str, Any]]]) -> Iterator[Snapshot]:
    """Datasets among (urn, typed aspects by name) pairs, as snapshots (others are skipped); lineage
    to a dataset read here names it as Lumos does."""
    entities = list(entities)
    datasets = [(urn, aspects) for urn, aspects in entities if urn.startswith("urn:li:dataset:")]
    names = {urn: _lumos_name(urn, aspects.get("datasetProperties")) for urn, aspects in datasets}
    jobs = _jobs(entities)
    now = datetime.now(timezone.utc)
    for urn, aspects in datasets:
        yield snapshot_from_aspects(urn, aspects, now, names, jobs)


def _jobs(entities: Iterable[tuple[str, Mapping[str, Any]]]) -> dict[tuple[str, str], dict]:
    """(dataset, upstream) → the job that builds one from the other, from the data jobs' inputs and outputs."""
    out = {}
    for urn, aspects in entities:
        io = aspects.get("dataJobInputOutput") if urn.startswith("urn:li:dataJob:") else None
        if io is None:
            continue
        job = DataJobUrn.from_string(urn)
        flow = job.get_data_flow_urn()
        ref = {"orchestrator": flow.orchestrator, "flow": flow.flow_id, "name": job.job_id}
        out.update({(down, up): ref for down in io.outputDatasets for up in io.inputDatasets})
    return out


def _lumos_name(urn: str, props: DatasetPropertiesClass | None) -> str:
    name = (props.customProperties or {}).get("lumos.dataset") if props else None
    return name or DatasetUrn.from_string(urn).name


def _schema_from_aspect(schema: SchemaMetadataClass | None) -> Schema:
    if schema is None:
        return Schema()
    raw = getattr(schema.platformSchema, "rawSchema", None)
    if isinstance(raw, str) and raw:
        try:  # written by Lumos: exact (before names and aliases were kept: the fields alone)
            doc = json.loads(raw)
            if isinstance(doc, list):
                return schema_from_json(doc)
            return schema_from_json(doc["fields"], doc.get("name"), tuple(doc.get("aliases", ())))
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


def _owner_from(owner: OwnerClass) -> dict:
    urn = Urn.from_string(owner.owner)
    kind = "group" if urn.entity_type == "corpGroup" else "user"
    return {"id": urn.entity_ids[0], "kind": kind, "type": owner.type if owner.type in OWNERSHIP_TYPES else "NONE"}


def snapshot_from_aspects(
    urn: str,
    aspects: Mapping[str, Any],
    captured_at: datetime,
    names: Mapping[str, str] | None = None,
    jobs: Mapping[tuple[str, str], dict] | None = None,
) -> Snapshot:
    """A Lumos snapshot of what the catalog holds for a dataset (typed aspects by name); `names`:
    DataHub URN → Lumos name of the datasets read with it; `jobs`: (dataset, upstream) → the job between."""
    names, jobs = names or {}, jobs or {}
    parsed = DatasetUrn.from_string(urn)
    platform = parsed.get_data_platform_urn().platform_name
    props: DatasetPropertiesClass | None = aspects.get("datasetProperties")
    custom = dict(props.customProperties or {}) if props else {}
    modified = props.lastModified.time if props and props.lastModified else None
    schema = _schema_from_aspect(aspects.get("schemaMetadata"))
    ownership, tags, terms = aspects.get("ownership"), aspects.get("globalTags"), aspects.get("glossaryTerms")
    domains, status = aspects.get("domains"), aspects.get("status")
    lineage: UpstreamLineageClass | None = aspects.get("upstreamLineage")
    doc: dict[str, Any] = {
        "format_version": SNAPSHOT_FORMAT,
        "dataset": {
            "platform": platform,
            "name": names.get(urn) or _lumos_name(urn, props),
            "location": _location(platform, parsed.name),
            "format": custom.get("lumos.format"),
        },
        "partition_key": custom.get("lumos.partition"),
        "captured_at": captured_at.isoformat(),
        "version": custom.get("lumos.version"),
        "change_class": custom.get("lumos.change_class"),
        "previous_version": None,
        "policy": None,
        "schema": schema_to_json(schema),
        "stats": {
            "file_count": int(custom.get("number_of_files") or 0),
            "total_bytes": int(custom.get("size_in_bytes") or 0),
            "row_count": _rows(aspects.get("datasetProfile")),
            "partition_values": {},
            "usage": {},
            "last_modified": datetime.fromtimestamp(modified / 1000, timezone.utc).isoformat() if modified else None,
        },
        "description": props.description if props else None,
        # unique, in the order the catalog keeps them (Lumos' and another writer's entry for one tag: one tag)
        "owners": list({json.dumps(o): o for o in map(_owner_from, ownership.owners)}.values()) if ownership else [],
        "tags": list(dict.fromkeys(TagUrn.from_string(t.tag).name for t in tags.tags)) if tags else [],
        "terms": list(dict.fromkeys(GlossaryTermUrn.from_string(t.urn).name for t in terms.terms)) if terms else [],
        "domain": Urn.from_string(domains.domains[0]).entity_ids[0] if domains and domains.domains else None,
        "upstream": [
            _edge(u.dataset, names, _columns(lineage, u.dataset), jobs.get((urn, u.dataset))) for u in lineage.upstreams
        ]
        if lineage is not None
        else [],  # fmt: skip
        "errors": [],
        "conflicts": [],
        "changes": [],
        "removed": bool(status and status.removed),
        "cost": None,
    }
    if schema.name is not None:
        doc["schema_name"] = schema.name
    if schema.aliases:
        doc["schema_aliases"] = list(schema.aliases)
    return snapshot_from_json(doc)


def _edge(urn: str, names: Mapping[str, str], columns: list[dict], job: dict | None) -> dict:
    up = DatasetUrn.from_string(urn)
    platform = up.get_data_platform_urn().platform_name
    where = _location(platform, up.name)
    return {"upstream": {"platform": platform, "name": names.get(urn, up.name), "location": where, "format": None},
            "columns": columns, "job": job}  # fmt: skip


def _columns(lineage: UpstreamLineageClass, upstream: str) -> list[dict]:
    """The column mappings of the edge from `upstream`: its fine-grained lineage, field to field."""
    out = []
    for f in lineage.fineGrainedLineages or ():
        for up in f.upstreams or ():
            source = SchemaFieldUrn.from_string(up)
            if source.parent == upstream:
                out += [{"downstream": SchemaFieldUrn.from_string(d).field_path, "upstream": source.field_path}
                        for d in f.downstreams or ()]  # fmt: skip
    return out


def _rows(profile: DatasetProfileClass | None) -> int | None:
    """The whole table's row count, where its latest profile is the whole table's."""
    if profile is None or (profile.partitionSpec and profile.partitionSpec.type != "FULL_TABLE"):
        return None
    return profile.rowCount


def _location(platform: str, name: str) -> str:
    """Where a dataset DataHub names `name` is: the path its URN holds, as a file system names it."""
    return _SCHEMES.get(platform, "") + name
