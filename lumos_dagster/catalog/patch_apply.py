"""DataHub's PATCH semantics, applied where no GMS applies them: DataHub Lite (which refuses
PATCH proposals), an MCP file read back as a catalog's state, and the GMS stand-in of the tests.

Lumos sends what it shares with other writers (lineage, tags, owners, terms, domains, its
properties) as PATCH proposals built by DataHub's own patch builders (`DatasetPatchBuilder`),
so that it adds and removes only its own entries. GMS applies those through its aspect
templates; this module is a port of them, read from datahub-project/datahub
(`PatchItemImpl`, `GenericJsonPatch`, `Template`, `ArrayMergingTemplate`, `CompoundKeyTemplate`,
`TemplateUtil`, `FineGrainedLineageTemplateHelper`, and the Ownership, GlobalTags,
GlossaryTerms, Domains, UpstreamLineage, DatasetProperties and EditableSchemaMetadata
templates):

1. each keyed array of the current aspect becomes nested maps, one level per key field
   (`attribution␟source` is a nested field: the element's `attribution.source`; a missing key
   is ``""``);
2. every level a path names is created when missing (for `remove`, the last one too: removing
   what is not there is no error);
3. the JSON-patch operations are applied;
4. the maps become arrays again, existing elements first, new ones appended.

A patch in the generic envelope (`{"arrayPrimaryKeys": …, "patch": […]}`, what the builders
make for tags, owners, terms and domains) is keyed by the envelope's keys and starts from an
empty record; a plain list of operations is keyed by the aspect's own template, which gives its
default when the aspect is absent. Timeseries aspects cannot be patched (GMS refuses).
`tests/test_patch_apply.py` holds the cases.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Iterable, Mapping, Union, cast

from datahub.emitter.aspect import ASPECT_MAP
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.emitter.serialization_helper import post_json_transform, pre_json_transform
from datahub.metadata.schema_classes import MetadataChangeEventClass, MetadataChangeProposalClass, _Aspect

from lumos_dagster.floor.errors import CatalogError

#: the separator of a nested key field's parts (`attribution␟source`)
US = "\u241f"
_SYSTEM = {"time": 0, "actor": "urn:li:corpuser:__datahub_system"}

#: the aspect templates GMS applies a plain list of operations through: each keyed array's key
#: fields ([] for an array of strings, keyed by the string itself)
TEMPLATE_ARRAYS: dict[str, dict[str, list[str]]] = {
    "globalTags": {"tags": ["tag"]},
    "glossaryTerms": {"terms": ["urn", f"attribution{US}source"]},
    "ownership": {"owners": ["owner", "type", "typeUrn"]},
    "upstreamLineage": {"upstreams": ["dataset"]},  # its fineGrainedLineages: _fine_grained_*
    "datasetProperties": {"tags": []},
    "domains": {"domains": []},
    "editableSchemaMetadata": {"editableSchemaFieldInfo": ["fieldPath"]},
    "editableDatasetProperties": {},
}
#: what each template starts from when the aspect is absent
TEMPLATE_DEFAULTS: dict[str, dict] = {
    "globalTags": {"tags": []},
    "glossaryTerms": {"terms": [], "auditStamp": _SYSTEM},
    "ownership": {"owners": [], "lastModified": _SYSTEM},
    "upstreamLineage": {"upstreams": [], "fineGrainedLineages": []},
    "datasetProperties": {"tags": [], "customProperties": {}},
    "domains": {"domains": []},
    "editableSchemaMetadata": {"created": _SYSTEM, "lastModified": _SYSTEM, "editableSchemaFieldInfo": []},
    "editableDatasetProperties": {},
}
#: key fields put back into an element whose key lived only in the patch's path
_SCALAR_KEYS = frozenset({"tag", "urn", "owner", "type", "typeUrn", "dataset", "domain", "fieldPath"})


#: a proposal: an aspect sent whole (UPSERT) or a patch of a shared one (PATCH)
Proposal = Union[MetadataChangeProposalWrapper, MetadataChangeProposalClass]
#: a catalog's state as proposals leave it: (entity, aspect name) → aspect
State = dict[tuple[str, str], _Aspect]


class IfAbsent(MetadataChangeProposalWrapper):
    """An aspect of an entity people curate (a glossary term's definition, a domain's name, a job's
    description, what a moved dataset carries): written only where the entity has none, never over
    what is there."""


class PatchError(CatalogError):
    """A patch GMS would refuse."""


def patched(mcp: MetadataChangeProposalClass, current: _Aspect | None) -> _Aspect:
    """The aspect a PATCH proposal leaves, applied to `current` (None: the entity has none)."""
    return patched_json(mcp, None if current is None else pre_json_transform(current.to_obj()))


def patched_json(mcp: MetadataChangeProposalClass, current: dict | None) -> _Aspect:
    """`patched`, with the current aspect in its JSON form (as DataHub Lite keeps it)."""
    name = mcp.aspectName
    cls = ASPECT_MAP.get(name or "")
    if cls is None or mcp.aspect is None:
        raise PatchError(f"cannot patch unknown aspect {name!r} of {mcp.entityUrn}")
    if cls.get_aspect_type() == "timeseries":
        raise PatchError(f"{name} is a timeseries aspect: it cannot be patched ({mcp.entityUrn})")
    after = apply_patch(cls.ASPECT_NAME, current, json.loads(mcp.aspect.value))
    return cls.from_obj(post_json_transform(after))


def apply_patch(aspect: str, current: dict | None, payload: Any) -> dict:
    """The aspect (JSON) GMS stores after applying `payload` (a PATCH proposal's value) to `current`."""
    keys: dict[str, list[str]] | None
    if isinstance(payload, dict) and "patch" in payload:
        keys = payload.get("arrayPrimaryKeys") or {}
        ops = payload["patch"]
        if not keys and not payload.get("forceGenericPatch"):
            keys = None  # the aspect's own template
    else:
        keys, ops = None, payload
    if current is not None:
        node = copy.deepcopy(current)
        if aspect == "domains" and "domainAssociations" not in node:
            # GMS' DomainsMigrationMutator: `domains` given whole, as unattributed associations
            node["domainAssociations"] = [{"domain": d} for d in node.get("domains", [])]
    elif aspect in TEMPLATE_DEFAULTS:  # what GMS fills in of a new aspect (a glossary term's audit stamp)
        node = copy.deepcopy(TEMPLATE_DEFAULTS[aspect])
    elif keys is not None:
        node = {}  # the generic template starts from an empty record
    else:
        raise PatchError(f"Patch not supported for aspect with name {aspect}: no default and no current value")
    node = _to_maps(aspect, node, keys)
    for op in ops:
        _scaffold(node, op)
    for op in ops:
        _apply(node, op)
    node = _to_arrays(aspect, node, keys)
    if aspect == "domains" and "domainAssociations" in node:
        # GMS' DomainsSyncMutationHook keeps the `domains` array in step with `domainAssociations`
        node["domains"] = list(dict.fromkeys(d["domain"] for d in node["domainAssociations"]))
    return node


# ------------------------------------------------------------------ keyed arrays


def _key(element: Any, field: str) -> str:
    value = element
    for part in field.split(US):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def array_to_map(node: dict, field: str, keys: list[str]) -> dict:
    arr = node.get(field)
    out: dict[str, Any] = {}
    for element in arr if isinstance(arr, list) else ():
        if not keys:
            out[element if isinstance(element, str) else ""] = element
            continue
        level = out
        for k in keys:
            level = level.setdefault(_key(element, k), {})
        level.update(copy.deepcopy(element))
    return {**node, field: out}


def _merged(level: Any, keys: list[str]) -> list[Any]:
    if not keys:
        return [level]
    first, rest = keys[0], keys[1:]
    out: list[Any] = []
    for key, value in level.items():
        elements = _merged(value, rest)
        if key and US not in first and first in _SCALAR_KEYS:
            for e in elements:
                if isinstance(e, dict) and first not in e:
                    e[first] = key
        out += elements
    return out


def map_to_array(node: dict, field: str, keys: list[str]) -> dict:
    value = node.get(field)
    if isinstance(value, list):  # a whole array put back by the patch
        return node
    if value is None:
        return {**node, field: []}
    return {**node, field: _merged(value, keys) if keys else list(value.values())}


def _fine_grained_to_map(lineages: Any) -> dict:
    out: dict[str, Any] = {}
    for f in lineages or ():
        downstreams = f.get("downstreams")
        if not downstreams or len(downstreams) != 1:
            raise PatchError("Patching not supported on fine grained lineages with not exactly one downstream")
        upstreams = f.get("upstreams") or []
        up_type = f.get("upstreamType") or (
            "DATASET" if upstreams and upstreams[0].startswith("urn:li:dataset:") else "FIELD_SET"
        )
        level = (
            out.setdefault(f.get("transformOperation", "NONE"), {})
            .setdefault(downstreams[0], {})
            .setdefault(f.get("query", "NONE"), {})
        )
        for u in dict.fromkeys(upstreams):
            level[u] = {"confidenceScore": f.get("confidenceScore", 1.0), "upstreamType": up_type,
                        "downstreamType": f.get("downstreamType") or "FIELD"}  # fmt: skip
    return out


def _fine_grained_from_map(level: Any) -> list:
    if isinstance(level, list):
        return level
    out = []
    for operation, downstreams in (level or {}).items():
        for downstream, queries in downstreams.items():
            for query, upstreams in queries.items():
                if not upstreams:
                    continue
                score, up_type, down_type = 1.0, "FIELD_SET", "FIELD"
                for v in upstreams.values():
                    if "confidenceScore" in v and v["confidenceScore"] <= score:
                        score = v["confidenceScore"]
                    up_type, down_type = v.get("upstreamType", up_type), v.get("downstreamType", down_type)
                f: dict[str, Any] = {"downstreams": [downstream], "upstreams": list(upstreams)}
                if query and query != "NONE":
                    f["query"] = query
                f.update({"upstreamType": up_type, "downstreamType": down_type, "confidenceScore": score,
                          "transformOperation": operation})  # fmt: skip
                out.append(f)
    return out


_FIELD_ARRAYS = (("globalTags", "tags", ["tag"]), ("glossaryTerms", "terms", ["urn", f"attribution{US}source"]))


def _to_maps(aspect: str, node: dict, keys: dict[str, list[str]] | None) -> dict:
    for field, fields in (keys if keys is not None else TEMPLATE_ARRAYS.get(aspect, {})).items():
        node = array_to_map(node, field, fields)
    if keys is not None:
        return node
    if aspect == "upstreamLineage":
        node["fineGrainedLineages"] = _fine_grained_to_map(node.get("fineGrainedLineages"))
    elif aspect == "glossaryTerms":
        node.setdefault("auditStamp", dict(_SYSTEM))
    elif aspect == "editableSchemaMetadata":
        for info in node["editableSchemaFieldInfo"].values():
            for sub, field, fields in _FIELD_ARRAYS:
                if sub in info:
                    info[sub] = array_to_map(info[sub], field, fields)
    return node


def _to_arrays(aspect: str, node: dict, keys: dict[str, list[str]] | None) -> dict:
    for field, fields in (keys if keys is not None else TEMPLATE_ARRAYS.get(aspect, {})).items():
        node = map_to_array(node, field, fields)
    if keys is not None:
        return node
    if aspect == "upstreamLineage":
        node["fineGrainedLineages"] = _fine_grained_from_map(node.get("fineGrainedLineages"))
    elif aspect == "editableSchemaMetadata":
        for info in node["editableSchemaFieldInfo"]:
            for sub, field, fields in _FIELD_ARRAYS:
                if sub in info:
                    info[sub] = map_to_array(info[sub], field, fields)
    return node


# ------------------------------------------------------------------ JSON patch


def _tokens(path: str) -> list[str]:
    if not path.startswith("/"):
        raise PatchError(f"not a JSON pointer: {path!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _scaffold(node: dict, op: dict) -> None:
    """Create the levels the path names (TemplateUtil.populateTopLevelKeys)."""
    tokens = _tokens(op["path"])
    level: Any = node
    for t in tokens if op["op"] == "remove" else tokens[:-1]:
        if not isinstance(level, dict):
            return
        if level.get(t) is None:
            level[t] = {}
        level = level[t]


def _apply(node: dict, op: dict) -> None:
    tokens = _tokens(op["path"])
    parent: Any = node
    for t in tokens[:-1]:
        if isinstance(parent, dict) and t in parent:
            parent = parent[t]
        elif isinstance(parent, list) and t.isdigit() and int(t) < len(parent):
            parent = parent[int(t)]
        else:
            raise PatchError(f"the parent of {op['path']} does not exist")
    last, kind = tokens[-1], op["op"]
    if kind in ("add", "replace"):
        value = copy.deepcopy(op.get("value"))
        if value is None and kind == "add":
            value = ""  # GenericJsonPatch turns a null value into ""
        if isinstance(parent, list):
            if last == "-":
                parent.append(value)
            else:
                parent.insert(int(last), value)
        elif kind == "replace" and last not in parent:
            raise PatchError(f"replace of missing {op['path']}")
        else:
            parent[last] = value
    elif kind == "remove":
        if isinstance(parent, list):
            del parent[int(last)]
        else:
            parent.pop(last, None)  # scaffolded: removing what is absent is no error
    else:
        raise PatchError(f"Unsupported PATCH operation: {kind}")


def state_of(records: Iterable[Any], state: Mapping[tuple[str, str], _Aspect] | None = None) -> State:
    """(entity, aspect name) → aspect, after `records` (MCEs, proposals and patches, as DataHub's file
    source reads them) are applied in order to `state`."""
    out = dict(state or {})
    for r in records:
        if isinstance(r, MetadataChangeEventClass):
            snapshot = r.proposedSnapshot
            for aspect in snapshot.aspects:
                out[snapshot.urn, aspect.get_aspect_name()] = aspect
        elif isinstance(r, MetadataChangeProposalClass) and r.changeType == "PATCH":
            key = (cast(str, r.entityUrn), cast(str, r.aspectName))
            out[key] = patched(r, out.get(key))
        elif isinstance(r, MetadataChangeProposalWrapper) and r.aspect is not None:
            key = (cast(str, r.entityUrn), cast(str, r.aspectName))
            if not isinstance(r, IfAbsent) or key not in out:
                out[key] = r.aspect
    return out
