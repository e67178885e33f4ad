"""Apache Atlas over its REST API v2 (`/api/atlas/v2/...`), with plain `requests`.

The official `apache-atlas` client is not used: it sets no timeout and cannot pass
`replaceClassifications` on a bulk write, and everything here is a handful of JSON calls.

Types: Lumos registers its own typedefs rather than writing `hive_table`/`fs_path`:
* `lumos_dataset` (a `DataSet`): a lake dataset is files at a location, not a table of a
  Hive database (`hive_table` needs a `hive_db` and a `db.table@cluster` name) and not one
  path (`fs_path` has no columns). As a `DataSet` it is searched, shown and drawn in Atlas'
  lineage graph like any other; its own attributes hold location, format, platform, version,
  domain, typed owners and `lumosRecord` (what only Lumos knows: changes, errors, stats…).
* `lumos_column` (a `DataSet`, as `hive_column` is), owned by its dataset through the
  `lumos_dataset_columns` composition: a column left out of an update is deleted with it.
* `lumos_process` (a `Process`): one per lineage edge, inputs → outputs, with its column
  mappings and job.
Tags are classifications (one classification type per tag, registered when first used),
glossary terms are terms of the `Lumos` glossary assigned to datasets and columns, owners go
to `owner` (ids, as Atlas shows them) and `lumosOwners` (`kind:type:id`).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, Iterator, Sequence

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from lumos_dagster.catalog.base import CURRENT_STATE_ONLY, Undeliverable, content_hash
from lumos_dagster.floor.datatypes import field_from_json, field_to_json, type_str
from lumos_dagster.floor.errors import CatalogError
from lumos_dagster.floor.masking import shown_url
from lumos_dagster.floor.model import Snapshot
from lumos_dagster.floor.snapshot_json import snapshot_from_json, snapshot_to_json

log = logging.getLogger(__name__)
API = "/api/atlas/v2"
DATASET, COLUMN, PROCESS, COLUMNS_REL = "lumos_dataset", "lumos_column", "lumos_process", "lumos_dataset_columns"
GLOSSARY = "Lumos"
# Atlas' rules for a type name (AtlasTypeUtil) and a glossary term's name (no '.' or '@', they
# build its qualifiedName `term@glossary`)
CLASSIFICATION_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9_ ]*$")
TERM_NAME = re.compile(r"^[^.@]+$")
# what `lumosRecord` leaves out: Atlas holds it natively
_NATIVE = ("schema", "description", "owners", "tags", "terms", "upstream", "removed", "captured_at", "fingerprint",
           "version", "domain")  # fmt: skip


def _attr(name: str, type_name: str, optional: bool = True) -> dict:
    return {"name": name, "typeName": type_name, "isOptional": optional, "cardinality": "SINGLE",
            "isUnique": False, "isIndexable": False}  # fmt: skip


TYPEDEFS: dict[str, list[dict[str, Any]]] = {
    "entityDefs": [
        {"name": DATASET, "superTypes": ["DataSet"], "typeVersion": "1.0", "attributeDefs": [
            _attr("platform", "string", False), _attr("location", "string"), _attr("format", "string"),
            _attr("version", "string"), _attr("domain", "string"), _attr("lumosOwners", "array<string>"),
            _attr("lumosRecord", "string")]},
        {"name": COLUMN, "superTypes": ["DataSet"], "typeVersion": "1.0", "attributeDefs": [
            _attr("type", "string"), _attr("position", "int"), _attr("lumosField", "string")]},
        {"name": PROCESS, "superTypes": ["Process"], "typeVersion": "1.0", "attributeDefs": [
            _attr("columnMapping", "array<string>"), _attr("jobOrchestrator", "string"),
            _attr("jobFlow", "string"), _attr("jobName", "string")]},
    ],
    "relationshipDefs": [
        {"name": COLUMNS_REL, "typeVersion": "1.0", "relationshipCategory": "COMPOSITION", "propagateTags": "NONE",
         "endDef1": {"type": DATASET, "name": "columns", "isContainer": True, "cardinality": "SET"},
         "endDef2": {"type": COLUMN, "name": "table", "isContainer": False, "cardinality": "SINGLE"}},
    ],
}  # fmt: skip


def _ref(type_name: str, qualified_name: str) -> dict:
    """An AtlasObjectId by unique attribute: Atlas resolves it to the entity's guid."""
    return {"typeName": type_name, "uniqueAttributes": {"qualifiedName": qualified_name}}


