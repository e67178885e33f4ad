"""Load on `lumos serve` while a materialization writes to the same store, or under abuse.

    .venv/bin/python -m benchmarks.api_load [--datasets 10000] [--seconds 30] [--clients 8] [--postgres]
    .venv/bin/python -m benchmarks.api_load --abuse [--datasets 1000] [--seconds 20] [--clients 16] [--rate 15]

Builds an estate of N datasets through the store's own write API (`upsert_datasets`, and captures
versioned as a run stores them: `run.record.store_versioned`), starts `lumos serve` on 127.0.0.1, and
for `--seconds` runs `--clients` threads of reads and checks against it (dataset detail, the dataset
list, history, search, a proposed-schema check) while another process stores new captures as a
materialization does (batches of 200, some of them schema changes). Then prints requests, req/s, p50/p99 latency and
errors per endpoint, and checks the store: every capture written is there once, every document
parses and matches its columns. Loopback only; bounded by `--seconds`.

`--abuse` serves the same estate with 16 tokens (one without an id) and writes on, and measures what
hostile requests cost (docs/reliability.md, "Hostile requests"): first `/health` alone, then requests
with wrong tokens alone (the server's CPU per request of each), then, for `--seconds`, wrong tokens,
unauthenticated writes, 470 KB Spark DDL and expanding Avro checks, oversized bodies and a few
ordinary reads and checks at once, with `/health` probed every 20 ms from a process of its own.
Afterwards: the server's CPU in the second that starts 1 s after the last answer (work that outlived
its deadline by more than 1 s shows there) and the audit rows unauthenticated requests added.
"""

from __future__ import annotations

import argparse
import itertools
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
from lumos_dagster.floor.datatypes import Field, Primitive, Schema
from lumos_dagster.floor.model import DatasetRecord, DatasetRef, Owner, Snapshot
from lumos_dagster.floor.snapshot_json import snapshot_loads
from lumos_dagster.run.record import store_versioned
from lumos_dagster.store import SnapshotStore
from lumos_dagster.store.sql_tables import snapshots_table, stored_document, with_bodies

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
                        r = http.get("/v1/dataset", params={"name": name})
                    elif kind == "list":
                        r = http.get("/v1/datasets", params={"q": f"domain{rng.randrange(20):02d}", "limit": 50,
                                                             "offset": rng.randrange(0, 400, 50)})  # fmt: skip
                    elif kind == "history":
                        r = http.get("/v1/dataset/history", params={"name": name})
                    elif kind == "search":
                        r = http.get("/v1/search", params={"q": f"table {rng.randrange(n)}", "limit": 10})
                    else:
                        ddl = ", ".join(f"col_{k} {('BIGINT', 'STRING', 'DOUBLE', 'BOOLEAN', 'DATE')[k % 5]}"
                                        for k in range(8 + rng.randrange(2)))  # fmt: skip
                        r = http.post("/v1/dataset/check", params={"name": name},
                                      json={"format": "spark-ddl", "schema": ddl})  # fmt: skip
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


# ------------------------------------------------------------------ --abuse


def _ddl(fields: int) -> str:
    return ", ".join(f"c{i} STRING" for i in range(fields))


def _expanding_avro(levels: int) -> dict:
    """A record whose named record is used ten times at each level: 2.2 KB, 10^levels fields expanded."""
    record: dict = {"type": "record", "name": "L0", "fields": [{"name": "x", "type": "long"}]}
    for level in range(1, levels + 1):
        record = {"type": "record", "name": f"L{level}", "fields": [{"name": "f0", "type": record}]
                  + [{"name": f"f{i}", "type": f"L{level - 1}"} for i in range(1, 10)]}  # fmt: skip
    return record


def probe_health(base: str, ready, stop, out: str) -> None:
    """GET /health every 20 ms until `stop` is set, from a process of its own (the load generator's threads
    would otherwise add their own waits): [time.monotonic(), ms, status] each, to `out`."""
    probes = []
    with httpx.Client(base_url=base, timeout=30) as http:
        http.get("/health")
        ready.set()
        while not stop.is_set():
            at, start = time.monotonic(), time.perf_counter()
            try:
                status: int | str = http.get("/health").status_code
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            probes.append([at, (time.perf_counter() - start) * 1000, status])
            time.sleep(max(0.0, 0.02 - (time.perf_counter() - start)))
    Path(out).write_text(json.dumps(probes))


