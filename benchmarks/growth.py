"""What an unchanged dataset-partition costs the snapshot store: bytes per capture of unchanged
content, on SQLite and on PostgreSQL.

    .venv/bin/python -m benchmarks.growth [--datasets 200] [--days 30] [--reruns 5] [--no-postgres]

N datasets × D days go through `lumos_dagster.run.record.store_versioned`, as a run stores them:
day 1 captures each dataset (a realistic document of 3-4 KB: nested schema, descriptions, stats,
owners, tags, column lineage, cost, quality, profile), and every later day captures it again with
the same content in a new daily partition (a daily re-snapshot of an undated dataset; only the
capture time and the data's age move). Then the last day's partition is captured again R times (a
sensor re-running a partition). Two ways of keeping them are measured on the same engine:

* inline: each capture's whole document in its row (`lumos_snapshots.document`), what the store
  wrote before schema version 3 (written here as those rows were; the store still reads them);
* store: what `SnapshotStore` writes now.

Both with no catalog and with one catalog whose outbox is delivered after each day (a catalog that
takes anything: `Shelf`); the store's outbox then pruned by its retention (`prune_outbox`: entries
delivered more than `store.retention.outbox_days` ago; here 0, as if the window had passed), the
inline layout's not (it had none).

Bytes: SQLite, the database file's growth after a WAL checkpoint and `VACUUM`; PostgreSQL,
`pg_total_relation_size` (tables, TOAST, indexes) of the store's tables, in a throwaway schema,
with a plain `VACUUM` after each day (what autovacuum does: dead row versions reused, nothing
given back to the file system). Per unchanged dataset-partition: the growth from the end of day 1
to the end of day D, divided by N × (D − 1); per re-run: the growth over the R re-runs, divided by
N × R. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone

import sqlalchemy as sa

from lumos_dagster.floor.datatypes import Field, Primitive, Schema, Struct
from lumos_dagster.floor.model import (
    AssertionResult,
    ColumnMapping,
    ColumnProfile,
    Cost,
    DatasetRef,
    LineageEdge,
    OperationalStats,
    Owner,
    Profile,
    Quality,
    Snapshot,
)
from lumos_dagster.floor.snapshot_json import snapshot_dumps
from lumos_dagster.run.record import _versioned, store_versioned
from lumos_dagster.store import SnapshotStore
from lumos_dagster.store.rows import _snapshot_row
from lumos_dagster.store.sql_tables import metadata

PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
DAY0 = datetime(2026, 11, 1, tzinfo=timezone.utc)
KINDS = ("int64", "float64", "string", "boolean", "date", "int32")
CATALOG = "growth-catalog"


def capture(i: int, day: int, minutes: int = 5) -> Snapshot:
    """Dataset `i`'s capture on `day` (0-based): the same content every day, captured a few minutes
    after midnight, its data a day older each day."""
    name = f"sales/region_{i % 7}/orders_{i}"
    ref = DatasetRef("file", name, f"s3://lake/{name}", "parquet")
    fields = [
        Field(f"col_{j}_{KINDS[(i + j) % len(KINDS)]}", Primitive(KINDS[(i + j) % len(KINDS)]), nullable=j % 3 != 0,
              description=f"column {j} of orders {i}: what it holds and where it comes from", native_type="INT64")
        for j in range(8 + i % 7)
    ]  # fmt: skip
    fields.append(Field("customer", Struct(tuple(Field(n, Primitive("string")) for n in ("id", "name", "country")))))
    upstream = (
        LineageEdge(
            DatasetRef("file", f"raw/orders_{i}", f"s3://lake/raw/orders_{i}", "parquet"),
            tuple(ColumnMapping(f.name, f.name) for f in fields[:4]),
        ),
    )
    at = DAY0 + timedelta(days=day, minutes=minutes)
    modified = DAY0 - timedelta(hours=3)
    return Snapshot(
        ref,
        (DAY0 + timedelta(days=day)).date().isoformat(),
        at,
        schema=Schema(tuple(fields)),
        stats=OperationalStats(12, 48_000_000 + i, 1_200_000 + i, modified, {}),
        description=f"Orders of region {i % 7}, one row per order line, loaded nightly from the shop database.",
        domain="sales",
        owners=(Owner("alice"), Owner("data-eng", "group", "TECHNICAL_OWNER")),
        tags=("pii", "gold"),
        upstream=upstream,
        cost=Cost("2026-11", 12.5 + i, 3.25, 1.5, "proportional"),
        terms=("Order",),
        sla="36h",
        quality=Quality(
            0.97,
            "fresh",
            round((at - modified).total_seconds() / 3600, 2),
            (AssertionResult("not_null_id", "pass", "completeness", "col_0_int64", "dbt"),),
        ),
        profile=Profile(
            1_200_000 + i, 0.1, tuple(ColumnProfile(f.name, 0.01, 1000 + j, "a", "z") for j, f in enumerate(fields[:6]))
        ),  # fmt: skip
    )


class Shelf:
    """A catalog that takes anything: it remembers what it was sent (for the delivery's bookkeeping)."""

    name = CATALOG

    def fingerprint(self, s: Snapshot) -> str:
        return hashlib.sha256(snapshot_dumps(s).encode()).hexdigest()

    def emit(self, snapshots) -> int:
        return len(snapshots)

    def close(self) -> None:
        pass


def _store_inline(store: SnapshotStore, snapshots: list[Snapshot], catalogs: list[str]) -> None:
    """What a run stored before schema version 3: captures versioned alike, each row with its whole
    document inline, each queued for each catalog."""
    from lumos_dagster.store.sql_tables import outbox_table, snapshots_table

    with store.versioning({s.dataset.urn for s in snapshots}) as v:
        versioned, _, _, _ = _versioned(v, snapshots)
        rows = []
        for s in versioned:
            row = _snapshot_row(s)
            rows.append({k: row[k] for k in ("urn", "partition_key", "captured_at", "version", "fingerprint",
                                              "readable")} | {"document": snapshot_dumps(s)})  # fmt: skip
        conn = v.conn
        before = conn.execute(sa.select(sa.func.coalesce(sa.func.max(snapshots_table.c.id), 0))).scalar_one()
        conn.execute(snapshots_table.insert(), rows)
        ids = range(before + 1, before + 1 + len(rows))
        now = datetime.now(timezone.utc)
        queued = [
            dict(snapshot_id=sid, catalog=c, urn=r["urn"], partition_key=r["partition_key"], status="pending",
                 attempts=0, created_at=now)
            for sid, r in zip(ids, rows, strict=True)
            for c in catalogs
        ]  # fmt: skip
        if queued:
            conn.execute(outbox_table.insert(), queued)


def _size(store: SnapshotStore) -> int:
    with store.engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.exec_driver_sql("VACUUM")
            path = store.engine.url.database
            return os.path.getsize(path)
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")  # VACUUM runs outside a transaction
        total = 0
        for table in metadata.sorted_tables:
            conn.exec_driver_sql(f"VACUUM {table.name}")
            total += conn.execute(
                sa.text("SELECT pg_total_relation_size(CAST(:t AS regclass))"), {"t": table.name}
            ).scalar()
        return total


def _deliver(store: SnapshotStore, layout: str) -> None:
    from lumos_dagster.delivery.outbox import deliver

    deliver(store, Shelf())
    if layout == "store":  # the outbox retention, its window passed (inline: before it, nothing removed)
        store.prune_outbox(days=0)


def _autovacuum(store: SnapshotStore) -> None:
    """PostgreSQL: what autovacuum does between two days (dead row versions made reusable)."""
    if store.engine.dialect.name == "postgresql":
        with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            for table in metadata.sorted_tables:
                conn.exec_driver_sql(f"VACUUM {table.name}")


def measure(url: str, layout: str, datasets: int, days: int, reruns: int, catalog: bool) -> dict:
    catalogs = [CATALOG] if catalog else []
    write = store_versioned if layout == "store" else _store_inline

    def day(d: int, minutes: int = 5) -> None:
        write(store, [capture(i, d, minutes) for i in range(datasets)], catalogs)
        if catalog:
            _deliver(store, layout)
        _autovacuum(store)

    with SnapshotStore(url) as store:
        started = time.perf_counter()
        day(0)
        first = _size(store)
        for d in range(1, days):
            day(d)
        daily = _size(store)
        for r in range(reruns):
            day(days - 1, minutes=10 + r)
        rerun = _size(store)
        took = time.perf_counter() - started
        got = store.latest(capture(0, 0).dataset.urn)
        assert got is not None and got.partition_key == capture(0, days - 1).partition_key
    document = len(snapshot_dumps(capture(0, 1)))
    return {
        "day1": first,
        "per_partition": (daily - first) / (datasets * (days - 1)),
        "per_rerun": (rerun - daily) / (datasets * reruns) if reruns else 0.0,
        "document": document,
        "seconds": took,
    }


def _sqlite(folder: str) -> str:
    return f"sqlite:///{folder}/{uuid.uuid4().hex[:8]}.db"


class _Schema:
    """A throwaway PostgreSQL schema: the store's URL in it, dropped at the end."""

    def __init__(self):
        self.name = f"lumos_growth_{uuid.uuid4().hex[:10]}"
        self.admin = sa.create_engine(PG)

    def __enter__(self) -> str:
        with self.admin.begin() as conn:
            conn.execute(sa.text(f'CREATE SCHEMA "{self.name}"'))
        return f"{PG}?options=-csearch_path%3D{self.name}"

    def __exit__(self, *exc) -> None:
        with self.admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{self.name}" CASCADE'))
        self.admin.dispose()


def measure_all(datasets: int = 200, days: int = 30, reruns: int = 5, postgres: bool = True,
                layouts: tuple[str, ...] = ("inline", "store"), log=lambda text: None) -> list[tuple]:  # fmt: skip
    """(engine, layout, with a catalog, `measure`'s figures) for each engine, layout and outbox."""
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for engine in ["sqlite"] + (["postgresql"] if postgres else []):
            for layout in layouts:
                for catalog in (False, True):
                    if engine == "sqlite":
                        got = measure(_sqlite(folder), layout, datasets, days, reruns, catalog)
                    else:
                        with _Schema() as url:
                            got = measure(url, layout, datasets, days, reruns, catalog)
                    rows.append((engine, layout, catalog, got))
                    log(f"{engine} {layout} catalog={catalog}: {got}")
    return rows


def render(rows: list[tuple], datasets: int = 200, days: int = 30, reruns: int = 5) -> list[str]:
    lines = [
        "### Store growth: what an unchanged dataset-partition costs",
        "",
        f"{datasets} datasets × {days} days, unchanged after day 1; then {reruns} re-runs of the last day's "
        f"partition. Document: {rows[0][3]['document']:,} bytes (`python -m benchmarks.growth`).",
        "",
        "| engine | layout | outbox | store after day 1 | bytes / unchanged partition | bytes / re-run | seconds |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for engine, layout, catalog, got in rows:
        outbox = ("1 catalog, delivered" + (", retention" if layout == "store" else "")) if catalog else "no catalog"
        lines.append(f"| {engine} | {layout} | {outbox} | {got['day1']:,} | {got['per_partition']:,.0f} | "
                     f"{got['per_rerun']:,.0f} | {got['seconds']:.1f} |")  # fmt: skip
    return lines + ["", "Target: an unchanged dataset-partition costs at most 300 bytes in the store."]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=int, default=200)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--reruns", type=int, default=5)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--layouts", default="inline,store")
    args = parser.parse_args(argv)
    log = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    rows = measure_all(args.datasets, args.days, args.reruns, not args.no_postgres, tuple(args.layouts.split(",")), log)
    print("\n".join(render(rows, args.datasets, args.days, args.reruns)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
