"""An Apache Atlas stand-in (no Atlas server can run here): the REST v2 endpoints the Atlas
adapter uses, on a real HTTP server, holding typedefs, entities, classifications, glossary
terms and their assignments the way Atlas does.

Every request body is validated against JSON Schemas written from Atlas' documented v2
model (https://atlas.apache.org/api/v2/ — json_AtlasTypesDef, json_AtlasEntitiesWithExtInfo,
json_AtlasEntity, json_AtlasClassification, json_AtlasObjectId, json_AtlasGlossary,
json_AtlasGlossaryTerm, json_AtlasRelatedObjectId, json_SearchParameters), then against the
type system as Atlas' entity store checks it: the entity's type exists, mandatory attributes
(inherited ones too: `Referenceable.qualifiedName`, `Asset.name`) are set, attribute values
have their declared types, classifications are registered, references resolve. Like Atlas, it
answers 400 for an invalid body, 404 for a reference or type it does not know, 409 for a type
defined twice. It is stricter than Atlas in one way: an attribute the type does not declare
is refused rather than ignored, so a typo in the adapter cannot pass unnoticed.
"""

from __future__ import annotations

import base64
import itertools
import uuid

import jsonschema

from tests.fake_servers import FakeServer

_NAME = {"type": "string", "minLength": 1}
_OBJECT_ID = {  # json_AtlasObjectId: a guid, or a type and unique attributes
    "type": "object",
    "properties": {"guid": {"type": "string"}, "typeName": _NAME, "uniqueAttributes": {"type": "object"}},
    "anyOf": [{"required": ["guid"]}, {"required": ["typeName", "uniqueAttributes"]}],
}
_ATTRIBUTE_DEF = {
    "type": "object",
    "required": ["name", "typeName"],
    "properties": {
        "name": _NAME,
        "typeName": _NAME,
        "isOptional": {"type": "boolean"},
        "cardinality": {"enum": ["SINGLE", "LIST", "SET"]},
        "isUnique": {"type": "boolean"},
        "isIndexable": {"type": "boolean"},
    },
}
_STRUCT_DEF = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": _NAME,
        "description": {"type": "string"},
        "typeVersion": {"type": "string"},
        "attributeDefs": {"type": "array", "items": _ATTRIBUTE_DEF},
        "superTypes": {"type": "array", "items": _NAME},
    },
}
_END_DEF = {
    "type": "object",
    "required": ["type", "name"],
    "properties": {
        "type": _NAME,
        "name": _NAME,
        "isContainer": {"type": "boolean"},
        "cardinality": {"enum": ["SINGLE", "LIST", "SET"]},
    },
}
TYPES_DEF = {  # json_AtlasTypesDef
    "type": "object",
    "additionalProperties": False,
    "properties": {
        **{k: {"type": "array", "items": _STRUCT_DEF} for k in ("structDefs", "classificationDefs", "entityDefs")},
        "enumDefs": {"type": "array"},
        "businessMetadataDefs": {"type": "array"},
        "relationshipDefs": {
            "type": "array",
            "items": {
                **_STRUCT_DEF,
                "required": ["name", "relationshipCategory", "endDef1", "endDef2"],
                "properties": {
                    **_STRUCT_DEF["properties"],
                    "relationshipCategory": {"enum": ["ASSOCIATION", "AGGREGATION", "COMPOSITION"]},
                    "propagateTags": {"enum": ["NONE", "ONE_TO_TWO", "TWO_TO_ONE", "BOTH"]},
                    "endDef1": _END_DEF,
                    "endDef2": _END_DEF,
                },
            },
        },
    },
}
ENTITY = {  # json_AtlasEntity
    "type": "object",
    "required": ["typeName"],
    "properties": {
        "typeName": _NAME,
        "guid": {"type": "string"},
        "status": {"enum": ["ACTIVE", "DELETED", "PURGED"]},
        "attributes": {"type": "object"},
        "relationshipAttributes": {"type": "object"},
        "classifications": {
            "type": "array",
            "items": {"type": "object", "required": ["typeName"], "properties": {"typeName": _NAME}},
        },
    },
}
ENTITIES = {  # json_AtlasEntitiesWithExtInfo
    "type": "object",
    "required": ["entities"],
    "properties": {
        "entities": {"type": "array", "minItems": 1, "items": ENTITY},
        "referredEntities": {"type": "object"},
    },
}
GLOSSARY = {"type": "object", "required": ["name"], "properties": {"name": _NAME}}
TERM = {
    "type": "object",
    "required": ["name", "anchor"],
    "properties": {
        "name": {"type": "string", "pattern": "^[^.@]+$"},  # '.' and '@' build the term's qualifiedName
        "anchor": {"type": "object", "required": ["glossaryGuid"]},
    },
}
RELATED_IDS = {"type": "array", "minItems": 1, "items": {"type": "object", "required": ["guid"]}}
SEARCH = {
    "type": "object",
    "required": ["typeName"],
    "properties": {"typeName": _NAME, "limit": {"type": "integer"}, "offset": {"type": "integer", "minimum": 0}},
}

