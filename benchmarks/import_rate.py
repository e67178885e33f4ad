"""How fast `lumos import` writes a portable document into a store: validate, then import (one
transaction), for documents of 1,000 and 10,000 datasets (each with one earlier version).

    .venv/bin/python -m benchmarks.import_rate [--store URL] [--datasets 1000,10000]

Prints a markdown table of seconds and datasets/s per step. The store is a fresh SQLite file
unless --store names another (a PostgreSQL URL: its tables must be empty).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from lumos_dagster.estate import portable
from lumos_dagster.floor.datatypes import Field, Primitive, Schema
from lumos_dagster.floor.model import DatasetRef, Snapshot
from lumos_dagster.store import SnapshotStore

T0 = datetime(2026, 11, 20, tzinfo=timezone.utc)


def document(n: int, fields: int = 12) -> dict:
    def snapshot(name: str, pk: str, n_fields: int, at: datetime) -> Snapshot:
        ref = DatasetRef("file", name, f"/lake/{name}", "parquet")
        schema = Schema(tuple(Field(f"f{i}", Primitive("int64")) for i in range(n_fields)))
        return Snapshot(ref, pk, at, schema=schema, version=f"1.{n_fields}.0")

    entries = [
        portable.Entry(
            snapshot(f"raw/d{i}", "2026-11-20", fields, T0),
            [snapshot(f"raw/d{i}", "2026-11-19", fields - 1, T0 - timedelta(days=1))],
        )
        for i in range(n)
    ]
    return portable.to_json(portable.Estate(entries, source="benchmark", exported_at=T0))


def measure(n: int, url: str | None) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "estate.json"
        path.write_text(json.dumps(document(n)))
        out = {"MiB": path.stat().st_size / 2**20}
        started = time.perf_counter()
        doc = portable.load(str(path))
        check = portable.validate(doc)
        assert check.ok, check.problems[:3]
        estate = portable.from_json(doc)
        out["validate"] = time.perf_counter() - started
        with SnapshotStore(url or f"sqlite:///{tmp}/store.db") as store:
            started = time.perf_counter()
            portable.import_into_store(estate, store)
            out["import"] = time.perf_counter() - started
            started = time.perf_counter()
            portable.import_into_store(estate, store)  # again: nothing new
            out["again"] = time.perf_counter() - started
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", help="a store URL (default: a fresh SQLite file)")
    parser.add_argument("--datasets", default="1000,10000")
    args = parser.parse_args()
    print("| datasets | MiB | load + validate s | import s | datasets/s | import again s |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in (int(x) for x in args.datasets.split(",")):
        r = measure(n, args.store)
        print(f"| {n:,} | {r['MiB']:.1f} | {r['validate']:.1f} | {r['import']:.1f} | {n / r['import']:,.0f} | "
              f"{r['again']:.1f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
