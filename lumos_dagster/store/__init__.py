"""The snapshot store: dataset registry, snapshot history and the catalog outbox."""

from lumos_dagster.store.store import Delivery, Release, SnapshotStore, claim_owner

__all__ = ["Delivery", "Release", "SnapshotStore", "claim_owner"]
