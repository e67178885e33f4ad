"""Stand-ins for catalog servers that cannot run here (no Docker, no network): real HTTP
servers on 127.0.0.1 that speak the endpoints Lumos' adapters use, record every request,
and can refuse or drop connections. They hold state the way the real services do (an
aspect's version rises only when its content changes), so tests can check that every
aspect arrived and none twice."""

from __future__ import annotations

import base64
import json
import socket
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse

from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.emitter.serialization_helper import post_json_transform, pre_json_transform
from datahub.metadata.schema_classes import ASPECT_NAME_MAP, KEY_ASPECTS, MetadataChangeProposalClass
from datahub.metadata.urns import Urn

from lumos_dagster.catalog.patch_apply import patched


class FakeServer:
    """Subclasses implement `handle(method, path, query, body, headers) -> (status, json)`."""

    def __init__(self, token: str | None = None, port: int = 0):
        self.token = token
        self.requests: list[tuple[str, str, object]] = []
        # up | drop: close the connection without reading a request | lose-reply: process it, then
        # drop the connection before answering (the client cannot know it arrived)
        self.mode = "up"
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if outer.mode == "drop":
                    return self._hang_up()
                if outer.token and self.headers.get("Authorization") != f"Bearer {outer.token}":
                    return self._reply(401, {"message": "unauthorized"})
                url = urlparse(self.path)
                body = json.loads(raw) if raw else None
                outer.requests.append((method, self.path, body))
                status, payload = outer.handle(method, url.path, parse_qs(url.query), body, self.headers)
                if outer.mode == "lose-reply" and method != "GET":
                    return self._hang_up()
                self._reply(status, payload)

            def _hang_up(self) -> None:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)

            def _reply(self, status: int, payload) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._serve("GET")

            def do_POST(self):
                self._serve("POST")

            def do_PUT(self):
                self._serve("PUT")

            def do_DELETE(self):
                self._serve("DELETE")

            def log_message(self, *args):
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread: threading.Thread | None = None

    def start(self) -> "FakeServer":
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def handle(self, method, path, query, body, headers):
        raise NotImplementedError


