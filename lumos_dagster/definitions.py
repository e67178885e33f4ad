"""The Lumos code location: lumos.yaml + the discovery registry → Dagster definitions.

The only module that assembles everything. `LUMOS_CONFIG` names the config file (default:
./lumos.yaml). The registry comes as Dagster defs state (`lumos_dagster.assets.state`): the code server and every
run worker build from the same registry document. Definitions are built once per process, lumos.yaml
and document: Dagster's CLI loads a code location several times in one command, and each load of
thousands of datasets costs seconds. In a Dagster project of the user's own, the same definitions come
from the Lumos component (lumos_dagster/component.py), which builds them here.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from dagster import Definitions, definitions, in_process_executor

from lumos_dagster.assets.datasets import build_dataset_assets
from lumos_dagster.assets.keys import dataset_keys
from lumos_dagster.assets.reports import report_assets
from lumos_dagster.floor.collector import paused
from lumos_dagster.floor.config import LumosConfig, load_config
from lumos_dagster.floor.windows import parse_lag
from lumos_dagster.lineage.catalogue import RegistryState, catalogue_of
from lumos_dagster.resources.io_manager import LumosIOManager
from lumos_dagster.resources.spark import spark_resource
from lumos_dagster.resources.store import CatalogsResource, SnapshotStoreResource
from lumos_dagster.sensors.discovery import discovery_job
from lumos_dagster.sensors.nudges import nudge_job
from lumos_dagster.sensors.releases import dataset_schedule_sensor, release_sensor
from lumos_dagster.sensors.retention import retention_job
from lumos_dagster.sensors.schedules import cadence_jobs, cadence_schedules
from lumos_dagster.sensors.storage import storage_sensor
from lumos_dagster.sensors.sync import sync_job
from lumos_dagster.sensors.table_changes import table_sensor
from lumos_dagster.sensors.triggers import Targets
from lumos_dagster.sources import FileSource, TableSource, build_sources


@dataclass(frozen=True)
class Assembly:
    definitions: Definitions
    targets: Targets  # what sensors can request: dataset → asset key, partitions, schedule


def build_definitions(config: LumosConfig, state: RegistryState | None = None) -> Definitions:
    """The definitions, their asset graph resolved (Dagster asks for it next, and caches it);
    `state`: the registry document to build from (default: the registry now)."""
    with paused():
        definitions = assemble(config, state).definitions
        definitions.resolve_asset_graph()
    return definitions


def assemble(config: LumosConfig, state: RegistryState | None = None) -> Assembly:
    sources = build_sources(config)
    if state is None:
        state = RegistryState.of_location(config)
    catalogue = catalogue_of(config, state, {name: s.root for name, s in sources.items()})
    keys = dataset_keys(catalogue)
    by_cadence, missing = build_dataset_assets(config, catalogue, sources, keys)
    jobs = cadence_jobs(by_cadence)
    targets = Targets(catalogue.by_name(), keys, by_cadence, jobs)
    store_resource = SnapshotStoreResource.of(config.store_url)
    resources = {
        "spark": spark_resource(config.spark),
        "lumos_store": store_resource,
        "lumos_catalogs": CatalogsResource.from_config(config),
        "lumos_io_manager": LumosIOManager(store=store_resource),
    }
    sync = sync_job(resources)
    sensors = [storage_sensor(s, config, targets, sync) for s in sources.values() if isinstance(s, FileSource)]
    sensors += [
        table_sensor(s, config.store_url, targets, config.partitions.datasets_per_run)
        for s in sources.values()
        if isinstance(s, TableSource) and s.watchable
    ]
    if any(d.schedule for d in catalogue.datasets):
        sensors.append(dataset_schedule_sensor(targets))
    if config.releases.watch:
        sensors.append(
            release_sensor(config.resolve_location(config.releases.watch), targets, config.releases.endpoint_url)
        )
    reports = [report_assets(config, catalogue)]
    discover, discover_daily = discovery_job(config, {d.name for d in catalogue.datasets})
    nudge = nudge_job(config)
    retention, retention_daily = retention_job(
        config.retention.dagster_runs_days, config.store.retention.outbox_days, config.retention.schedule
    )
    definitions = Definitions(
        assets=[*(a for chunk in by_cadence.values() for a in chunk), *missing, *reports],
        jobs=[*jobs.values(), discover, sync, retention, *(nudge[:1] if nudge else ())],
        schedules=[
            *cadence_schedules(
                by_cadence, jobs, config.partitions.datasets_per_run, parse_lag(config.partitions.snapshot_lag)
            ),
            discover_daily,
            retention_daily,
            *(nudge[1:] if nudge else ()),
        ],
        sensors=sensors,
        # one process per run: its steps share one Spark session (a step per process would start a JVM
        # each) and the run does not pay a second interpreter start and code-location load
        executor=in_process_executor,
        resources=resources,
    )
    return Assembly(definitions, targets)


@functools.cache
def location_config(path: str) -> LumosConfig:
    """The lumos.yaml at `path`, read once per process."""
    return load_config(path)


#: the definitions built in this process, by lumos.yaml: the registry document's digest and what it built
_BUILT: dict[str, tuple[str, Definitions]] = {}


def location_definitions(path: str, state: RegistryState | None = None) -> Definitions:
    """The code location of the lumos.yaml at `path`, built from `state` (default: the registry document
    this load builds from, `lumos_dagster.assets.state.registry_state`), once per process and document."""
    from lumos_dagster.assets.state import registry_state

    if state is None:
        state = registry_state(location_config(path))
    built = _BUILT.get(path)
    if built is None or built[0] != state.digest:
        built = _BUILT[path] = (state.digest, build_definitions(location_config(path), state))
    return built[1]


@definitions
def defs() -> Definitions:
    from lumos_dagster.floor.config import config_path

    return location_definitions(config_path())
