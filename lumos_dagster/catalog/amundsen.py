"""Amundsen, through the files its databuilder loads: the node and relationship CSVs that
databuilder's `FsNeo4jCSVLoader` writes and its `Neo4jCsvPublisher` loads into Neo4j.

Amundsen has been dormant since 2024, so this stays small. `amundsen-databuilder` itself is not
a dependency: its last release (7.5.1) pins numpy<2 and pandas<=2.2.2, which Lumos' constraints
are past. The records are those of its models, written as its loader writes them:
* `TableMetadata`: Table (key `{db}://{cluster}.{schema}/{table}`), its Description, Columns
  (name, col_type, sort_order) with theirs, Tags (`TAGGED_BY`), and the Database, Cluster and
  Schema it sits in;
* `TableOwner`: User nodes (by email) and `OWNER` relationships;
* `TableLineage`: `HAS_DOWNSTREAM` relationships between tables.
Each relationship also has its reverse type (`REVERSE_TYPE`), as the publisher needs. Values
that are numbers or booleans go in `name:UNQUOTED` columns; every other value is quoted
(`csv.QUOTE_NONNUMERIC`).

The database is the platform (`file`), the schema a dataset's first folder, the table the rest
(as OpenMetadata's place). Table attributes (TableMetadata's extra keyword attributes) hold
what Amundsen's model lacks: the Lumos name, location, format, version and `lumos_record`
(the rest of the snapshot, glossary terms and owner kinds included). Amundsen lowercases tags
and owner emails; the record gives back their spelling. A removed dataset is left out of the
files, as Amundsen's staleness removal would drop it.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import tempfile
from collections import defaultdict
from datetime import datetime, timezone
from typing import Any, Iterator, Sequence

from lumos_dagster.catalog.base import CURRENT_STATE_ONLY, content_hash
from lumos_dagster.catalog.openmetadata import table_place
from lumos_dagster.floor.datatypes import field_to_json, type_str
from lumos_dagster.floor.model import Snapshot
from lumos_dagster.floor.snapshot_json import snapshot_from_json, snapshot_to_json

UNQUOTED = ":UNQUOTED"  # databuilder.publisher.neo4j_csv_publisher.UNQUOTED_SUFFIX
_NATIVE = ("schema", "description", "owners", "tags", "upstream", "removed", "captured_at", "fingerprint")

Node = dict[str, Any]  # LABEL, KEY, attributes
Relation = dict[str, Any]  # START_KEY, START_LABEL, END_KEY, END_LABEL, TYPE, REVERSE_TYPE


def _node(key: str, label: str, **attributes) -> Node:
    return {"LABEL": label, "KEY": key, **attributes}  # the loader's column order


def _rel(start: tuple[str, str], end: tuple[str, str], type_: str, reverse: str) -> Relation:
    return {"START_KEY": start[1], "START_LABEL": start[0], "END_KEY": end[1], "END_LABEL": end[0],
            "TYPE": type_, "REVERSE_TYPE": reverse}  # fmt: skip


class AmundsenCatalog:
    cannot_hold = CURRENT_STATE_ONLY

    def __init__(self, path: str, cluster: str = "lumos"):
        self.path = os.path.abspath(path)
        self.name = f"amundsen:{self.path}"
        self.cluster = cluster

    def table_key(self, platform: str, name: str) -> str:
        schema, table = table_place(name)
        return f"{platform}://{self.cluster}.{schema}/{table}"

    def records(self, s: Snapshot) -> tuple[list[Node], list[Relation]]:
        """The nodes and relationships databuilder's TableMetadata, TableOwner and TableLineage give."""
        schema, table = table_place(s.dataset.name)
        db, key = s.dataset.platform, self.table_key(s.dataset.platform, s.dataset.name)
        record = {k: v for k, v in snapshot_to_json(s).items() if k not in _NATIVE}
        record["owners"] = [{"id": o.id, "kind": o.kind, "type": o.type} for o in s.owners]
        record["tags"], record["fields"] = list(s.tags), [field_to_json(f) for f in s.schema.fields]
        record["upstream"] = snapshot_to_json(s)["upstream"]
        t = ("Table", key)
        nodes = [_node(key, "Table", name=table, is_view=False, lumos_name=s.dataset.name,
                       location=s.dataset.location, format=s.dataset.format or "", version=s.version or "",
                       lumos_record=json.dumps(record, sort_keys=True))]  # fmt: skip
        rels = []
        if s.description:
            nodes.append(_node(f"{key}/_description", "Description", description_source="description",
                               description=s.description))  # fmt: skip
            rels.append(_rel(t, ("Description", f"{key}/_description"), "DESCRIPTION", "DESCRIPTION_OF"))
        for tag in s.tags:
            nodes.append(_node(tag.lower(), "Tag", tag_type="default"))
            rels.append(_rel(t, ("Tag", tag.lower()), "TAGGED_BY", "TAG"))
        for i, f in enumerate(s.schema.fields):
            col = f"{key}/{f.name}"
            nodes.append(_node(col, "Column", name=f.name, col_type=type_str(f.type), sort_order=i))
            rels.append(_rel(t, ("Column", col), "COLUMN", "COLUMN_OF"))
            if f.description:
                nodes.append(_node(f"{col}/_description", "Description", description_source="description",
                                   description=f.description))  # fmt: skip
                rels.append(_rel(("Column", col), ("Description", f"{col}/_description"), "DESCRIPTION",
                                 "DESCRIPTION_OF"))  # fmt: skip
        nodes += [_node(f"database://{db}", "Database", name=db),
                  _node(f"{db}://{self.cluster}", "Cluster", name=self.cluster),
                  _node(f"{db}://{self.cluster}.{schema}", "Schema", name=schema)]  # fmt: skip
        rels += [
            _rel(("Database", f"database://{db}"), ("Cluster", f"{db}://{self.cluster}"), "CLUSTER", "CLUSTER_OF"),
            _rel(("Cluster", f"{db}://{self.cluster}"), ("Schema", f"{db}://{self.cluster}.{schema}"), "SCHEMA",
                 "SCHEMA_OF"),
            _rel(("Schema", f"{db}://{self.cluster}.{schema}"), t, "TABLE", "TABLE_OF"),
        ]  # fmt: skip
        for o in s.owners:
            nodes.append(_node(o.id.lower(), "User", email=o.id.lower()))
            rels.append(_rel(t, ("User", o.id.lower()), "OWNER", "OWNER_OF"))
        for e in s.upstream:
            up = ("Table", self.table_key(e.upstream.platform, e.upstream.name))
            rels.append(_rel(up, t, "HAS_DOWNSTREAM", "HAS_UPSTREAM"))
        return nodes, rels

    def fingerprint(self, snapshot: Snapshot) -> str:
        return content_hash({"records": self.records(snapshot), "removed": snapshot.removed})

    # ------------------------------------------------------------------ files

    def _read(self) -> tuple[list[Node], list[Relation]]:
        out: tuple[list, list] = ([], [])
        for folder, rows in zip(("nodes", "relationships"), out, strict=True):
            where = os.path.join(self.path, folder)
            for name in sorted(os.listdir(where)) if os.path.isdir(where) else []:
                with open(os.path.join(where, name), newline="", encoding="utf8") as f:
                    rows += [
                        {k.removesuffix(UNQUOTED): _unquoted(k, v) for k, v in r.items()} for r in csv.DictReader(f)
                    ]
        return out

    def _write(self, nodes: list[Node], rels: list[Relation]) -> None:
        """All the files anew, in a folder beside the old one, then swapped in."""
        parent = os.path.dirname(self.path)
        os.makedirs(parent, exist_ok=True)
        fresh = tempfile.mkdtemp(dir=parent, prefix=".amundsen-")
        labels = {"nodes": ("LABEL",), "relationships": ("START_LABEL", "END_LABEL", "TYPE")}
        for folder, rows in (("nodes", nodes), ("relationships", rels)):
            label = labels[folder]
            os.makedirs(os.path.join(fresh, folder))
            groups: dict[tuple, list] = defaultdict(list)
            for r in rows:  # one file per label and set of columns, as the loader makes them
                groups[(*(r[k] for k in label), tuple(r))].append(r)
            numbers: dict[tuple, int] = {}
            for key, group in sorted(groups.items(), key=lambda g: g[0]):
                number = numbers[key[:-1]] = numbers.get(key[:-1], -1) + 1  # a label's sets of columns
                name = "_".join(key[:-1]) + f"_{number}.csv"
                with open(os.path.join(fresh, folder, name), "w", newline="", encoding="utf8") as f:
                    header = [k + (UNQUOTED if isinstance(v, (bool, int)) else "") for k, v in group[0].items()]
                    writer = csv.writer(f, quoting=csv.QUOTE_NONNUMERIC)
                    writer.writerow(header)
                    writer.writerows(sorted([list(r.values()) for r in group], key=lambda row: [str(v) for v in row]))
        old = f"{fresh}.old"
        if os.path.exists(self.path):
            os.rename(self.path, old)
        os.rename(fresh, self.path)
        shutil.rmtree(old, ignore_errors=True)

    # ------------------------------------------------------------------- emit

    def emit(self, snapshots: Sequence[Snapshot]) -> int:
        """The snapshots' records replace their tables' (a removed one's go); the rest stay as they are."""
        nodes, rels = self._read()
        replaced = {self.table_key(s.dataset.platform, s.dataset.name) for s in snapshots}
        out_nodes = {(n["LABEL"], n["KEY"]): n for n in nodes
                     if not (n["LABEL"] in _OWN_NODES and _table_of(n["KEY"]) in replaced)}  # fmt: skip
        out_rels = {tuple(r.values()): r for r in rels if _table_of(_owned_end(r)) not in replaced}
        written = 0
        for s in snapshots:
            if s.removed:
                continue
            n, r = self.records(s)
            out_nodes.update({(x["LABEL"], x["KEY"]): x for x in n})  # shared nodes (a tag, a schema) once
            out_rels.update({tuple(x.values()): x for x in r})
            written += len(n) + len(r)
        linked = {k for r in out_rels.values() for k in (r["START_KEY"], r["END_KEY"])}
        kept = [n for (label, key), n in out_nodes.items() if label not in ("Tag", "User") or key in linked]
        self._write(kept, list(out_rels.values()))
        return written

    # ------------------------------------------------------------------- read

    def read_all(self) -> Iterator[Snapshot]:
        graph = _Graph(*self._read())
        captured_at = datetime.fromtimestamp(os.path.getmtime(self.path), timezone.utc).isoformat()
        for n in sorted(graph.tables.values(), key=lambda n: n["lumos_name"]):
            yield self._snapshot(n, graph, captured_at)

    def _snapshot(self, table: Node, graph: "_Graph", captured_at: str) -> Snapshot:
        """Amundsen's own records win for what people edit there (descriptions, tags, owners,
        lineage); the record gives back the rest and the spelling Amundsen lowercased."""
        key = table["KEY"]
        doc = json.loads(table["lumos_record"])
        fields, spelled_tags = doc.pop("fields"), {t.lower(): t for t in doc["tags"]}
        owners = {o["id"].lower(): o for o in doc["owners"]}
        known_edges = {e["upstream"]["name"]: e for e in doc["upstream"]}

        linked, tables = graph.linked, graph.tables

        def description(start: str) -> str | None:
            found = [graph.nodes[("Description", k)]["description"] for k in linked(start, "DESCRIPTION")]
            return found[0] if found else None

        columns = {graph.nodes[("Column", k)]["name"]: k for k in linked(key, "COLUMN")}
        upstream = {tables[k]["lumos_name"]: k for k in graph.upstream.get(key, ()) if k in tables}
        doc.update(
            dataset={"platform": key.split("://", 1)[0], "name": table["lumos_name"], "location": table["location"],
                     "format": table["format"] or None},
            captured_at=captured_at,
            description=description(key),
            tags=_in_order([spelled_tags.get(t, t) for t in linked(key, "TAGGED_BY")], doc["tags"]),
            owners=[owners.get(u, {"id": u, "kind": "user", "type": "DATAOWNER"})
                    for u in _in_order(linked(key, "OWNER"), list(owners))],
            schema=[{**f, "description": description(columns[f["name"]])} for f in fields if f["name"] in columns],
            upstream=[
                known_edges.get(name) or _bare_edge(tables[upstream[name]])
                for name in _in_order(list(upstream), list(known_edges))
            ],
            removed=False,
        )  # fmt: skip
        return snapshot_from_json(doc)

    def close(self) -> None:
        pass


