"""Stand-ins for catalog servers that cannot run here (no Docker, no network): real HTTP
servers on 127.0.0.1 that speak the endpoints Lumos' adapters use, record every request,
and can refuse or drop connections. They hold state the way the real services do (an
aspect's version rises only when its content changes), so tests can check that every
aspect arrived and none twice."""

from __future__ import annotations

import json
import socket
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse

from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.emitter.serialization_helper import post_json_transform, pre_json_transform
from datahub.metadata.schema_classes import MetadataChangeProposalClass


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
    the requested types) and `/entitiesV2/{urn}` (the latest version of each aspect)."""

    def __init__(self, token: str | None = None, port: int = 0):
        super().__init__(token, port)
        self.aspects: dict[tuple[str, str], list] = {}  # (urn, aspect name) → versions (typed aspects)

    def ingest(self, proposal: dict) -> str:
        mcpc = MetadataChangeProposalClass.from_obj(post_json_transform(proposal))
        mcpw = MetadataChangeProposalWrapper.try_from_mcpc(mcpc)
        assert mcpw is not None and mcpw.aspect is not None, f"not a known aspect: {proposal}"
        versions = self.aspects.setdefault((mcpw.entityUrn, mcpw.aspectName), [])
        if not versions or versions[-1] != mcpw.aspect:  # GMS keeps a new version only for new content
            versions.append(mcpw.aspect)
        return mcpw.entityUrn

    def handle(self, method, path, query, body, headers):
        if method == "GET" and path == "/config":
            return 200, {"noCode": "true", "versions": {"acryldata/datahub": {"version": "v1.2.0"}}}
        if method == "POST" and path == "/aspects" and query.get("action") == ["ingestProposalBatch"]:
            return 200, {"value": [self.ingest(p) for p in body["proposals"]]}
        if method == "POST" and path == "/aspects" and query.get("action") == ["ingestProposal"]:
            return 200, {"value": self.ingest(body["proposal"])}
        if method == "POST" and path == "/api/graphql" and "scrollAcrossEntities" in body["query"]:
            types = [t.lower() for t in body["variables"].get("types") or []]
            urns = sorted({urn for urn, _ in self.aspects if urn.split(":")[2].lower() in types})
            results = [{"entity": {"urn": urn}} for urn in urns]
            return 200, {"data": {"scrollAcrossEntities": {"nextScrollId": None, "searchResults": results}}}
        if method == "GET" and path.startswith("/entitiesV2/"):
            urn = unquote(path.removeprefix("/entitiesV2/"))
            wanted = query.get("aspects", ["List()"])[0].removeprefix("List(").removesuffix(")").split(",")
            aspects = {
                name: {"name": name, "value": pre_json_transform(versions[-1].to_obj())}
                for (entity, name), versions in self.aspects.items()
                if entity == urn and name in wanted
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
    """OpenMetadata: create-or-update (PUT) of services, databases, schemas and tables (a PUT
    restores a soft-deleted table), soft delete by name, user lookup by name, and lineage edges;
    entities get ids like the real server's."""

    def __init__(self, token: str | None = None, users: tuple[str, ...] = (), teams: tuple[str, ...] = ()):
        super().__init__(token)
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

    def handle(self, method, path, query, body, headers):
        parent = {"databases": "service", "databaseSchemas": "database", "tables": "databaseSchema",
                  "tags": "classification"}  # fmt: skip
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
        for kind in ("services/databaseServices", "classifications"):
            if method == "PUT" and path == f"/api/v1/{kind}":
                return 200, self._put(kind, body["name"], body)
        for kind, key in parent.items():
            if method == "PUT" and path == f"/api/v1/{kind}":
                return 200, self._put(kind, f"{body[key]}.{body['name']}", body)
        if method == "PUT" and path == "/api/v1/lineage":
            edge = body["edge"]
            key = (edge["fromEntity"]["id"], edge["toEntity"]["id"])
            self.lineage.add(key)
            self.column_lineage[key] = edge.get("lineageDetails", {}).get("columnsLineage", [])
            return 200, {}
        return 404, {"message": f"no route {method} {path}"}


class FakeOpenLineage(FakeServer):
    """An OpenLineage consumer (Marquez-style): POST /api/v1/lineage."""

    def __init__(self, token: str | None = None):
        super().__init__(token)
        self.events: list[dict] = []

    def handle(self, method, path, query, body, headers):
        if method == "POST" and path == "/api/v1/lineage":
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
