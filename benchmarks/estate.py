"""An estate of 100,000 datasets, snapshotted by the daemon's own schedule, end to end.

    .venv/bin/python -m benchmarks.estate                       # 100,000 datasets in 20 code locations
    .venv/bin/python -m benchmarks.estate --datasets 10000 --locations 2 [--stock]

The lake (benchmarks/lake.py: one file a dataset, Parquet, ORC, Avro, CSV and JSON lines in turn,
nested columns) is split by top folder over code locations in one workspace (one lumos.yaml each,
by source), sharing one PostgreSQL snapshot store and one DataHub Lite catalog; a tenth of each
location's datasets declare an upstream in the location before it, so lineage crosses locations.
The deployment is `lumos deploy`'s (the daemon with queued runs, PostgreSQL instance storage, a
code server per location; `--stock`: Dagster's own event log, else Lumos' tuned one). Each
location's daily snapshot schedule is set to tick a few minutes after the deployment is up
(`partitions.snapshot_lag`), and snapshots yesterday's partition: every location's datasets in
runs of `partitions.datasets_per_run`, queued and run `max_concurrent_runs` at a time.

Measured: each code location's load time (a fresh process building its definitions), the
webserver's answer to one location's asset catalog, the time from the schedule's tick to the
last write into DataHub Lite, and every dataset's fields in DataHub Lite against the lake.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from benchmarks.lake import generate_lake
from benchmarks.soak import PG, _database, discard

ROOT = Path(__file__).resolve().parents[1]


def log(text: str) -> None:
    print(f"[estate {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


BIN = Path(sys.executable).parent
LOAD = """
import sys, time
t0 = time.perf_counter()
from lumos_dagster.floor.config import load_config
from lumos_dagster.definitions import build_definitions
defs = build_definitions(load_config(sys.argv[1]))
defs.resolve_asset_graph()
print(time.perf_counter() - t0)
"""
CATALOG_QUERY = """
query LocationAssets($location: String!) {
  repositoryOrError(repositorySelector: {repositoryLocationName: $location, repositoryName: "__repository__"}) {
    ... on Repository { assetNodes { assetKey { path } groupName isPartitioned description } }
  }
}"""


def configs(work: Path, lake: Path, locations: int, store_db: str, day: str, lag: str) -> dict[str, Path]:
    """One lumos.yaml per location (top folders `d<k>` of the lake): its own source, the shared store and
    catalog, and for a tenth of its datasets an upstream in the location before it."""
    out = {}
    for k in range(locations):
        names = sorted(p.name for p in (lake / f"d{k}").iterdir())
        before = sorted(p.name for p in (lake / f"d{(k - 1) % locations}").iterdir()) if locations > 1 else []
        declared = (
            [{"name": n, "upstream": [before[i % len(before)]]} for i, n in enumerate(names[::10])] if before else []
        )
        config = {
            "sources": [{"name": f"part{k}", "root": str(lake / f"d{k}")}],
            "store": {"url": f"{PG}/{store_db}"},
            "catalog": {"type": "datahub-lite", "path": str(work / "lite.db")},
            "partitions": {"start": day, "snapshot_lag": lag},
            "datasets": declared,
        }
        path = work / f"estate{k:02d}.yaml"
        path.write_text(yaml.safe_dump(config))
        out[f"estate{k:02d}"] = path
    return out


def load_times(paths: list[Path]) -> list[float]:
    times = []
    for path in paths:
        done = subprocess.run([sys.executable, "-c", LOAD, str(path)], capture_output=True, text=True, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
        if done.returncode:
            raise RuntimeError(f"{path}: the code location did not load:\n{done.stderr[-3000:]}")
        times.append(float(done.stdout.strip().splitlines()[-1]))
    return times


def _lag_until(moment: datetime) -> str:
    """The `snapshot_lag` that makes a daily schedule tick at `moment` (UTC)."""
    minutes = moment.hour * 60 + moment.minute
    return f"{minutes // 60}h {minutes % 60}m"


def _last_write(store_db: str) -> tuple[float | None, int]:
    """(the last delivery to DataHub Lite, epoch s; entries delivered) from the store's outbox."""
    import psycopg

    with psycopg.connect(f"postgresql://postgres@127.0.0.1:5432/{store_db}") as conn:
        last, count = conn.execute(
            "SELECT max(delivered_at), count(*) FROM lumos_outbox WHERE status = 'delivered'"
        ).fetchone()
    return (last.timestamp() if last else None), count


def _right(lite: Path, truth: dict[str, list[str]]) -> tuple[int, int]:
    """(datasets in DataHub Lite whose fields are the lake's, datasets there)."""
    from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog

    found = {s.dataset.name: sorted(p for p, _ in s.schema.flatten()) for s in DataHubLiteCatalog(str(lite)).read_all()}
    expected = {name.split("/", 1)[1]: fields for name, fields in truth.items()}
    return sum(found.get(n) == f for n, f in expected.items()), len(found)


