"""Engines side by side: where Spark — local, a standalone cluster, Spark Connect — pays against the
process pool, for a snapshot's schema reading and for profiling, over local files and an S3 lake.

    PYTHONPATH=$PWD .venv/bin/python -m benchmarks.engines [--sizes 1000,10000] [--repeat 1] [--quick]

Each size is a dataset of that many small Parquet files (`ROWS` rows, four columns), written to a local
folder and to a bucket on moto's S3 server (tests/emulators.py). Engines:

* pool: `PoolReader` (a process pool of `os.cpu_count()` workers made per call, as a run makes it:
  forked for local files, spawned for S3) reads the schemas; profiling has no pool in Lumos (files are
  profiled on Spark), so a stand-in measures what a pool would take: each worker aggregates its files'
  rows, nulls, min and max (`lumos_dagster.formats.rows`, no distinct estimate), the parent merges.
* local: Spark `local[2]`, as a run's resource makes it.
* standalone: a standalone master and two workers of one core and 512 MB each (benchmarks/spark_servers.py).
* connect: a Spark Connect server on `local[2]`.

Each Spark engine runs in a process of its own (pyspark keeps one kind of session per process), measured
as a run pays it: the session's start (`start_session` and a first two-item job), then per size
`read_schemas` and `profile_files` (`lumos_dagster.spark`), every result checked. Times are the best of
`--repeat`. From the times at two sizes, each engine's fixed seconds and seconds per file (the line through
them), and the file count from which it beats the pool, its session start included (see `threshold`).
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Callable

from benchmarks.measure import machine
from benchmarks.spark_servers import ROOT, connect_server, standalone_cluster

SIZES = (1_000, 10_000)
QUICK = (100, 300)
ENGINES = ("pool", "local", "standalone", "connect")
STORES = ("local", "s3")
ROWS = 20
WARM = 10
BUCKET = "lumos-bench"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "lumos", "AWS_SECRET_ACCESS_KEY": "lumos-secret", "AWS_DEFAULT_REGION": "us-east-1"}
#: two files that are not there: a session's first job, as a run's first read pays it
MISSING = [("/nonexistent/a.parquet", "parquet"), ("/nonexistent/b.parquet", "parquet")]
SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.python.worker.reuse": "true",
    "spark.sql.session.timeZone": "UTC",
}


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ the lake


def _parquet(i: int) -> bytes:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    base = i * ROWS
    table = pa.table({
        "id": pa.array(range(base, base + ROWS), pa.int64()),
        "name": [None if (base + r) % 5 == 0 else f"n{base + r}" for r in range(ROWS)],
        "amount": [(base + r) * 0.5 for r in range(ROWS)],
        "day": pa.array([19_000 + i % 30] * ROWS, pa.int32()).cast(pa.date32()),
    })  # fmt: skip
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def write_lake(folder: Path, sizes: tuple[int, ...], client) -> dict[int, list[str]]:
    """Each size's files: local under `folder/f{n}/`, and the same keys in the S3 bucket (`client`: boto3's, None:
    local only). Returns the keys."""
    keys = {}
    for n in sizes:
        keys[n] = [f"f{n}/part-{i:05d}.parquet" for i in range(n)]
        bodies = [_parquet(i) for i in range(n)]
        for key, body in zip(keys[n], bodies, strict=True):
            (folder / key).parent.mkdir(parents=True, exist_ok=True)
            (folder / key).write_bytes(body)
        if client is not None:
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda kb: client.put_object(Bucket=BUCKET, Key=kb[0], Body=kb[1]),
                              zip(keys[n], bodies, strict=True)))  # fmt: skip
        _log(f"{n:,} files written")
    return keys


# ------------------------------------------------------------------ the pool


def _profile_chunk(paths: list[str], fs) -> dict:
    """Rows, and per column nulls, min and max, of `paths` (what a profile aggregates, no distinct estimate)."""
    import pyarrow.compute as pc

    from lumos_dagster.formats.rows import record_batches

    out: dict = {"rows": 0, "columns": {}}
    for path in paths:
        for batch in record_batches(path, "parquet", tuple(fs) if fs else None):
            out["rows"] += batch.num_rows
            for name, column in zip(batch.schema.names, batch.columns, strict=True):
                nulls, low, high = out["columns"].get(name, (0, None, None))
                found = pc.min_max(column).as_py()
                low = min((v for v in (low, found["min"]) if v is not None), default=None)
                high = max((v for v in (high, found["max"]) if v is not None), default=None)
                out["columns"][name] = (nulls + column.null_count, low, high)
    return out


def pool_profile(paths: list[str], fs, workers: int) -> dict:
    """The profile stand-in on a process pool made for the call: rows and per column (nulls, min, max)."""
    from lumos_dagster.formats.readers import start_method

    context = multiprocessing.get_context(start_method([(paths[0], "parquet", fs)]))
    size = max(1, -(-len(paths) // (workers * 4)))
    chunks = [paths[i : i + size] for i in range(0, len(paths), size)]
    merged: dict = {"rows": 0, "columns": {}}
    with ProcessPoolExecutor(min(workers, len(chunks)), mp_context=context) as pool:
        for part in pool.map(_profile_chunk, chunks, [fs] * len(chunks)):
            merged["rows"] += part["rows"]
            for name, (nulls, low, high) in part["columns"].items():
                n0, l0, h0 = merged["columns"].get(name, (0, None, None))
                low = min((v for v in (l0, low) if v is not None), default=None)
                high = max((v for v in (h0, high) if v is not None), default=None)
                merged["columns"][name] = (n0 + nulls, low, high)
    return merged


# ------------------------------------------------------------------ measuring


def best(repeat: int, fn: Callable, *args) -> tuple[float, object]:
    """The fastest wall seconds of `repeat` calls of `fn(*args)`, and the last call's value."""
    times, value = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        value = fn(*args)
        times.append(time.perf_counter() - start)
    return min(times), value