class FakeGMS(FakeServer):
    """DataHub GMS: `/config`, the Rest.li ingest endpoints the emitter uses, and what
    DataHubGraph reads back with: `scrollAcrossEntities` (GraphQL, one page of every entity of
    the requested types) and `/entitiesV2/{urn}` (the latest version of each aspect).

    It checks what GMS checks before it keeps anything: each URN valid for its entity type, each
    aspect one the entity type has (DataHub's entity registry, as the acryl-datahub wheel carries
    it), no PATCH of a timeseries aspect; a request with one such proposal is refused whole (422).
    A PATCH is applied to the aspect as GMS applies it (Lumos' port of GMS' templates,
    lumos_dagster.catalog.patch_apply: no GMS can run here to apply it)."""

    def __init__(self, token: str | None = None, port: int = 0, refuse: tuple[str, ...] = ()):
        super().__init__(token, port)
        self.aspects: dict[tuple[str, str], list] = {}  # (urn, aspect name) → versions (typed aspects)
        self.refuse = refuse  # entity URNs answered 422 as GMS's validation does, refusing their whole request

    def check(self, proposal: dict) -> MetadataChangeProposalClass:
        """The proposal, or GMS' reason to refuse it (ValueError)."""
        mcpc = MetadataChangeProposalClass.from_obj(post_json_transform(proposal))
        if mcpc.entityUrn in self.refuse:
            raise ValueError(f"Failed to validate entity URN {mcpc.entityUrn}")
        try:
            urn = Urn.from_string(mcpc.entityUrn)
        except Exception as exc:
            raise ValueError(f"Failed to validate entity URN {mcpc.entityUrn}: {exc}") from None
        key = KEY_ASPECTS.get(urn.entity_type)
        allowed = key is not None and (mcpc.aspectName == key.ASPECT_NAME
                                       or mcpc.aspectName in key.ASPECT_INFO["entityAspects"])  # fmt: skip
        if mcpc.aspectName not in ASPECT_NAME_MAP or not allowed:
            raise ValueError(f"Unknown aspect {mcpc.aspectName} for entity {urn.entity_type}")
        if mcpc.changeType == "PATCH" and ASPECT_NAME_MAP[mcpc.aspectName].get_aspect_type() == "timeseries":
            raise ValueError(f"PATCH is not supported for timeseries aspect {mcpc.aspectName}")
        return mcpc

    def ingest(self, mcpc: MetadataChangeProposalClass) -> str:
        versions = self.aspects.setdefault((mcpc.entityUrn, mcpc.aspectName), [])
        if mcpc.changeType == "PATCH":
            aspect = patched(mcpc, versions[-1] if versions else None)
        else:
            mcpw = MetadataChangeProposalWrapper.try_from_mcpc(mcpc)
            assert mcpw is not None and mcpw.aspect is not None, f"not a known aspect: {mcpc}"
            aspect = mcpw.aspect
        if not versions or versions[-1] != aspect:  # GMS keeps a new version only for new content
            versions.append(aspect)
        return mcpc.entityUrn

    def current(self, urn: str) -> dict:
        """The entity's latest aspects, by name."""
        return {name: versions[-1] for (entity, name), versions in self.aspects.items() if entity == urn and versions}

    def handle(self, method, path, query, body, headers):
        if method == "GET" and path == "/config":
            return 200, {"noCode": "true", "versions": {"acryldata/datahub": {"version": "v1.2.0"}}}
        if method == "POST" and path == "/aspects" and query.get("action") in (["ingestProposalBatch"],
                                                                              ["ingestProposal"]):  # fmt: skip
            proposals = body["proposals"] if "proposals" in body else [body["proposal"]]
            try:
                checked = [self.check(p) for p in proposals]
            except ValueError as exc:
                return 422, {"status": 422, "message": str(exc)}
            urns = [self.ingest(p) for p in checked]
            return 200, {"value": urns if "proposals" in body else urns[0]}
        if method == "POST" and path == "/api/graphql" and "scrollAcrossEntities" in body["query"]:
            types = [t.lower() for t in body["variables"].get("types") or []]
            urns = sorted({urn for urn, _ in self.aspects if urn.split(":")[2].lower() in types})
            results = [{"entity": {"urn": urn}} for urn in urns]
            return 200, {"data": {"scrollAcrossEntities": {"nextScrollId": None, "searchResults": results}}}
        if method == "GET" and path.startswith("/entitiesV2/"):
            urn = unquote(path.removeprefix("/entitiesV2/"))
            wanted = query.get("aspects", ["List()"])[0].removeprefix("List(").removesuffix(")").split(",")
            aspects = {
                name: {"name": name, "value": pre_json_transform(aspect.to_obj())}
                for name, aspect in self.current(urn).items()
                if name in wanted or wanted == [""]
            }
            return 200, {"urn": urn, "aspects": aspects}
        return 404, {"message": f"no route {method} {path}"}


#: OpenMetadata's CreateTable request schema (additionalProperties: false): the real server refuses others
CREATE_TABLE_FIELDS = frozenset(
    {"name", "displayName", "description", "tableType", "columns", "tableConstraints", "tablePartition",
     "tableProfilerConfig", "owners", "databaseSchema", "tags", "schemaDefinition", "retentionPeriod",
     "extension", "sourceUrl", "domain", "dataProducts", "lifeCycle", "sourceHash"}
)  # fmt: skip


