"""DataHub GMS over REST, through acryl-datahub's own emitter: batched ingest requests,
retries with exponential backoff, connect/read timeouts, token auth."""

from __future__ import annotations

from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.emitter.rest_emitter import DatahubRestEmitter

from lumos_dagster.catalog.datahub import DataHubCatalog


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
        super().__init__(f"datahub-rest:{server.rstrip('/')}", env)
        self.server = server
        self.batch_size = batch_size
        self._settings = dict(
            token=token,
            connect_timeout_sec=timeout_sec,
            read_timeout_sec=timeout_sec,
            retry_max_times=retries,
            openapi_ingestion=False,  # the Rest.li ingestProposalBatch endpoint every GMS has
        )
        self._emitter: DatahubRestEmitter | None = None

    def _connected(self) -> DatahubRestEmitter:
        if self._emitter is None:
            emitter = DatahubRestEmitter(self.server, **self._settings)
            emitter.test_connection()  # a wrong URL or token fails here, with DataHub's own message
            self._emitter = emitter
        return self._emitter

    def _send(self, mcps: list[MetadataChangeProposalWrapper]) -> None:
        emitter = self._connected()
        for start in range(0, len(mcps), self.batch_size):
            emitter.emit_mcps(mcps[start : start + self.batch_size])

    def close(self) -> None:
        if self._emitter is not None:
            self._emitter.close()
            self._emitter = None