def _check_schemas(results: dict, n: int, engine: str) -> None:
    bad = [r for r in results.values() if r.error is not None or r.row_count != ROWS]
    assert len(results) == n and not bad, f"{engine} read {len(results)} of {n} files, {bad[:1]}"


def _inputs(spec: dict, store: str, keys: list[str]) -> tuple[list[str], list[tuple], list | None]:
    """The paths, schema items and file system spec of `keys` on `store`."""
    fs = spec["fs"] if store == "s3" else None
    paths = [f"{BUCKET}/{k}" if fs else os.path.join(spec["folder"], k) for k in keys]
    return paths, [(p, "parquet", tuple(fs)) if fs else (p, "parquet") for p in paths], fs


def _measure_store(engine: str, spec: dict, repeat: int, schemas: Callable, profile: Callable) -> dict:
    """The warm-up (`{store}/{task}_warm_s`: a first read and profile of `WARM` files on each store: class loading, code
    generation, a pool's spawn, what a run's first reads pay once), then per store and size the schema and
    profile seconds (results checked)."""
    out: dict = {}
    for store in STORES:
        paths, items, fs = _inputs(spec, store, next(iter(spec["keys"].values()))[:WARM])
        out[f"{store}/schema_warm_s"], _ = best(1, schemas, items)
        out[f"{store}/profile_warm_s"], _ = best(1, profile, paths, fs)
    for store in STORES:
        for n, keys in spec["keys"].items():
            paths, items, fs = _inputs(spec, store, keys)
            schema_s, results = best(repeat, schemas, items)
            _check_schemas(results, int(n), engine)
            profile_s, rows = best(repeat, profile, paths, fs)
            assert rows == int(n) * ROWS, f"{engine} profiled {rows} rows of {int(n) * ROWS}"
            out[f"{store}/{n}"] = {"schema_s": schema_s, "profile_s": profile_s}
            _log(f"{engine} {store} {int(n):,} files: schemas {schema_s:.2f} s, profile {profile_s:.2f} s")
    return out


def measure_pool(spec: dict, repeat: int) -> dict:
    from lumos_dagster.formats.readers import PoolReader

    workers = os.cpu_count() or 1
    pool = PoolReader(workers=workers)
    empty = [("/nonexistent/a.parquet", "parquet"), ("/nonexistent/b.parquet", "parquet")]
    start_s, _ = best(max(3, repeat), pool, empty)  # a pool per call: its fork, start and shutdown
    return {"start_s": start_s, **_measure_store("pool", spec, repeat, pool,
                                                 lambda p, fs: pool_profile(p, fs, workers)["rows"])}  # fmt: skip


