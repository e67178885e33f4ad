"""Table formats: a folder that a table format describes is one dataset, never a folder of files.

Discovery asks every registered format which listed paths prove a table folder (`claim`); the
files under such a folder all belong to that one dataset, whose format is the table format's
`type` and whose platform is its `platform`. The pipeline then asks the format, not the data
files, for the table's schema and statistics (`lumos_dagster/run/table_listing.py`).

A second format plugs in with one registration: a `TableFormat` (see `tables/base.py`) added to
`TABLES` below, or named by a `lumos.tables` entry point.
"""

from __future__ import annotations

import functools
from typing import Sequence, TypeVar

from lumos_dagster.floor.plugins import PluginRegistry
from lumos_dagster.table_formats.base import ListedFile, Table, TableFormat, TableState, UnreadableVersion
from lumos_dagster.table_formats.delta import DELTA
from lumos_dagster.table_formats.iceberg import ICEBERG

__all__ = [
    "TABLES",
    "ListedFile",
    "Table",
    "TableFormat",
    "TableState",
    "UnreadableVersion",
    "claim",
    "hidden_folders",
    "table_format",
]

TABLES: PluginRegistry[TableFormat] = PluginRegistry("lumos.tables", TableFormat, (DELTA, ICEBERG))


def table_format(name: str | None) -> TableFormat | None:
    return TABLES.get(name) if name else None


@functools.cache
def hidden_folders() -> frozenset[str]:
    """Folder names a listing walks into although they start with `_` or `.` (`_delta_log`)."""
    return frozenset(name for fmt in TABLES for name in fmt.hidden)


E = TypeVar("E")


def claim(paths: Sequence[tuple[str, E]]) -> tuple[dict[str, tuple[TableFormat, list[E]]], list[E]]:
    """Split listed (path, entry) pairs into table folders and the rest.

    Returns table folder → (its format, every entry under it), and the entries of no table. A
    table inside another table's folder is part of the outer one. A table at the source root
    itself (folder "") is claimed too; the caller decides what to make of it.
    """
    roots: dict[str, TableFormat] = {}
    formats = tuple(TABLES)
    for path, _ in paths:
        for fmt in formats:
            root = fmt.root_of(path)
            if root is not None:
                roots.setdefault(root, fmt)
                break
    if not roots:
        return {}, [e for _, e in paths]
    tables: dict[str, tuple[TableFormat, list[E]]] = {}
    rest = []
    for path, entry in paths:
        # the outermost table folder holding the path: a nested table's files go to the one holding it
        root = next((f for f in _folders(path) if f in roots), None)
        if root is None:
            rest.append(entry)
        else:
            tables.setdefault(root, (roots[root], []))[1].append(entry)
    return tables, rest


def _folders(path: str) -> list[str]:
    """The folders holding `path`, outermost first: "", "a", "a/b" for `a/b/c`."""
    parts = path.split("/")[:-1]
    return [""] + ["/".join(parts[: i + 1]) for i in range(len(parts))]
