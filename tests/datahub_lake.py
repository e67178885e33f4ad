"""A small lake that DataHub's own sources read as well as Lumos: Parquet with nested columns
(struct, list of structs, map), CSV, JSON lines, Avro with named records, and a Delta table with a
history of commits (create, appends, a schema change, delete, update, merge). `files/` is what DataHub's
`s3` source reads (`{dept}/{table}`), `delta/` what its `delta-lake` source reads."""

import datetime
import decimal
import json
import os
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

DAYS = ("2026-11-01", "2026-11-02")
AVRO_SCHEMA = {
    "type": "record", "name": "DiscountRow", "namespace": "com.example.ref",
    "fields": [
        {"name": "code", "type": "string"},
        {"name": "discount", "type": {"type": "record", "name": "Discount", "fields": [
            {"name": "pct", "type": "double"},
            {"name": "window", "type": {"type": "record", "name": "Window", "fields": [
                {"name": "start", "type": {"type": "long", "logicalType": "timestamp-millis"}},
                {"name": "end", "type": ["null", "long"], "default": None}]}}]}},
        {"name": "regions", "type": {"type": "array", "items": "string"}},
        {"name": "limits", "type": {"type": "map", "values": "int"}},
        {"name": "history", "type": {"type": "array", "items": {"type": "record", "name": "Change", "fields": [
            {"name": "at", "type": "long"}, {"name": "by", "type": ["null", "string"], "default": None}]}}},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "note", "type": ["null", "string"], "default": None, "doc": "free text"},
    ],
}  # fmt: skip
ORDERS = pa.schema([
    ("order_id", pa.int64()),
    ("customer", pa.struct([("id", pa.int32()), ("name", pa.string()),
                            ("address", pa.struct([("city", pa.string()), ("zip", pa.string())]))])),
    ("items", pa.list_(pa.struct([("sku", pa.string()), ("qty", pa.int32()), ("price", pa.float64())]))),
    ("attrs", pa.map_(pa.string(), pa.string())),
    ("tags", pa.list_(pa.string())),
    ("amount", pa.decimal128(10, 2)),
    ("ts", pa.timestamp("us", tz="UTC")),
    ("day", pa.date32()),
    ("flag", pa.bool_()),
])  # fmt: skip


def _folder(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def build(root: Path) -> Path:
    """The lake under `root`; returns it."""
    files = root / "files"
    for day in DAYS:
        order = {"order_id": 1, "customer": {"id": 7, "name": "a", "address": {"city": "x", "zip": "1"}},
                 "items": [{"sku": "s", "qty": 1, "price": 2.5}], "attrs": [("k", "v")], "tags": ["t"],
                 "amount": decimal.Decimal("1.50"), "day": datetime.date(2026, 11, 1), "flag": True,
                 "ts": datetime.datetime(2026, 11, 1, tzinfo=datetime.timezone.utc)}  # fmt: skip
        orders = _folder(files / "sales/orders" / f"dt={day}")
        pq.write_table(pa.Table.from_pylist([order], ORDERS), orders / "part-0.parquet")
        with open(_folder(files / "web/events" / f"dt={day}") / "events-0.json", "w") as f:
            for i in range(3):
                event = {"event_id": i, "user": {"id": "u1", "geo": {"country": "FR", "lat": 1.5}},
                         "props": [{"k": "a", "v": 1}], "names": ["x", "y"], "ok": True, "note": None}  # fmt: skip
                f.write(json.dumps(event) + "\n")
    returns = _folder(files / "sales/returns")
    (returns / "returns-1.csv").write_text("return_id,order_id,reason,amount,returned_at\n1,1,broken,1.5,2026-11-01\n")
    (returns / "returns-2.csv").write_text("return_id,order_id,reason,amount,returned_at\n3,2,other,3.5,2026-11-03\n")
    with open(_folder(files / "ref/discounts") / "discounts-0.avro", "wb") as f:
        fastavro.writer(f, fastavro.parse_schema(AVRO_SCHEMA), [
            {"code": "X", "discount": {"pct": 0.1, "window": {"start": 1, "end": None}}, "regions": ["eu"],
             "limits": {"a": 1}, "history": [{"at": 1, "by": "me"}], "kind": "A", "note": None}])  # fmt: skip
    countries = _folder(files / "ref/countries")
    pq.write_table(pa.table({"code": ["FR"], "name": ["France"]}), countries / "countries.parquet")
    delta_table(root / "delta" / "orders_delta")
    return root


def delta_table(path: Path) -> None:
    """Six commits: create, append, append with a new column, delete, update, merge."""
    from deltalake import DeltaTable, write_deltalake

    s1 = pa.schema([("order_id", pa.int64()), ("customer", pa.struct([("id", pa.int32()), ("name", pa.string())])),
                    ("items", pa.list_(pa.struct([("sku", pa.string()), ("qty", pa.int32())]))),
                    ("attrs", pa.map_(pa.string(), pa.int64())), ("amount", pa.decimal128(10, 2)),
                    ("dt", pa.string())])  # fmt: skip
    row = {"order_id": 1, "customer": {"id": 1, "name": "a"}, "items": [{"sku": "x", "qty": 1}], "attrs": [("k", 1)],
           "amount": decimal.Decimal("1.00"), "dt": "2026-11-01"}  # fmt: skip
    os.makedirs(path, exist_ok=True)
    write_deltalake(str(path), pa.Table.from_pylist([row], schema=s1), partition_by=["dt"], name="orders_delta")
    write_deltalake(str(path), pa.Table.from_pylist([dict(row, order_id=2, dt="2026-11-02")], schema=s1), mode="append")
    s2 = s1.append(pa.field("channel", pa.string()))
    third = dict(row, order_id=3, dt="2026-11-03", channel="web")
    write_deltalake(str(path), pa.Table.from_pylist([third], schema=s2), mode="append", schema_mode="merge")
    DeltaTable(str(path)).delete("order_id = 1")
    DeltaTable(str(path)).update(updates={"channel": "'app'"}, predicate="order_id = 2")
    (DeltaTable(str(path)).merge(source=pa.Table.from_pylist([dict(third, order_id=4)], schema=s2),
                                 predicate="t.order_id = s.order_id", source_alias="s", target_alias="t")
     .when_not_matched_insert_all().execute())  # fmt: skip