def measure_spark(engine: str, address: str, spec: dict, repeat: int) -> dict:
    """In this process: a session on `address` (a master, or a Connect server), timed as a run pays it."""
    from lumos_dagster.spark.profile import profile_files
    from lumos_dagster.spark.schemas import read_schemas
    from lumos_dagster.spark.session import start_session

    started = time.perf_counter()
    if engine == "connect":
        session = start_session(SPARK_CONF, address)
    else:
        conf = {**SPARK_CONF, "spark.master": address, "spark.pyspark.python": sys.executable}
        if engine == "standalone":
            conf |= {"spark.executor.memory": "512m", "spark.executorEnv.PYTHONPATH": str(ROOT)}
            conf |= {f"spark.executorEnv.{k}": v for k, v in CREDENTIALS.items()}
        session = start_session(conf)
    read_schemas(session, MISSING)
    start_s = time.perf_counter() - started
    _log(f"{engine}: session and a first job in {start_s:.1f} s")
    try:
        return {"start_s": start_s, **_measure_store(
            engine, spec, repeat, lambda items: read_schemas(session, items),
            lambda paths, fs: profile_files(session, paths, "parquet", 1.0, tuple(fs) if fs else None).row_count,
        )}  # fmt: skip
    finally:
        session.stop()


def _child(engine: str, address: str, spec_file: str, repeat: int) -> dict:
    env = {**os.environ, **CREDENTIALS, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable}
    command = [sys.executable, "-m", "benchmarks.engines", "--child", engine, address, spec_file,
               "--repeat", str(repeat)]  # fmt: skip
    out = subprocess.run(command, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT, timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(f"the {engine} engine failed (exit {out.returncode}); its log is above")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _spark_engine(engine: str, folder: Path, spec_file: Path, repeat: int) -> dict:
    """The measurements of a Spark engine, its servers started for it and stopped after (two clusters at once
    would share the 2 cores)."""
    if engine == "local":
        return _child(engine, "local[2]", str(spec_file), repeat)
    if engine == "standalone":
        (folder / "standalone").mkdir()
        with standalone_cluster(folder / "standalone", env=CREDENTIALS) as (master, _):
            return _child(engine, master, str(spec_file), repeat)
    with connect_server(folder / "connect.log", env=CREDENTIALS) as address:
        return _child(engine, address, str(spec_file), repeat)


def measure(sizes: tuple[int, ...], repeat: int = 1, engines: tuple[str, ...] = ENGINES) -> dict:
    """Seconds per engine, store and size."""
    from tests.emulators import s3_emulator

    os.environ.update(CREDENTIALS)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's line per request
    folder = Path(tempfile.mkdtemp(prefix="lumos-bench-engines-"))
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, folder, ignore_errors=True)
        server, url, client = s3_emulator(BUCKET)
        stack.callback(server.stop)
        keys = write_lake(folder / "lake", sizes, client)
        spec = {"folder": str(folder / "lake"), "keys": keys, "fs": ["s3", url.split("://", 1)[1], "us-east-1", "http"]}
        spec_file = folder / "spec.json"
        spec_file.write_text(json.dumps(spec))
        spec = json.loads(spec_file.read_text())  # the sizes as the children see them: text keys
        out = {}
        for engine in engines:
            out[engine] = (
                measure_pool(spec, repeat) if engine == "pool" else _spark_engine(engine, folder, spec_file, repeat)
            )
    return out


# ------------------------------------------------------------------ the figures


def line(m: dict, engine: str, store: str, task: str, sizes: tuple[int, ...]) -> tuple[float, float]:
    """(fixed seconds, seconds per file) of `task` by `engine` on `store`: the line through the smallest and
    largest size's times."""
    lo, hi = min(sizes), max(sizes)
    t_lo, t_hi = (m[engine][f"{store}/{n}"][f"{task}_s"] for n in (lo, hi))
    per_file = (t_hi - t_lo) / (hi - lo)
    return t_lo - per_file * lo, per_file


def threshold(fixed: float, per_file: float, pool_fixed: float, pool_per_file: float) -> float | None:
    """Files from which an engine (`fixed` seconds, session start included, and `per_file`) beats the pool:
    (fixed − pool_fixed) / (pool_per_file − per_file); None when its files cost no less than the pool's (never)."""
    gain = pool_per_file - per_file
    if gain <= 0:
        return None
    return max(0.0, (fixed - pool_fixed) / gain)


def cluster_threshold(start: float, fixed: float, per_file: float, cores: int, pool_fixed: float,
                      pool_per_file: float, cluster_cores: int | None) -> float | None:  # fmt: skip
    """A cluster's threshold when it brings `cluster_cores` executor cores of its own (None: without bound), from
    what was measured on `cores` here: its per-file cost shrinks as cores are added (per_file × cores /
    cluster_cores), its fixed cost (session `start` and job overhead `fixed`) does not."""
    scaled = 0.0 if cluster_cores is None else per_file * cores / cluster_cores
    return threshold(start + fixed, scaled, pool_fixed, pool_per_file)


def _files(n: float | None) -> str:
    return "never" if n is None else f"{n:,.0f}"


