"""MongoDB: collections, with schemas inferred from a sample of documents.

Types are collected per field path: a field missing from some documents (or null in
some) is nullable, nested documents are structs, arrays take the merged type of their
elements, and a field whose documents disagree becomes a union of what they hold (numbers
widen first: an int and a double are a double).
"""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal as PyDecimal
from fnmatch import fnmatchcase

from lumos_dagster.floor.datatypes import (
    Array,
    DataType,
    Field,
    Primitive,
    Schema,
    Struct,
    Timestamp,
    UnionType,
    type_str,
)
from lumos_dagster.floor.masking import mask_secrets
from lumos_dagster.floor.model import DatasetRecord, OperationalStats
from lumos_dagster.floor.plugins import expand_secrets
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.formats.merge import widen
from lumos_dagster.sources.base import Progress, TableDescription, TableSource

NULL = Primitive("null")


def value_type(value) -> DataType:
    if value is None:
        return NULL
    if isinstance(value, bool):  # before int: bool is an int in Python
        return Primitive("boolean")
    if isinstance(value, int):
        return Primitive("int64")
    if isinstance(value, float):
        return Primitive("float64")
    if isinstance(value, str):
        return Primitive("string")
    if isinstance(value, dt.datetime):
        return Timestamp("ms", "UTC")  # BSON dates: milliseconds since the epoch, UTC
    if isinstance(value, (bytes, bytearray)):
        return Primitive("binary")
    if isinstance(value, uuid.UUID):
        return Primitive("uuid")
    if isinstance(value, dict):
        return Struct(infer_fields([value]))
    if isinstance(value, (list, tuple)):
        element = merge_types([value_type(v) for v in value]) if value else NULL
        return Array(element, element == NULL or any(v is None for v in value))
    kind = type(value).__name__
    if kind == "ObjectId":
        return Primitive("string")
    if kind == "Decimal128" or isinstance(value, PyDecimal):
        return Primitive("unknown")  # decimal128 has no fixed precision/scale to report
    return Primitive("unknown")


def merge_types(types: list[DataType]) -> DataType:
    """One type for the values a field holds across documents (nulls left to nullability)."""
    distinct: list[DataType] = []
    for t in types:
        if t == NULL:
            continue
        for i, seen in enumerate(distinct):
            merged = _merge_two(seen, t)
            if merged is not None:
                distinct[i] = merged
                break
        else:
            distinct.append(t)
    if not distinct:
        return NULL
    # in a stable order: a union must not depend on which documents the sample drew first
    return distinct[0] if len(distinct) == 1 else UnionType(tuple(sorted(distinct, key=type_str)))


def _merge_two(a: DataType, b: DataType) -> DataType | None:
    if isinstance(a, Struct) and isinstance(b, Struct):
        return Struct(_merge_fields([a.fields, b.fields]))
    if isinstance(a, Array) and isinstance(b, Array):
        return Array(merge_types([a.element, b.element]), a.element_nullable or b.element_nullable)
    return widen(a, b)


def _merge_fields(per_document: list[tuple[Field, ...]]) -> tuple[Field, ...]:
    order: list[str] = []
    found: dict[str, list[Field]] = {}
    for fields in per_document:
        for f in fields:
            if f.name not in found:
                order.append(f.name)
                found[f.name] = []
            found[f.name].append(f)
    out = []
    for name in order:
        fs = found[name]
        t = merge_types([f.type for f in fs])
        nullable = len(fs) < len(per_document) or any(f.nullable for f in fs) or t == NULL
        out.append(
            Field(name, t, nullable, native_type=" | ".join(sorted({f.native_type for f in fs if f.native_type})))
        )
    return tuple(out)


def infer_fields(documents: list[dict]) -> tuple[Field, ...]:
    per_document = [
        tuple(
            Field(k, value_type(v), v is None, native_type=type(v).__name__ if v is not None else "null")
            for k, v in doc.items()
        )
        for doc in documents
    ]
    return _merge_fields(per_document)


class MongoSource(TableSource):
    def __init__(self, config, client=None, where: str = "uri"):
        """`where` names the URI in errors, e.g. `lumos.yaml: sources[0].uri`."""
        super().__init__(config)
        self._client = client
        self.where = where
        # shown in reports and the start of each collection's URI: the URI's hosts as written, never its
        # user, password, database or options (`tlsCertificateKeyFilePassword=…`, which may hold an `@`);
        # its ${VAR}s are expanded when connecting
        hosts = config.uri.split("://", 1)[-1].split("?", 1)[0].rpartition("@")[2].split("/", 1)[0]
        self.root = f"mongodb://{hosts}"

    @property
    def client(self):
        if self._client is None:
            import pymongo

            uri = expand_secrets(self.config.uri, self.where)
            self._client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=30000)
        return self._client

    def _wanted(self, database: str, collection: str) -> bool:
        return not any(fnmatchcase(f"{database}.{collection}", p) for p in self.config.exclude)

    def discover(self, report: ScanReport, progress: Progress | None = None) -> list[DatasetRecord] | None:
        records = []
        try:
            for database in self.config.databases:
                for collection in sorted(self.client[database].list_collection_names()):
                    if not self._wanted(database, collection):
                        report.skip(f"{database}.{collection}", "excluded by the source's exclude")
                        continue
                    records.append(
                        DatasetRecord(
                            f"{database}/{collection}",
                            self.platform,
                            self.name,
                            f"{database}.{collection}",
                            "collection",
                            database,
                        )  # fmt: skip
                    )
        except Exception as exc:  # any driver failure means the source cannot be reached
            report.fail(f"source {self.name}", mask_secrets(f"cannot list collections at {self.root}: {exc}"))
            return None
        report.datasets_found += len(records)
        return records

    def _sample(self, collection) -> list[dict]:
        n = self.config.sample_size
        try:
            return list(collection.aggregate([{"$sample": {"size": n}}]))
        except Exception:  # MongoDB-compatible servers without $sample: the first documents
            return list(collection.find().limit(n))

    def describe(self, location: str) -> TableDescription | None:
        database, _, name = location.partition(".")
        if name not in self.client[database].list_collection_names():
            return None
        collection = self.client[database][name]
        documents = self._sample(collection)
        try:
            size = self.client[database].command("collStats", name).get("size", 0)
        except Exception:  # not every MongoDB-compatible server has collStats
            size = 0
        return TableDescription(
            schema=Schema(infer_fields(documents)),
            stats=OperationalStats(total_bytes=int(size), row_count=collection.estimated_document_count()),
        )
