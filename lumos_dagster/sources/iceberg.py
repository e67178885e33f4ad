"""Iceberg tables through a catalog (SQL on PostgreSQL or SQLite, REST, Hive), with pyiceberg.

Each table is one dataset, named `namespace.table` as DataHub's own Iceberg source names it, on
DataHub's `iceberg` platform. Its history is the table's snapshots and schema changes
(`lumos_dagster.table_formats.iceberg_history`): only metadata and manifests are read, never a data file.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Sequence, overload

from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NoSuchTableError

from lumos_dagster.floor.errors import ConfigError
from lumos_dagster.floor.masking import mask_secrets, shown_url
from lumos_dagster.floor.model import Commit, DatasetRecord
from lumos_dagster.floor.plugins import expand_secrets
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.sources.base import Progress, TableDescription, TableSource
from lumos_dagster.table_formats.base import TableState
from lumos_dagster.table_formats.iceberg_history import FORMAT, IcebergHistory


def describe_state(state: TableState) -> TableDescription:
    return TableDescription(schema=state.schema, stats=state.stats, description=state.description, table=state.table,
                            unread=state.unread)  # fmt: skip


class _Described(Sequence[TableDescription]):
    """A table's states, each with its partition values (read from its snapshot's manifests) only when a
    run asks for it: a run of the last day reads one snapshot's manifests, not every snapshot's."""

    def __init__(self, history: IcebergHistory):
        self.history = history
        self._described: dict[int, TableDescription] = {}  # a backfill's windows share states

    def __len__(self) -> int:
        return len(self.history.states)

    def commits(self) -> list[Commit]:
        """The table's snapshots, as commits (`tables.Table.commits`)."""
        return self.history.commits()

    @overload
    def __getitem__(self, i: int) -> TableDescription: ...
    @overload
    def __getitem__(self, i: slice) -> list[TableDescription]: ...
    def __getitem__(self, i: int | slice) -> TableDescription | list[TableDescription]:
        found = range(len(self))[i]  # as a list indexes: from the end when negative, IndexError past it
        if isinstance(found, range):
            return [self[j] for j in found]
        if found not in self._described:
            self._described[found] = describe_state(self.history.with_partitions(self.history.states[found]))
        return self._described[found]


class IcebergSource(TableSource):
    def __init__(self, config, where: str = "uri"):
        """`where` names the URI in errors, e.g. `lumos.yaml: sources[0].uri`."""
        super().__init__(config)
        self.where = where
        self.root = shown_url(config.uri)
        self._catalog: Catalog | None = None

    def catalog(self) -> Catalog:
        if self._catalog is None:  # the URI's ${VAR}s are read here, by the run that connects
            properties = {**self.config.properties, "uri": expand_secrets(self.config.uri, self.where)}
            if self.config.warehouse:
                properties["warehouse"] = self.config.warehouse
            self._catalog = load_catalog(self.config.catalog_name, **properties)
        return self._catalog

    def _wanted(self, namespace: str, table: str) -> bool:
        return any(fnmatchcase(namespace, p) for p in self.config.namespaces) and not any(
            fnmatchcase(f"{namespace}.{table}", p) for p in self.config.exclude
        )

    def _namespaces(self, catalog: Catalog, parent: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        out = []
        for ns in catalog.list_namespaces(parent):
            out.append(ns)
            if len(ns) > len(parent):  # catalogs with nested namespaces list the children of `parent`
                out.extend(n for n in self._namespaces(catalog, ns) if n != ns)
        return out

    def discover(self, report: ScanReport, progress: Progress | None = None) -> list[DatasetRecord] | None:
        records = []
        try:
            catalog = self.catalog()
            for ns in self._namespaces(catalog):
                for identifier in catalog.list_tables(ns):
                    namespace, table = ".".join(identifier[:-1]), identifier[-1]
                    name = f"{namespace}.{table}"
                    if not self._wanted(namespace, table):
                        report.skip(name, "excluded by the source's namespaces/exclude")
                        continue
                    loaded = catalog.load_table(identifier)
                    now = IcebergHistory(loaded.metadata, loaded.io).states[-1]
                    records.append(
                        DatasetRecord(
                            name=name,
                            platform=self.platform,
                            source=self.name,
                            location=name,
                            format=FORMAT,
                            domain=namespace,
                            partition_keys=now.table.partition_spec,
                            file_count=now.stats.file_count,
                            total_bytes=now.stats.total_bytes,
                        )
                    )
        except ConfigError as exc:
            report.fail(f"source {self.name}", str(exc))
            return None
        except Exception as exc:  # the catalog's driver raises its own errors (SQLAlchemy, HTTP…)
            report.fail(f"source {self.name}", mask_secrets(f"cannot list the catalog {self.root}: {exc}"))
            return None
        report.datasets_found += len(records)
        return records

    def history(self, location: str) -> Sequence[TableDescription]:
        try:
            table = self.catalog().load_table(location)
        except NoSuchTableError:
            return []
        return _Described(IcebergHistory(table.metadata, table.io))

    def describe(self, location: str) -> TableDescription | None:
        states = self.history(location)
        return states[-1] if states else None
