"""Bearer tokens: salted scrypt hashes at rest, scopes per token.

A hash reads `scrypt$N$r$p$SALT$KEY` (SALT and KEY in unpadded URL-safe base64; N=2**14, r=8, p=1,
a 16-byte salt and a 32-byte key by default): the hash alone does not let anyone call the API, and
guessing a token from it costs a memory-hard computation per guess. Tokens that `new_token` makes
carry 256 random bits, so there is nothing to guess anyway.

Checking a presented token against every configured hash costs one scrypt each (tens of
milliseconds); a token once verified is remembered for the life of the process under an HMAC of
it with a key drawn at start-up (never the token itself), so requests after the first pay a
dictionary lookup.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Sequence

from lumos_dagster.api_config import SCHEME, parse_hash

N, R, P, SALT_BYTES, KEY_BYTES = 2**14, 8, 1, 16, 32
TOKEN_PREFIX = "lumos_"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _scrypt(token: str, salt: bytes, n: int, r: int, p: int, length: int) -> bytes:
    return hashlib.scrypt(token.encode(), salt=salt, n=n, r=r, p=p, dklen=length, maxmem=256 * 1024 * 1024)


def new_token() -> str:
    """A fresh random token (256 bits)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str, salt: bytes | None = None) -> str:
    salt = salt if salt is not None else secrets.token_bytes(SALT_BYTES)
    return f"{SCHEME}${N}${R}${P}${_b64(salt)}${_b64(_scrypt(token, salt, N, R, P, KEY_BYTES))}"


def verify(token: str, stored: str) -> bool:
    n, r, p, salt, key = parse_hash(stored)
    return hmac.compare_digest(_scrypt(token, salt, n, r, p, len(key)), key)


@dataclass(frozen=True)
class Principal:
    """Who called: the token's name and scopes."""

    name: str
    scopes: frozenset[str]


class TokenVerifier:
    """Presented token → Principal, or None. Thread-safe."""

    def __init__(self, tokens: Sequence, remember: int = 1024):
        self._tokens = [(t.name, t.hash, frozenset(t.scopes)) for t in tokens]
        self._key = secrets.token_bytes(32)
        self._known: OrderedDict[bytes, Principal] = OrderedDict()
        self._remember = remember
        self._lock = threading.Lock()

    def __call__(self, token: str | None) -> Principal | None:
        if not token or len(token) > 512:
            return None
        tag = hmac.new(self._key, token.encode(), hashlib.sha256).digest()
        with self._lock:
            found = self._known.get(tag)
            if found is not None:
                self._known.move_to_end(tag)
                return found
        for name, stored, scopes in self._tokens:
            if verify(token, stored):
                principal = Principal(name, scopes)
                with self._lock:
                    self._known[tag] = principal
                    while len(self._known) > self._remember:
                        self._known.popitem(last=False)
                return principal
        return None
