"""DataHub GMS over REST, through acryl-datahub's own emitter: batched ingest requests,
retries with exponential backoff, connect/read timeouts, token auth; read back through
DataHubGraph (search for the datasets, then their aspects)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from datahub.configuration.common import OperationalError
from datahub.emitter.rest_emitter import DatahubRestEmitter
from datahub.ingestion.graph.client import DatahubClientConfig, DataHubGraph

from lumos_dagster.catalog.base import REFUSED_STATUSES, http_status, send_each
from lumos_dagster.catalog.datahub import DataHubCatalog, Proposal
from lumos_dagster.catalog.datahub_read import READ_ASPECTS, snapshots_from_entities
from lumos_dagster.catalog.patch_apply import IfAbsent
from lumos_dagster.floor.masking import shown_url
from lumos_dagster.floor.model import Snapshot


class DataHubRestCatalog(DataHubCatalog):
    def __init__(
        self,
        server: str,
        token: str | None = None,
        env: str = "PROD",
        batch_size: int = 100,
        retries: int = 3,
        timeout_sec: float = 30,
    ):
        super().__init__(f"datahub-rest:{shown_url(server.rstrip('/'))}", env)  # the outbox keys on it: no credentials
        self.server = server
        self.batch_size = batch_size
        self._token, self._retries, self._timeout_sec = token, retries, timeout_sec
        self._emitter: DatahubRestEmitter | None = None
        self._graph: DataHubGraph | None = None  # reads what `IfAbsent` must not overwrite
        self._present: set[tuple] = set()

    def _connected(self) -> DatahubRestEmitter:
        if self._emitter is None:
            emitter = DatahubRestEmitter(
                self.server,
                token=self._token,
                connect_timeout_sec=self._timeout_sec,
                read_timeout_sec=self._timeout_sec,
                retry_max_times=self._retries,
                openapi_ingestion=False,  # the Rest.li ingestProposalBatch endpoint every GMS has
            )
            emitter.test_connection()  # a wrong URL or token fails here, with DataHub's own message
            self._emitter = emitter
        return self._emitter

    def emit(self, snapshots: Sequence[Snapshot], before: Sequence[str | None] | None = None) -> int:
        try:
            return super().emit(snapshots, before)
        except OperationalError as exc:
            if http_status(exc) not in REFUSED_STATUSES:
                raise
        # GMS refused the batch for some entry of it: one snapshot at a time tells which (what the
        # first try sent GMS keeps once: it stores a new version only for new content)
        one = DataHubCatalog.emit
        pairs = list(zip(snapshots, before or [None] * len(snapshots), strict=True))
        return send_each(pairs, lambda pair: pair, lambda pair: one(self, [pair[0]], [pair[1]]), "DataHub GMS")

    def _send(self, proposals: list[Proposal]) -> None:
        emitter = self._connected()
        proposals = [p for p in proposals if not isinstance(p, IfAbsent) or self._absent(p)]
        for start in range(0, len(proposals), self.batch_size):
            emitter.emit_mcps(proposals[start : start + self.batch_size])

    def _absent(self, p: IfAbsent) -> bool:
        """Whether GMS has no such aspect of the entity (what it has stays known for the adapter's life)."""
        key = (p.entityUrn, p.aspectName)
        if key in self._present:
            return False
        if p.aspectName in self._reader().get_entity_semityped(str(p.entityUrn), aspects=[str(p.aspectName)]):
            self._present.add(key)
            return False
        return True

    def _read(self, urn: str) -> dict:
        return dict(self._reader().get_entity_semityped(urn))

    def _reader(self) -> DataHubGraph:
        if self._graph is None:
            self._graph = DataHubGraph(self._client_config())
        return self._graph

    def _client_config(self) -> DatahubClientConfig:
        return DatahubClientConfig(
            server=self.server, token=self._token, timeout_sec=self._timeout_sec, retry_max_times=self._retries
        )

    def read_all(self) -> Iterator[Snapshot]:
        """Every dataset GMS holds in this environment, soft-deleted ones too (found through its
        search, read aspect by aspect): what `lumos export --from datahub-rest` writes."""
        from datahub.ingestion.graph.filters import RemovedStatusFilter

        with DataHubGraph(self._client_config()) as graph:
            urns = graph.get_urns_by_filter(entity_types=["dataset"], env=self.env, status=RemovedStatusFilter.ALL)
            entities = [(urn, graph.get_entity_semityped(urn, aspects=list(READ_ASPECTS))) for urn in urns]
        yield from snapshots_from_entities(entities)

    def close(self) -> None:
        for client in (self._emitter, self._graph):
            if client is not None:
                client.close()
        self._emitter = self._graph = None
