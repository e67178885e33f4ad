"""Reading OpenMetadata back: the tables of Lumos' database (soft-deleted ones too), page by page
(`GET /tables?database=…&fields=…&include=all`, then `paging.after`), and each live table's
upstream edges (`GET /lineage/table/name/{fqn}?upstreamDepth=1`).

The `lumosRecord` custom property gives back what only Lumos knows; what people may have edited
in OpenMetadata wins: description, owners, tags, glossary terms, lineage, the `lumosVersion`
property, and the columns (a table whose columns no longer match the record's schema comes back
with the columns OpenMetadata has, their types as it spells them). A table Lumos did not write
comes back with only what any table has.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Iterator, Protocol, overload

from lumos_dagster.floor.datatypes import Field, Primitive, Schema, schema_to_json
from lumos_dagster.floor.model import Snapshot, dataset_urn
from lumos_dagster.floor.snapshot_json import SNAPSHOT_FORMAT, snapshot_from_json

#: the classification and glossary Lumos' tags and terms live in, and the custom properties it sets
CLASSIFICATION = GLOSSARY = "Lumos"
VERSION_PROPERTY, RECORD_PROPERTY = "lumosVersion", "lumosRecord"


class OpenMetadataCatalog(Protocol):
    """What reading needs of `catalog.openmetadata.OpenMetadataCatalog`: where Lumos writes, and a call."""

    service: str
    database: str

    @overload
    def _call(self, method: str, path: str, body: dict | None = None) -> dict: ...
    @overload
    def _call(self, method: str, path: str, body: dict | None = None, *, missing_ok: bool) -> dict | None: ...


PAGE = 100
FIELDS = "columns,tags,owners,extension"


def _tables(catalog: OpenMetadataCatalog) -> Iterator[dict]:
    after = None
    while True:
        query = f"database={catalog.service}.{catalog.database}&fields={FIELDS}&include=all&limit={PAGE}"
        page = catalog._call("GET", f"tables?{query}" + (f"&after={after}" if after else ""))
        yield from page["data"]
        after = page.get("paging", {}).get("after")
        if not after:
            return


def _upstream_ids(catalog: OpenMetadataCatalog, table: dict) -> tuple[list[str], dict[str, dict]]:
    """The ids of the table's upstream tables, and every node the lineage answer names."""
    fqn = table["fullyQualifiedName"]
    found = catalog._call("GET", f"lineage/table/name/{fqn}?upstreamDepth=1&downstreamDepth=0", missing_ok=True)
    if found is None:
        return [], {}
    edges = [e["fromEntity"] for e in found.get("upstreamEdges") or () if e["toEntity"] == table["id"]]
    return edges, {n["id"]: n for n in found.get("nodes") or ()}


def _labels(table: dict, source: str, prefix: str) -> list[str]:
    """Tag or term names: Lumos' own without their prefix, anyone else's by their full name."""
    fqns = [t["tagFQN"] for t in table.get("tags") or () if t.get("source", "Classification") == source]
    return [f.removeprefix(f"{prefix}.") if f.startswith(f"{prefix}.") else f for f in fqns]


def _schema(table: dict, recorded: list | None) -> list:
    columns = table.get("columns") or []
    if recorded is not None and [f["name"] for f in recorded] == [c["name"] for c in columns]:
        return recorded
    fields = (
        Field(c["name"], Primitive("unknown"), c.get("constraint") != "NOT_NULL", description=c.get("description"),
              native_type=c.get("dataTypeDisplay") or c.get("dataType"))
        for c in columns
    )  # fmt: skip
    return schema_to_json(Schema(tuple(fields)))


def _bare(table: dict) -> dict:
    name = table.get("displayName") or table["name"]
    return {
        "format_version": SNAPSHOT_FORMAT,
        "dataset": {"urn": dataset_urn("file", name), "platform": "file", "name": name,
                    "location": table.get("sourceUrl") or "", "format": None},
        "partition_key": None,
        "version": None,
        "stats": {"file_count": 0, "total_bytes": 0, "row_count": None, "partition_values": {}, "last_modified": None},
        "errors": [], "conflicts": [], "changes": [], "upstream": [], "owners": [],
        "previous_version": None, "change_class": None, "policy": None,
    }  # fmt: skip


def read_tables(catalog: OpenMetadataCatalog) -> Iterator[Snapshot]:
    now = datetime.now(timezone.utc).isoformat()
    tables = list(_tables(catalog))
    names = {t["id"]: t.get("displayName") or t["name"] for t in tables}
    for table in tables:
        extension = table.get("extension") or {}
        doc = json.loads(extension[RECORD_PROPERTY]) if RECORD_PROPERTY in extension else _bare(table)
        recorded = doc.get("schema")
        doc["captured_at"] = now
        doc["schema"] = _schema(table, recorded)
        doc["description"] = table.get("description")
        doc["version"] = extension.get(VERSION_PROPERTY)
        types = {(o["id"], o["kind"]): o["type"] for o in doc.get("owners", [])}  # OpenMetadata has no owner types
        doc["owners"] = []
        for o in table.get("owners") or ():
            kind = "group" if o["type"] == "team" else "user"
            doc["owners"].append({"id": o["name"], "kind": kind, "type": types.get((o["name"], kind), "DATAOWNER")})
        doc["tags"] = _labels(table, "Classification", CLASSIFICATION)
        doc["terms"] = _labels(table, "Glossary", GLOSSARY)
        doc["removed"] = bool(table.get("deleted"))
        if not doc["removed"]:  # a soft-deleted table keeps the edges it was written with
            known = {e["upstream"]["name"]: e for e in doc.get("upstream", [])}
            ids, nodes = _upstream_ids(catalog, table)
            upstream = {names.get(i) or nodes.get(i, {}).get("fullyQualifiedName", i) for i in ids}
            doc["upstream"] = [
                known.get(u) or {"upstream": {"urn": dataset_urn("file", u), "platform": "file", "name": u,
                                              "location": "", "format": None}}
                for u in [n for n in known if n in upstream] + sorted(upstream - set(known))  # as written, then new
            ]  # fmt: skip
        yield snapshot_from_json(doc)
