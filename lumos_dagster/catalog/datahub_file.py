"""An MCP file in DataHub's file-sink format: `datahub ingest` (file source) loads it.

The file holds the latest version of every aspect Lumos sent, so it is the catalog's
current state; it is rewritten atomically, and an aspect sent again with the same
content leaves the file as it was."""

from __future__ import annotations

import os
import pathlib
import tempfile
from typing import Iterator

from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.ingestion.sink.file import write_metadata_file
from datahub.ingestion.source.file import read_metadata_file

from lumos_dagster.catalog.datahub import DataHubCatalog, snapshots_from_entities
from lumos_dagster.model import Snapshot


class DataHubFileCatalog(DataHubCatalog):
    def __init__(self, path: str, env: str = "PROD"):
        self.path = os.path.abspath(path)
        super().__init__(f"datahub-file:{self.path}", env)

    def _read(self) -> dict[tuple[str | None, str | None], MetadataChangeProposalWrapper]:
        if not os.path.exists(self.path):
            return {}
        return {
            (m.entityUrn, m.aspectName): m
            for m in read_metadata_file(pathlib.Path(self.path))
            if isinstance(m, MetadataChangeProposalWrapper)
        }

    def _send(self, mcps: list[MetadataChangeProposalWrapper]) -> None:
        current = self._read()
        current.update({(m.entityUrn, m.aspectName): m for m in mcps})
        folder = os.path.dirname(self.path)
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        os.close(fd)
        try:
            write_metadata_file(pathlib.Path(tmp), [current[k] for k in sorted(current)])
            os.replace(tmp, self.path)  # readers see the old file or the new one, never half of one
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def read_all(self) -> Iterator[Snapshot]:
        entities: dict[str, dict] = {}
        for (urn, name), mcp in self._read().items():
            if urn is not None:  # a proposal may name its entity by key aspect instead; Lumos's have URNs
                entities.setdefault(urn, {})[name] = mcp.aspect
        yield from snapshots_from_entities(entities.items())
