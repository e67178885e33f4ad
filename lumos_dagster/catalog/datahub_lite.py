"""DataHub Lite: DataHub's embedded catalog in one SQLite file (the default catalog).

`datahub lite ls/get/search`, pointed at the same file, reads what Lumos wrote.
"""

from __future__ import annotations

import os
from typing import Iterator

from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.lite.lite_local import DataHubLiteLocal
from datahub.lite.lite_util import get_datahub_lite

from lumos_dagster.catalog.datahub import DataHubCatalog, snapshots_from_entities
from lumos_dagster.model import Snapshot


def lite_config(path: str, read_only: bool = False) -> dict:
    """The config DataHub Lite (and the `datahub lite` CLI's ~/.datahubenv) take for `path`."""
    # busy_timeout: two Lumos runs may write the file at once; WAL lets readers in meanwhile
    options = {"busy_timeout": 60000} if read_only else {"busy_timeout": 60000, "journal_mode": "WAL"}
    return {"type": "sqlite", "config": {"file": path, "read_only": read_only, "options": options}}


def open_lite(path: str, read_only: bool = False) -> DataHubLiteLocal:
    if not read_only:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return get_datahub_lite(lite_config(os.path.abspath(path), read_only), read_only=read_only)


class DataHubLiteCatalog(DataHubCatalog):
    """Holds the file open from the first write to `close()`: Lite rebuilds its browse index over
    every entity when it is closed, so closing after each batch would make a run quadratic."""

    def __init__(self, path: str, env: str = "PROD"):
        self.path = os.path.abspath(path)
        self._lite: DataHubLiteLocal | None = None
        super().__init__(f"datahub-lite:{self.path}", env)

    def _send(self, mcps: list[MetadataChangeProposalWrapper]) -> None:
        if self._lite is None:
            self._lite = open_lite(self.path)
        for mcp in mcps:
            self._lite.write(mcp)

    def close(self) -> None:
        if self._lite is not None:
            lite, self._lite = self._lite, None
            lite.close()

    def read_all(self) -> Iterator[Snapshot]:
        if not os.path.exists(self.path):
            return
        lite = open_lite(self.path, read_only=True)
        try:
            entities = [next(iter(e.items())) for e in lite.get_all_entities(typed=True)]
        finally:
            lite.close()
        yield from snapshots_from_entities(entities)
