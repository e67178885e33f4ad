"""A Confluent Schema Registry client (its REST API, read-only) and its schemas as Lumos schemas.

Only what the Kafka source needs: the subjects, a subject's versions, one version (or the
latest), and a schema by the id a framed message carries. Avro subjects are mapped by the Avro
reader's own mapper (`formats.avro`), JSON-Schema ones by `formats.json_schema`, Protobuf ones by
`formats.protobuf` (compiled by protoc, with the files its references bring: a reference names
the subject and version that hold the file an `import` names, and those may have references too).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.error import HTTPError
from urllib.parse import quote
from urllib.request import Request, urlopen

from lumos_dagster.floor.datatypes import Schema
from lumos_dagster.floor.masking import mask_secrets, shown_url
from lumos_dagster.floor.storable import storable_json
from lumos_dagster.formats.avro import from_avro_schema
from lumos_dagster.formats.json_schema import from_json_schema
from lumos_dagster.formats.protobuf import ProtoFile, compile_proto


class RegistryError(Exception):
    """The registry answered with an error, or could not be reached (the message names no secret)."""


@dataclass(frozen=True)
class RegisteredSchema:
    id: int
    schema_type: str  # AVRO | JSON | PROTOBUF
    text: str
    subject: str | None = None
    version: int | None = None
    # Protobuf: (import name, text) of each file its references bring, theirs included
    imports: tuple[tuple[str, str], ...] = ()
    # Protobuf: Confluent's message indexes of the message meant (its serializers frame each message
    # with them); by default the file's first message, as Confluent's registry names a schema
    message: tuple[int, ...] = (0,)


def proto_file(registered: RegisteredSchema) -> ProtoFile:
    """A Protobuf schema compiled (ProtobufError, protoc's message, when it does not compile). The
    file is named after its subject (else its id): protoc's messages then say whose it is."""
    main = f"{(registered.subject or f'schema-{registered.id}').replace('/', '_')}.proto"
    while any(name == main for name, _ in registered.imports):
        main = f"_{main}"
    return compile_proto(registered.imports + ((main, registered.text),), main)


def to_schema(registered: RegisteredSchema) -> Schema:
    """The registered schema as a Lumos schema; ValueError for a type Lumos does not read."""
    if registered.schema_type == "AVRO":
        return from_avro_schema(storable_json(registered.text))
    if registered.schema_type == "JSON":
        return from_json_schema(registered.text)
    if registered.schema_type == "PROTOBUF":
        return proto_file(registered).schema(registered.message)
    raise ValueError(
        f"schema {registered.id} is {registered.schema_type}: Lumos reads Avro, JSON Schema and Protobuf subjects"
    )


class SchemaRegistry:
    def __init__(self, url: str, auth: tuple[str, str] | None = None, timeout: float = 10.0):
        """`url` with its ${VAR}s already expanded; `auth` is basic auth (user, password)."""
        self.url = url.rstrip("/")
        self.shown = shown_url(self.url)
        self.timeout = timeout
        self._headers = {"Accept": "application/vnd.schemaregistry.v1+json, application/json"}
        if auth is not None:
            token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
            self._headers["Authorization"] = f"Basic {token}"
        self.by_id = lru_cache(maxsize=256)(self._by_id)  # ids never change meaning
        self._referenced = lru_cache(maxsize=256)(self._version)  # nor do a subject's numbered versions

    def _get(self, path: str, missing_ok: bool = False):
        try:
            with urlopen(Request(self.url + path, headers=self._headers), timeout=self.timeout) as response:
                return json.loads(response.read())
        except HTTPError as exc:
            if missing_ok and exc.code == 404:
                return None
            try:
                detail = json.loads(exc.read()).get("message", "")
            except (ValueError, AttributeError):
                detail = ""
            raise RegistryError(f"schema registry {self.shown}{path}: HTTP {exc.code} {detail}".rstrip()) from None
        except (OSError, ValueError) as exc:  # refused, timed out, not JSON
            raise RegistryError(mask_secrets(f"schema registry {self.shown}{path}: {exc}")) from None

    def subjects(self) -> list[str]:
        return self._get("/subjects")

    def versions(self, subject: str) -> list[int]:
        """The subject's version numbers, oldest first; [] when there is no such subject."""
        return sorted(self._get(f"/subjects/{quote(subject, safe='')}/versions", missing_ok=True) or [])

    def _version(self, subject: str, version: int | str) -> dict[str, Any] | None:
        return self._get(f"/subjects/{quote(subject, safe='')}/versions/{version}", missing_ok=True)

    def version(self, subject: str, version: int | str = "latest") -> RegisteredSchema | None:
        """One version of the subject (default: the latest); None when there is no such subject or version."""
        got = self._version(subject, version)
        if got is None:
            return None
        return self._registered(got["id"], got, got["subject"], got["version"])

    def _by_id(self, schema_id: int) -> RegisteredSchema | None:
        """The schema of that id; None when the registry has none."""
        got = self._get(f"/schemas/ids/{schema_id}", missing_ok=True)
        if got is None:
            return None
        return self._registered(schema_id, got)

    def _registered(self, schema_id: int, got: dict[str, Any], subject: str | None = None,
                    version: int | None = None) -> RegisteredSchema:  # fmt: skip
        schema_type = got.get("schemaType", "AVRO")
        imports: dict[str, str] = {}
        if schema_type == "PROTOBUF":  # Avro and JSON Schema references are not followed
            self._imports(got.get("references") or (), imports, f"schema {schema_id}")
        return RegisteredSchema(schema_id, schema_type, got["schema"], subject, version, tuple(imports.items()))

    def _imports(self, references, into: dict[str, str], whose: str) -> None:
        """The files `references` bring, and theirs, into `into` (import name → text)."""
        for ref in references:
            name, subject, version = ref["name"], ref["subject"], ref["version"]
            if name in into:  # imported twice, or a cycle (protoc names the cycle)
                continue
            got = self._referenced(subject, version)
            if got is None:
                raise RegistryError(
                    f"schema registry {self.shown}: {whose} imports {name!r} from subject {subject} version "
                    f"{version}, which the registry does not have"
                )
            into[name] = got["schema"]
            self._imports(got.get("references") or (), into, f"subject {subject} version {version}")