# Atlas' built-in model types the Lumos types build on (models/0000-Area0/0010-base_model.json)
_BUILTIN = {
    "Referenceable": ([], {"qualifiedName": ("string", False)}),
    "Asset": (
        ["Referenceable"],
        {"name": ("string", False), "description": ("string", True), "owner": ("string", True)},
    ),  # fmt: skip
    "DataSet": (["Asset"], {}),
    "Process": (["Asset"], {"inputs": ("array<DataSet>", True), "outputs": ("array<DataSet>", True)}),
}
_PRIMITIVES = {"string": str, "int": int, "long": int, "boolean": bool, "float": float, "double": float}


_VALIDATORS: dict[int, jsonschema.protocols.Validator] = {}


def _validate(body, schema: dict) -> None:
    """jsonschema.validate, with each schema checked and compiled once (the stand-in takes thousands of requests)."""
    if id(schema) not in _VALIDATORS:
        _VALIDATORS[id(schema)] = jsonschema.validators.validator_for(schema)(schema)
    _VALIDATORS[id(schema)].validate(body)


class _Refused(Exception):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code = status, code


class FakeAtlas(FakeServer):
    def __init__(self, username: str = "admin", password: str = "admin", token: str | None = None):
        super().__init__()
        # basic authentication (Atlas' file and LDAP logins), or a bearer token as a Knox/JWT front takes it
        basic = "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()
        self.auth = f"Bearer {token}" if token else basic
        self.entity_types = {n: {"superTypes": s, "attributeDefs": a} for n, (s, a) in _BUILTIN.items()}
        self.classification_types: set[str] = set()
        self.relationship_types: dict[str, dict] = {}
        self.entities: dict[str, dict] = {}  # guid → entity
        self.owner: dict[str, str] = {}  # a composed entity's guid → its container's
        self.children: dict[str, dict[str, None]] = {}  # a container's guid → what it owns, in order
        self.by_qn: dict[str, list[str]] = {}  # qualifiedName → guids (a deleted one and its successor)
        self.io: dict[str, dict[str, set[str]]] = {}  # a DataSet's guid → processes it is an input/output of
        self.glossaries: dict[str, dict] = {}
        self.terms: dict[str, dict] = {}  # guid → term
        self.assignments: dict[str, tuple[str, str]] = {}  # relationship guid → (term guid, entity guid)
        self.meanings: dict[str, dict[str, str]] = {}  # entity guid → relationship guid → term guid
        self.versions: dict[str, int] = {}  # guid → version, raised only when the entity changes
        self._clock = itertools.count(1_764_000_000_000, 1000)

    # ------------------------------------------------------------ type system

    def _attributes(self, type_name: str) -> dict[str, tuple[str, bool]]:
        t = self.entity_types[type_name]
        out: dict[str, tuple[str, bool]] = {}
        for s in t["superTypes"]:
            out.update(self._attributes(s))
        out.update(t["attributeDefs"])
        return out

    def _is_a(self, type_name: str, ancestor: str) -> bool:
        return type_name == ancestor or any(self._is_a(s, ancestor) for s in self.entity_types[type_name]["superTypes"])

    def _define(self, body: dict) -> None:
        _validate(body, TYPES_DEF)
        defs = [d for k in ("entityDefs", "classificationDefs", "relationshipDefs") for d in body.get(k, [])]
        known = set(self.entity_types) | self.classification_types | set(self.relationship_types)
        for d in defs:
            if d["name"] in known:
                raise _Refused(409, "ATLAS-409-00-001", f"Given type {d['name']} already exists")
        for d in body.get("entityDefs", []):
            for s in d.get("superTypes", []):
                if s not in self.entity_types:
                    raise _Refused(400, "ATLAS-400-00-012", f"{d['name']}: unknown supertype {s}")
            attrs = {a["name"]: (a["typeName"], a.get("isOptional", True)) for a in d.get("attributeDefs", [])}
            self.entity_types[d["name"]] = {"superTypes": d.get("superTypes", []), "attributeDefs": attrs}
        for d in body.get("relationshipDefs", []):
            for end in (d["endDef1"], d["endDef2"]):
                if end["type"] not in self.entity_types:
                    raise _Refused(400, "ATLAS-400-00-012", f"{d['name']}: unknown end type {end['type']}")
            self.relationship_types[d["name"]] = d
        self.classification_types |= {d["name"] for d in body.get("classificationDefs", [])}

    def _relation_ends(self, type_name: str) -> dict[str, tuple[dict, dict]]:
        """Relationship attribute name → (this end, the other end) for a type."""
        out = {}
        for r in self.relationship_types.values():
            for mine, other in ((r["endDef1"], r["endDef2"]), (r["endDef2"], r["endDef1"])):
                if self._is_a(type_name, mine["type"]):
                    out[mine["name"]] = (mine, other)
        return out

    def _check_value(self, where: str, type_name: str, value) -> None:
        if value is None:
            return
        if type_name.startswith("array<"):
            if not isinstance(value, list):
                raise _Refused(400, "ATLAS-400-00-08D", f"{where}: expected an array")
            for v in value:
                self._check_value(where, type_name[6:-1], v)
        elif type_name in _PRIMITIVES:
            if not isinstance(value, _PRIMITIVES[type_name]) or isinstance(value, bool) != (type_name == "boolean"):
                raise _Refused(400, "ATLAS-400-00-08D", f"{where}: expected {type_name}, got {value!r}")
        else:
            _validate(value, _OBJECT_ID)

    def _validate_entity(self, e: dict) -> None:
        if e["typeName"] not in self.entity_types:
            raise _Refused(404, "ATLAS-404-00-001", f"Given typename {e['typeName']} was invalid")
        declared = self._attributes(e["typeName"])
        attrs = e.get("attributes", {})
        for name, (_, optional) in declared.items():
            if not optional and attrs.get(name) in (None, ""):
                raise _Refused(400, "ATLAS-400-00-01C", f"{e['typeName']}.{name}: mandatory attribute missing")
        for name, value in attrs.items():
            if name not in declared:
                raise _Refused(400, "ATLAS-400-00-01D", f"{e['typeName']}: no attribute {name}")
            self._check_value(f"{e['typeName']}.{name}", declared[name][0], value)
        ends = self._relation_ends(e["typeName"])
        for name, value in e.get("relationshipAttributes", {}).items():
            if name not in ends:
                raise _Refused(400, "ATLAS-400-00-01D", f"{e['typeName']}: no relationship attribute {name}")
            for ref in value if isinstance(value, list) else [value]:
                _validate(ref, _OBJECT_ID)
        for c in e.get("classifications", []):
            if c["typeName"] not in self.classification_types:
                raise _Refused(404, "ATLAS-404-00-001", f"Given typename {c['typeName']} was invalid")

    # ---------------------------------------------------------------- entities

    def find(self, type_name: str, qn: str, active_only: bool = True) -> dict | None:
        for guid in self.by_qn.get(qn, ()):
            e = self.entities[guid]
            if self._is_a(e["typeName"], type_name) and (e["status"] == "ACTIVE" or not active_only):
                return e
        return None

    def _own(self, child: str, parent: str) -> None:
        self.children.get(self.owner.get(child, ""), {}).pop(child, None)
        self.owner[child] = parent
        self.children.setdefault(parent, {})[child] = None

    def _resolve(self, ref: dict) -> str:
        if "guid" in ref and ref["guid"] in self.entities:
            return ref["guid"]
        found = self.find(ref.get("typeName", "Referenceable"), ref.get("uniqueAttributes", {}).get("qualifiedName"))
        if found is None:
            raise _Refused(404, "ATLAS-404-00-00A", f"Referenced entity {ref} is not found")
        return found["guid"]

    def _bulk(self, body: dict, replace_classifications: bool) -> dict:
        _validate(body, ENTITIES)
        for e in body["entities"]:
            self._validate_entity(e)
        mutated: dict[str, list] = {"CREATE": [], "UPDATE": []}
        staged = []
        for e in body["entities"]:
            current = self.find(e["typeName"], e["attributes"]["qualifiedName"])
            new = current is None
            guid = str(uuid.uuid4()) if new else current["guid"]
            stored = {
                "guid": guid,
                "typeName": e["typeName"],
                "status": "ACTIVE",
                "attributes": {k: v for k, v in e["attributes"].items() if v is not None},
                "classifications": [
                    {"typeName": c["typeName"], "entityGuid": guid} for c in e.get("classifications", [])
                ]
                if new or replace_classifications
                else current["classifications"],
            }
            staged.append((stored, e.get("relationshipAttributes", {}), current))
            mutated["CREATE" if new else "UPDATE"].append(self._header(stored))
            self.entities[guid] = {**(current or {}), **stored}
            if new:
                self.by_qn.setdefault(e["attributes"]["qualifiedName"], []).append(guid)
        for stored, relations, current in staged:  # references resolve once the whole request is in
            entity = self.entities[stored["guid"]]
            for key in ("inputs", "outputs"):
                for r in (current or {}).get("attributes", {}).get(key, []):
                    self.io[r["guid"]][key].discard(stored["guid"])
                if key in entity["attributes"]:
                    entity["attributes"][key] = [self._id(self._resolve(r)) for r in entity["attributes"][key]]
                    for r in entity["attributes"][key]:
                        self.io.setdefault(r["guid"], {"inputs": set(), "outputs": set()})[key].add(stored["guid"])
            for name, value in relations.items():
                mine, other = self._relation_ends(stored["typeName"])[name]
                if isinstance(value, list):  # the container's side: what it no longer lists is deleted
                    listed = {self._resolve(r) for r in value}
                    for guid in list(self.children.get(stored["guid"], ())):
                        if guid not in listed:
                            self._delete(guid)
                    for guid in listed:
                        self._own(guid, stored["guid"])
                else:
                    self._own(stored["guid"], self._resolve(value))
            if current is None or self._public(current) != self._public(entity):
                self.versions[stored["guid"]] = self.versions.get(stored["guid"], 0) + 1
                entity["updateTime"] = next(self._clock)
            entity.setdefault("createTime", entity["updateTime"])
        return {"mutatedEntities": {k: v for k, v in mutated.items() if v}, "guidAssignments": {}}

    def _public(self, entity: dict) -> tuple:
        return (entity["status"], repr(sorted(entity["attributes"].items())), repr(entity["classifications"]))

    def _delete(self, guid: str) -> dict:
        entity = self.entities[guid]
        if entity["status"] == "ACTIVE":
            entity["status"] = "DELETED"
            self.versions[guid] = self.versions.get(guid, 0) + 1
            entity["updateTime"] = next(self._clock)
            for child in self.children.get(guid, ()):  # a composition deletes what it owns
                self._delete(child)
        return {"mutatedEntities": {"DELETE": [self._header(entity)]}}

    def _id(self, guid: str) -> dict:
        e = self.entities[guid]
        return {
            "guid": guid,
            "typeName": e["typeName"],
            "uniqueAttributes": {"qualifiedName": e["attributes"]["qualifiedName"]},
        }

    def _header(self, e: dict) -> dict:
        a = e["attributes"]
        return {
            "guid": e["guid"],
            "typeName": e["typeName"],
            "status": e["status"],
            "displayText": a.get("name"),
            "attributes": {"qualifiedName": a.get("qualifiedName"), "name": a.get("name")},
            "classificationNames": [c["typeName"] for c in e["classifications"]],
        }

    def _related(self, guid: str, **extra) -> dict:
        e = self.entities[guid]
        return {"guid": guid, "typeName": e["typeName"], "entityStatus": e["status"],
                "displayText": e["attributes"].get("name"), "relationshipStatus": "ACTIVE", **extra}  # fmt: skip

    def _full(self, guid: str) -> dict:
        """The entity as GET answers: with relationship attributes (AtlasRelatedObjectIds)."""
        e = self.entities[guid]
        relations: dict = {}
        meanings = [
            {"guid": t, "typeName": "AtlasGlossaryTerm", "displayText": self.terms[t]["name"],
             "relationshipGuid": r, "relationshipStatus": "ACTIVE"}
            for r, t in self.meanings.get(guid, {}).items()
        ]  # fmt: skip
        relations["meanings"] = meanings
        for name, (mine, _) in self._relation_ends(e["typeName"]).items():
            if mine.get("isContainer"):
                relations[name] = [self._related(g) for g in self.children.get(guid, ())]
            elif guid in self.owner:
                relations[name] = self._related(self.owner[guid])
        if self._is_a(e["typeName"], "DataSet"):
            for key, rel in (("outputs", "outputFromProcesses"), ("inputs", "inputToProcesses")):
                relations[rel] = [
                    self._related(p, relationshipStatus=self.entities[p]["status"])
                    for p in sorted(self.io.get(guid, {}).get(key, ()))
                ]
        return {**e, "version": self.versions.get(guid, 0), "relationshipAttributes": relations}

    def _with_ext(self, guid: str) -> dict:
        referred = {g: self._full(g) for g in self.children.get(guid, ())}
        return {"entity": self._full(guid), "referredEntities": referred}

    # ------------------------------------------------------------------ routes

    def handle(self, method, path, query, body, headers):
        if headers.get("Authorization") != self.auth:
            return 401, {"errorCode": "ATLAS-401-00-001", "errorMessage": "Unauthorized"}
        try:
            return self._route(method, path.removeprefix("/api/atlas/v2/"), query, body)
        except jsonschema.ValidationError as exc:
            return 400, {"errorCode": "ATLAS-400-00-001", "errorMessage": f"invalid request body: {exc.message}"}
        except _Refused as exc:
            return exc.status, {"errorCode": exc.code, "errorMessage": str(exc)}

    def _route(self, method, path, query, body):
        parts = path.split("/")
        qn = query.get("attr:qualifiedName", [None])[0]
        if (method, path) == ("GET", "types/typedefs/headers"):
            names = [*self.entity_types, *self.classification_types, *self.relationship_types]
            return 200, [{"name": n} for n in names]
        if (method, path) == ("POST", "types/typedefs"):
            self._define(body)
            return 200, body
        if (method, path) == ("POST", "entity/bulk"):
            return 200, self._bulk(body, query.get("replaceClassifications") == ["true"])
        if parts[:3] == ["entity", "uniqueAttribute", "type"]:
            found = self.find(parts[3], qn)
            if found is None:
                raise _Refused(404, "ATLAS-404-00-009", f"Instance {parts[3]} with qualifiedName={qn} does not exist")
            return 200, self._with_ext(found["guid"]) if method == "GET" else self._delete(found["guid"])
        if parts[:2] == ["entity", "guid"] and len(parts) == 3:
            if parts[2] not in self.entities:
                raise _Refused(404, "ATLAS-404-00-005", f"Given instance guid {parts[2]} is invalid/not found")
            return 200, self._with_ext(parts[2]) if method == "GET" else self._delete(parts[2])
        if (method, path) == ("POST", "search/basic"):
            _validate(body, SEARCH)
            hits = [self._header(e) for e in self.entities.values() if self._is_a(e["typeName"], body["typeName"])
                    and (e["status"] == "ACTIVE" or not body.get("excludeDeletedEntities"))]  # fmt: skip
            start = body.get("offset", 0)
            return 200, {"queryType": "BASIC", "entities": hits[start : start + body.get("limit", 100)]}
        if path == "glossary":
            if method == "GET":
                return 200, list(self.glossaries.values())
            _validate(body, GLOSSARY)
            glossary = {"guid": str(uuid.uuid4()), "name": body["name"], "qualifiedName": body["name"]}
            self.glossaries[glossary["guid"]] = glossary
            return 200, glossary
        if method == "GET" and parts[0] == "glossary" and parts[2:] == ["terms"]:
            return 200, [t for t in self.terms.values() if t["anchor"]["glossaryGuid"] == parts[1]]
        if (method, path) == ("POST", "glossary/term"):
            _validate(body, TERM)
            if body["anchor"]["glossaryGuid"] not in self.glossaries:
                raise _Refused(404, "ATLAS-404-00-014", "glossary not found")
            if any(t["name"] == body["name"] and t["anchor"] == body["anchor"] for t in self.terms.values()):
                raise _Refused(409, "ATLAS-409-00-009", f"Glossary term with name {body['name']} already exists")
            term = {"guid": str(uuid.uuid4()), "name": body["name"], "anchor": body["anchor"]}
            self.terms[term["guid"]] = term
            return 200, term
        if parts[:2] == ["glossary", "terms"] and parts[3:] == ["assignedEntities"]:
            _validate(body, RELATED_IDS)
            if parts[2] not in self.terms:
                raise _Refused(404, "ATLAS-404-00-013", "term not found")
            for ref in body:
                if method == "POST":
                    if ref["guid"] not in self.entities:
                        raise _Refused(404, "ATLAS-404-00-005", f"guid {ref['guid']} not found")
                    relationship = str(uuid.uuid4())
                    self.assignments[relationship] = (parts[2], ref["guid"])
                    self.meanings.setdefault(ref["guid"], {})[relationship] = parts[2]
                elif self.assignments.pop(ref.get("relationshipGuid"), None) is None:
                    raise _Refused(400, "ATLAS-400-00-03A", "term is not assigned to the entity")
                else:
                    self.meanings[ref["guid"]].pop(ref["relationshipGuid"])
            return 200, None
        return 404, {"errorMessage": f"no route {method} {path}"}
