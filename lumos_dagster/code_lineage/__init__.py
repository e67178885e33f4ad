"""Lineage read from code: SQL files (`lineage.sql`) and dbt manifests (`lineage.dbt`).

Both readers give the same model: what a job writes, what it reads, column edges where they can be
derived, and the documentation found next to the code. Table names are normalized by
`normalize_table_name`: quotes stripped, lowercase, qualified as written in the code.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ColumnEdge:
    downstream: str  # column of the output table
    upstream_table: str  # normalized table name, as qualified in the code
    upstream: str  # column of that table


@dataclass(frozen=True)
class CodeLineage:
    job: str  # the SQL file's path relative to the folder read, or the dbt unique_id
    kind: str  # "sql" | "dbt"
    output: str  # normalized table name; "" when an unparseable statement's target is unknown
    inputs: tuple[str, ...]  # normalized table names, sorted
    columns: tuple[ColumnEdge, ...] = ()
    description: str | None = None
    owners: tuple[str, ...] = ()
    sla: str | None = None
    tags: tuple[str, ...] = ()
    column_descriptions: dict[str, str] = field(default_factory=dict)
    errors: tuple[str, ...] = ()  # each names the file or node it comes from


@dataclass(frozen=True)
class StoredSql:
    """SQL a database keeps for its views, read like a SQL folder: each view is a job."""

    flow: str  # the source's name
    dialect: str
    views: tuple[tuple[str, str, str], ...]  # (job, the view as the SQL names it, its SELECT)
    names: dict[str, str] = field(default_factory=dict)  # table as the SQL names it → dataset name


def split_values(values: Iterable[str]) -> tuple[str, ...]:
    """Owners or tags given comma-separated and/or repeated: each once, in order."""
    items = (item.strip() for value in values for item in value.split(","))
    return tuple(dict.fromkeys(item for item in items if item))


def normalize_table_name(name: str) -> str:
    """`"Sales".\\`Orders\\`` -> `sales.orders`: quotes dropped, lowercase, the qualification kept."""
    return ".".join(part.strip('`"[] ') for part in name.split(".")).lower()
