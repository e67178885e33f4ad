"""The interface every catalog adapter implements."""

from __future__ import annotations

from typing import Protocol, Sequence

from lumos_dagster.model import Snapshot


class CatalogAdapter(Protocol):
    """Writes snapshots into one catalog. Writes must be idempotent: sending the same
    snapshot twice leaves the catalog as it was after the first time."""

    #: identifies the catalog in the outbox (two adapters for one catalog share it)
    name: str

    def emit(self, snapshots: Sequence[Snapshot]) -> int:
        """Write the snapshots; return how many aspects were sent. Raise on failure."""
        ...

    def close(self) -> None: ...
