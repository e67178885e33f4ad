"""OpenMetadata over its REST API (`/api/v1/...`), with plain `requests` so its SDK stays
optional: service → database → schema → table (columns with nested children, owners,
tags, glossary terms), and lineage edges between tables; read back by `read_all`
(openmetadata_read.py).

A dataset `raw/orders` becomes table `orders` in schema `raw` (`a/b/c`: schema `a`, table
`b__c`; a name without a folder goes to schema `default`). Tags live in the `Lumos`
classification, glossary terms in the `Lumos` glossary. Owners are looked up by name among
users (groups: teams); an owner OpenMetadata does not know is left out and logged, not invented.

Two custom properties of the `table` type, registered on first write, carry what OpenMetadata
has no field for: `lumosVersion` (the dataset's version, shown in its UI) and `lumosRecord`
(the rest of the Lumos snapshot as JSON, as DataHub's `lumos.record`: Lumos types, changes,
stats…), so a read back gives the snapshot that was written.
"""

from __future__ import annotations

import json
import logging
from typing import Iterator, Sequence, overload

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from lumos_dagster.catalog.base import CURRENT_STATE_ONLY, Undeliverable, content_hash, send_each
from lumos_dagster.catalog.openmetadata_read import (
    CLASSIFICATION,
    GLOSSARY,
    RECORD_PROPERTY,
    VERSION_PROPERTY,
    read_tables,
)
from lumos_dagster.floor.datatypes import (
    Array,
    DataType,
    Decimal,
    Enum,
    Field,
    Fixed,
    Map,
    Primitive,
    Struct,
    Time,
    Timestamp,
    UnionType,
    type_str,
)
from lumos_dagster.floor.errors import CatalogError
from lumos_dagster.floor.masking import shown_url
from lumos_dagster.floor.model import Snapshot
from lumos_dagster.floor.snapshot_json import snapshot_to_json

log = logging.getLogger(__name__)
_PRIMITIVES = {
    "boolean": "BOOLEAN", "int8": "TINYINT", "int16": "SMALLINT", "int32": "INT", "int64": "BIGINT",
    "uint8": "SMALLINT", "uint16": "INT", "uint32": "BIGINT", "uint64": "NUMERIC",
    "float16": "FLOAT", "float32": "FLOAT", "float64": "DOUBLE", "string": "STRING", "binary": "BINARY",
    "date": "DATE", "uuid": "UUID", "json": "JSON", "variant": "VARIANT", "interval": "INTERVAL", "null": "NULL",
    "unknown": "UNKNOWN",
}  # fmt: skip


def data_type(t: DataType) -> str:
    if isinstance(t, Primitive):
        return _PRIMITIVES[t.kind]
    if isinstance(t, Timestamp):
        return "TIMESTAMPZ" if t.tz else "TIMESTAMP"
    kinds = {Decimal: "DECIMAL", Time: "TIME", Fixed: "BINARY", Enum: "ENUM", Struct: "STRUCT", Array: "ARRAY",
             Map: "MAP", UnionType: "UNION"}  # fmt: skip
    return kinds[type(t)]


def column(f: Field) -> dict:
    body: dict = {
        "name": f.name,
        "dataType": data_type(f.type),
        "dataTypeDisplay": type_str(f.type),
        "constraint": "NULL" if f.nullable else "NOT_NULL",
    }
    if f.description:
        body["description"] = f.description
    if isinstance(f.type, Decimal):
        body["precision"], body["scale"] = f.type.precision, f.type.scale
    if isinstance(f.type, Fixed):
        body["dataLength"] = f.type.size
    inner = f.type
    if isinstance(inner, Array):
        body["arrayDataType"] = data_type(inner.element)
    while isinstance(inner, (Array, Map)):
        inner = inner.element if isinstance(inner, Array) else inner.value
    if isinstance(inner, Struct):
        body["children"] = [column(c) for c in inner.fields]
    return body


#: the file errors a table's Lumos record keeps (the store keeps them all)
MAX_RECORDED_ERRORS = 100


def record(s: Snapshot) -> str:
    """The Lumos snapshot but for what changes on every run (capture time, the data's age)."""
    doc = {k: v for k, v in snapshot_to_json(s).items() if k not in ("captured_at", "fingerprint")}
    doc["errors"] = doc["errors"][:MAX_RECORDED_ERRORS]
    if doc.get("quality"):
        doc["quality"] = {**doc["quality"], "age_hours": None}
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def _label(fqn: str, source: str) -> dict:
    return {"tagFQN": fqn, "source": source, "labelType": "Automated", "state": "Confirmed"}


def table_place(name: str) -> tuple[str, str]:
    """(schema, table) of a dataset name."""
    parts = name.split("/")
    return ("default", parts[0]) if len(parts) == 1 else (parts[0], "__".join(parts[1:]))


