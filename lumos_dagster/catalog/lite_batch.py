"""Batched writes into DataHub Lite's SQLite file, by DataHub Lite's own rules.

DataHub Lite (acryl-datahub's `SqliteLite`) has no batch API. Its `write()` takes one MCP,
serializes the aspect twice, commits about twice per MCP (each browse edge commits as it
goes), and `close()` rebuilds the browse index from every entity in the file (17 s at
10,000 datasets). `BatchedSqliteLite` is the same class over the same file and tables, with
one more method, `write_batch(mcps)`:

* one transaction per batch, taken with the write lock up front (`BEGIN IMMEDIATE`): readers
  (`datahub lite ls/get/search`, other runs) see whole batches, and a process killed mid-batch
  leaves the file as it was after the last whole one (SQLite's rollback on the next open);
* each aspect serialized once, to exactly the text `write()` stores (aspect_json.py, a tenth of
  DataHub's time); the current rows of the batch read with one query per 500 entities; rows
  written with `executemany`;
* Lite's versioning rules, as `SqlBackedLite.write` applies them: an aspect whose content
  changed gets the next version (row vN, and v0 mirrors it), the same content again only
  refreshes `lastObserved`;
* the browse edges kept by DataHub's own hooks (`post_update_hook`, `global_post_update_hook`)
  for the entities the batch changed, inside the transaction, so `close()` needs no reindex.

It uses members DataHub does not document (`sqlite_client`, `_commit`, the two hooks,
`_close_connection`, `reindex`). `tests/test_lite_batch.py` writes the same MCPs through
stock `write()` + `close()` and through `write_batch`, and compares every aspect row, version
and browse edge: an acryl-datahub upgrade that changes those rules fails there.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import cast

from datahub.lite.sqlite_lite import SqliteLite
from datahub.lite.sqlite_lite_config import SqliteLiteConfig
from datahub.metadata.schema_classes import (
    DataPlatformInstanceClass,
    GenericAspectClass,
    MetadataChangeProposalClass,
    SystemMetadataClass,
    _Aspect,
)

from lumos_dagster.catalog.aspect_json import aspect_text
from lumos_dagster.catalog.patch_apply import IfAbsent, Proposal, patched_json

#: the aspects `global_post_update_hook` places an entity in the browse tree by
BROWSE_ASPECTS = frozenset({"container", "subTypes", "dataPlatformInstance"})
_CHUNK = 500  # SQLite's bound-parameter limit is 32,766 (999 before 3.32): stay well below it


@dataclass
class WriteCounts:
    new: int = 0  # aspects the file did not have
    changed: int = 0  # aspects whose content changed: a new version
    unchanged: int = 0  # the same content again: only lastObserved moves


@dataclass
class _Row:
    """The v0 row of one (urn, aspect) as the batch leaves it."""

    metadata: str
    system_metadata: str
    existed: bool  # in the file before the batch: updated, not inserted
    created_on: int
    dirty: bool = False


class BatchedSqliteLite(SqliteLite):
    def __init__(self, config: SqliteLiteConfig):
        self._in_batch = False
        super().__init__(config)

    # -------------------------------------------------------- transactions

    def _commit(self) -> None:
        # DataHub's add_edge()/reindex() commit as they go: inside a batch, the batch commits
        if not self._in_batch:
            super()._commit()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Everything inside is one SQLite transaction, holding the write lock from the start
        (a second writer waits for it, up to the connection's busy_timeout)."""
        if self._in_batch:
            raise RuntimeError("DataHub Lite batches do not nest")
        self.sqlite_client.execute("BEGIN IMMEDIATE")
        self._in_batch = True
        try:
            yield
        except BaseException:
            self._in_batch = False
            self.sqlite_client.rollback()
            raise
        self._in_batch = False
        self.sqlite_client.commit()

    # ------------------------------------------------------------ writing

    def write_batch(self, proposals: Sequence[Proposal]) -> WriteCounts:
        """Write the proposals in one transaction, with `write()`'s versioning and the browse edges
        `close()` would add. A PATCH is applied to the aspect as the batch has left it, as GMS applies
        it (`patch_apply`); an `IfAbsent` aspect is written only where the entity has none."""
        counts = WriteCounts()
        if not proposals:
            return counts
        now = int(time.time() * 1000)
        # what write() stores as systemMetadata when the MCP has none (same keys, same order)
        template = SystemMetadataClass(lastObserved=now, properties={}).to_obj()
        default_system: dict[int, str] = {}  # version → its systemMetadata text
        with self.transaction():
            rows = self._v0_rows(list(dict.fromkeys(_urn(p) for p in proposals)))
            existed = {urn for urn, _ in rows}
            versions: list[tuple] = []
            changed: dict[str, set[str]] = {}  # entity → its aspects this batch changed
            browse: dict[str, dict] = {}  # entity → its browse aspects in this batch
            platforms_done: set[tuple] = set()
            for proposal in proposals:
                resolved = _resolve(proposal, rows)
                if resolved is None:
                    continue
                key, aspect, text, given = resolved
                created_on = given.lastObserved if given is not None and given.lastObserved else now
                row = rows.get(key)
                if row is not None:
                    old = json.loads(row.system_metadata)
                    # byte-equal first (Lite's own rows are), then write()'s own test: equal as JSON
                    if row.metadata == text or json.loads(row.metadata) == json.loads(text):
                        counts.unchanged += 1
                        old = old or {}
                        old["lastObserved"] = created_on
                        row.system_metadata, row.dirty = json.dumps(old), True
                        continue
                    version = old.get("properties", {}).get("sysVersion")
                    if version is None:  # a row written by something else: its highest version
                        version = self.sqlite_client.execute(
                            "SELECT max(version) FROM metadata_aspect_v2 WHERE urn = ? AND aspect_name = ?", key
                        ).fetchone()[0]
                    version = int(version) + 1
                    counts.changed += 1
                else:
                    version = 1
                    counts.new += 1
                if given is None:  # Lumos' proposals: the same text for every row of a version
                    system_text = default_system.get(version)
                    if system_text is None:
                        system = {**template, "properties": {"sysVersion": str(version)}}
                        system_text = default_system[version] = json.dumps(system)
                else:
                    system = given.to_obj()
                    system["properties"] = system.get("properties") or {}
                    system["properties"]["sysVersion"] = str(version)
                    system_text = json.dumps(system)
                versions.append((key[0], key[1], version, text, system_text, created_on))
                if row is None:
                    rows[key] = _Row(text, system_text, existed=False, created_on=created_on, dirty=True)
                else:
                    row.metadata, row.system_metadata, row.dirty = text, system_text, True
                changed.setdefault(key[0], set()).add(key[1])
                if key[1] in BROWSE_ASPECTS:
                    browse.setdefault(key[0], {})[key[1]] = aspect
                if isinstance(aspect, DataPlatformInstanceClass):
                    platform = (aspect.platform, aspect.instance)
                    if platform in platforms_done:  # the same seven platform edges: once a batch
                        continue
                    platforms_done.add(platform)
                self.post_update_hook(key[0], key[1], aspect)  # name and platform edges
            self._write_rows(versions, rows)
            self._place_in_browse_tree(changed, browse, existed)
        return counts

    def _v0_rows(self, urns: list[str]) -> dict[tuple[str, str], _Row]:
        rows: dict[tuple[str, str], _Row] = {}
        for start in range(0, len(urns), _CHUNK):
            chunk = urns[start : start + _CHUNK]
            for urn, name, metadata, system, created_on in self.sqlite_client.execute(
                "SELECT urn, aspect_name, metadata, system_metadata, createdon FROM metadata_aspect_v2 "
                f"WHERE version = 0 AND urn IN ({','.join('?' * len(chunk))})",
                chunk,
            ):
                rows[urn, name] = _Row(metadata, system, existed=True, created_on=created_on)
        return rows

    def _write_rows(self, versions: list[tuple], rows: dict[tuple[str, str], _Row]) -> None:
        db = self.sqlite_client
        db.executemany("INSERT INTO metadata_aspect_v2 VALUES (?, ?, ?, ?, ?, ?)", versions)
        db.executemany(
            "INSERT INTO metadata_aspect_v2 VALUES (?, ?, 0, ?, ?, ?)",
            [(u, a, r.metadata, r.system_metadata, r.created_on) for (u, a), r in rows.items() if not r.existed],
        )
        db.executemany(
            "UPDATE metadata_aspect_v2 SET metadata = ?, system_metadata = ? "
            "WHERE urn = ? AND aspect_name = ? AND version = 0",
            [(r.metadata, r.system_metadata, u, a) for (u, a), r in rows.items() if r.existed and r.dirty],
        )

    def _place_in_browse_tree(self, changed: dict[str, set[str]], browse: dict[str, dict], existed: set[str]) -> None:
        """The edges `reindex()` gives the entities the batch changed: DataHub's own hook, with
        the browse aspects from the batch and, for entities already in the file, the file."""
        for urn, names in changed.items():
            aspects = dict(browse.get(urn, {}))
            if urn in existed:
                missing = [a for a in sorted(BROWSE_ASPECTS) if a not in aspects]
                if missing:
                    aspects.update(self._aspects(urn, missing))
                if names & BROWSE_ASPECTS:  # it may have moved: its old place goes, as in a reindex
                    self._unplace(urn)
            self.global_post_update_hook(urn, aspects)

    def _aspects(self, urn: str, names: list[str] | None) -> dict[str, _Aspect]:
        """The entity's aspects (`names`, None: all) as DataHub objects, by name."""
        stored = self.get(urn, names, typed=True) or {}
        stored.pop("urn", None)
        # typed=True: every value but the entity's `urn` is an aspect object
        return cast(dict[str, _Aspect], stored)

    def _unplace(self, urn: str) -> None:
        """Drop the entity from its browse-type nodes, and a node left with no child at all."""
        db = self.sqlite_client
        child = "FROM metadata_edge_v2 WHERE dst_id = ? AND relnship = 'child'"
        nodes = [r[0] for r in db.execute(f"SELECT src_id {child}", (urn,))]
        db.execute(f"DELETE {child}", (urn,))
        for node in nodes:
            children = db.execute("SELECT 1 FROM metadata_edge_v2 WHERE src_id = ? AND relnship = 'child'", (node,))
            if children.fetchone() is None:
                db.execute("DELETE FROM metadata_edge_v2 WHERE src_id = ? OR dst_id = ?", (node, node))

    # ------------------------------------------------- repair and closing

    def index_unplaced(self) -> int:
        """Put entities that are missing from the browse tree into it (a file whose stock writer
        died before its closing reindex); return how many. One scan of the file."""
        unplaced = [
            r[0]
            for r in self.sqlite_client.execute(
                "SELECT urn FROM metadata_aspect_v2 WHERE version = 0 "
                "EXCEPT SELECT dst_id FROM metadata_edge_v2 WHERE relnship = 'child'"
            )
        ]
        if not unplaced:
            return 0
        with self.transaction():
            for urn in unplaced:
                aspects = self._aspects(urn, None)
                for name, aspect in aspects.items():
                    self.post_update_hook(urn, name, aspect)
                self.global_post_update_hook(urn, aspects)
        return len(unplaced)

    def close(self) -> None:
        """No reindex: every batch left the browse edges complete."""
        self._close_connection()


