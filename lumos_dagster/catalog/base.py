"""The interface every catalog adapter implements."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

from lumos_dagster.floor.errors import CatalogError
from lumos_dagster.floor.model import Snapshot


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


@runtime_checkable
class Claiming(Protocol):
    """A catalog Lumos shares with other writers: it adds its own entries to aspects others write too,
    and removes only those. The outbox keeps, per dataset, what the adapter says it added (its own
    text, opaque to the outbox) and hands it back with the next delivery of that dataset: None for a
    dataset never delivered there, "" for one delivered before Lumos kept it."""

    name: str

    def claims(self, snapshot: Snapshot, before: str | None) -> str:
        """What delivering `snapshot` leaves Lumos having added (`before`: what it had added)."""
        ...

    # `before` may be left out (None): a claiming adapter is also called as a plain `CatalogAdapter`
    def emit(self, snapshots: Sequence[Snapshot], before: Sequence[str | None] | None = None) -> int: ...


#: the categories of an estate a catalog may be unable to hold (lumos_dagster.estate.carry counts them)
DATASETS, VERSIONS, HISTORY, RELEASES = "datasets", "versions", "history", "releases"
LINEAGE, OWNERS, TAGS, TERMS, SCHEMAS, DESCRIPTIONS = "lineage", "owners", "tags", "terms", "schemas", "descriptions"
#: every catalog keeps current state only: no earlier versions, no releases (those stay in the store)
CURRENT_STATE_ONLY = frozenset({HISTORY, RELEASES})


class Undeliverable(CatalogError):
    """Snapshots the catalog can never take as they are (no retry helps): their positions in the
    emitted batch, each with why; `delivered`, the positions that went through meanwhile (none for
    an adapter that builds the whole batch before sending any of it)."""

    def __init__(self, rejected: dict[int, str], delivered: frozenset[int] = frozenset()):
        super().__init__("; ".join(rejected.values()))
        self.rejected = rejected
        self.delivered = delivered


#: HTTP answers refusing one entry as it is (validation); any other failure (unreachable, 401, 403, 404,
#: 408, 429, 5xx) says the catalog cannot take anything now, and the entries wait
REFUSED_STATUSES = frozenset({400, 422})


def http_status(exc: BaseException) -> int | None:
    """The HTTP status behind an exception (requests', or one an adapter chains from it)."""
    for e in (exc, exc.__cause__):
        status = getattr(getattr(e, "response", None), "status_code", None)
        if status is not None:
            return status
    return None


def send_each(snapshots: Sequence[Any], build: Callable[[Any], Any], send: Callable[[Any], int],
              catalog: str) -> int:  # fmt: skip
    """Build and send the snapshots one at a time; one that cannot be built, or that the catalog
    refuses (`REFUSED_STATUSES`), is held back with its reason while the others go on. Any other
    failure is the catalog's: it propagates, and the whole batch waits (sending is idempotent)."""
    rejected: dict[int, str] = {}
    sent, delivered = 0, set()
    for i, snapshot in enumerate(snapshots):
        try:
            item = build(snapshot)
        except Exception as exc:  # building is pure: what fails for this snapshot fails every time
            rejected[i] = f"{type(exc).__name__}: {exc}"
            continue
        try:
            sent += send(item)
        except Exception as exc:
            status = http_status(exc)
            if status not in REFUSED_STATUSES:
                raise
            rejected[i] = f"{catalog} refused it (HTTP {status}): {str(exc)[:300]}"
            continue
        delivered.add(i)
    if rejected:
        raise Undeliverable(rejected, frozenset(delivered))
    return sent


def content_hash(payload: Any) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:32]


def secret(env_var: str | None, what: str, required: bool) -> str | None:
    """A credential from the environment, read when the adapter is built (at run time).
    An unset optional one means "no credential" (an open server answers; a closed one says 401)."""
    value = os.environ.get(env_var) if env_var else None
    if not value and required:
        raise CatalogError(f"{what}: environment variable {env_var} is not set (it holds the credential)")
    return value or None