def report(m: dict, sizes: tuple[int, ...], repeat: int, load: str) -> list[str]:
    info = machine()
    engines = [e for e in ENGINES if e in m]
    lines = [
        "### Engines: the process pool, Spark local[2], a standalone cluster, Spark Connect",
        "",
        f"`PYTHONPATH=$PWD .venv/bin/python -m benchmarks.engines --sizes {','.join(map(str, sizes))} "
        f"--repeat {repeat}` on {info['cores']} cores, Python {info['python']}, pyspark {info['pyspark']}, "
        f"pyarrow {info['pyarrow']}; `uptime` at the start: {load}. Small Parquet files ({ROWS} rows, 4 columns), "
        "local and on moto's S3 server; wall seconds, the best of the runs. Start: Spark's session and a first "
        f"two-item job (the pool's: made, a no-op read, shut down). First: the first schema read and profile of {WARM} "
        "files on the store (class loading, code generation, a spawned pool's start), which a run pays once too.",
        "",
        "| engine | start (s) | store | first schemas, first profile (s) | files | schemas (s) | schemas (ms/file) "
        "| profile (s) | profile (ms/file) |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for e in engines:
        for store in STORES:
            for n in sizes:
                r = m[e][f"{store}/{n}"]
                lines.append(
                    f"| {e} | {m[e]['start_s']:.2f} | {store} | {m[e][store + '/schema_warm_s']:.2f}, "
                    f"{m[e][store + '/profile_warm_s']:.2f} | {n:,} | {r['schema_s']:.2f} | "
                    f"{r['schema_s'] / n * 1000:.2f} | {r['profile_s']:.2f} | {r['profile_s'] / n * 1000:.2f} |"
                )
    if len(sizes) < 2 or "pool" not in m:
        return lines
    lines += [
        "",
        "Fixed seconds and seconds per file: the line through the two sizes' times. An engine beats the pool from "
        "(its start + its first read + its fixed − the pool's fixed) ÷ (the pool's s/file − its s/file) files "
        "(never when its files cost no less). A cluster's executors bring cores of their own: with C cores its "
        "s/file is the measured one × 2 ÷ C (the 2 cores here), its fixed cost unchanged; C = ∞ gives the least.",
        "",
        "| task | store | engine | fixed (s) | ms/file | beats the pool here from (files) | C = 8 | C = 32 | C = ∞ |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for task in ("schema", "profile"):
        for store in STORES:
            pool_fixed, pool_per_file = line(m, "pool", store, task, sizes)
            lines.append(f"| {task} | {store} | pool | {pool_fixed:.2f} | {pool_per_file * 1000:.3f} | – | – | – | – |")
            for e in engines:
                if e == "pool":
                    continue
                fixed, per_file = line(m, e, store, task, sizes)
                start = m[e]["start_s"] + m[e][f"{store}/{task}_warm_s"]
                here = threshold(start + fixed, per_file, pool_fixed, pool_per_file)
                cells = [
                    cluster_threshold(start, fixed, per_file, 2, pool_fixed, pool_per_file, c) for c in (8, 32, None)
                ]
                lines.append(f"| {task} | {store} | {e} | {fixed:.2f} | {per_file * 1000:.3f} | {_files(here)} | "
                             + " | ".join(_files(c) for c in cells) + " |")  # fmt: skip
    return lines


def engines_report(sizes: tuple[int, ...] = SIZES, repeat: int = 1) -> list[str]:
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    return report(measure(sizes, repeat), sizes, repeat, load)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.engines", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="file counts, comma-separated")
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement (the best is kept)")
    parser.add_argument("--quick", action="store_true", help=f"a smoke run: sizes {QUICK}, once")
    parser.add_argument("--engines", default=",".join(ENGINES), help="which engines, comma-separated (pool first)")
    parser.add_argument("--json", help="also write the measurements here")
    parser.add_argument("--child", nargs=3, metavar=("ENGINE", "ADDRESS", "SPEC"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        engine, address, spec_file = args.child
        print(json.dumps(measure_spark(engine, address, json.loads(Path(spec_file).read_text()), args.repeat)))
        return
    sizes = QUICK if args.quick else tuple(int(s) for s in args.sizes.split(","))
    repeat = 1 if args.quick else args.repeat
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    m = measure(sizes, repeat, tuple(args.engines.split(",")))
    if args.json:
        Path(args.json).write_text(json.dumps({"sizes": sizes, "repeat": repeat, "load": load, "m": m}))
    print("\n".join(report(m, sizes, repeat, load)))


if __name__ == "__main__":
    main()