def _urn(proposal: Proposal) -> str:
    if proposal.entityUrn is None or proposal.aspectName is None or proposal.aspect is None:
        raise ValueError(f"DataHub Lite keeps aspects of entities named by URN, not {proposal!r}")
    return proposal.entityUrn


def _resolve(
    proposal: Proposal, rows: dict[tuple[str, str], _Row]
) -> tuple[tuple[str, str], _Aspect, str, SystemMetadataClass | None] | None:
    """What the proposal writes: its (entity, aspect) row, the aspect and its text, its system metadata;
    None when there is nothing to write (an `IfAbsent` aspect the entity already has)."""
    key = (_urn(proposal), cast(str, proposal.aspectName))
    row = rows.get(key)
    if isinstance(proposal, MetadataChangeProposalClass):  # a PATCH, on what is there now
        value = cast(GenericAspectClass, proposal.aspect).value
        aspect, text = _patched(key[1], row.metadata if row else None, value)
        return key, aspect, text, proposal.systemMetadata
    if isinstance(proposal, IfAbsent) and row is not None:
        return None
    aspect = cast(_Aspect, proposal.aspect)
    return key, aspect, aspect_text(aspect), proposal.systemMetadata


@lru_cache(maxsize=4096)
def _patched(aspect_name: str, current: str | None, value: bytes) -> tuple[_Aspect, str]:
    """A patch (`value`) applied to an aspect's stored text: its new aspect and text. The same patch of the
    same text (the first tags, owners and terms Lumos gives many datasets) is applied once."""
    generic = GenericAspectClass(value=value, contentType="application/json")
    patch = MetadataChangeProposalClass(
        entityType="dataset", changeType="PATCH", aspectName=aspect_name, aspect=generic
    )
    aspect = patched_json(patch, json.loads(current) if current is not None else None)
    return aspect, aspect_text(aspect)


def open_batched(path: str, options: dict) -> BatchedSqliteLite:
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return BatchedSqliteLite(SqliteLiteConfig(file=path, options=options))
