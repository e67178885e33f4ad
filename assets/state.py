"""The registry as Dagster's definitions state: every process builds the code location from the
same registry document.

A code location's assets come from the registry, which sensors and `lumos discover` change while
the deployment runs. Were each process to read the registry itself, the code server could plan a
run with one set of datasets and the run worker load another. So the registry is Dagster defs
state (`DefsStateStorage`, Dagster 1.13): the code server, when it loads, publishes the registry
document as a state version named by its content (nothing new when it is unchanged), and Dagster
pins that version in every run planned against it; a run worker loads the pinned version, never
the registry as it is by then. A dataset recorded meanwhile appears at the code location's next
load (a sensor asks for one: `lumos_dagster.sensors.reload`).

Outside a Dagster load (tests building definitions, an instance without state storage) the
registry is read directly.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from pathlib import Path

from dagster.components.utils.defs_state import DefsStateConfig
from dagster_shared.serdes.objects.models.defs_state_info import DefsStateManagementType

from lumos_dagster.floor.config import LumosConfig
from lumos_dagster.lineage.catalogue import RegistryState
from lumos_dagster.resources.tuning.dagster_private import DefinitionsLoadContext, DefinitionsLoadType, DefsStateStorage


def state_key(config: LumosConfig) -> str:
    """One key per code location (several share one instance and one store): its lumos.yaml's name
    and where it is."""
    where = hashlib.sha1(os.path.abspath(config.source_file).encode()).hexdigest()[:8]
    return f"lumos_registry__{Path(config.source_file).stem}__{where}"


def state_config(config: LumosConfig) -> DefsStateConfig:
    """How Dagster keeps the registry document: versions in the instance's defs state storage, refreshed by
    each load that initializes the code location (not only under `dagster dev`)."""
    return DefsStateConfig(
        key=state_key(config), management_type=DefsStateManagementType.VERSIONED_STATE_STORAGE, refresh_if_dev=False
    )


def _kept(storage: DefsStateStorage, key: str, version: str) -> bool:
    """Whether the storage holds that version's document: the pointer lives in Dagster's database, the
    documents in a folder (or a bucket), and a new folder may come with an old database."""
    with tempfile.TemporaryDirectory(prefix="lumos-state-") as folder:
        try:
            storage.download_state_to_path(key, version, Path(folder) / "state")
        except Exception:  # whatever the storage raises for a missing document
            return False
    return True


#: the state this process's last initializing load built, by state key
_PLANNED: dict[str, RegistryState] = {}


def registry_state(config: LumosConfig) -> RegistryState:
    """The registry document this load builds from: the version Dagster pinned for a run worker,
    else the registry now, published as the location's latest version when it is new."""
    context, storage = DefinitionsLoadContext.get(), DefsStateStorage.get()
    if storage is None:
        return RegistryState.of_location(config)
    key = state_key(config)
    if context.load_type == DefinitionsLoadType.RECONSTRUCTION:
        with context.state_path(state_config(config), storage, Path(config.base_dir)) as path:
            if path is not None:
                return RegistryState.loads(path.read_text())
        # no pinned version: a run executed in the process that planned it (`dagster asset
        # materialize` reconstructs the job several times) builds from the state it planned with;
        # else a run planned before the location had state
        return _PLANNED.get(key) or RegistryState.of_location(config)
    state = _PLANNED[key] = RegistryState.of_location(config)
    known = context.get_defs_key_state_info(key)
    if known is None or known.version != state.digest or not _kept(storage, key, state.digest):
        with tempfile.TemporaryDirectory(prefix="lumos-state-") as folder:
            path = Path(folder) / "state"
            path.write_text(state.text)
            storage.upload_state_from_path(key, state.digest, path)
        context.add_defs_state_info(key, state.digest, time.time())
    return state
