"""The tuned event log for deployments on PostgreSQL (the switch: resources/tuning/__init__.py;
docs/deploy.md).

Dagster's PostgreSQL event log (dagster-postgres: the same tables and queries, so the webserver
and the daemon read it as usual), writing as event_log.py does on SQLite: the events a
run emits by the thousand are held for at most half a second and written in groups, one statement
per table; this process reads them at once, other processes (which poll) half a second late at
most. Its connections come from a small pool instead of one connection per statement.

Dagster's own storage also sends a NOTIFY per event, which its code "no longer uses for event
watches" and keeps only for older webservers: grouped writes leave it out.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import sqlalchemy as sa
from dagster._core.events.log import EventLogEntry
from dagster._core.storage.event_log.migration import ASSET_KEY_INDEX_COLS
from dagster._core.storage.event_log.schema import SqlEventLogStorageTable
from dagster_postgres.event_log.event_log import PostgresEventLogStorage
from dagster_postgres.utils import create_pg_engine
from sqlalchemy.engine import Connection

from lumos_dagster.resources.tuning.event_log import INDEXED, GroupedEventWrites

#: the advisory lock Lumos' writers of one Dagster database take turns on ("LUMO" in ASCII)
WRITERS_LOCK = 0x4C554D4F
_INSERT = SqlEventLogStorageTable.insert().returning(SqlEventLogStorageTable.c.id, sort_by_parameter_order=True)


class LumosPostgresEventLogStorage(GroupedEventWrites, PostgresEventLogStorage):
    def __init__(self, postgres_url: str, should_autocreate_tables: bool = True, inst_data=None, token_provider=None):
        self._start_grouping()
        self._tables: set[str] = set()
        super().__init__(postgres_url, should_autocreate_tables, inst_data, token_provider)
        # Dagster opens a connection per statement (NullPool): a run writes thousands
        self._engine = create_pg_engine(
            self.postgres_url, self._token_provider, isolation_level="AUTOCOMMIT", pool_size=2, max_overflow=4
        )

    @classmethod
    def from_config_value(cls, inst_data, config_value) -> "LumosPostgresEventLogStorage":
        from dagster_postgres.utils import get_token_provider_from_config, pg_url_from_config

        return cls(
            pg_url_from_config(config_value),
            config_value.get("should_autocreate_tables", True),
            inst_data,
            get_token_provider_from_config(config_value),
        )

    @contextmanager
    def _connect(self) -> Iterator[Connection]:
        with self._lock:
            self._flush_held()  # whatever reads or writes next sees the held events
        with super()._connect() as conn:
            yield conn

    def has_table(self, table_name: str) -> bool:
        # tables are created, never dropped: a table found once is there for good
        if table_name not in self._tables and super().has_table(table_name):
            self._tables.add(table_name)
        return table_name in self._tables

    def _asset_index_cols(self, conn: Connection) -> bool:
        return self.has_secondary_index(ASSET_KEY_INDEX_COLS)

    def _write(self, events: list[EventLogEntry]) -> None:
        """The events' rows in one short statement, then what the index adds in one transaction. The
        rows' ids are given at insert and seen at commit: a reader that pages by id (an asset sensor)
        must not see a later id commit before an earlier one, so the statement is short and Lumos'
        writers take their turns (an advisory lock); Dagster's own commit at each insert."""
        rows = [self._event_to_row(e) for e in events]
        new = [(e, r) for e, r in zip(events, rows, strict=True) if id(e) not in self._in_shard]
        if new:
            with self._engine.connect() as autocommit:
                conn = autocommit.execution_options(isolation_level="READ COMMITTED")
                with conn.begin():
                    conn.execute(sa.select(sa.func.pg_advisory_xact_lock(WRITERS_LOCK)))
                    ids = conn.execute(_INSERT, [r for _, r in new]).scalars().all()
            self._in_shard.update({id(e): i for (e, _), i in zip(new, ids, strict=True)})
        indexed = [
            (e, r, self._in_shard[id(e)]) for e, r in zip(events, rows, strict=True) if e.dagster_event_type in INDEXED
        ]
        if indexed:
            with self._engine.connect() as autocommit:
                conn = autocommit.execution_options(isolation_level="READ COMMITTED")
                with conn.begin():
                    self._index(conn, indexed)

    def dispose(self) -> None:
        self.flush()
        super().dispose()