def _server_cpu(pid: int) -> float:
    """CPU seconds of the server and of the processes it started, those alive now."""
    import psutil

    total = 0.0
    root = psutil.Process(pid)
    for proc in [root, *root.children(recursive=True)]:
        try:
            t = proc.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def _hammer(base: str, stop_at: float, threads: int, rate: float, requests: dict[str, tuple[str, str, dict]]) -> dict:
    """`threads` threads each sending `requests` (kind → (method, path, httpx arguments)) round robin, `rate`
    a second, until `stop_at`: kind → {"ms": [...], "statuses": {status: count}}."""
    results: dict[str, dict] = {k: {"ms": [], "statuses": {}} for k in requests}
    lock = threading.Lock()
    kinds = list(requests)

    def client(first: int) -> None:
        with httpx.Client(base_url=base, timeout=120) as http:
            for kind in itertools.islice(itertools.cycle(kinds), first, None):
                if time.monotonic() >= stop_at:
                    return
                method, path, kwargs = requests[kind]
                start = time.perf_counter()
                try:
                    status = http.request(method, path, **kwargs).status_code
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                took = time.perf_counter() - start
                with lock:
                    results[kind]["ms"].append(took * 1000)
                    results[kind]["statuses"][status] = results[kind]["statuses"].get(status, 0) + 1
                time.sleep(max(0.0, 1 / rate - took))

    workers = [threading.Thread(target=client, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return results


def _unauthenticated_rows(url: str) -> int:
    from lumos_dagster.api import audit

    engine = sa.create_engine(url)
    try:
        return sum(1 for e in audit.entries(engine, limit=10_000_000) if e["principal"] == "-")
    finally:
        engine.dispose()


def abuse(base: str, url: str, pid: int, tokens: dict[str, str], seconds: float, clients: int, rate: float,
          timeout: float, folder: Path) -> int:  # fmt: skip
    """The `--abuse` run (see the module's docstring); 0 when /health p99 < 50 ms, nothing computes 1 s
    after the last answer, and unauthenticated requests added no row."""
    good = {"Authorization": f"Bearer {tokens['bench']}"}
    known_id = tokens["other0"].split(".")[0]  # an id read from lumos.yaml, with a guessed secret
    wrong = {
        "new token": {"Authorization": f"Bearer {new_token()}"},
        "known id": {"Authorization": f"Bearer {known_id}.{'x' * 43}"},
        "no id": {"Authorization": "Bearer guess-0123456789"},
        "none": {},
    }
    anonymous = {f"anonymous GET ({k})": ("GET", "/v1/datasets", {"headers": h}) for k, h in wrong.items()}
    target = "x" * 1000
    accept = {"params": {"name": target}, "headers": wrong["known id"], "json": {"version": "1.0.0", "reason": target}}
    anonymous |= {
        "anonymous release": ("POST", "/v1/releases", {"json": {"name": "S-anon"}}),
        "anonymous accept": ("POST", "/v1/dataset/acceptances", accept),
    }
    as_json = {**good, "Content-Type": "application/json"}
    check = "/v1/dataset/check"
    hostile = {
        "check 470 KB DDL": ("POST", check, {"params": {"name": _name(1)}, "headers": as_json,
                                             "content": json.dumps({"format": "spark-ddl", "schema": _ddl(40_000)})}),
        "check expanding Avro": ("POST", check, {"params": {"name": _name(2)}, "headers": as_json, "content":
                                                 json.dumps({"format": "avro", "schema": _expanding_avro(6)})}),
        "check 2 MB body": ("POST", check, {"params": {"name": _name(3)}, "headers": as_json,
                                            "content": json.dumps({"format": "spark-ddl", "schema": _ddl(160_000)})}),
    }  # fmt: skip
    ordinary = {
        "detail": ("GET", "/v1/dataset", {"params": {"name": _name(4)}, "headers": good}),
        "check 9 fields": ("POST", check, {"params": {"name": _name(5)}, "headers": good,
                                           "json": {"format": "spark-ddl", "schema": _ddl(9)}}),
    }  # fmt: skip
    rows_before = _unauthenticated_rows(url)
    ctx = multiprocessing.get_context("spawn")
    ready, stop, out = ctx.Event(), ctx.Event(), folder / "health.json"
    prober = ctx.Process(target=probe_health, args=(base, ready, stop, str(out)))
    prober.start()
    ready.wait(120)
    spans = []  # name, results, start, end, server CPU seconds
    for name, threads, requests, length in [
        ("/health alone", 0, {}, 3.0),
        ("wrong tokens alone", clients, anonymous, 3.0),
        ("abuse", clients, {**anonymous, **hostile, **ordinary}, seconds),
    ]:
        start, cpu = time.monotonic(), _server_cpu(pid)
        if threads:
            results = _hammer(base, start + length, threads, rate, requests)
        else:
            results = {}
            time.sleep(length)
        spans.append((name, results, start, time.monotonic(), _server_cpu(pid) - cpu))
    stop.set()
    prober.join(60)
    time.sleep(1.0)  # every request has its answer: its work may outlive it by 1 s, no more
    cpu = _server_cpu(pid)
    time.sleep(1.0)
    after = _server_cpu(pid) - cpu
    probes = json.loads(out.read_text())
    rows = _unauthenticated_rows(url) - rows_before
    phases = []  # name, results, the probes of /health then, server CPU ms per request
    for name, results, start, end, spent in spans:
        took = [p for p in probes if start <= p[0] < end]
        health = {"ms": [p[1] for p in took], "statuses": {}}
        for p in took:
            health["statuses"][p[2]] = health["statuses"].get(p[2], 0) + 1
        count = sum(len(r["ms"]) for r in results.values()) + len(took)
        phases.append((name, results, health, spent * 1000 / max(1, count)))

    def ms(values: list[float], p: float) -> str:
        return f"{_percentile(values, p):,.1f}"

    print(f"\n{clients} client threads at {rate:g} requests a second each, request_timeout {timeout:g} s, 16 tokens "
          "(one without an id), "
          f"{os.cpu_count()} cores shared with the load generator\n")  # fmt: skip
    print("| phase | request | p50 ms | p99 ms | max ms | answers |")
    print("|---|---|---:|---:|---:|---|")
    worst_late = 0.0
    for name, results, health, _ in phases:
        for kind, r in [*results.items(), ("/health (probe)", health)]:
            answers = ", ".join(f"{k}: {v:,}" for k, v in sorted(r["statuses"].items(), key=str))
            print(f"| {name} | {kind} | {ms(r['ms'], 50)} | {ms(r['ms'], 99)} | {max(r['ms'], default=0):,.1f} | "
                  f"{answers} |")  # fmt: skip
            if kind != "/health (probe)":
                worst_late = max(worst_late, max(r["ms"], default=0) / 1000 - timeout)
    health_p99 = _percentile(phases[2][2]["ms"], 99)
    print(f"\nserver CPU per request: /health alone {phases[0][3]:.2f} ms; with wrong tokens (and the /health "
          f"probes) {phases[1][3]:.2f} ms")  # fmt: skip
    print(f"/health p99 under abuse: {health_p99:.1f} ms (target < 50 ms)")
    print(f"slowest answer past the deadline: {max(0.0, worst_late):.2f} s; server CPU from 1 to 2 s after the last "
          f"answer: {after:.2f} s (target: none)")  # fmt: skip
    print(f"audit rows added by unauthenticated requests: {rows} (target 0)")
    return 0 if health_p99 < 50 and after < 0.1 and rows == 0 else 1


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
    parser.add_argument("--abuse", action="store_true", help="hostile requests instead of the writer and the mix")
    parser.add_argument("--timeout", type=float, default=5.0, help="api.limits.request_timeout of --abuse")
    parser.add_argument("--rate", type=float, default=15.0, help="requests a second of each --abuse client")
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
        tokens = {"bench": new_token()}
        api: dict = {"tokens": [{"name": "bench", "hash": hash_token(tokens["bench"]), "scopes": ["read", "check"]}]}
        if args.abuse:  # 16 tokens, one of them without an id; writes on: a writer exists, anonymous ones must not
            tokens |= {f"other{i}": new_token() for i in range(14)} | {"older": "an older token of one's own"}
            api["tokens"] += [{"name": n, "hash": hash_token(t), "scopes": ["read", "write"]}
                              for n, t in tokens.items() if n != "bench"]  # fmt: skip
            api |= {"writes": True, "limits": {"request_timeout": args.timeout}}
        token = tokens["bench"]
        (folder / "lake").mkdir()
        config = {
            "sources": [{"name": "lake", "root": str(folder / "lake")}],
            "store": {"url": url},
            "api": api,
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
        if args.abuse:
            return abuse(base, url, server.pid, tokens, args.seconds, args.clients, args.rate, args.timeout, folder)
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