class FakeOpenMetadata(FakeServer):
    """OpenMetadata: create-or-update (PUT) of services, databases, schemas, tables (a PUT
    restores a soft-deleted table), glossaries and terms; soft delete by name, user lookup by
    name, lineage edges; custom properties of the `table` type (a table's `extension` may hold
    only registered ones). Entities get ids like the real server's.

    And what is PUT is served back as OpenMetadata's API documents it
    (https://docs.open-metadata.org/swagger.html): `GET /tables?database=…&fields=…&include=…`
    in pages of `limit` with a `paging.after` cursor, owners as entity references (id, type,
    name), and `GET /lineage/table/name/{fqn}` (`nodes`, `upstreamEdges`, `downstreamEdges`).
    `drop_lineage_to` names tables whose incoming lineage it accepts and loses (an injected loss)."""

    def __init__(self, token: str | None = None, users: tuple[str, ...] = (), teams: tuple[str, ...] = ()):
        super().__init__(token)
        self.drop_lineage_to: set[str] = set()  # table FQNs
        self.refuse_tables: set[str] = set()  # table names a PUT is answered 400 for, as its validation does
        self.types = {n: {"id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"type/{n}")), "name": n, "customProperties": []}
                      for n in ("table", "string")}  # fmt: skip
        self.entities: dict[str, dict[str, dict]] = {}  # kind → fully qualified name → entity
        self.versions: dict[str, int] = {}  # fqn → version, raised only when the entity changes
        self.lineage: set[tuple[str, str]] = set()
        self.column_lineage: dict[tuple[str, str], list[dict]] = {}  # edge → its columnsLineage
        self.people = {
            kind: {n: str(uuid.uuid5(uuid.NAMESPACE_URL, f"{kind}/{n}")) for n in names}
            for kind, names in (("users", users), ("teams", teams))
        }

    def _put(self, kind: str, fqn: str, body: dict) -> dict:
        current = self.entities.setdefault(kind, {}).get(fqn)
        entity_id = current["id"] if current else str(uuid.uuid5(uuid.NAMESPACE_URL, f"{kind}/{fqn}"))
        entity = {**body, "id": entity_id, "fullyQualifiedName": fqn}
        if current != entity:
            self.versions[fqn] = self.versions.get(fqn, 0) + 1
        self.entities[kind][fqn] = entity
        return entity

    def _reference(self, kind: str, entity: dict) -> dict:
        return {"id": entity["id"], "type": kind, "name": entity.get("name"), "displayName": entity.get("displayName"),
                "fullyQualifiedName": entity["fullyQualifiedName"]}  # fmt: skip

    def _served(self, table: dict, fields: set[str]) -> dict:
        """A table as GET returns it: owners as full references, only the fields asked for."""
        names = {i: (kind, n) for kind, people in self.people.items() for n, i in people.items()}
        out = {k: v for k, v in table.items() if k not in {"columns", "tags", "owners", "extension"} or k in fields}
        if "owners" in fields:
            out["owners"] = [{"id": o["id"], "type": o["type"], "name": names[o["id"]][1]}
                             for o in table.get("owners") or ()]  # fmt: skip
        return out

    def _list_tables(self, query: dict) -> dict:
        database = query["database"][0]
        fields = set(query.get("fields", [""])[0].split(","))
        include = query.get("include", ["non-deleted"])[0]
        tables = sorted(
            (fqn, t) for fqn, t in self.entities.get("tables", {}).items()
            if fqn.startswith(f"{database}.") and (include == "all" or bool(t.get("deleted")) == (include == "deleted"))
        )  # fmt: skip
        limit = int(query.get("limit", ["10"])[0])
        after = base64.b64decode(query["after"][0]).decode() if "after" in query else ""
        page = [t for fqn, t in tables if fqn > after][:limit]
        more = page and page[-1]["fullyQualifiedName"] != tables[-1][0]
        paging = {"total": len(tables)}
        if more:
            paging["after"] = base64.b64encode(page[-1]["fullyQualifiedName"].encode()).decode()
        return {"data": [self._served(t, fields) for t in page], "paging": paging}

    def _lineage(self, fqn: str, query: dict) -> tuple[int, dict]:
        tables = self.entities.get("tables", {})
        if fqn not in tables or tables[fqn].get("deleted"):
            return 404, {"message": f"table instance for {fqn} not found"}
        by_id = {t["id"]: t for t in tables.values()}
        me = tables[fqn]["id"]
        up = int(query.get("upstreamDepth", ["1"])[0]) > 0
        down = int(query.get("downstreamDepth", ["1"])[0]) > 0

        def edge(key):
            return {"fromEntity": key[0], "toEntity": key[1],
                    "lineageDetails": {"columnsLineage": self.column_lineage[key]}}  # fmt: skip

        upstream = [edge(k) for k in sorted(self.lineage) if up and k[1] == me]
        downstream = [edge(k) for k in sorted(self.lineage) if down and k[0] == me]
        ids = {e["fromEntity"] for e in upstream} | {e["toEntity"] for e in downstream}
        return 200, {"entity": self._reference("table", tables[fqn]),
                     "nodes": [self._reference("table", by_id[i]) for i in sorted(ids)],
                     "upstreamEdges": upstream, "downstreamEdges": downstream}  # fmt: skip

    def handle(self, method, path, query, body, headers):
        parent = {"databases": "service", "databaseSchemas": "database", "tables": "databaseSchema",
                  "tags": "classification", "glossaryTerms": "glossary"}  # fmt: skip
        if method == "GET" and path.startswith("/api/v1/metadata/types/name/"):
            found = self.types.get(path.rsplit("/", 1)[-1])
            return (200, found) if found else (404, {"message": "type not found"})
        if method == "PUT" and path.startswith("/api/v1/metadata/types/"):
            found = next((t for t in self.types.values() if t["id"] == path.rsplit("/", 1)[-1]), None)
            kinds = {t["id"]: t["name"] for t in self.types.values()}
            if found is None or body["propertyType"]["id"] not in kinds:
                return 404, {"message": "type not found"}
            properties = [p for p in found["customProperties"] if p["name"] != body["name"]]
            found["customProperties"] = [*properties, {**body, "propertyType": {
                **body["propertyType"], "name": kinds[body["propertyType"]["id"]]}}]  # fmt: skip
            return 200, found
        if method == "GET" and path == "/api/v1/tables":
            return 200, self._list_tables(query)
        if method == "PUT" and path == "/api/v1/tables" and body["name"] in self.refuse_tables:
            return 400, {"code": 400, "message": f'[name must match "^((?!::).)*$"] for {body["name"]}'}
        if method == "GET" and path.startswith("/api/v1/lineage/table/name/"):
            return self._lineage(path.rsplit("/", 1)[-1], query)
        for kind in ("users", "teams"):
            if method == "GET" and path.startswith(f"/api/v1/{kind}/name/"):
                name = path.rsplit("/", 1)[-1]
                if name in self.people[kind]:
                    return 200, {"id": self.people[kind][name], "name": name}
                return 404, {"message": f"{kind[:-1]} instance for {name} not found"}
        if method == "GET" and path.startswith("/api/v1/tables/name/"):
            found = self.entities.get("tables", {}).get(path.rsplit("/", 1)[-1])
            return (200, found) if found and not found.get("deleted") else (404, {"message": "table not found"})
        if method == "DELETE" and path.startswith("/api/v1/tables/name/"):
            found = self.entities.get("tables", {}).get(path.rsplit("/", 1)[-1])
            if not found or query.get("hardDelete") != ["false"]:
                return 404, {"message": "table not found"}
            found["deleted"] = True
            return 200, found
        if method == "PUT" and path == "/api/v1/tables" and set(body) - CREATE_TABLE_FIELDS:
            return 400, {"message": f"Unrecognized field(s) {sorted(set(body) - CREATE_TABLE_FIELDS)}"}
        registered = {p["name"] for p in self.types["table"]["customProperties"]}
        if method == "PUT" and path == "/api/v1/tables" and set(body.get("extension") or ()) - registered:
            unknown = sorted(set(body["extension"]) - registered)
            return 400, {"message": f"Unknown custom field {unknown[0]}"}
        for kind in ("services/databaseServices", "classifications", "glossaries"):
            if method == "PUT" and path == f"/api/v1/{kind}":
                return 200, self._put(kind, body["name"], body)
        for kind, key in parent.items():
            if method == "PUT" and path == f"/api/v1/{kind}":
                return 200, self._put(kind, f"{body[key]}.{body['name']}", body)
        if method == "PUT" and path == "/api/v1/lineage":
            edge = body["edge"]
            key = (edge["fromEntity"]["id"], edge["toEntity"]["id"])
            if any(t["id"] == key[1] for fqn, t in self.entities["tables"].items() if fqn in self.drop_lineage_to):
                return 200, {}
            self.lineage.add(key)
            self.column_lineage[key] = edge.get("lineageDetails", {}).get("columnsLineage", [])
            return 200, {}
        return 404, {"message": f"no route {method} {path}"}


class FakeOpenLineage(FakeServer):
    """An OpenLineage consumer (Marquez-style): POST /api/v1/lineage."""

    def __init__(self, token: str | None = None, refuse: tuple[str, ...] = ()):
        super().__init__(token)
        self.events: list[dict] = []
        self.refuse = refuse  # dataset names whose events are answered 422, as Marquez's validation does

    def handle(self, method, path, query, body, headers):
        if method == "POST" and path == "/api/v1/lineage":
            if body["dataset"]["name"] in self.refuse:
                return 422, {"errors": [f"invalid dataset name {body['dataset']['name']}"]}
            self.events.append(body)
            return 201, {}
        return 404, {"message": f"no route {method} {path}"}


def free_port() -> int:
    """A port nothing listens on: connecting to it is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WebhookReceiver(FakeServer):
    """Any HTTP endpoint taking JSON posts (Slack-like incoming webhooks, a ticketing bridge…)."""

    def handle(self, method, path, query, body, headers):
        return 200, {"ok": True}
