"""The `api:` section of lumos.yaml: who may call `lumos serve`, where it listens, its limits.

Tokens are never written down, only their hashes (`lumos serve --new-token` makes a token and its
hash); see `lumos_dagster.api.auth` for the hash format.
"""

from __future__ import annotations

import base64
from typing import Literal

from pydantic import Field, field_validator

from lumos_dagster.floor.plugins import ConfigModel

Scope = Literal["read", "check", "write"]
SCOPES: tuple[str, ...] = ("read", "check", "write")
#: the hash formats of a token (lumos_dagster.api.auth makes and checks them): SCHEME_ID for a token that
#: carries its id (the hash's salt), so a presented token is checked against one hash at most
SCHEME, SCHEME_ID = "scrypt", "scrypt-id"


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def parse_hash(text: str) -> tuple[int, int, int, bytes, bytes]:
    """(N, r, p, salt, key) of a stored hash; ValueError when it is not one."""
    parts = text.split("$")
    if len(parts) != 6 or parts[0] not in (SCHEME, SCHEME_ID):
        raise ValueError("not a token hash: expected scrypt-id$N$r$p$ID$KEY (from `lumos serve --new-token`)")
    try:
        n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
        salt, key = _unb64(parts[4]), _unb64(parts[5])
    except ValueError:
        raise ValueError("not a token hash: N, r, p must be numbers, SALT and KEY base64") from None
    if n < 2**10 or n & (n - 1) or not 1 <= r <= 64 or not 1 <= p <= 16 or len(salt) < 8 or len(key) < 16:
        raise ValueError("token hash parameters too weak or malformed (N a power of two ≥ 1024, salt ≥ 8 bytes)")
    return n, r, p, salt, key


class ApiToken(ConfigModel):
    """A bearer token allowed to call the API, by its hash."""

    name: str = Field(min_length=1, description="Who holds it (shown in the audit log), e.g. `ci-orders`.")
    hash: str = Field(description="`scrypt-id$…` as printed by `lumos serve --new-token` (never the token itself).")
    scopes: list[Scope] = Field(
        default_factory=lambda: list[Scope](["read"]),
        description="read: every GET; check: POST a proposed schema, the gate; write: accept, release.",
    )

    @field_validator("hash")
    @classmethod
    def _hash(cls, value: str) -> str:
        parse_hash(value)  # raises ValueError naming what is wrong
        return value


class ApiLimits(ConfigModel):
    max_body_bytes: int = Field(1_048_576, ge=1024, description="Larger request bodies are refused (413).")
    request_timeout: float = Field(
        10.0, gt=0, le=600, description="Seconds a request may take before it is answered 504 (and its query stopped)."
    )
    page_size: int = Field(100, ge=1, le=10_000, description="Largest page of `GET /v1/datasets`.")
    max_fields: int = Field(
        10_000, ge=1, le=1_000_000, description="A proposed schema with more fields, nested ones counted: not judged."
    )


class ApiConfig(ConfigModel):
    host: str = Field("127.0.0.1", description="Address to bind: loopback unless told otherwise.")
    port: int = Field(8765, ge=0, le=65535, description="TCP port (0: any free port).")
    writes: bool = Field(False, description="Allow the write endpoints (accept a breaking change, record a release).")
    tokens: list[ApiToken] = Field(default_factory=list, description="Bearer tokens, by hash, with their scopes.")
    limits: ApiLimits = Field(default_factory=ApiLimits)
    cache_seconds: float = Field(
        10.0,
        ge=0,
        description="How long the lineage graph and the search index may lag behind the store while it is written.",
    )
    workers: int = Field(8, ge=1, le=64, description="Requests served at once (threads, and store connections).")

    @field_validator("tokens")
    @classmethod
    def _unique(cls, tokens: list[ApiToken]) -> list[ApiToken]:
        names = [t.name for t in tokens]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"token names must be unique, repeated: {', '.join(dupes)}")
        return tokens
