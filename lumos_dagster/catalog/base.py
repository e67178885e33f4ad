"""The interface every catalog adapter implements."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Iterator, Protocol, Sequence

from lumos_dagster.errors import CatalogError
from lumos_dagster.model import Snapshot


class CatalogAdapter(Protocol):
    """Writes snapshots into one catalog. Writes must be idempotent: sending the same
    snapshot twice leaves the catalog as it was after the first time."""

    #: identifies the catalog in the outbox (two adapters for one catalog share it)
    name: str

    def fingerprint(self, snapshot: Snapshot) -> str:
        """Hash of what `emit` would send for this snapshot: equal hashes, nothing to send."""
        ...

    def emit(self, snapshots: Sequence[Snapshot]) -> int:
        """Write the snapshots; return how many items (aspects, events, entities) were sent. Raise on
        failure: `Undeliverable` for snapshots this catalog can never take, anything else when it
        cannot take them now."""
        ...

    def close(self) -> None: ...


#: the categories of an estate a catalog may be unable to hold (lumos_dagster.estate.carry counts them)
DATASETS, VERSIONS, HISTORY, RELEASES = "datasets", "versions", "history", "releases"
LINEAGE, OWNERS, TAGS, TERMS, SCHEMAS, DESCRIPTIONS = "lineage", "owners", "tags", "terms", "schemas", "descriptions"
#: every catalog keeps current state only: no earlier versions, no releases (those stay in the store)
CURRENT_STATE_ONLY = frozenset({HISTORY, RELEASES})


class ReadableCatalog(CatalogAdapter, Protocol):
    """A catalog Lumos can read back: what it holds, as snapshots (for `lumos export`, `compare`,
    `migrate`)."""

    #: the categories above it keeps nothing of: `compare` and `migrate` report them as "not
    #: carried" rather than as a loss (e.g. `CURRENT_STATE_ONLY | {TERMS}` for one without a glossary)
    cannot_hold: frozenset[str]

    def read_all(self) -> Iterator[Snapshot]: ...


class Undeliverable(CatalogError):
    """Snapshots the catalog can never take as they are (no retry helps): their positions in the
    emitted batch, each with why. Nothing of the batch was sent."""

    def __init__(self, rejected: dict[int, str]):
        super().__init__("; ".join(rejected.values()))
        self.rejected = rejected


def content_hash(payload: Any) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:32]


def secret(env_var: str | None, what: str, required: bool) -> str | None:
    """A credential from the environment, read when the adapter is built (at run time).
    An unset optional one means "no credential" (an open server answers; a closed one says 401)."""
    value = os.environ.get(env_var) if env_var else None
    if not value and required:
        raise CatalogError(f"{what}: environment variable {env_var} is not set (it holds the credential)")
    return value or None