_OWN_NODES = ("Table", "Column", "Description")  # a table's own; Tag, User, Schema… are shared


def _table_of(key: str) -> str:
    """The table key a table's, column's or description's key starts with (`db://cluster.schema/table`)."""
    return "/".join(key.split("/", 4)[:4])


def _owned_end(r: Relation) -> str:
    """The key of the table a relationship belongs to: lineage and placement belong to the downstream
    table, the rest to where they start."""
    return r["END_KEY"] if r["TYPE"] in ("HAS_DOWNSTREAM", "TABLE") else r["START_KEY"]


def _unquoted(header: str, value: str) -> Any:
    if not header.endswith(UNQUOTED):
        return value
    return value == "True" if value in ("True", "False") else int(value)


class _Graph:
    """The records read, indexed: a node by label and key, relationships by start and type."""

    def __init__(self, nodes: list[Node], rels: list[Relation]):
        self.nodes = {(n["LABEL"], n["KEY"]): n for n in nodes}
        self.tables = {n["KEY"]: n for n in nodes if n["LABEL"] == "Table"}
        self.out: dict[tuple[str, str], list[str]] = defaultdict(list)
        self.upstream: dict[str, list[str]] = defaultdict(list)
        for r in rels:
            self.out[(r["START_KEY"], r["TYPE"])].append(r["END_KEY"])
            if r["TYPE"] == "HAS_DOWNSTREAM":
                self.upstream[r["END_KEY"]].append(r["START_KEY"])

    def linked(self, start: str, type_: str) -> list[str]:
        return self.out.get((start, type_), [])


def _in_order(found: list[str], recorded: list[str]) -> list[str]:
    """What Amundsen has, in the order Lumos recorded (what it added since, after)."""
    rank = {x: i for i, x in enumerate(recorded)}
    return sorted(found, key=lambda x: rank.get(x, len(rank)))


def _bare_edge(table: Node) -> dict:
    platform = table["KEY"].split("://", 1)[0]
    ref = {"platform": platform, "name": table["lumos_name"], "location": table["location"]}
    return {"upstream": {**ref, "format": table["format"] or None}, "columns": [], "job": None}
