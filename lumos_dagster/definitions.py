"""The Lumos code location: lumos.yaml + the discovery registry → Dagster definitions.

The only module that assembles everything. `LUMOS_CONFIG` names the config file
(default: ./lumos.yaml); it is read when the code location loads.
"""

from __future__ import annotations

from dagster import Definitions, definitions

from assets.datasets import build_dataset_assets
from lumos_dagster.catalog import catalogs_json
from lumos_dagster.config import LumosConfig, load_config
from lumos_dagster.datasets import resolve_datasets
from lumos_dagster.sources import build_sources
from lumos_dagster.store import SnapshotStore
from resources.io_manager import LumosIOManager
from resources.spark import spark_resource
from resources.store import CatalogsResource, SnapshotStoreResource
from sensors.schedules import cadence_schedules


def build_definitions(config: LumosConfig) -> Definitions:
    sources = build_sources(config)
    store = SnapshotStore(config.store_url)
    try:
        records = store.datasets()
    finally:
        store.close()
    catalogue = resolve_datasets(config, records, {name: s.root for name, s in sources.items()})
    by_cadence, missing = build_dataset_assets(config, catalogue, sources)
    store_resource = SnapshotStoreResource(url=config.store_url)
    catalogs = CatalogsResource(catalogs=catalogs_json(config))
    return Definitions(
        assets=[*by_cadence.values(), *missing],
        schedules=cadence_schedules(by_cadence),
        resources={
            "spark": spark_resource(config.spark),
            "lumos_store": store_resource,
            "lumos_io_manager": LumosIOManager(store=store_resource, catalogs=catalogs),
        },
    )


@definitions
def defs() -> Definitions:
    return build_definitions(load_config())
