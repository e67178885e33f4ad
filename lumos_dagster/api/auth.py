"""Bearer tokens: salted scrypt hashes at rest, scopes per token, and no cost for a wrong one.

A token that `new_token` makes reads `lumos_<ID>.<SECRET>`. ID is 16 random bytes, not a secret:
it is the salt of the token's hash, `scrypt-id$N$r$p$ID$KEY` (N=2**14, r=8, p=1, a 32-byte key;
ID and KEY in unpadded URL-safe base64). SECRET is 256 random bits, so there is nothing to guess.
A presented token is checked against the one hash with its ID; a token whose ID no hash has is
refused without hashing anything, so a wrong token costs what `/health` costs, however many tokens
are configured.

Hashes of tokens without an ID (`scrypt$N$r$p$SALT$KEY`: an older `--new-token`, or a token of
your own through `--hash-token`) still work, but a presented token without an ID must be tried
against each of them. Failed hashing is therefore rationed for the whole process: FAILED_BURST
scrypt checks at once, then FAILED_PER_SECOND. Past that, a token that would need one is answered
429 without it. Hashing runs on two threads of its own, never the request workers', at a lower
priority than the server's (Linux: a thread's nice value is its own).

A token once verified is remembered for the life of the process under an HMAC of it with a key
drawn at start-up (never the token itself), so requests after the first pay a dictionary lookup.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import os
import re
import secrets
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Sequence

from lumos_dagster.floor.api_config import SCHEME, SCHEME_ID, parse_hash

N, R, P, SALT_BYTES, KEY_BYTES = 2**14, 8, 1, 16, 32
TOKEN_PREFIX = "lumos_"
#: failed scrypt checks the process allows at once, and per second after that
FAILED_BURST, FAILED_PER_SECOND = 5, 1.0
_WITH_ID = re.compile(r"lumos_([A-Za-z0-9_-]{22})\.[A-Za-z0-9_-]{32,}")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _scrypt(token: str, salt: bytes, n: int, r: int, p: int, length: int) -> bytes:
    return hashlib.scrypt(token.encode(), salt=salt, n=n, r=r, p=p, dklen=length, maxmem=256 * 1024 * 1024)


def token_id(token: str) -> str | None:
    """The ID a token carries (`lumos_<ID>.<SECRET>`), or None for a token without one."""
    m = _WITH_ID.fullmatch(token)
    return m[1] if m else None


def new_token() -> str:
    """A fresh random token: its ID (16 bytes) and its secret (256 bits)."""
    return f"{TOKEN_PREFIX}{_b64(secrets.token_bytes(SALT_BYTES))}.{secrets.token_urlsafe(32)}"


def hash_token(token: str) -> str:
    """What lumos.yaml holds of a token: `scrypt-id$…` salted with its ID, or `scrypt$…` with a random salt
    for a token without one."""
    tid = token_id(token)
    if tid is not None:
        key = _scrypt(token, base64.urlsafe_b64decode(tid + "=="), N, R, P, KEY_BYTES)
        return f"{SCHEME_ID}${N}${R}${P}${tid}${_b64(key)}"
    salt = secrets.token_bytes(SALT_BYTES)
    return f"{SCHEME}${N}${R}${P}${_b64(salt)}${_b64(_scrypt(token, salt, N, R, P, KEY_BYTES))}"


def verify(token: str, stored: str) -> bool:
    n, r, p, salt, key = parse_hash(stored)
    return hmac.compare_digest(_scrypt(token, salt, n, r, p, len(key)), key)


@dataclass(frozen=True)
class Principal:
    """Who called: the token's name and scopes."""

    name: str
    scopes: frozenset[str]


class Throttled(Exception):
    """Failed token checks have used up their allowance: try again in a second."""


class TokenVerifier:
    """Presented token → Principal, or None. Thread-safe."""

    def __init__(self, tokens: Sequence, remember: int = 1024, burst: int = FAILED_BURST,
                 per_second: float = FAILED_PER_SECOND):  # fmt: skip
        self._by_id: dict[str, tuple[str, str, frozenset[str]]] = {}
        self._without_id: list[tuple[str, str, frozenset[str]]] = []
        for t in tokens:
            entry = (t.name, t.hash, frozenset(t.scopes))
            if t.hash.startswith(f"{SCHEME_ID}$"):
                self._by_id[t.hash.split("$")[4]] = entry
            else:
                self._without_id.append(entry)
        #: the names of the tokens without an ID: each costs a scrypt check per token presented without one
        self.without_id = [name for name, _, _ in self._without_id]
        self._key = secrets.token_bytes(32)
        self._known: OrderedDict[bytes, Principal] = OrderedDict()
        self._remember = remember
        self._lock = threading.Lock()
        self._burst, self._per_second = burst, per_second
        self._allowance, self._refilled = float(burst), time.monotonic()
        self._hashing = ThreadPoolExecutor(2, "lumos-hashing", initializer=lambda: os.nice(10))

    def _candidates(self, token: str) -> list[tuple[str, str, frozenset[str]]]:
        """The hashes `token` has to be checked against: the one with its ID, or those without an ID."""
        tid = token_id(token)
        if tid is None:
            return self._without_id
        found = self._by_id.get(tid)
        return [found] if found is not None else []

    def _remembered(self, tag: bytes) -> Principal | None:
        with self._lock:
            found = self._known.get(tag)
            if found is not None:
                self._known.move_to_end(tag)
            return found

    def _spend(self, checks: int) -> None:
        """Take `checks` scrypt checks from the allowance (0: only look; negative: give them back);
        Throttled when it has fewer."""
        with self._lock:
            now = time.monotonic()
            self._allowance = min(self._burst, self._allowance + (now - self._refilled) * self._per_second)
            self._refilled = now
            if checks >= 0 and self._allowance < max(1, checks):
                raise Throttled()
            self._allowance = min(self._burst, self._allowance - checks)

    def __call__(self, token: str | None) -> Principal | None:
        """The Principal of `token`, or None; Throttled when it would need a check past the allowance."""
        if not token or len(token) > 512:
            return None
        tag = hmac.new(self._key, token.encode(), hashlib.sha256).digest()
        found = self._remembered(tag)
        if found is not None:
            return found
        spent = 0
        for name, stored, scopes in self._candidates(token):
            self._spend(1)
            spent += 1
            if verify(token, stored):
                self._spend(-spent)  # a good token's checks are not failures
                principal = Principal(name, scopes)
                with self._lock:
                    self._known[tag] = principal
                    while len(self._known) > self._remember:
                        self._known.popitem(last=False)
                return principal
        return None

    async def authenticate(self, token: str | None) -> Principal | None:
        """As calling it, from the event loop: what needs no hashing is answered at once, the rest on the
        verifier's own threads."""
        if not token or len(token) > 512:
            return None
        found = self._remembered(hmac.new(self._key, token.encode(), hashlib.sha256).digest())
        if found is not None or not self._candidates(token):
            return found
        self._spend(0)  # rationed out: refused here, without a thread
        return await asyncio.get_running_loop().run_in_executor(self._hashing, self, token)
