"""DataHub Lite: DataHub's embedded catalog in one SQLite file (the default catalog).

`datahub lite ls/get/search`, pointed at the same file, reads what Lumos wrote.
"""

from __future__ import annotations

import os
from typing import Sequence

from datahub.lite.lite_local import DataHubLiteLocal
from datahub.lite.lite_util import get_datahub_lite

from lumos_dagster.catalog.datahub import snapshot_aspects
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


class DataHubLiteCatalog:
    def __init__(self, path: str, env: str = "PROD"):
        self.path = os.path.abspath(path)
        self.env = env
        self.name = f"datahub-lite:{self.path}"

    def emit(self, snapshots: Sequence[Snapshot]) -> int:
        lite = open_lite(self.path)
        n = 0
        try:
            for s in snapshots:
                for mcp in snapshot_aspects(s, self.env):
                    lite.write(mcp)
                    n += 1
        finally:
            lite.close()
        return n

    def close(self) -> None:
        """Nothing held between emits: the file is opened per batch."""
