"""The sample lake `make demo` builds: a few domains, every supported format, nested
columns, date partitions up to today, one corrupt file and one schema disagreement."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
from decimal import Decimal

import fastavro
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.orc as orc
import pyarrow.parquet as pq

DAYS = 3


def _dates(today: dt.date) -> list[dt.date]:
    return [today - dt.timedelta(days=n) for n in range(DAYS - 1, -1, -1)]


def _events(rng: random.Random, day: dt.date, n: int) -> pa.Table:
    base = dt.datetime.combine(day, dt.time(), dt.timezone.utc)
    return pa.table(
        {
            "event_id": pa.array([f"e-{day:%Y%m%d}-{i}" for i in range(n)]),
            "user_id": pa.array([rng.randint(1, 500) for _ in range(n)], pa.int64()),
            "event_time": pa.array(
                [base + dt.timedelta(seconds=rng.randint(0, 86399)) for _ in range(n)], pa.timestamp("us", tz="UTC")
            ),
            "device": pa.array(
                [{"os": rng.choice(["ios", "android", "web"]), "version": f"{rng.randint(1, 9)}.0"} for _ in range(n)],
                pa.struct([("os", pa.string()), ("version", pa.string())]),
            ),
            "tags": pa.array(
                [rng.sample(["promo", "new", "returning", "mobile"], 2) for _ in range(n)], pa.list_(pa.string())
            ),
            "properties": pa.array(
                [[("page", f"/p/{rng.randint(1, 40)}")] for _ in range(n)], pa.map_(pa.string(), pa.string())
            ),
        }
    )


ORDER_SCHEMA = {
    "type": "record",
    "name": "Order",
    "namespace": "com.example.sales",
    "doc": "An order as the checkout service writes it.",
    "fields": [
        {"name": "order_id", "type": "long", "doc": "Unique order number"},
        {"name": "customer_id", "type": "long"},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
        {"name": "coupon", "type": ["null", "string"], "default": None},
        {"name": "placed_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}


def _orders(rng: random.Random, day: dt.date, n: int) -> list[dict]:
    base = dt.datetime.combine(day, dt.time(), dt.timezone.utc)
    return [
        {
            "order_id": int(f"{day:%Y%m%d}{i:04d}"),
            "customer_id": rng.randint(1, 200),
            "amount": Decimal(rng.randint(100, 99999)) / 100,
            "status": rng.choice(["NEW", "PAID", "SHIPPED"]),
            "coupon": rng.choice([None, "WELCOME10"]),
            "placed_at": base + dt.timedelta(minutes=rng.randint(0, 1439)),
        }
        for i in range(n)
    ]


def _write_avro(path: str, rows: list[dict]) -> None:
    with open(path, "wb") as fh:
        fastavro.writer(fh, fastavro.parse_schema(ORDER_SCHEMA), rows, codec="deflate")


def _write_bytes(path: str, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)


def _write(path: str, writer) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    writer(path)


def build_demo_lake(root: str, today: dt.date | None = None, seed: int = 7) -> list[str]:
    """Write the sample lake under `root`; returns the files written."""
    today = today or dt.datetime.now(dt.timezone.utc).date()
    rng = random.Random(seed)
    written: list[str] = []

    def put(rel: str, writer) -> None:
        path = os.path.join(root, rel)
        _write(path, writer)
        written.append(path)

    for day in _dates(today):
        events = _events(rng, day, 200)
        put(f"raw/events/dt={day}/part-00000.parquet", lambda p, t=events: pq.write_table(t, p))
        cleaned = events.drop_columns(["properties"]).append_column(
            "session_id", pa.array([f"s-{rng.randint(1, 60)}" for _ in range(events.num_rows)])
        )
        put(f"clean/events/dt={day}/part-00000.snappy.parquet", lambda p, t=cleaned: pq.write_table(t, p))
        orders = _orders(rng, day, 80)
        put(f"raw/orders/dt={day}/orders.avro", lambda p, rows=orders: _write_avro(p, rows))
        clean_orders = pa.table(
            {
                "order_id": pa.array([o["order_id"] for o in orders], pa.int64()),
                "customer_id": pa.array([o["customer_id"] for o in orders], pa.int64()),
                "amount": pa.array([o["amount"] for o in orders], pa.decimal128(10, 2)),
                "status": pa.array([o["status"] for o in orders]),
                "order_date": pa.array([day] * len(orders), pa.date32()),
            }
        )
        put(f"clean/orders/dt={day}/part-00000.orc", lambda p, t=clean_orders: orc.write_table(t, p))
        put(f"clean/events/dt={day}/_SUCCESS", lambda p: _write_bytes(p, b""))

    customers = pa.table(
        {
            "customer_id": pa.array(range(1, 201), pa.int64()),
            "name": pa.array([f"Customer {i}" for i in range(1, 201)]),
            "country": pa.array([rng.choice(["FR", "DE", "US", "JP"]) for _ in range(200)]),
            "signup_date": pa.array([dt.date(2025, 1, 1) + dt.timedelta(days=i) for i in range(200)]),
        }
    )
    put("raw/customers/customers.csv", lambda p: pcsv.write_csv(customers, p))

    revenue = [
        {"date": str(day), "revenue": round(rng.uniform(1e3, 9e3), 2), "orders": 80, "by_country": {"FR": 10, "US": 40}}
        for day in _dates(today)
    ]
    lines = "".join(json.dumps(r) + "\n" for r in revenue).encode()
    put("analytics/daily_revenue/revenue.jsonl", lambda p: _write_bytes(p, lines))
    c360 = pa.table(
        {
            "customer_id": pa.array(range(1, 201), pa.int64()),
            "lifetime_value": pa.array([rng.uniform(0, 5000) for _ in range(200)], pa.float64()),
            "segments": pa.array(
                [[rng.choice(["vip", "churn-risk", "new"])] for _ in range(200)], pa.list_(pa.string())
            ),
        }
    )
    put("analytics/customer_360/part-00000.parquet", lambda p: pq.write_table(c360, p))

    # a partner drop: two files disagree on a type (int32 vs int64), a third is truncated
    for i, int_type in enumerate((pa.int32(), pa.int64())):
        feed = pa.table({"sku": pa.array([f"SKU-{j}" for j in range(50)]), "quantity": pa.array(range(50), int_type)})
        put(f"landing/partner_feed/batch-{i}.parquet", lambda p, t=feed: pq.write_table(t, p))
    full = pa.BufferOutputStream()
    pq.write_table(pa.table({"sku": ["x"], "quantity": [1]}), full)
    data = full.getvalue().to_pybytes()
    put("landing/partner_feed/batch-2.parquet", lambda p: _write_bytes(p, data[: len(data) // 2]))
    # the undated files existed from the lake's first day: a partition of an undated dataset holds the
    # files modified before its end (run.contents.files_in_window)
    first = dt.datetime.combine(_dates(today)[0], dt.time(), dt.timezone.utc).timestamp()
    for path in written:
        if "/dt=" not in path:
            os.utime(path, (first, first))
    return written
