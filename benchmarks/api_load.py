"""Load on `lumos serve` while a materialization writes to the same store.

    .venv/bin/python -m benchmarks.api_load [--datasets 10000] [--seconds 30] [--clients 8] [--postgres]

Builds an estate of N datasets through the store's own write API (`upsert_datasets`, and captures
versioned as a run stores them: `run.record.store_versioned`), starts `lumos serve` on 127.0.0.1, and
for `--seconds` runs `--clients` threads of reads and checks against it (dataset detail, the dataset
list, history, search, a proposed-schema check) while another process stores new captures as a
materialization does (batches of 200, some of them schema changes). Then prints requests, req/s, p50/p99 latency and
errors per endpoint, and checks the store: every capture written is there once, every document
parses and matches its columns. Loopback only; bounded by `--seconds`.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import sqlalchemy as sa
import yaml

from lumos_dagster.api.auth import hash_token, new_token
from lumos_dagster.model import DatasetRecord, DatasetRef, Field, Owner, Primitive, Schema, Snapshot, snapshot_loads
from lumos_dagster.run.record import store_versioned
from lumos_dagster.store import SnapshotStore
from lumos_dagster.store.tables import snapshots_table, stored_document, with_bodies

ROOT = Path(__file__).resolve().parents[1]
PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)
TYPES = ("int64", "string", "float64", "boolean", "date")
MIX = (("detail", 50), ("list", 15), ("history", 10), ("search", 10), ("check", 15))


def _name(i: int) -> str:
    return f"domain{i % 20:02d}/table_{i:05d}"


def _snapshot(i: int, day: int, extra: int = 0) -> Snapshot:
    name = _name(i)
    fields = tuple(Field(f"col_{k}", Primitive(TYPES[k % len(TYPES)])) for k in range(8 + extra))
    return Snapshot(
        DatasetRef("file", name, f"/lake/{name}", "parquet"),
        str((T0 + timedelta(days=day)).date()),
        T0 + timedelta(days=day, minutes=i % 60),
        schema=Schema(fields),
        owners=(Owner(f"team{i % 37}@example.com"),),
        tags=("bench", f"tier{i % 3}"),
        description=f"Table {i} of domain {i % 20}",
        domain=f"domain{i % 20:02d}",
    )


def build_store(url: str, n: int) -> None:
    store = SnapshotStore(url)
    try:
        store.upsert_datasets(
            DatasetRecord(_name(i), "file", "lake", _name(i), "parquet", f"domain{i % 20:02d}") for i in range(n)
        )
        for start in range(0, n, 1000):
            store_versioned(store, [_snapshot(i, 0) for i in range(start, min(n, start + 1000))])
    finally:
        store.close()


def writer(url: str, n: int, stop_at: float, out: str, rate: float) -> None:
    """A materialization: batches of 200 new captures (a new day's partition), one in ten with an added
    column, each batch in one transaction as the snapshot run stores it (run/record.py), `rate` captures a second
    (a run stores about 100 a second on 2 cores: docs/benchmarks.md)."""
    store = SnapshotStore(url)
    written, batches, took = [], 0, []
    rng = random.Random(7)
    day = 1
    try:
        while time.monotonic() < stop_at:
            ids = rng.sample(range(n), 200)
            snaps = [_snapshot(i, day, extra=1 if rng.random() < 0.1 else 0) for i in ids]
            start = time.perf_counter()
            stored = store_versioned(store, snaps, catalogs=["bench"])
            took.append(time.perf_counter() - start)
            written += [(s.dataset.urn, s.partition_key, s.version, s.fingerprint) for s in stored]
            batches += 1
            day += 1
            time.sleep(max(0.0, 200 / rate - took[-1]))
    finally:
        store.close()
    with open(out, "w") as fh:
        json.dump({"written": written, "batches": batches, "batch_seconds": took}, fh)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def load(base: str, token: str, n: int, seconds: float, clients: int, mix=MIX) -> dict[str, dict]:
    results: dict[str, list[float]] = {k: [] for k, _ in mix}
    errors: dict[str, list[str]] = {k: [] for k, _ in mix}
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds
    kinds = [k for k, w in mix for _ in range(w)]

    def client(seed: int) -> None:
        rng = random.Random(seed)
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
            while time.monotonic() < stop_at:
                kind = rng.choice(kinds)
                name = _name(rng.randrange(n))
                start = time.perf_counter()
                try:
                    if kind == "detail":
                        r = http.get(f"/v1/datasets/{name}")
                    elif kind == "list":
                        r = http.get("/v1/datasets", params={"q": f"domain{rng.randrange(20):02d}", "limit": 50,
                                                             "offset": rng.randrange(0, 400, 50)})  # fmt: skip
                    elif kind == "history":
                        r = http.get(f"/v1/datasets/{name}/history")
                    elif kind == "search":
                        r = http.get("/v1/search", params={"q": f"table {rng.randrange(n)}", "limit": 10})
                    else:
                        ddl = ", ".join(f"col_{k} {('BIGINT', 'STRING', 'DOUBLE', 'BOOLEAN', 'DATE')[k % 5]}"
                                        for k in range(8 + rng.randrange(2)))  # fmt: skip
                        r = http.post(f"/v1/datasets/{name}/check", json={"format": "spark-ddl", "schema": ddl})
                    took = time.perf_counter() - start
                    ok = r.status_code == 200
                    why = None if ok else f"{r.status_code} {r.text[:200]}"
                except httpx.HTTPError as exc:
                    took, ok, why = time.perf_counter() - start, False, repr(exc)
                with lock:
                    (results[kind] if ok else errors[kind]).append(took if ok else why)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {k: {"ok": results[k], "errors": errors[k]} for k, _ in mix}


def verify(url: str, initial: int, written: list) -> list[str]:
    """Problems with the store after the run: captures missing, repeated or corrupt. Each capture's
    document is read as the store gives it back (its body from `lumos_documents`, put together with
    the row's own fields: `tables.stored_document`)."""
    problems = []
    engine = sa.create_engine(url)
    t = snapshots_table
    q = sa.select(t.c.urn, t.c.partition_key, t.c.version, t.c.fingerprint, stored_document("text"))
    try:
        with engine.connect() as conn:
            rows = conn.execute(q.select_from(with_bodies())).all()
    finally:
        engine.dispose()
    if len(rows) != initial + len(written):
        problems.append(f"{len(rows)} captures stored, expected {initial} + {len(written)}")
    seen = {}
    for urn, pk, version, fingerprint, document in rows:
        try:
            s = snapshot_loads(document)
        except Exception as exc:  # noqa: BLE001 - any failure is corruption
            problems.append(f"{urn} {pk}: unreadable document: {exc}")
            continue
        if (s.dataset.urn, s.partition_key or "", s.version, s.fingerprint) != (urn, pk, version, fingerprint):
            problems.append(f"{urn} {pk}: document and columns disagree")
        seen[(urn, pk)] = seen.get((urn, pk), 0) + 1
    for urn, pk, _version, _fingerprint in written:
        if seen.get((urn, pk)) != 1:
            problems.append(f"{urn} {pk}: stored {seen.get((urn, pk), 0)} times")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--without", default="", help="comma-separated endpoints left out of the mix, e.g. search")
    parser.add_argument("--write-rate", type=float, default=200.0, help="captures the writer stores a second")
    parser.add_argument("--postgres", action="store_true", help=f"a throwaway schema in {PG} instead of SQLite")
    args = parser.parse_args(argv)
    if not 1 <= args.seconds <= 120:
        parser.error("--seconds: 1 to 120")
    folder = Path(tempfile.mkdtemp(prefix="lumos-api-load-"))
    schema = None
    if args.postgres:
        schema = f"lumos_bench_{uuid.uuid4().hex[:10]}"
        with sa.create_engine(PG).begin() as conn:
            conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        url = f"{PG}?options=-csearch_path%3D{schema}"
    else:
        url = f"sqlite:///{folder}/store.db"
    server = None
    try:
        start = time.perf_counter()
        build_store(url, args.datasets)
        print(f"store: {args.datasets} datasets in {time.perf_counter() - start:.1f} s", file=sys.stderr)
        token = new_token()
        (folder / "lake").mkdir()
        config = {
            "sources": [{"name": "lake", "root": str(folder / "lake")}],
            "store": {"url": url},
            "api": {"tokens": [{"name": "bench", "hash": hash_token(token), "scopes": ["read", "check"]}]},
        }
        (folder / "lumos.yaml").write_text(yaml.safe_dump(config))
        port = _free_port()
        log = open(folder / "serve.log", "wb")
        server = subprocess.Popen([str(Path(sys.executable).with_name("lumos")), "serve", "-c",
                                   str(folder / "lumos.yaml"), "--port", str(port), "--log-level", "warning"],
                                  stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"lumos serve did not start: {(folder / 'serve.log').read_text()[-2000:]}")
            time.sleep(0.2)
        # warm up: the first request builds the lineage graph, the first search the index
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=120) as http:
            http.get("/v1/datasets", params={"limit": 1}).raise_for_status()
            http.get("/v1/search", params={"q": "table"}).raise_for_status()
        out = folder / "writer.json"
        ctx = multiprocessing.get_context("spawn")
        writing = ctx.Process(
            target=writer, args=(url, args.datasets, time.monotonic() + args.seconds, str(out), args.write_rate)
        )
        writing.start()
        mix = tuple((k, w) for k, w in MIX if k not in args.without.split(","))
        results = load(base, token, args.datasets, args.seconds, args.clients, mix)
        writing.join(120)
        wrote = json.loads(out.read_text())
        problems = verify(url, args.datasets, [tuple(w) for w in wrote["written"]])
        store = "PostgreSQL" if args.postgres else "SQLite (WAL)"
        print(f"\n{args.datasets:,} datasets, {store}, {args.clients} clients, {args.seconds:g} s, "
              f"{os.cpu_count()} cores; the writer stored {len(wrote['written']):,} captures in "
              f"{wrote['batches']} batches meanwhile (p50 {_percentile(wrote['batch_seconds'], 50) * 1000:.0f} ms "
              f"a batch of 200)\n")  # fmt: skip
        print("| endpoint | requests | req/s | p50 ms | p99 ms | errors |")
        print("|---|---:|---:|---:|---:|---:|")
        total_ok = total_err = 0
        for kind, r in results.items():
            ok, err = r["ok"], r["errors"]
            total_ok, total_err = total_ok + len(ok), total_err + len(err)
            print(f"| {kind} | {len(ok) + len(err):,} | {len(ok) / args.seconds:,.1f} | "
                  f"{_percentile(ok, 50) * 1000:.1f} | {_percentile(ok, 99) * 1000:.1f} | {len(err)} |")  # fmt: skip
        print(f"| **all** | {total_ok + total_err:,} | {total_ok / args.seconds:,.1f} | | | {total_err} |")
        for kind, r in results.items():
            for why in r["errors"][:3]:
                print(f"error {kind}: {why}", file=sys.stderr)
        print(f"\nstore after the run: {'no lost or corrupt capture' if not problems else '; '.join(problems[:10])}")
        return 1 if problems or total_err else 0
    finally:
        if server is not None:
            server.terminate()
            server.wait(15)
        if schema is not None:
            with sa.create_engine(PG).begin() as conn:
                conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
