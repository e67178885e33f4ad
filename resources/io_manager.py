"""The catalog IO manager: every snapshot goes to the store, then to the catalog.

`handle_output` stores each partition's snapshot (history is kept) and queues it in
the outbox in the same transaction, then delivers the outbox; a catalog that fails
leaves the snapshots queued, and the materialization says so. A catalog that failed is
not tried again for the rest of the run (a dead server must not cost a timeout per
dataset); the next run or `lumos sync` delivers. `load_input` gives downstream assets
the upstream's snapshots back from the store.
"""

from typing import Any, Optional, Union

from dagster import ConfigurableIOManager, InitResourceContext, InputContext, MetadataValue, OutputContext
from pydantic import PrivateAttr

from lumos_dagster.catalog.base import CatalogAdapter
from lumos_dagster.catalog.delivery import deliver
from lumos_dagster.model import Snapshot
from lumos_dagster.store import SnapshotStore
from resources.store import CatalogsResource, SnapshotStoreResource

URN_METADATA_KEY = "lumos/urn"


class LumosIOManager(ConfigurableIOManager):
    store: SnapshotStoreResource
    catalogs: CatalogsResource
    _adapters: list[CatalogAdapter] | None = PrivateAttr(default=None)
    _store: SnapshotStore | None = PrivateAttr(default=None)  # one per step: opening checks the schema
    _down: dict[str, str] = PrivateAttr(default_factory=dict)  # catalog → first error this run

    def _catalogs(self) -> list[CatalogAdapter]:
        if self._adapters is None:
            self._adapters = self.catalogs.adapters()
        return self._adapters

    def _open_store(self) -> SnapshotStore:
        if self._store is None:
            self._store = self.store.open()
        return self._store

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        for adapter in self._adapters or ():
            adapter.close()
        if self._store is not None:
            self._store.close()

    def handle_output(self, context: OutputContext, obj: Union[dict[Optional[str], Snapshot], Snapshot]) -> None:
        snapshots = list(obj.values()) if isinstance(obj, dict) else [obj]
        adapters = self._catalogs()
        store = self._open_store()
        metadata: dict[str, Any] = {"lumos/catalogs": MetadataValue.text(", ".join(a.name for a in adapters))}
        store.put(snapshots, catalogs=[a.name for a in adapters])  # recorded first: nothing is lost
        for adapter in adapters:
            if adapter.name not in self._down:
                report = deliver(store, adapter)
                if report.failed:
                    self._down[adapter.name] = next(iter(report.failed.values()))
                    context.log.warning(
                        f"catalog {adapter.name} did not take the metadata; what it misses stays queued "
                        f"for the next run or `lumos sync`: {self._down[adapter.name]}"
                    )
            if adapter.name in self._down:
                pending = store.outbox_counts(adapter.name).get("pending", 0)
                metadata[f"lumos/pending/{adapter.name}"] = MetadataValue.int(pending)
        context.add_output_metadata(metadata)

    def load_input(self, context: InputContext) -> Any:
        upstream = context.upstream_output
        urn = upstream.definition_metadata.get(URN_METADATA_KEY) if upstream else None
        if urn is None:
            raise ValueError(
                f"{context.asset_key.to_user_string()} is not a Lumos dataset asset (no {URN_METADATA_KEY})"
            )
        urn = urn.value if hasattr(urn, "value") else urn
        store = self._open_store()
        if not context.has_asset_partitions:
            return store.latest(urn)
        keys = context.asset_partition_keys
        found = {pk: store.latest(urn, pk) for pk in keys}
        missing = [pk for pk, s in found.items() if s is None]
        if missing:
            raise ValueError(
                f"{context.asset_key.to_user_string()}: no snapshot for partition(s) {', '.join(missing[:5])}; "
                "materialize them first"
            )
        return found[keys[0]] if len(keys) == 1 else found
