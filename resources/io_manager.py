"""The IO manager of dataset assets: downstream assets get an upstream's snapshots back from the store.

Dataset ops write the store themselves, in batches, before Dagster records a materialization
(`lumos_dagster.delivery.worker`), and yield no values: nothing reaches `handle_output`.
"""

from typing import Any

from dagster import ConfigurableIOManager, InputContext, OutputContext

from lumos_dagster.floor.naming import URN_METADATA_KEY
from lumos_dagster.resources.store import SnapshotStoreResource


class LumosIOManager(ConfigurableIOManager):
    store: SnapshotStoreResource

    def handle_output(self, context: OutputContext, obj: Any) -> None:
        if obj is not None:
            raise TypeError(
                f"{context.asset_key.to_user_string()}: Lumos dataset ops store snapshots themselves; "
                "an output with a value is not expected here"
            )

    def load_input(self, context: InputContext) -> Any:
        upstream = context.upstream_output
        urn = upstream.definition_metadata.get(URN_METADATA_KEY) if upstream else None
        if urn is None:
            raise ValueError(
                f"{context.asset_key.to_user_string()} is not a Lumos dataset asset (no {URN_METADATA_KEY})"
            )
        urn = urn.value if hasattr(urn, "value") else urn
        with self.store.open() as store:
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