def estate(datasets: int, locations: int, stock: bool, max_runs: int) -> dict:
    from lumos_dagster.cli.deploy import Deployment

    tag = uuid.uuid4().hex[:8]
    work = Path(tempfile.mkdtemp(prefix="lumos-estate-"))
    store_db, dagster_db = f"lumos_estate_store_{tag}", f"lumos_estate_dagster_{tag}"
    _database(store_db)
    yesterday = datetime.now(UTC).date() - timedelta(days=1)
    started = time.perf_counter()
    truth = generate_lake(work / "lake", datasets, 1, 1, folders=locations, first_day=yesterday)
    log(f"lake of {datasets:,} datasets in {time.perf_counter() - started:.0f} s")
    deployment = None
    try:
        # time to discover, measure loads and start every code location first
        tick = (datetime.now(UTC) + timedelta(minutes=3 + locations // 2)).replace(second=0, microsecond=0)
        paths = configs(work, work / "lake", locations, store_db, str(yesterday), _lag_until(tick))
        started = time.perf_counter()
        for path in paths.values():
            subprocess.run([str(BIN / "lumos"), "discover", "-c", str(path)], cwd=ROOT, check=True, capture_output=True)
        log(f"lumos discover of {locations} locations in {time.perf_counter() - started:.0f} s")
        loads = load_times(list(paths.values())[:3])
        log(f"code location loads: {', '.join(f'{s:.2f} s' for s in loads)}")
        deployment = Deployment(work / "deploy", paths, port=3400 + int(tag[:2], 16) % 100,
                                max_concurrent_runs=max_runs, tuned=not stock,
                                pg_url=f"postgresql+psycopg2://postgres@127.0.0.1:5432/{dagster_db}")  # fmt: skip
        started = time.perf_counter()
        deployment.up(timeout=1800)
        up_s = time.perf_counter() - started
        log(f"deployment of {locations} code locations up in {up_s:.0f} s; the schedule ticks at {tick:%H:%M} UTC")
        started = time.perf_counter()
        answer = deployment.graphql(CATALOG_QUERY, {"location": next(iter(paths))})
        catalog_s = time.perf_counter() - started
        nodes = len(answer["repositoryOrError"].get("assetNodes") or [])
        if nodes < datasets // locations:
            raise RuntimeError(f"the asset catalog query answered {nodes} assets: {str(answer)[:500]}")
        while datetime.now(UTC) < tick:
            time.sleep(5)
        query = "{ runsOrError { ... on Runs { results { status } } } }"
        while True:
            runs = [r["status"] for r in deployment.graphql(query)["runsOrError"]["results"]]
            delivered = _last_write(store_db)[1]
            if runs and all(s in ("SUCCESS", "FAILURE", "CANCELED") for s in runs) and delivered >= datasets:
                break
            if datetime.now(UTC) > tick + timedelta(minutes=90):
                raise RuntimeError(f"not done after 90 minutes: runs {runs}, {delivered} delivered")
            log(f"runs {dict((s, runs.count(s)) for s in set(runs))}, {delivered:,} datasets in DataHub Lite")
            time.sleep(20)
        last, delivered = _last_write(store_db)
        right, in_lite = _right(work / "lite.db", truth)
        return {
            "datasets": datasets,
            "locations": locations,
            "instance": "stock" if stock else "tuned",
            "max_concurrent_runs": max_runs,
            "load_s": loads,
            "up_s": up_s,
            "catalog_query_s": catalog_s,
            "catalog_assets": nodes,
            "tick_to_last_write_s": (last - tick.timestamp()) if last else None,
            "runs": {s: runs.count(s) for s in set(runs)},
            "in_lite": in_lite,
            "right": right,
            "memory_mb": {name: p.memory_info().rss / 2**20 for name, p in _procs(deployment).items()},
        }
    finally:
        if deployment is not None:
            deployment.down()
        _database(store_db, drop=True)
        _database(dagster_db, drop=True)
        discard(work)


def _procs(deployment) -> dict:
    return deployment.processes()


def render(r: dict) -> str:
    minutes = r["tick_to_last_write_s"] / 60 if r["tick_to_last_write_s"] else float("nan")
    return "\n".join([
        f"### Estate: {r['datasets']:,} datasets in {r['locations']} code locations ({r['instance']} instance, "
        f"{r['max_concurrent_runs']} runs at a time)",
        "",
        "| measure | value | target |",
        "|---|---:|---:|",
        f"| schedule tick → last DataHub Lite write | {minutes:.1f} min | ≤ 20 min |",
        f"| datasets right in DataHub Lite | {r['right']:,} / {r['datasets']:,} ({r['in_lite']:,} there) | all |",
        f"| code location load (3 fresh processes) | {', '.join(f'{s:.2f}' for s in r['load_s'])} s | ≤ 3 s |",
        f"| webserver: one location's asset catalog ({r['catalog_assets']:,} assets) | {r['catalog_query_s']:.2f} s "
        "| ≤ 3 s |",
        f"| deployment up (every location loaded) | {r['up_s']:.0f} s | |",
        f"| runs | {', '.join(f'{k} {v}' for k, v in sorted(r['runs'].items()))} | no failure |",
        f"| memory after the run (MB) | {_memory(r['memory_mb'])} | |",
    ])  # fmt: skip


def _memory(rss: dict[str, float]) -> str:
    """The code servers as a range (one per location), the other processes each by name."""
    servers = [v for k, v in rss.items() if k.startswith("code-server")]
    parts = [f"{len(servers)} code servers {min(servers):,.0f}–{max(servers):,.0f}"] if servers else []
    parts += [f"{k} {v:,.0f}" for k, v in sorted(rss.items()) if not k.startswith("code-server")]
    return ", ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=100_000)
    parser.add_argument("--locations", type=int, default=20)
    parser.add_argument("--max-runs", type=int, default=2)
    parser.add_argument("--stock", action="store_true", help="Dagster's own event log (default: Lumos' tuned one)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    result = estate(args.datasets, args.locations, args.stock, args.max_runs)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))
    print(render(result))


if __name__ == "__main__":
    main()
