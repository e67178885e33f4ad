"""The snapshot store: dataset registry, snapshot history and the catalog outbox.

SQLAlchemy Core over SQLite (default, WAL mode) or PostgreSQL, so the same code serves
a laptop and a deployment. Snapshots are kept as their portable JSON document, with the
columns needed to find them (dataset, partition, capture order) alongside; the document's body
(all but the capture's own fields) once however many captures share it (`documents.py`): a
capture of unchanged content costs its row, about 200-300 bytes.

A store holds one database connection from its first use to `close()` (use it as a context
manager: `with SnapshotStore(url) as store:`), and writes many rows with one statement per
table: recording and delivering a dataset costs a fraction of a millisecond, whatever the
number of datasets.
"""

from __future__ import annotations

from lumos_dagster.store.connection import StoreConnection
from lumos_dagster.store.file_state import FileState
from lumos_dagster.store.history import History
from lumos_dagster.store.imports import Imports
from lumos_dagster.store.outbox import Delivery, Outbox, claim_owner
from lumos_dagster.store.recording import Recording, Versioning
from lumos_dagster.store.registry import Registry
from lumos_dagster.store.releases import Release, Releases

__all__ = ["Delivery", "Release", "SnapshotStore", "Versioning", "claim_owner"]


class SnapshotStore(Registry, Recording, History, Outbox, FileState, Releases, Imports, StoreConnection):
    """The snapshot store, one mixin per job, each in its own module. A use case asks for the roles it
    uses (`roles.py`: `HistoryStore`, `OutboxStore`, `RegistryStore`, `ReleaseStore`, at most 13
    methods each), which this class plays:

    - `connection.py` (`StoreConnection`): the engine, the one connection and its transactions
      (`_tx`), the schema version check on open, `close` and the context manager;
    - `registry.py` (`Registry`): the dataset registry and code docs (`upsert_datasets`,
      `mark_removed`, `datasets`, `save_code`, `code`);
    - `history.py` (`History`): snapshot history, read (`previous`, `version_history`,
      `version_histories`, `latest`, `history`, `at_version`);
    - `recording.py` (`Recording`, `Versioning`): snapshot history, written (`put`, `versioning`),
      each capture queued in the outbox in the same transaction;
    - `outbox.py` (`Outbox`, `Delivery`, `claim_owner`): the catalog outbox (`claim`, `renew`,
      `release`, `mark`, `mark_many`, `record_deliveries`, `catalog_state`, `outbox_counts`,
      `prune_outbox`, …);
    - `file_state.py` (`FileState`): per-source file state (`file_state`, `save_file_state`);
    - `releases.py` (`Releases`, `Release`): releases and acceptances (`add_release`,
      `record_release_versions`, `releases`, `acceptances`);
    - `imports.py` (`Imports`): importing an estate (`import_estate`);
    - `rows.py`: helpers several jobs share (a capture's row, its body stored once); `tables.py`:
      the tables, and the select of a capture's document (`stored_document`); `documents.py`: a
      document split into body and capture fields, and put together again; `acceptances.py`: the
      acceptances table.
    """
