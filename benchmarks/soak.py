"""Soak: Lumos running as a Dagster deployment while a lake keeps changing, measured from outside.

    .venv/bin/python -m benchmarks.soak                        # short: 200 datasets, 4 minutes
    .venv/bin/python -m benchmarks.soak --long                 # 1,000 datasets, 60 minutes
    .venv/bin/python -m benchmarks.soak --datasets N --minutes M --rate R [--tuned] [--png PATH]

It brings up the deployment `make deploy` runs (`lumos deploy`: Dagster's PostgreSQL storage, the
daemon with queued runs, the webserver, the code location in its own code server; Lumos' sensors
and schedules running as shipped), over a generated lake (benchmarks/mutator.py), waits for the first
snapshot of every dataset, which nobody materializes (the sensors' first tick requests it), then
changes the lake `--rate` times a second for `--minutes`. Nothing else touches the deployment: every
change must reach the catalog by itself. From outside it measures:

* how long the first snapshot of every dataset took from `up`, and the datasets it missed;
* the lag from each change landing to DataHub Lite showing it (read back as Lumos snapshots), by
  kind of change; changes never seen (missed);
* versions from torn or partial files (a CSV cut in its header or mid-row, header-only files, files
  written in appends): any version of a dataset they touched beyond its first and its removal;
* each removal's version and change class, in the store (the API's history) and in DataHub Lite;
* runs failed (the webserver's GraphQL); versions wrong or duplicated (each dataset's history
  through `lumos serve`'s API); deliveries duplicated (an OpenLineage file catalog beside DataHub
  Lite logs every delivery: the same content delivered twice in a row is a duplicate); torn files
  that became a version;
* each long-lived process's memory over time, CPU seconds per change, Dagster event-log rows and
  store bytes per simulated day (a day's partition of every dataset materialized, then the same
  day again with nothing changed).

It prints a markdown report and writes a PNG of lag and memory over the soak.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import yaml

from benchmarks.mutator import Expectation, Lake, today

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[1]
PG = "postgresql+psycopg://postgres@127.0.0.1:5432"
GRACE = 240  # seconds after the last change for the catalog to catch up before a change counts as missed
FIRST_WITHIN = 600  # seconds after `up` for the first snapshot of every dataset before one counts as missed


def log(text: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def _database(name: str, drop: bool = False) -> None:
    import psycopg

    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if not drop:
            conn.execute(f'CREATE DATABASE "{name}"')


def discard(work: Path) -> None:
    """Remove a benchmark's lake and deployment (gigabytes at estate size), but keep them, logs and
    all, when the benchmark is failing."""
    if sys.exc_info()[0] is None:
        shutil.rmtree(work, ignore_errors=True)
    else:
        log(f"kept {work} for its logs")


def project(work: Path, lake: Path, store_db: str) -> Path:
    config = {
        "sources": [{"name": "lake", "root": str(lake)}],
        "store": {"url": f"{PG}/{store_db}"},
        "catalog": [
            {"type": "datahub-lite", "path": str(work / "lite.db")},
            {"type": "openlineage", "path": str(work / "deliveries.jsonl"), "namespace": "soak"},
        ],
        "partitions": {"start": str(today() - timedelta(days=2))},
    }
    path = work / "lumos.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def datahub_urns(config_path: Path) -> dict[str, str]:
    """Dataset name → its urn in DataHub, as the DataHub catalog names it (DataHub's own source's urn)."""
    from lumos_dagster.catalog.datahub import dataset_urn
    from lumos_dagster.floor.config import load_config
    from lumos_dagster.lineage.catalogue import load_catalogue
    from lumos_dagster.sources import build_sources
    from lumos_dagster.store import SnapshotStore

    config = load_config(str(config_path))
    roots = {name: s.root for name, s in build_sources(config).items()}
    with SnapshotStore(config.store_url) as store:
        return {d.name: dataset_urn(d.ref) for d in load_catalogue(config, store, roots).datasets}


class Observer:
    """Polls DataHub Lite for the expectations not met yet; records when each is first met."""

    def __init__(self, lite_path: str, config_path: Path):
        self.lite_path, self.config_path = lite_path, config_path
        self.urns: dict[str, str] = {}  # name → DataHub urn, of every dataset seen in the registry so far
        self.pending: list[Expectation] = []
        self.done: list[Expectation] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def add(self, e: Expectation) -> None:
        with self.lock:
            # a later change to the same dataset supersedes an earlier one's test: the catalog shows the newest
            for old in [p for p in self.pending if p.dataset == e.dataset]:
                old.note += " superseded"
                self.pending.remove(old)
                self.done.append(old)
            self.pending.append(e)

    def run(self) -> None:
        from lumos_dagster.catalog.datahub_lite import open_lite
        from lumos_dagster.catalog.datahub_read import snapshot_from_aspects

        def urn(name: str) -> str | None:
            if name not in self.urns:  # a new dataset: once the registry has it
                self.urns.update(datahub_urns(self.config_path))
            return self.urns.get(name)

        while not self.stop.wait(2.0):
            if not os.path.exists(self.lite_path):
                continue
            with self.lock:
                pending = list(self.pending)
            try:
                lite = open_lite(self.lite_path, read_only=True)
            except Exception as exc:  # noqa: BLE001  (a write in progress: the next round reads it)
                log(f"observer: {exc}")
                continue
            now = time.time()
            stamp = datetime.fromtimestamp(now, timezone.utc)
            try:
                for e in pending:
                    try:
                        found = urn(e.dataset)
                        aspects = lite.get(found, None, typed=True) if found else None
                        snap = snapshot_from_aspects(found, aspects, stamp) if aspects else None
                    except Exception as exc:  # noqa: BLE001  (a half-written entity: the next round reads it)
                        log(f"observer: {e.dataset}: {type(exc).__name__}: {exc}")
                        continue
                    if e.test(snap):
                        e.seen, e.shown = now, snap
                        with self.lock:
                            if e in self.pending:
                                self.pending.remove(e)
                                self.done.append(e)
            finally:
                lite.close()


class Sampler:
    """Every `every` seconds: each long-lived process's RSS and the deployment's CPU seconds."""

    def __init__(self, processes: dict[str, int], every: float = 20.0):
        import psutil

        self.procs = {name: psutil.Process(pid) for name, pid in processes.items()}
        self.every, self.samples, self.stop = every, [], threading.Event()

    def cpu(self) -> float:
        total = 0.0
        for p in self.procs.values():
            try:
                for q in [p, *p.children(recursive=True)]:
                    t = q.cpu_times()
                    total += t.user + t.system + t.children_user + t.children_system
            except Exception:  # noqa: BLE001  (a child ended while summed)
                continue
        return total

    def rss(self) -> dict[str, float]:
        """MB of each process with its own children: a code server's gRPC process, not the run workers
        that process starts."""
        out = {}
        for name, p in self.procs.items():
            try:
                kids = p.children(recursive=False)
                out[name] = sum(q.memory_info().rss for q in [p, *kids]) / 2**20
            except Exception:  # noqa: BLE001
                out[name] = float("nan")
        return out

    def run(self) -> None:
        while True:
            self.samples.append((time.time(), self.rss(), self.cpu()))
            if self.stop.wait(self.every):
                return


def _runs(deployment) -> dict[str, int]:
    query = "{ runsOrError(limit: 100000) { ... on Runs { results { status } } } }"
    runs = deployment.graphql(query)["runsOrError"]["results"]
    out: dict[str, int] = {}
    for r in runs:
        out[r["status"]] = out.get(r["status"], 0) + 1
    return out


def _event_rows(dagster_db: str) -> int:
    import psycopg

    with psycopg.connect(f"postgresql://postgres@127.0.0.1:5432/{dagster_db}") as conn:
        return conn.execute("SELECT count(*) FROM event_logs").fetchone()[0]


def _store_bytes(store_db: str) -> int:
    """The store database's size, after a plain VACUUM (what autovacuum does: dead rows reused)."""
    import psycopg

    with psycopg.connect(f"postgresql://postgres@127.0.0.1:5432/{store_db}", autocommit=True) as conn:
        conn.execute("VACUUM")
        return conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]


