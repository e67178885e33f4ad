"""Schema readers side by side: where the process pool, and Spark, start to pay.

    .venv/bin/python -m benchmarks.readers [--sizes 100,1000,10000] [--repeat 3]

For each size, a lake from `benchmarks.lake.generate_lake` (10 files per dataset, formats
rotating over Parquet, ORC, Avro, CSV and JSON lines) is read by the in-process loop, the
process pool (`os.cpu_count()` workers, a pool per call) and Spark `local[*]`, each with
`read_file_result`; the results must be equal. Times are the best of `--repeat` runs on a
warm page cache (this measures the readers, not the disk). Spark's session start
(`getOrCreate` and a first two-item job, as a run pays it) is measured apart, and shown
excluded from and included in its ms/file. The break-even figures are what the default
thresholds in `lumos_dagster/scan/readers.py` are set from.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Callable

from benchmarks.lake import generate_lake
from benchmarks.measure import machine
from lumos_dagster.formats import FileResult, format_of
from lumos_dagster.formats.readers import Item, PoolReader, read_in_process, start_method

SIZES = {False: (100, 300, 1_000, 3_000, 10_000), True: (100, 300, 1_000, 3_000, 10_000, 30_000)}
FILES_PER_DATASET = 10
#: two files that are not there: a job of two trivial reads (no module of ours to ship to the executors)
MISSING = [("/nonexistent/a.parquet", "parquet"), ("/nonexistent/b.parquet", "parquet")]


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def lake_items(root: Path, files: int) -> list[Item]:
    """A generated lake of `files` files under `root`, as (path, format) items."""
    generate_lake(root, max(1, files // FILES_PER_DATASET), min(files, FILES_PER_DATASET), 1)
    paths = sorted(os.path.join(d, f) for d, _, names in os.walk(root) for f in names if not f.startswith("_"))
    return [(p, format_of(p)) for p in paths]


def timed(fn: Callable[..., object], *args) -> tuple[float, float, object]:
    """Wall seconds, CPU seconds (this process and the children it reaped: a pool's
    workers) and the value of `fn(*args)`."""
    before, start = os.times(), time.perf_counter()
    value = fn(*args)
    wall, after = time.perf_counter() - start, os.times()
    cpu = sum(after[:4]) - sum(before[:4])  # user, system, children's user, children's system
    return wall, cpu, value


def best(repeat: int, fn: Callable[..., object], *args) -> tuple[float, object]:
    """Fastest wall time in seconds of `repeat` calls of `fn(*args)`, and the last call's value."""
    runs = [timed(fn, *args) for _ in range(repeat)]
    return min(wall for wall, _, _ in runs), runs[-1][2]


def _noop(item: Item) -> FileResult:
    return FileResult(item[0])


def pool_overhead(workers: int, repeat: int = 20) -> tuple[float, float]:
    """Seconds for a two-item no-op read: on a pool made per call (fork, start, shutdown,
    join), and on one pool kept alive (what keeping a pool for the process would save)."""
    items = [("a", None), ("b", None)]
    per_call, _ = best(repeat, PoolReader(_noop, workers), items)
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(start_method(items))) as pool:
        list(pool.map(_noop, items))  # workers started
        kept, _ = best(repeat, lambda: list(pool.map(_noop, items)))
    return per_call, kept