class AtlasCatalog:
    #: Atlas keeps an audit trail, not Lumos versions: earlier versions and releases stay in the store
    cannot_hold = CURRENT_STATE_ONLY

    def __init__(
        self,
        url: str,
        username: str | None = None,
        password: str | None = None,
        token: str | None = None,
        cluster: str = "lumos",
        timeout_sec: float = 30,
        retries: int = 3,
    ):
        self.url = url.rstrip("/")
        self.name = f"atlas:{shown_url(self.url)}"  # the outbox keys on it: no credentials
        self.cluster = cluster
        self.timeout = timeout_sec
        self.session = requests.Session()
        retry = Retry(total=retries, backoff_factor=0.5, status_forcelist=(429, 500, 502, 503, 504),
                      allowed_methods=("GET", "PUT", "DELETE"))  # fmt: skip
        self.session.mount("http://", HTTPAdapter(max_retries=retry))
        self.session.mount("https://", HTTPAdapter(max_retries=retry))
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"
        elif username:
            self.session.auth = (username, password or "")
        self._typedefs: set[str] | None = None  # names of the types Atlas has, read once
        self._glossary: str | None = None
        self._terms: dict[str, str] = {}  # term name → guid

    # ------------------------------------------------------------- http

    def _call(self, method: str, path: str, body=None, params=None, missing_ok: bool = False):
        response = self.session.request(
            method, f"{self.url}{API}/{path}", json=body, params=params, timeout=self.timeout
        )
        if missing_ok and response.status_code == 404:
            return None
        if response.status_code == 400:
            raise _Rejected(f"Atlas {method} {API}/{path}: HTTP 400: {response.text[:300]}")
        if response.status_code >= 400:
            raise CatalogError(f"Atlas {method} {API}/{path}: HTTP {response.status_code}: {response.text[:300]}")
        return response.json() if response.content else None

    # ---------------------------------------------------------- payloads

    def qualified_name(self, platform: str, name: str) -> str:
        """Atlas' `name@cluster` convention, the platform first: `file://raw/orders@lumos`."""
        return f"{platform}://{name}@{self.cluster}"

    def _dataset_qn(self, s: Snapshot) -> str:
        return self.qualified_name(s.dataset.platform, s.dataset.name)

    def entities(self, s: Snapshot) -> list[dict]:
        """The dataset entity and its columns, as one bulk write (AtlasEntitiesWithExtInfo.entities)."""
        qn = self._dataset_qn(s)
        record = {k: v for k, v in snapshot_to_json(s).items() if k not in _NATIVE}
        attributes = {
            "qualifiedName": qn,
            "name": s.dataset.name,
            "description": s.description,
            "owner": ",".join(o.id for o in s.owners) or None,
            "lumosOwners": [f"{o.kind}:{o.type}:{o.id}" for o in s.owners],
            "platform": s.dataset.platform,
            "location": s.dataset.location,
            "format": s.dataset.format,
            "version": s.version,
            "domain": s.domain,
            "lumosRecord": json.dumps(record, sort_keys=True),
        }
        columns: list[dict[str, Any]] = [
            {
                "typeName": COLUMN,
                "attributes": {
                    "qualifiedName": f"{s.dataset.platform}://{s.dataset.name}.{f.name}@{self.cluster}",
                    "name": f.name,
                    "description": f.description,
                    "type": type_str(f.type),
                    "position": i,
                    "lumosField": json.dumps(field_to_json(f), sort_keys=True),
                },
                "relationshipAttributes": {"table": _ref(DATASET, qn)},
            }
            for i, f in enumerate(s.schema.fields)
        ]
        dataset = {
            "typeName": DATASET,
            "attributes": {k: v for k, v in attributes.items() if v is not None},
            "relationshipAttributes": {"columns": [_ref(COLUMN, c["attributes"]["qualifiedName"]) for c in columns]},
            "classifications": [{"typeName": t} for t in s.tags],
        }
        return [dataset, *columns]

    def processes(self, s: Snapshot) -> list[dict]:
        out = []
        here = self._dataset_qn(s)
        for e in s.upstream:
            there = self.qualified_name(e.upstream.platform, e.upstream.name)
            attributes = {
                "qualifiedName": f"{there}->{here}",
                "name": f"{e.upstream.name} -> {s.dataset.name}",
                "inputs": [_ref(DATASET, there)],
                "outputs": [_ref(DATASET, here)],
                "columnMapping": [f"{c.upstream}->{c.downstream}" for c in e.columns],
            }
            if e.job:
                attributes.update(jobOrchestrator=e.job.orchestrator, jobFlow=e.job.flow, jobName=e.job.name)
            out.append({"typeName": PROCESS, "attributes": attributes})
        return out

    def fingerprint(self, snapshot: Snapshot) -> str:
        return content_hash(
            {
                "entities": self.entities(snapshot),
                "processes": self.processes(snapshot),
                "terms": [snapshot.terms, [f.terms for f in snapshot.schema.fields]],
                "removed": snapshot.removed,
            }
        )

    @staticmethod
    def problems(s: Snapshot) -> list[str]:
        """Why Atlas could never take this snapshot as it is (names its rules refuse)."""
        bad_tags = [t for t in s.tags if not CLASSIFICATION_NAME.match(t)]
        bad_terms = [t for t in (*s.terms, *(t for f in s.schema.fields for t in f.terms)) if not TERM_NAME.match(t)]
        out = []
        if bad_tags:
            out.append(
                f"{s.dataset.name}: tag(s) {bad_tags} are not Atlas classification names (letters, digits, _, space)"
            )
        if bad_terms:
            out.append(f"{s.dataset.name}: glossary term(s) {bad_terms} contain '.' or '@', which Atlas refuses")
        return out

    # -------------------------------------------------------------- emit

    def _ensure_types(self, tags: set[str]) -> int:
        if self._typedefs is None:
            have = self._call("GET", "types/typedefs/headers") or []
            self._typedefs = {h["name"] for h in have}
        missing = {
            "entityDefs": [d for d in TYPEDEFS["entityDefs"] if d["name"] not in self._typedefs],
            "relationshipDefs": [d for d in TYPEDEFS["relationshipDefs"] if d["name"] not in self._typedefs],
            "classificationDefs": [
                {
                    "name": t,
                    "description": f"Lumos tag {t}",
                    "superTypes": [],
                    "attributeDefs": [],
                    "typeVersion": "1.0",
                }
                for t in sorted(tags - self._typedefs)
            ],
        }
        if not any(missing.values()):
            return 0
        self._call("POST", "types/typedefs", {k: v for k, v in missing.items() if v})
        self._typedefs |= {d["name"] for defs in missing.values() for d in defs}
        return 1

    def _term_guid(self, name: str) -> str:
        if self._glossary is None:
            found = next((g for g in self._call("GET", "glossary") or [] if g["name"] == GLOSSARY), None)
            if found is None:
                found = self._call("POST", "glossary", {"name": GLOSSARY, "shortDescription": "Terms set by Lumos"})
            self._glossary = found["guid"]
            terms = self._call("GET", f"glossary/{self._glossary}/terms", params={"limit": -1}) or []
            self._terms = {t["name"]: t["guid"] for t in terms}
        if name not in self._terms:
            term = self._call("POST", "glossary/term", {"name": name, "anchor": {"glossaryGuid": self._glossary}})
            self._terms[name] = term["guid"]
        return self._terms[name]

    def _assign_terms(self, guid: str, current: list[dict], wanted: Sequence[str]) -> int:
        """Make the terms of entity `guid` be `wanted` (current: its `meanings`)."""
        calls = 0
        have = {m["displayText"]: m for m in current if m.get("relationshipStatus", "ACTIVE") == "ACTIVE"}
        for name in wanted:
            if name not in have:
                self._call("POST", f"glossary/terms/{self._term_guid(name)}/assignedEntities", [{"guid": guid}])
                calls += 1
        for name, m in have.items():
            if name not in wanted:
                body = [{"guid": guid, "relationshipGuid": m["relationshipGuid"]}]
                self._call("DELETE", f"glossary/terms/{m['guid']}/assignedEntities", body)
                calls += 1
        return calls

    def _get(self, type_name: str, qn: str) -> dict | None:
        return self._call(
            "GET", f"entity/uniqueAttribute/type/{type_name}", params={"attr:qualifiedName": qn}, missing_ok=True
        )

    def emit(self, snapshots: Sequence[Snapshot]) -> int:
        rejected = {i: "; ".join(p) for i, s in enumerate(snapshots) if (p := self.problems(s))}
        calls = self._ensure_types({t for i, s in enumerate(snapshots) if i not in rejected for t in s.tags})
        written: list[Snapshot] = []
        for i, s in enumerate(snapshots):
            if i in rejected:
                continue
            if s.removed:  # a soft delete: Atlas keeps the entity, status DELETED
                self._call("DELETE", f"entity/uniqueAttribute/type/{DATASET}",
                           params={"attr:qualifiedName": self._dataset_qn(s)}, missing_ok=True)  # fmt: skip
                calls += 1
                continue
            try:  # classifications are replaced, not merged, so a dropped tag goes
                self._call("POST", "entity/bulk", {"entities": self.entities(s)}, {"replaceClassifications": "true"})
            except _Rejected as exc:
                rejected[i] = str(exc)
                continue
            calls += 1
            written.append(s)
        for s in written:  # terms and lineage once every dataset of the batch is there
            calls += self._terms_and_lineage(s)
        if rejected:  # delivery quarantines these and emits the rest again (idempotent)
            raise Undeliverable(rejected)
        return calls

    def _terms_and_lineage(self, s: Snapshot) -> int:
        found = self._get(DATASET, self._dataset_qn(s))
        if found is None:  # written by this emit: Atlas lost it, or another writer deleted it since
            raise CatalogError(f"Atlas has no {self._dataset_qn(s)} right after it was written")
        entity, referred = found["entity"], found.get("referredEntities", {})
        relations = entity.get("relationshipAttributes", {})
        calls = 1 + self._assign_terms(entity["guid"], relations.get("meanings", []), s.terms)
        by_name = {c["attributes"]["name"]: c for c in referred.values() if c.get("status") == "ACTIVE"}
        for f in s.schema.fields:
            col = by_name[f.name]
            calls += self._assign_terms(col["guid"], col.get("relationshipAttributes", {}).get("meanings", []), f.terms)
        wanted = {p["attributes"]["qualifiedName"]: p for p in self.processes(s)}
        for old in relations.get("outputFromProcesses", []):  # edges that are gone
            if old.get("entityStatus", "ACTIVE") != "ACTIVE":
                continue
            process = self._call("GET", f"entity/guid/{old['guid']}")["entity"]  # a related id has no qualifiedName
            if process["typeName"] == PROCESS and process["attributes"]["qualifiedName"] not in wanted:
                self._call("DELETE", f"entity/guid/{old['guid']}")
                calls += 2
        for qn, process in wanted.items():
            upstream = process["attributes"]["inputs"][0]["uniqueAttributes"]["qualifiedName"]
            if self._get(DATASET, upstream) is None:
                log.info("lineage %s waits until %s is in Atlas", qn, upstream)
                continue
            self._call("POST", "entity/bulk", {"entities": [process]})
            calls += 2
        return calls

    # -------------------------------------------------------------- read

    def _search(self, type_name: str) -> Iterator[dict]:
        offset, page = 0, 1000
        while True:
            body = {"typeName": type_name, "excludeDeletedEntities": False, "limit": page, "offset": offset}
            found = (self._call("POST", "search/basic", body) or {}).get("entities") or []
            yield from found
            if len(found) < page:
                return
            offset += page

    def read_all(self) -> Iterator[Snapshot]:
        """Every Lumos dataset in Atlas (soft-deleted ones as removed), with its lineage from the
        `lumos_process` entities. Atlas' own values win for what people edit there: description,
        owners, tags, terms, columns' descriptions, lineage."""
        datasets: dict[str, dict] = {}  # qualifiedName → entity with ext info; an active one wins
        for header in self._search(DATASET):
            found = self._call("GET", f"entity/guid/{header['guid']}")
            qn = found["entity"]["attributes"]["qualifiedName"]
            if qn not in datasets or found["entity"].get("status") == "ACTIVE":
                datasets[qn] = found
        edges: dict[str, list[dict]] = {}
        for header in self._search(PROCESS):
            if header.get("status") != "ACTIVE":
                continue
            p = self._call("GET", f"entity/guid/{header['guid']}")["entity"]["attributes"]
            for out in p["outputs"]:
                edges.setdefault(out["uniqueAttributes"]["qualifiedName"], []).append(p)
        by_qn = {qn: d["entity"]["attributes"] for qn, d in datasets.items()}
        for qn in sorted(datasets):
            yield self._snapshot(datasets[qn], edges.get(qn, []), by_qn)

    def _snapshot(self, found: dict, processes: list[dict], by_qn: dict[str, dict]) -> Snapshot:
        entity, referred = found["entity"], found.get("referredEntities", {})
        a = entity["attributes"]
        doc = json.loads(a.get("lumosRecord") or "{}")
        doc.setdefault("format_version", "lumos.snapshot/1")
        doc["dataset"] = {"platform": a["platform"], "name": a["name"], "location": a.get("location") or "",
                          "format": a.get("format")}  # fmt: skip
        doc["captured_at"] = _updated_at(entity)
        doc["description"], doc["version"], doc["domain"] = a.get("description"), a.get("version"), a.get("domain")
        doc["owners"] = [
            dict(zip(("kind", "type", "id"), o.split(":", 2), strict=True)) for o in a.get("lumosOwners") or []
        ]
        if not doc["owners"] and a.get("owner"):  # set in Atlas' UI: ids of users
            doc["owners"] = [{"id": o.strip(), "kind": "user", "type": "DATAOWNER"} for o in a["owner"].split(",")]
        doc["tags"] = [c["typeName"] for c in entity.get("classifications") or []]
        relations = entity.get("relationshipAttributes", {})
        doc["terms"] = _terms(relations)
        columns = [c for c in referred.values() if c["typeName"] == COLUMN and c.get("status") == "ACTIVE"]
        doc["schema"] = [
            field_to_json(replace(field_from_json(json.loads(c["attributes"]["lumosField"])),
                                  description=c["attributes"].get("description"),
                                  terms=tuple(_terms(c.get("relationshipAttributes", {})))))
            for c in sorted(columns, key=lambda c: c["attributes"].get("position", 0))
        ]  # fmt: skip
        doc["upstream"] = [_edge(p, by_qn) for p in sorted(processes, key=lambda p: p["qualifiedName"])]
        doc["removed"] = entity.get("status") == "DELETED"
        return snapshot_from_json(doc)

    def close(self) -> None:
        self.session.close()


class _Rejected(CatalogError):
    """Atlas answered 400: it will never take this request as it is."""


def _terms(relations: dict) -> list[str]:
    return sorted(m["displayText"] for m in relations.get("meanings", []) if m.get("relationshipStatus") == "ACTIVE")


def _updated_at(entity: dict) -> str:
    return datetime.fromtimestamp(entity.get("updateTime", 0) / 1000, timezone.utc).isoformat()


def _edge(p: dict, by_qn: dict[str, dict]) -> dict:
    there = p["inputs"][0]["uniqueAttributes"]["qualifiedName"]
    up = by_qn.get(there) or {"platform": there.split("://", 1)[0], "name": there.split("://", 1)[-1].rsplit("@", 1)[0]}
    columns = [
        dict(zip(("upstream", "downstream"), m.split("->", 1), strict=True)) for m in p.get("columnMapping") or []
    ]
    job = None
    if p.get("jobName"):
        job = {"orchestrator": p["jobOrchestrator"], "flow": p["jobFlow"], "name": p["jobName"]}
    ref = {
        "platform": up["platform"],
        "name": up["name"],
        "location": up.get("location") or "",
        "format": up.get("format"),
    }
    return {"upstream": ref, "columns": columns, "job": job}
