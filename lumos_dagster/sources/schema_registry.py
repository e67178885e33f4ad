"""A Confluent Schema Registry client (its REST API, read-only) and its schemas as Lumos schemas.

Only what the Kafka source needs: the subjects, a subject's versions, one version (or the
latest), and a schema by the id a framed message carries. Avro subjects are mapped by the Avro
reader's own mapper (`formats.avro`), JSON-Schema ones by `formats.json_schema`; Protobuf
subjects are named in the error, not read.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from functools import lru_cache
from urllib.error import HTTPError
from urllib.parse import quote
from urllib.request import Request, urlopen

from lumos_dagster.formats.avro import from_avro_schema
from lumos_dagster.formats.json_schema import from_json_schema
from lumos_dagster.model import Schema, storable_json
from lumos_dagster.plugins import mask_secrets


class RegistryError(Exception):
    """The registry answered with an error, or could not be reached (the message names no secret)."""


@dataclass(frozen=True)
class RegisteredSchema:
    id: int
    schema_type: str  # AVRO | JSON | PROTOBUF
    text: str
    subject: str | None = None
    version: int | None = None


def to_schema(registered: RegisteredSchema) -> Schema:
    """The registered schema as a Lumos schema; ValueError for a type Lumos does not read."""
    if registered.schema_type == "AVRO":
        return from_avro_schema(storable_json(registered.text))
    if registered.schema_type == "JSON":
        return from_json_schema(registered.text)
    raise ValueError(f"schema {registered.id} is {registered.schema_type}: Lumos reads Avro and JSON Schema subjects")


class SchemaRegistry:
    def __init__(self, url: str, auth: tuple[str, str] | None = None, timeout: float = 10.0):
        """`url` with its ${VAR}s already expanded; `auth` is basic auth (user, password)."""
        self.url = url.rstrip("/")
        self.shown = mask_secrets(self.url)
        self.timeout = timeout
        self._headers = {"Accept": "application/vnd.schemaregistry.v1+json, application/json"}
        if auth is not None:
            token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
            self._headers["Authorization"] = f"Basic {token}"
        self.by_id = lru_cache(maxsize=256)(self._by_id)  # ids never change meaning

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

    def version(self, subject: str, version: int | str = "latest") -> RegisteredSchema | None:
        """One version of the subject (default: the latest); None when there is no such subject or version."""
        got = self._get(f"/subjects/{quote(subject, safe='')}/versions/{version}", missing_ok=True)
        if got is None:
            return None
        return RegisteredSchema(got["id"], got.get("schemaType", "AVRO"), got["schema"], got["subject"], got["version"])

    def _by_id(self, schema_id: int) -> RegisteredSchema | None:
        """The schema of that id; None when the registry has none."""
        got = self._get(f"/schemas/ids/{schema_id}", missing_ok=True)
        if got is None:
            return None
        return RegisteredSchema(schema_id, got.get("schemaType", "AVRO"), got["schema"])
