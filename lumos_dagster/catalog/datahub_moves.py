"""A dataset whose entity in DataHub moved: Lumos named it otherwise before (its own `platform,name`
URNs, before it named datasets as DataHub's sources do), or its place changed (a platform instance
set). What people attached to the old entity goes to the new one, and the old one is soft-deleted, so
that nothing is duplicated and nothing people wrote is lost.

Carried, from what the catalog gives back of the old entity: the aspects people edit (documentation,
field-level docs, tags and terms, links, deprecation), written to the new entity unless it has its
own already; the tags, terms, owners, domains and lineage edges others added, added to the new
entity's next to Lumos' own. Field-level edits follow their field to its new path (matched by the
flat path both give). The old entity and the folders Lumos made for it then get `status.removed`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from datahub.emitter.mce_builder import make_dataset_urn
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.emitter.mcp_builder import FolderKey
from datahub.metadata.schema_classes import (
    DomainAssociationClass,
    EditableSchemaFieldInfoClass,
    EditableSchemaMetadataClass,
    StatusClass,
)
from datahub.specific.dataset import DatasetPatchBuilder
from datahub.utilities.urns.field_paths import get_simple_field_path_from_v2_field_path

from lumos_dagster.catalog.datahub_fields import field_paths
from lumos_dagster.catalog.patch_apply import IfAbsent
from lumos_dagster.floor.model import DatasetRef, Snapshot

#: what people edit on a dataset: carried whole when the new entity has none of it
PEOPLES = ("editableDatasetProperties", "institutionalMemory", "deprecation", "documentation")


def legacy_urn(ref: DatasetRef, env: str) -> str:
    """The URN Lumos gave datasets before it named them as DataHub does (`platform,lumos name`)."""
    return make_dataset_urn(ref.platform, ref.name, env)


def legacy_folders(ref: DatasetRef, env: str) -> list[str]:
    """The folder containers Lumos made for its old URNs (the name's prefixes, `raw/`, `raw/web/`)."""
    parts = ref.name.split("/")[:-1]
    return [FolderKey(platform=ref.platform, env=env, folder_abs_path="/".join(parts[: i + 1])).as_urn()
            for i in range(len(parts))]  # fmt: skip


def move(s: Snapshot, old: str, new: str, aspects: Mapping[str, Any], ours: set[str], env: str) -> list:
    """Proposals carrying what the old entity holds (`aspects`, typed by name) to the new one, then
    removing the old one. `ours`: the entries Lumos adds itself (tag, term, owner, domain and
    upstream URNs), which it sends attributed to itself and so does not copy."""
    out: list = []
    for name in PEOPLES:
        if aspects.get(name) is not None:
            out.append(IfAbsent(entityUrn=new, aspect=aspects[name]))
    editable = aspects.get("editableSchemaMetadata")
    if editable is not None:
        out.append(IfAbsent(entityUrn=new, aspect=_refield(editable, s)))
    b = DatasetPatchBuilder(new)
    for t in getattr(aspects.get("globalTags"), "tags", None) or ():
        if t.tag not in ours:
            b.add_tag(t)
    for t in getattr(aspects.get("glossaryTerms"), "terms", None) or ():
        if t.urn not in ours:
            b.add_term(t)
    for o in getattr(aspects.get("ownership"), "owners", None) or ():
        if o.owner not in ours:
            b.add_owner(o)
    for d in getattr(aspects.get("domains"), "domains", None) or ():
        if d not in ours:
            b.add_domain(DomainAssociationClass(domain=d))
    for u in getattr(aspects.get("upstreamLineage"), "upstreams", None) or ():
        if u.dataset not in ours:
            b.add_upstream_lineage(u)
    out += b.build()
    out.append(MetadataChangeProposalWrapper(entityUrn=old, aspect=StatusClass(removed=True)))
    if old == legacy_urn(s.dataset, env):
        out += [MetadataChangeProposalWrapper(entityUrn=f, aspect=StatusClass(removed=True))
                for f in legacy_folders(s.dataset, env)]  # fmt: skip
    return out


def _refield(editable: EditableSchemaMetadataClass, s: Snapshot) -> EditableSchemaMetadataClass:
    """People's field-level edits at the new field paths (the same flat path); those of fields the
    schema no longer has keep their old path, as DataHub keeps edits of a removed field."""
    by_flat = {get_simple_field_path_from_v2_field_path(p): p for p, _ in field_paths(s.schema, s.dataset.platform,
                                                                                      s.dataset.format)}  # fmt: skip
    infos = [
        EditableSchemaFieldInfoClass(
            fieldPath=by_flat.get(get_simple_field_path_from_v2_field_path(i.fieldPath), i.fieldPath),
            description=i.description,
            globalTags=i.globalTags,
            glossaryTerms=i.glossaryTerms,
        )
        for i in editable.editableSchemaFieldInfo
    ]
    return EditableSchemaMetadataClass(
        editableSchemaFieldInfo=infos, created=editable.created, lastModified=editable.lastModified
    )
