"""Every private Dagster name Lumos uses (`dagster._…`), in one list, with the Dagster version each
was checked against. Nothing outside resources/tuning/ imports from `dagster._`: where Lumos needs
one of these names elsewhere it imports it from here (tests/test_tuning.py checks both rules). An
upgrade of Dagster checks this list first: `make check-dagster-latest`.

The names needed outside the tuning, with why no public name does:

* the registry as Dagster defs state (assets/state.py): `DefinitionsLoadContext`,
  `DefinitionsLoadType` (whether this load builds the code location or reconstructs it in a run
  worker) and `DefsStateStorage` (the instance's store of state versions) — Dagster's state-backed
  components use them and export none;
* a snapshot's data version on the materialization the op yields (assets/snapshots.py):
  `DATA_VERSION_TAG`, `DATA_VERSION_IS_USER_PROVIDED_TAG` — what `MaterializeResult(data_version=)`
  writes, for an `AssetMaterialization`, which takes no data version;
* an owner Dagster accepts (assets/keys.py): `is_valid_owner` — an invalid one fails the whole
  code location's load.

Not imported, but read: the tuned event log tells a run of Lumos' code location by
`DagsterRun.job_code_origin.repository_origin.code_pointer.module` (event_log.py,
`_of_lumos_location`), attributes of Dagster's private origin classes, checked against the same
release.
"""

from __future__ import annotations

from dagster._core.definitions.data_version import DATA_VERSION_IS_USER_PROVIDED_TAG, DATA_VERSION_TAG
from dagster._core.definitions.definitions_load_context import DefinitionsLoadContext, DefinitionsLoadType
from dagster._core.definitions.utils import is_valid_owner
from dagster._core.storage.defs_state.base import DefsStateStorage

#: the Dagster release every name below was checked against (constraints.txt)
CHECKED_AGAINST = "dagster 1.13.27"

#: private module → the names Lumos takes from it, and where
PRIVATE: dict[str, tuple[tuple[str, ...], str]] = {
    "dagster._core.definitions.data_version": (
        ("DATA_VERSION_TAG", "DATA_VERSION_IS_USER_PROVIDED_TAG"),
        "assets/snapshots.py: a snapshot's data version on the materialization its op yields",
    ),
    "dagster._core.definitions.definitions_load_context": (
        ("DefinitionsLoadContext", "DefinitionsLoadType"),
        "assets/state.py: the registry as defs state",
    ),
    "dagster._core.definitions.utils": (("is_valid_owner",), "assets/keys.py: owners Dagster accepts"),
    "dagster._core.storage.defs_state.base": (("DefsStateStorage",), "assets/state.py: the registry as defs state"),
    # the tuning itself (the switch: resources/tuning/__init__.py)
    "dagster._core.events": (
        ("ASSET_CHECK_EVENTS", "ASSET_EVENTS", "DagsterEventType"),
        "event_log.py: which events are indexed",
    ),
    "dagster._core.events.log": (("EventLogEntry",), "event_log.py, event_log_postgres.py"),
    "dagster._core.storage.asset_check_execution_record": (
        ("AssetCheckExecutionRecordStatus",),
        "event_log.py: check rows",
    ),
    "dagster._core.storage.event_log.schema": (
        ("AssetCheckExecutionsTable", "AssetKeyTable", "SqlEventLogStorageTable"),
        "event_log.py, event_log_postgres.py: Dagster's tables, written in groups",
    ),
    "dagster._core.storage.event_log.sqlite.sqlite_event_log": (
        ("INDEX_SHARD_NAME", "SqliteEventLogStorage", "SqliteEventLogStorageWatchdog"),
        "event_log.py: the SQLite event log it extends",
    ),
    "dagster._core.storage.event_log.migration": (("ASSET_KEY_INDEX_COLS",), "event_log_postgres.py"),
    "dagster._core.storage.sql": (("create_engine",), "event_log.py: a shard's kept engine"),
    "dagster._core.storage.sqlite": (("SQLITE_BUSY_TIMEOUT_SECONDS",), "event_log.py"),
    "dagster._time": (("datetime_from_timestamp",), "event_log.py: the assets table's timestamp"),
    "dagster._core.launcher": (("CheckRunHealthResult", "WorkerStatus"), "launcher.py: the optional launcher"),
    "dagster._core.definitions.decorators.decorator_assets_definition_builder": (
        ("_validate_check_specs_target_relevant_asset_keys",),
        "speedups.py: patched",
    ),
    "dagster._core.definitions.input": (("resolve_dagster_type",), "speedups.py: patched where imported"),
    "dagster._core.definitions.output": (("resolve_dagster_type",), "speedups.py: patched where imported"),
    "dagster._core.types.dagster_type": (
        ("Any", "DagsterType", "resolve_dagster_type"),
        "speedups.py: patched",
    ),
}

__all__ = [
    "DATA_VERSION_IS_USER_PROVIDED_TAG",
    "DATA_VERSION_TAG",
    "DefinitionsLoadContext",
    "DefinitionsLoadType",
    "DefsStateStorage",
    "is_valid_owner",
]
