"""DataHub Lite: DataHub's embedded catalog in one SQLite file (the default catalog).

`datahub lite ls/get/search`, pointed at the same file, reads what Lumos wrote. Lumos writes
through `BatchedSqliteLite` (lite_batch.py): one transaction per `emit`, DataHub Lite's own
versioning and browse edges, no reindex when the file is closed.
"""

from __future__ import annotations

import os
from typing import Iterator, cast

from datahub.lite.lite_local import DataHubLiteLocal
from datahub.lite.lite_util import get_datahub_lite

from lumos_dagster.catalog.datahub import DataHubCatalog, Proposal
from lumos_dagster.catalog.datahub_read import snapshots_from_entities
from lumos_dagster.catalog.lite_batch import BatchedSqliteLite, open_batched
from lumos_dagster.floor.model import Snapshot


def lite_options(read_only: bool = False) -> dict:
    """The PRAGMAs DataHub Lite sets on its connection to the file."""
    # busy_timeout: two Lumos runs may write the file at once; WAL lets readers in meanwhile.
    # synchronous stays SQLite's FULL (no `synchronous` option): a batch is on disk before the
    # outbox records it delivered, so even a power loss cannot leave the store saying the
    # catalog has what it lost. One fsync per batch of BATCH datasets costs next to nothing.
    return {"busy_timeout": 60000} if read_only else {"busy_timeout": 60000, "journal_mode": "WAL"}


def lite_config(path: str, read_only: bool = False) -> dict:
    """The config DataHub Lite (and the `datahub lite` CLI's ~/.datahubenv) take for `path`."""
    return {"type": "sqlite", "config": {"file": path, "read_only": read_only, "options": lite_options(read_only)}}


def open_lite(path: str, read_only: bool = False) -> DataHubLiteLocal:
    """DataHub Lite as DataHub opens it (stock `write()`, reindex on close)."""
    if not read_only:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return get_datahub_lite(lite_config(os.path.abspath(path), read_only), read_only=read_only)


class DataHubLiteCatalog(DataHubCatalog):
    """Holds the file open from the first write to `close()`; each `emit` is one transaction."""

    def __init__(self, path: str, env: str = "PROD"):
        self.path = os.path.abspath(path)
        self._lite: BatchedSqliteLite | None = None
        super().__init__(f"datahub-lite:{self.path}", env)

    def _writer(self) -> BatchedSqliteLite:
        if self._lite is None:
            lite = open_batched(self.path, lite_options())
            try:
                lite.index_unplaced()  # a file an older writer left without its closing reindex
            except BaseException:
                lite.close()
                raise
            self._lite = lite
        return self._lite

    def _send(self, proposals: list[Proposal]) -> None:
        self._writer().write_batch(proposals)

    def _read(self, urn: str) -> dict:
        found = self._writer().get(urn, None, typed=True) or {}
        found.pop("urn", None)
        return found

    def close(self) -> None:
        if self._lite is not None:
            lite, self._lite = self._lite, None
            lite.close()

    def read_all(self) -> Iterator[Snapshot]:
        if not os.path.exists(self.path):
            return
        lite = open_lite(self.path, read_only=True)
        try:
            # each is {urn: its aspects by name}, which DataHub annotates as a dict or an aspect
            entities = [cast(tuple[str, dict], next(iter(e.items()))) for e in lite.get_all_entities(typed=True)]
        finally:
            lite.close()
        yield from snapshots_from_entities(entities)
