"""Catalog adapters: Lumos snapshots out to the catalogs people use. Each takes plain values (never
lumos.yaml, never the store): `lumos_dagster.delivery` builds them and sends them what the outbox holds."""