def _materialize(env: dict, partition: str) -> float:
    start = time.perf_counter()
    done = subprocess.run([str(BIN / "dagster"), "asset", "materialize", "-m", "lumos_dagster.definitions",
                           "--select", "* and not group:reports", "--partition", partition],
                          cwd=ROOT, env=env, capture_output=True, text=True)  # fmt: skip
    if done.returncode:
        raise RuntimeError(f"materialize {partition} failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - start


def _duplicates(path: Path) -> int:
    """Deliveries of the same content to the same dataset twice in a row (OpenLineage file catalog)."""
    if not path.exists():
        return 0
    last: dict[str, str] = {}
    dupes = 0
    for line in path.read_text().splitlines():
        event = json.loads(line)
        for ds in event.get("outputs", []):
            key = ds["name"]
            content = json.dumps(ds.get("facets", {}), sort_keys=True)
            dupes += last.get(key) == content
            last[key] = content
    return dupes


def _timelines(api: str, token: str, names: set[str]) -> dict[str, list[dict]]:
    """Each dataset's version timeline through the API (`GET /v1/datasets/{name}/history`); a dataset
    with no version has none."""
    out = {}
    with httpx.Client(base_url=api, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
        for name in sorted(names):
            r = client.get(f"/v1/datasets/{name}/history")
            if r.status_code == 200:
                out[name] = r.json()
    return out


def _torn(timelines: dict[str, list[dict]], names: set[str]) -> list[str]:
    """Datasets written torn or partial (cut, header-only, appended) whose schema ever changed: the mutator
    never changes such a dataset's columns, so any version after its first (its removal aside) is a torn
    or partial file become a version."""
    out = []
    for name in sorted(names & timelines.keys()):
        kinds = {c["kind"] for e in timelines[name] for c in e["changes"]} - {"DATASET_REMOVED", "DATASET_ADDED"}
        if kinds:
            out.append(f"{name}: {sorted(kinds)}")
    return out


def _removals(done: list[Expectation], store_url: str) -> tuple[int, list[str]]:
    """(removals shown, those whose version or change class differ between the store's tombstone and
    DataHub Lite, as `name: store 2.0.0 major, catalog 1.0.0 new`). The store is read directly: the API
    answers for datasets it has, and a removed one it has not."""
    from lumos_dagster.store import SnapshotStore

    shown = [e for e in done if e.change == "delete_dataset" and e.shown is not None]
    differ = []
    with SnapshotStore(store_url) as store:
        urns = {r.name: r.urn for r in store.datasets(include_removed=True)}
        for e in shown:
            stones = [s for s in store.history(urns[e.dataset]) if s.removed] if e.dataset in urns else []
            kept = (stones[-1].version, stones[-1].change_class) if stones else (None, None)
            seen = (e.shown.version, e.shown.change_class)
            if kept != seen:
                differ.append(f"{e.dataset}: store {kept[0]} {kept[1]}, catalog {seen[0]} {seen[1]}")
    return len(shown), differ


def _histories(timelines: dict[str, list[dict]]) -> tuple[int, int, list[str]]:
    """(datasets whose versions are out of order, versions given twice or without a change, examples)."""
    wrong = dup = 0
    examples = []
    for name, timeline in timelines.items():
        versions = [tuple(int(x) for x in e["version"].split(".")) for e in timeline]
        if versions != sorted(versions):
            wrong += 1
            examples.append(f"{name}: {[e['version'] for e in timeline]}")
        twice = len(set(versions)) != len(versions)
        empty = [e["version"] for e in timeline if e["previous_version"] and not e["changes"]]
        if twice or empty:
            dup += 1
            examples.append(f"{name}: {[e['version'] for e in timeline]} (without a change: {empty})")
    return wrong, dup, examples


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def soak(datasets: int, minutes: float, rate: float, tuned: bool, png: Path | None) -> dict:
    from lumos_dagster.cli.deploy import Deployment

    tag = uuid.uuid4().hex[:8]
    work = Path(tempfile.mkdtemp(prefix="lumos-soak-"))
    lake_root = work / "lake"
    store_db, dagster_db = f"lumos_soak_store_{tag}", f"lumos_soak_dagster_{tag}"
    _database(store_db)
    lake = Lake(lake_root)
    started = time.perf_counter()
    lake.build(datasets)
    log(f"lake of {datasets} datasets in {time.perf_counter() - started:.0f} s under {lake_root}")
    config = project(work, lake_root, store_db)
    env = {**os.environ, "LUMOS_CONFIG": str(config)}
    subprocess.run([str(BIN / "lumos"), "discover"], env=env, cwd=ROOT, check=True, capture_output=True)
    deployment = Deployment(work / "deploy", {"lumos": config}, port=3300 + int(tag[:2], 16) % 100, tuned=tuned,
                            pg_url=f"postgresql+psycopg2://postgres@127.0.0.1:5432/{dagster_db}")  # fmt: skip
    token = "lumos_soak_" + tag
    api = None
    try:
        started, up_at = time.perf_counter(), time.time()
        deployment.up()
        log(f"deployment up in {time.perf_counter() - started:.0f} s: {deployment.running()}")
        denv = {**env, **deployment.instance_env()}
        api = _serve(work, config, token)
        sampler = Sampler(deployment.running())
        observer = Observer(str(work / "lite.db"), config)
        firsts = lake.first(up_at)  # nobody materializes anything: the sensors' first tick does
        for e in firsts:
            observer.add(e)
        threads = [threading.Thread(target=t.run, daemon=True) for t in (sampler, observer)]
        for t in threads:
            t.start()
        deadline = time.time() + FIRST_WITHIN
        while any(e.seen is None for e in firsts) and time.time() < deadline:
            time.sleep(5)
        first = {"datasets": len(firsts), "missed": sorted(e.dataset for e in firsts if e.seen is None),
                 "seconds": max((e.seen - e.landed for e in firsts if e.seen), default=float("nan"))}  # fmt: skip
        log(
            f"first snapshot of {len(firsts) - len(first['missed'])}/{len(firsts)} datasets in {first['seconds']:.0f} s"
        )
        with observer.lock:  # the soak's lag and misses are its changes'
            observer.pending = [e for e in observer.pending if e.change != "first_snapshot"]
        rows0, bytes0, cpu0 = _event_rows(dagster_db), _store_bytes(store_db), sampler.cpu()
        soak_start, changes, end = time.time(), 0, time.time() + minutes * 60
        while time.time() < end:
            expectation = lake.change()
            changes += 1
            if expectation is not None:
                observer.add(expectation)
            if changes % 60 == 0:
                log(f"{changes} changes, {len(observer.pending)} waiting for the catalog")
            time.sleep(max(0.0, soak_start + changes / rate - time.time()))
        deadline = time.time() + GRACE
        while observer.pending and time.time() < deadline:
            time.sleep(5)
        observer.stop.set()
        cpu = sampler.cpu() - cpu0
        rows1, bytes1 = _event_rows(dagster_db), _store_bytes(store_db)
        sampler.stop.set()
        for t in threads:
            t.join(30)
        runs = _runs(deployment)
        day = str(today() - timedelta(days=1))
        day_s = _materialize(denv, day)
        rows2, bytes2 = _event_rows(dagster_db), _store_bytes(store_db)
        _materialize(denv, day)  # the same day again: nothing changed
        rows3, bytes3 = _event_rows(dagster_db), _store_bytes(store_db)
        torn_names = {e.dataset for e in observer.done + observer.pending if e.change == "torn_file"}
        partial = (torn_names | lake.partial) - lake.removed
        # one timeline per dataset, read once for every check
        timelines = _timelines(api[0], token, set(lake.datasets) | partial)
        wrong, dup, examples = _histories(timelines)
        torn = _torn(timelines, partial)
        removals = _removals(observer.done, f"{PG}/{store_db}")
        result = _result(lake, observer, sampler, runs, changes, minutes, cpu, soak_start,
                         {"rows_soak": rows1 - rows0, "bytes_soak": bytes1 - bytes0, "rows_day": rows2 - rows1,
                          "bytes_day": bytes2 - bytes1, "rows_unchanged_day": rows3 - rows2,
                          "bytes_unchanged_day": bytes3 - bytes2, "day_s": day_s},
                         wrong, dup, examples, _duplicates(work / "deliveries.jsonl"), datasets, torn, first,
                         removals)  # fmt: skip
        if png is not None:
            plot(observer, sampler, soak_start, png)
        return result
    finally:
        if api is not None:
            api[1].terminate()
        deployment.down()
        _database(store_db, drop=True)
        _database(dagster_db, drop=True)
        discard(work)


def _serve(work: Path, config: Path, token: str):
    """`lumos serve` on the soak's store with one read token: (url, process)."""
    from lumos_dagster.api.auth import hash_token

    data = yaml.safe_load(config.read_text())
    port = 8900 + os.getpid() % 50
    data["api"] = {"port": port, "tokens": [{"name": "soak", "hash": hash_token(token), "scopes": ["read"]}]}
    served = work / "serve.yaml"
    served.write_text(yaml.safe_dump(data))
    proc = subprocess.Popen([str(BIN / "lumos"), "serve", "-c", str(served)], cwd=ROOT,
                            stdout=open(work / "serve.log", "wb"), stderr=subprocess.STDOUT)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return url, proc
        except httpx.TransportError:
            time.sleep(0.5)
    raise RuntimeError(f"lumos serve did not start: {(work / 'serve.log').read_text()[-2000:]}")


def _result(lake, observer, sampler, runs, changes, minutes, cpu, start, growth, wrong, dup, examples, dupes,
            datasets, torn, first, removals) -> dict:  # fmt: skip
    # a torn file's test is its dataset's fields, which the torn half never changes: no lag to measure
    met = [e for e in observer.done if e.seen is not None and e.change not in ("torn_file", "first_snapshot")]
    lags = [e.seen - e.landed for e in met]
    by_kind: dict[str, list[float]] = {}
    for e in met:
        by_kind.setdefault(e.change, []).append(e.seen - e.landed)
    missed = [f"{e.change} {e.dataset}" for e in observer.pending]
    ten = next((s for s in sampler.samples if s[0] >= start + 600), sampler.samples[len(sampler.samples) // 6])
    last = sampler.samples[-1]
    growth_ratio = {name: last[1][name] / ten[1][name] for name in last[1] if ten[1].get(name)}
    return {
        "datasets": datasets,
        "minutes": minutes,
        "changes": changes,
        "expectations": len(observer.done) + len(observer.pending),
        "missed": missed,
        "lag": {"p50": _percentile(lags, 0.5), "p99": _percentile(lags, 0.99), "max": max(lags, default=float("nan"))},
        "lag_by_kind": {k: (len(v), statistics.median(v), max(v)) for k, v in sorted(by_kind.items())},
        "runs": runs,
        "versions_wrong": wrong,
        "versions_duplicated": dup,
        "version_examples": examples[:10],
        "deliveries_duplicated": dupes,
        "torn_versions": torn,
        "first_snapshot": first,
        "removals": {"shown": removals[0], "differ": removals[1]},
        "memory_mb_at_10_min": ten[1],
        "memory_mb_at_end": last[1],
        "memory_growth": growth_ratio,
        "cpu_s_per_change": cpu / max(changes, 1),
        "growth": growth,
    }


def plot(observer: Observer, sampler: Sampler, start: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    kinds = sorted({e.change for e in observer.done if e.seen})
    for kind in kinds:
        points = [((e.landed - start) / 60, e.seen - e.landed) for e in observer.done if e.seen and e.change == kind]
        top.scatter([p[0] for p in points], [p[1] for p in points], s=8, label=kind)
    top.axhline(90, color="red", linewidth=0.8, linestyle="--")
    top.set_ylabel("lag to DataHub Lite (s)")
    top.legend(fontsize=7, ncol=4)
    for name in sampler.samples[0][1]:
        bottom.plot([(t - start) / 60 for t, _, _ in sampler.samples], [rss[name] for _, rss, _ in sampler.samples],
                    label=name)  # fmt: skip
    bottom.set_ylabel("RSS (MB)")
    bottom.set_xlabel("minutes into the soak")
    bottom.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def render(r: dict) -> str:
    lines = [
        f"### Soak: {r['datasets']:,} datasets, {r['minutes']:g} minutes, {r['changes']:,} changes",
        "",
        "| measure | value |",
        "|---|---:|",
        f"| changes with something for the catalog to show | {r['expectations']:,} |",
        f"| missed (not shown {GRACE} s after the soak) | {len(r['missed'])} |",
        f"| lag p50 / p99 / max (s) | {r['lag']['p50']:.1f} / {r['lag']['p99']:.1f} / {r['lag']['max']:.1f} |",
        f"| runs by status | {', '.join(f'{k} {v}' for k, v in sorted(r['runs'].items()))} |",
        f"| versions wrong / duplicated | {r['versions_wrong']} / {r['versions_duplicated']} |",
        f"| deliveries duplicated | {r['deliveries_duplicated']} |",
        f"| torn or partial files that became a version | {len(r['torn_versions'])} |",
        f"| first snapshot of every dataset, nobody materializing: datasets / missed / s after `up` | "
        f"{r['first_snapshot']['datasets']:,} / {len(r['first_snapshot']['missed'])} / "
        f"{r['first_snapshot']['seconds']:.0f} |",
        f"| removals: shown / version or change class differing between store and catalog | "
        f"{r['removals']['shown']} / {len(r['removals']['differ'])} |",
        f"| CPU seconds per change (every deployment process) | {r['cpu_s_per_change']:.2f} |",
        f"| event-log rows: soak / a day's partition / the same day unchanged | {r['growth']['rows_soak']:,} / "
        f"{r['growth']['rows_day']:,} / {r['growth']['rows_unchanged_day']:,} |",
        f"| store bytes per dataset: a day's partition / the same day unchanged | "
        f"{r['growth']['bytes_day'] / r['datasets']:,.0f} / "
        f"{r['growth']['bytes_unchanged_day'] / r['datasets']:,.0f} |",
        "",
        "| change | count | median lag (s) | max lag (s) |",
        "|---|---:|---:|---:|",
    ]
    lines += [f"| {k} | {n} | {med:.1f} | {mx:.1f} |" for k, (n, med, mx) in r["lag_by_kind"].items()]
    lines += ["", "| process | RSS at minute 10 (MB) | at the end (MB) | end ÷ minute 10 |", "|---|---:|---:|---:|"]
    for name, mb in r["memory_mb_at_end"].items():
        growth = r["memory_growth"].get(name, float("nan"))
        lines.append(f"| {name} | {r['memory_mb_at_10_min'][name]:.0f} | {mb:.0f} | {growth:.2f} |")
    if r["missed"]:
        lines += ["", "Missed: " + ", ".join(r["missed"][:20])]
    if r["version_examples"]:
        lines += ["", "Versions: " + "; ".join(r["version_examples"])]
    if r["torn_versions"]:
        lines += ["", "Versions from torn or partial files: " + "; ".join(r["torn_versions"][:10])]
    if r["removals"]["differ"]:
        lines += ["", "Removals that differ: " + "; ".join(r["removals"]["differ"][:10])]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=200)
    parser.add_argument("--minutes", type=float, default=4)
    parser.add_argument("--rate", type=float, default=1.0, help="lake changes a second")
    parser.add_argument("--long", action="store_true", help="1,000 datasets for 60 minutes")
    parser.add_argument("--tuned", action="store_true", help="the deployment on Lumos' tuned event log")
    parser.add_argument("--png", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.long:
        args.datasets, args.minutes = max(args.datasets, 1000), max(args.minutes, 60)
    if args.png is not None and importlib.util.find_spec("matplotlib") is None:
        # found before the hour of soaking, not after it
        parser.error("--png needs matplotlib: pip install -e '.[bench]' (make bench installs it)")
    result = soak(args.datasets, args.minutes, args.rate, args.tuned, args.png)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))
    print(render(result))


if __name__ == "__main__":
    main()
