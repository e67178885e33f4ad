"""The catalog IO manager: every snapshot goes to the store, then to the catalog.

`handle_output` stores each partition's snapshot (history is kept) and queues it in
the outbox in the same transaction, then delivers the outbox; a catalog that fails
leaves the snapshots queued, and the materialization says so. `load_input` gives
downstream assets the upstream's snapshots back from the store.
"""

from typing import Any, Optional, Union

from dagster import ConfigurableIOManager, InputContext, MetadataValue, OutputContext

from lumos_dagster.delivery import deliver
from lumos_dagster.model import Snapshot
from resources.store import CatalogsResource, SnapshotStoreResource

URN_METADATA_KEY = "lumos/urn"


class LumosIOManager(ConfigurableIOManager):
    store: SnapshotStoreResource
    catalogs: CatalogsResource

    def handle_output(self, context: OutputContext, obj: Union[dict[Optional[str], Snapshot], Snapshot]) -> None:
        snapshots = list(obj.values()) if isinstance(obj, dict) else [obj]
        store = self.store.open()
        metadata: dict[str, Any] = {}
        try:
            adapters = self.catalogs.adapters()
            store.put(snapshots, catalogs=[a.name for a in adapters])  # recorded first: nothing is lost
            for adapter in adapters:
                try:
                    report = deliver(store, adapter)
                finally:
                    adapter.close()
                if report.failed:
                    pending = store.outbox_counts(adapter.name).get("pending", 0)
                    error = next(iter(report.failed.values()))
                    metadata[f"lumos/pending/{adapter.name}"] = MetadataValue.int(pending)
                    context.log.warning(
                        f"catalog {adapter.name} did not take the metadata ({pending} snapshots queued; "
                        f"delivered on the next run or by `lumos sync`): {error}"
                    )
        finally:
            store.close()
        metadata["lumos/catalogs"] = MetadataValue.text(", ".join(a.name for a in adapters))
        context.add_output_metadata(metadata)

    def load_input(self, context: InputContext) -> Any:
        upstream = context.upstream_output
        urn = upstream.definition_metadata.get(URN_METADATA_KEY) if upstream else None
        if urn is None:
            raise ValueError(
                f"{context.asset_key.to_user_string()} is not a Lumos dataset asset (no {URN_METADATA_KEY})"
            )
        urn = urn.value if hasattr(urn, "value") else urn
        store = self.store.open()
        try:
            if not context.has_asset_partitions:
                return store.latest(urn)
            keys = context.asset_partition_keys
            found = {pk: store.latest(urn, pk) for pk in keys}
        finally:
            store.close()
        missing = [pk for pk, s in found.items() if s is None]
        if missing:
            raise ValueError(
                f"{context.asset_key.to_user_string()}: no snapshot for partition(s) {', '.join(missing[:5])}; "
                "materialize them first"
            )
        return found[keys[0]] if len(keys) == 1 else found