def spark_session():
    """A `local[*]` session as Lumos' Spark resource makes it (Python workers on this interpreter)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[*]")
        .appName("lumos-bench-readers")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.python.worker.reuse", "true")
        .config("spark.pyspark.python", sys.executable)
        .getOrCreate()
    )


def measure(sizes: tuple[int, ...], repeat: int = 3, spark: bool = True) -> dict:
    """Seconds per engine and size, the pool's overheads and Spark's start."""
    workers = os.cpu_count() or 1
    folder = Path(tempfile.mkdtemp(prefix="lumos-bench-readers-"))
    lakes, expected = {}, {}
    out: dict = {"workers": workers, "sizes": {}}
    try:
        for n in sizes:
            lakes[n] = lake_items(folder / f"lake{n}", n)
            _log(f"lake of {len(lakes[n]):,} files")
        out["pool_per_call_s"], out["pool_kept_s"] = pool_overhead(workers)
        pool = PoolReader(workers=workers)
        for n, items in lakes.items():
            loops, pools = [], []
            for _ in range(repeat):  # interleaved: a busy spell on the machine hits both alike
                loops.append(timed(read_in_process, items))
                pools.append(timed(pool, items))
            expected[n] = loops[-1][2]
            assert pools[-1][2] == expected[n], "the pool read differently from the loop"
            (loop_s, loop_cpu, _), (pool_s, pool_cpu, _) = (min(runs, key=lambda r: r[0]) for runs in (loops, pools))
            out["sizes"][n] = {"files": len(items), "loop_s": loop_s, "pool_s": pool_s, "pool_cpu_s": pool_cpu}
            _log(f"{n:,} files: loop {loop_s:.2f} s, pool {pool_s:.2f} s (CPU {loop_cpu:.2f} s, {pool_cpu:.2f} s)")
        if spark:
            from lumos_dagster.spark.schemas import read_schemas

            start = time.perf_counter()
            session = spark_session()
            read_schemas(session, MISSING)
            out["spark_start_s"] = time.perf_counter() - start
            out["spark_job_s"], _ = best(repeat, read_schemas, session, MISSING)
            _log(f"Spark start {out['spark_start_s']:.1f} s, an empty job {out['spark_job_s'] * 1000:.0f} ms")
            try:
                for n, items in lakes.items():
                    spark_s, got = best(repeat, read_schemas, session, items)
                    assert got == expected[n], "Spark read differently from the loop"
                    out["sizes"][n]["spark_s"] = spark_s
                    _log(f"{n:,} files: Spark {spark_s:.2f} s")
            finally:
                session.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return out


def _break_even(fixed_s: float, slower_per_file_s: float, faster_per_file_s: float) -> float | None:
    """Files from which an engine with `fixed_s` start and `faster_per_file_s` beats one
    with no start and `slower_per_file_s` (None: never)."""
    gain = slower_per_file_s - faster_per_file_s
    return fixed_s / gain if gain > 0 else None


def _per_file(rows: list[dict], key: str) -> float:
    """Seconds per file: the least-squares slope of time over file count (fixed costs drop out)."""
    xs, ys = [r["files"] for r in rows], [r[key] for r in rows]
    if len(xs) < 2:
        return ys[0] / xs[0]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def _files(n: float | None) -> str:
    return "never" if n is None else f"~{n:,.0f} files"


def report(m: dict) -> list[str]:
    """The markdown table and the break-even figures."""
    has_spark = "spark_start_s" in m
    lines = [
        f"### Schema readers: in-process loop, process pool ({m['workers']} workers), Spark local[*]",
        "",
        "| files | loop (ms/file) | pool (ms/file) | pool CPU, all processes (ms/file) "
        "| Spark, start excluded (ms/file) | Spark, start included (ms/file) | fastest |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in m["sizes"].values():
        n = r["files"]
        cells = {"loop": r["loop_s"], "pool": r["pool_s"]}
        spark_cells = ["n/a", "n/a"]
        if has_spark:
            cells["Spark (started)"] = r["spark_s"]
            cells["Spark (cold)"] = r["spark_s"] + m["spark_start_s"]
            spark_cells = [f"{r['spark_s'] / n * 1000:.2f}", f"{cells['Spark (cold)'] / n * 1000:.2f}"]
        fastest = min((k for k in cells if k != "Spark (started)"), key=cells.get)
        lines.append(
            f"| {n:,} | {r['loop_s'] / n * 1000:.2f} | {r['pool_s'] / n * 1000:.2f} | "
            f"{r['pool_cpu_s'] / n * 1000:.2f} | " + " | ".join(spark_cells) + f" | {fastest} |"
        )
    rows = list(m["sizes"].values())
    loop_per_file = _per_file(rows, "loop_s")
    pool_per_file = _per_file(rows, "pool_s")
    lines += [
        "",
        f"Pool start, read and shutdown of 2 no-op items: {m['pool_per_call_s'] * 1000:.1f} ms made per call, "
        f"{m['pool_kept_s'] * 1000:.1f} ms on a kept pool. Per file (slope over the sizes): loop "
        f"{loop_per_file * 1000:.3f} ms, pool {pool_per_file * 1000:.3f} ms.",
        "",
        f"* Pool beats the loop from {_files(_break_even(m['pool_per_call_s'], loop_per_file, pool_per_file))}.",
    ]
    if has_spark:
        spark_per_file = _per_file(rows, "spark_s")
        fixed = m["spark_start_s"] + m["spark_job_s"]
        lines += [
            f"* Spark session start (getOrCreate + a first job): {m['spark_start_s']:.1f} s; a job's own "
            f"overhead {m['spark_job_s'] * 1000:.0f} ms; {spark_per_file * 1000:.3f} ms/file.",
            f"* Spark local[*] beats the pool, start included, from "
            f"{_files(_break_even(fixed - m['pool_per_call_s'], pool_per_file, spark_per_file))}; "
            f"start excluded, from {_files(_break_even(m['spark_job_s'], pool_per_file, spark_per_file))}.",
            f"* On a cluster whose executors make the per-file time negligible, Spark pays once the pool "
            f"takes longer than the session start: from ~{m['spark_start_s'] / pool_per_file:,.0f} files "
            "(a lower bound: a cluster's executor allocation adds to the start).",
        ]
    return lines


def readers_report(sizes: tuple[int, ...] = SIZES[False], repeat: int = 3, spark: bool = True) -> list[str]:
    info = machine()
    head = [
        f"`python -m benchmarks.readers --sizes {','.join(map(str, sizes))} --repeat {repeat}` on "
        f"{info['cores']} cores, Python {info['python']}, pyspark {info['pyspark']}, pyarrow {info['pyarrow']}; "
        f"load average {os.getloadavg()[0]:.1f} at the start (other work on the machine slows the pool and Spark "
        "most).",
        "",
    ]
    return head + report(measure(sizes, repeat, spark))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.readers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES[False])), help="file counts, comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (the best is kept)")
    parser.add_argument("--no-spark", action="store_true", help="leave Spark out")
    args = parser.parse_args(argv)
    sizes = tuple(int(s) for s in args.sizes.split(","))
    print("\n".join(readers_report(sizes, args.repeat, not args.no_spark)))


if __name__ == "__main__":
    main()