class OpenMetadataCatalog:
    #: the Lumos custom properties bring back a dataset's whole current snapshot; no earlier versions
    cannot_hold = CURRENT_STATE_ONLY

    def __init__(
        self,
        server: str,
        token: str | None = None,
        service: str = "lumos",
        database: str = "lake",
        timeout_sec: float = 30,
        retries: int = 3,
    ):
        self.server = server.rstrip("/")
        self.name = f"openmetadata:{shown_url(self.server)}"  # the outbox keys on it: no credentials
        self.service, self.database = service, database
        self.timeout = timeout_sec
        self.session = requests.Session()
        retry = Retry(total=retries, backoff_factor=0.5, status_forcelist=(429, 500, 502, 503, 504),
                      allowed_methods=("GET", "PUT", "DELETE"))  # fmt: skip
        self.session.mount("http://", HTTPAdapter(max_retries=retry))
        self.session.mount("https://", HTTPAdapter(max_retries=retry))
        self.session.headers["Content-Type"] = "application/json"
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"
        self._owner_refs: dict[tuple[str, str], dict | None] = {}
        self._properties_registered = False

    # ------------------------------------------------------------- http

    @overload
    def _call(self, method: str, path: str, body: dict | None = None) -> dict: ...
    @overload
    def _call(self, method: str, path: str, body: dict | None = None, *, missing_ok: bool) -> dict | None: ...
    def _call(self, method: str, path: str, body: dict | None = None, missing_ok: bool = False) -> dict | None:
        """The answer's JSON; None for a 404 when `missing_ok`."""
        response = self.session.request(method, f"{self.server}/api/v1/{path}", json=body, timeout=self.timeout)
        if missing_ok and response.status_code == 404:
            return None
        if response.status_code >= 400:
            status, text = response.status_code, response.text[:300]
            cause = requests.HTTPError(response=response)  # its status tells a refused entry from a catalog down
            raise CatalogError(f"OpenMetadata {method} /api/v1/{path}: HTTP {status}: {text}") from cause
        return response.json()

    def _owner(self, kind: str, owner_id: str) -> dict | None:
        key = (kind, owner_id)
        if key not in self._owner_refs:
            what = "teams" if kind == "group" else "users"
            found = self._call("GET", f"{what}/name/{owner_id}", missing_ok=True)
            if found is None:
                log.warning("OpenMetadata knows no %s named %s: left out of the owners", what[:-1], owner_id)
            self._owner_refs[key] = {"id": found["id"], "type": what[:-1]} if found else None
        return self._owner_refs[key]

    # ---------------------------------------------------------- payloads

    def _schema_fqn(self, schema: str) -> str:
        return f"{self.service}.{self.database}.{schema}"

    def _table_fqn(self, dataset: str) -> str:
        schema, table = table_place(dataset)
        return f"{self._schema_fqn(schema)}.{table}"

    def table_body(self, s: Snapshot) -> dict:
        schema, table = table_place(s.dataset.name)
        body: dict = {
            "name": table,
            "displayName": s.dataset.name,
            "databaseSchema": self._schema_fqn(schema),
            "tableType": "External",
            "columns": [column(f) for f in s.schema.fields],
            "sourceUrl": s.dataset.location,
            "tags": [_label(f"{CLASSIFICATION}.{t}", "Classification") for t in s.tags]
            + [_label(f"{GLOSSARY}.{t}", "Glossary") for t in s.terms],
            "extension": {RECORD_PROPERTY: record(s), **({VERSION_PROPERTY: s.version} if s.version else {})},
        }
        if s.description:
            body["description"] = s.description
        return body

    def fingerprint(self, snapshot: Snapshot) -> str:
        return content_hash(
            {
                "table": self.table_body(snapshot),
                "removed": snapshot.removed,
                "owners": [(o.kind, o.id) for o in snapshot.owners],
                "upstream": sorted(
                    (e.upstream.name, sorted((c.downstream, c.upstream) for c in e.columns)) for e in snapshot.upstream
                ),
            }
        )

    def _register_properties(self) -> int:
        """Add Lumos' custom properties to the `table` type (OpenMetadata refuses an unknown one)."""
        table_type = self._call("GET", "metadata/types/name/table?fields=customProperties")
        have = {p["name"] for p in table_type.get("customProperties") or ()}
        wanted = {VERSION_PROPERTY: "The dataset's version (semver), as Lumos judged it",
                  RECORD_PROPERTY: "The Lumos snapshot (JSON): what lumos export reads back"}  # fmt: skip
        calls = 1
        if set(wanted) - have:
            string = self._call("GET", "metadata/types/name/string")
            calls += 1
            for name in sorted(set(wanted) - have):
                prop = {"name": name, "description": wanted[name], "propertyType": {"id": string["id"], "type": "type"}}
                self._call("PUT", f"metadata/types/{table_type['id']}", prop)
                calls += 1
        self._properties_registered = True
        return calls

    # -------------------------------------------------------------- emit

    def emit(self, snapshots: Sequence[Snapshot]) -> int:
        calls = 0
        self._call(
            "PUT",
            "services/databaseServices",
            {
                "name": self.service,
                "serviceType": "CustomDatabase",
                "connection": {"config": {"type": "CustomDatabase"}},
            },
        )
        self._call("PUT", "databases", {"name": self.database, "service": self.service})
        self._call("PUT", "classifications", {"name": CLASSIFICATION, "description": "Tags set by Lumos"})
        calls += 3
        if not self._properties_registered:
            calls += self._register_properties()
        terms = sorted({t for s in snapshots for t in s.terms})
        if terms:
            self._call("PUT", "glossaries", {"name": GLOSSARY, "description": "Glossary terms set by Lumos"})
            calls += 1
        for term in terms:
            self._call("PUT", "glossaryTerms", {"name": term, "glossary": GLOSSARY, "description": term})
            calls += 1
        for schema in sorted({table_place(s.dataset.name)[0] for s in snapshots}):
            self._call("PUT", "databaseSchemas", {"name": schema, "database": f"{self.service}.{self.database}"})
            calls += 1
        for tag in sorted({t for s in snapshots for t in s.tags}):
            self._call("PUT", "tags", {"name": tag, "classification": CLASSIFICATION, "description": tag})
            calls += 1
        ids: dict[str, str] = {}
        for s in [s for s in snapshots if s.removed]:
            # a soft delete (the table stays restorable, and a later PUT restores it); CreateTable
            # has no `deleted` field
            self._call("DELETE", f"tables/name/{self._table_fqn(s.dataset.name)}?hardDelete=false", missing_ok=True)
            calls += 1
        live = [i for i, s in enumerate(snapshots) if not s.removed]

        def put(request: tuple[str, dict]) -> int:
            ids[request[0]] = self._call("PUT", "tables", request[1])["id"]
            return 1

        refused = None
        try:  # tables first, then lineage: an edge needs both ends
            calls += send_each([snapshots[i] for i in live], self._table_request, put, "OpenMetadata")
        except Undeliverable as exc:  # the others' lineage still goes; the batch's positions, not live's
            removed = set(range(len(snapshots))) - set(live)
            refused = Undeliverable({live[j]: why for j, why in exc.rejected.items()},
                                    frozenset(removed | {live[j] for j in exc.delivered}))  # fmt: skip
        snapshots = [s for s in snapshots if s.dataset.name in ids]
        for s in snapshots:
            for edge in s.upstream:
                there, here = self._table_fqn(edge.upstream.name), self._table_fqn(s.dataset.name)
                upstream = self._call("GET", f"tables/name/{there}?fields=columns", missing_ok=True)
                if upstream is None:
                    log.info("lineage %s → %s waits until %s is in OpenMetadata", edge.upstream.name,
                             s.dataset.name, edge.upstream.name)  # fmt: skip
                    continue
                edge_body: dict = {
                    "fromEntity": {"id": upstream["id"], "type": "table"},
                    "toEntity": {"id": ids[s.dataset.name], "type": "table"},
                }
                # OpenMetadata refuses a column it does not have: keep the mappings whose columns both
                # tables have (SQL lowercases unquoted names: matched without case, sent as the table has them)
                theirs = {c["name"].lower(): c["name"] for c in upstream.get("columns", [])}
                ours = {f.name.lower(): f.name for f in s.schema.fields}
                mapped = [
                    {"fromColumns": [f"{there}.{theirs[c.upstream.lower()]}"],
                     "toColumn": f"{here}.{ours[c.downstream.lower()]}"}
                    for c in edge.columns
                    if c.upstream.lower() in theirs and c.downstream.lower() in ours
                ]  # fmt: skip
                if mapped:  # a column's FQN is its table's and its name
                    edge_body["lineageDetails"] = {"columnsLineage": mapped}
                self._call("PUT", "lineage", {"edge": edge_body})
                calls += 2
        if refused is not None:
            raise refused
        return calls

    def _table_request(self, s: Snapshot) -> tuple[str, dict]:
        body = self.table_body(s)
        owners = [ref for o in s.owners if (ref := self._owner(o.kind, o.id))]
        if owners:
            body["owners"] = owners
        return s.dataset.name, body

    def read_all(self) -> Iterator[Snapshot]:
        yield from read_tables(self)

    def close(self) -> None:
        self.session.close()
