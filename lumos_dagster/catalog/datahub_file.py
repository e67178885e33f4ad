"""An MCP file in DataHub's file-sink format: `datahub ingest` (file source) loads it.

The file is a catalog's current state, shared: it keeps every record Lumos did not write as it
found it (another team's MCEs and proposals), in their order, and after them Lumos' own latest
proposals, one per entity, aspect and kind (an aspect sent whole; its patches of a shared aspect,
which `datahub ingest` applies on top of what others wrote). Lumos' records carry
`systemMetadata.properties.appSource = lumos`, as DataHub marks what its UI writes `ui`. The file is
rewritten atomically, and a proposal sent again with the same content leaves it as it was."""

from __future__ import annotations

import os
import pathlib
import tempfile
from typing import Any, Iterator

from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.ingestion.sink.file import write_metadata_file
from datahub.ingestion.source.file import read_metadata_file
from datahub.metadata.schema_classes import MetadataChangeProposalClass, SystemMetadataClass

from lumos_dagster.catalog.datahub import DataHubCatalog, Proposal
from lumos_dagster.catalog.datahub_read import snapshots_from_entities
from lumos_dagster.catalog.patch_apply import IfAbsent, state_of
from lumos_dagster.floor.model import Snapshot

APP_SOURCE = "lumos"
_MARK = SystemMetadataClass(properties={"appSource": APP_SOURCE})


def _lumos(record: Any) -> bool:
    meta = getattr(record, "systemMetadata", None)
    return bool(meta and (meta.properties or {}).get("appSource") == APP_SOURCE)


def _key(p: Proposal) -> tuple[str | None, str | None, str]:
    return p.entityUrn, p.aspectName, "PATCH" if isinstance(p, MetadataChangeProposalClass) else "UPSERT"


class DataHubFileCatalog(DataHubCatalog):
    def __init__(self, path: str, env: str = "PROD"):
        self.path = os.path.abspath(path)
        super().__init__(f"datahub-file:{self.path}", env)

    def _records(self) -> list[Any]:
        return list(read_metadata_file(pathlib.Path(self.path))) if os.path.exists(self.path) else []

    def _send(self, proposals: list[Proposal]) -> None:
        records = self._records()
        others = [r for r in records if not _lumos(r)]
        ours: dict[tuple, list[Proposal]] = {}
        for r in records:
            if _lumos(r):
                ours.setdefault(_key(r), []).append(r)
        present = set(state_of(records))
        sent: dict[tuple, list[Proposal]] = {}
        for p in proposals:
            if isinstance(p, IfAbsent):
                if (p.entityUrn, p.aspectName) in present:
                    continue
                p = MetadataChangeProposalWrapper(entityUrn=p.entityUrn, aspect=p.aspect)
            p.systemMetadata = _MARK
            sent.setdefault(_key(p), []).append(p)  # a dataset's patches of one aspect: all of this delivery's
        ours.update(sent)
        folder = os.path.dirname(self.path)
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        os.close(fd)
        try:
            write_metadata_file(pathlib.Path(tmp), others + [p for k in sorted(ours, key=str) for p in ours[k]])
            os.replace(tmp, self.path)  # readers see the old file or the new one, never half of one
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def _read(self, urn: str) -> dict:
        return {name: aspect for (entity, name), aspect in state_of(self._records()).items() if entity == urn}

    def read_all(self) -> Iterator[Snapshot]:
        entities: dict[str, dict] = {}
        for (urn, name), aspect in state_of(self._records()).items():
            entities.setdefault(urn, {})[name] = aspect
        yield from snapshots_from_entities(entities.items())
