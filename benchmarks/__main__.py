"""Every benchmark in one run, as one markdown report: `make bench` (or `python -m benchmarks`).

    python -m benchmarks [--large] [--output docs/benchmarks.md]

By default: the 1,000-dataset lake beside DataHub's source and the floor, runs of 100 and 1,000
datasets, code locations of 1,000 and 5,000 datasets, Dagster's instance storages (stock and tuned),
Lumos on Dagster's stock SQLite and PostgreSQL instances and the tuned one beside DataHub's source
and Dagster's floor, with ms per dataset-partition at 1,000 (benchmarks/tenancy.py), the store's
growth, a short soak of the deployment, the schema readers, the engines (the process pool, Spark local, a
standalone cluster and Spark Connect on 1,000 and 10,000 local and S3 files), a lake of 100 Delta tables × 20
versions and the micro benchmarks (about an hour on 2 cores: the runs on the shipped instance,
Dagster's stock one, take ~100 ms a dataset-partition). `--large` adds runs and code
locations of 10,000 datasets (ms per dataset-partition on each instance too) and larger micro
benchmarks. The long soak (`python -m benchmarks.soak
--long`), the 100,000-dataset estate (`python -m benchmarks.estate`) and the API under load run on
their own: their sections of the report are kept. Ratios come from one run on one machine, never
from timed tests.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import dagster_floor, delta, growth, instance, micro, scale, scan, soak, tenancy
from benchmarks.lake import generate_lake
from benchmarks.load_definitions import measure as load_definitions
from benchmarks.measure import machine

LAKE = (1_000, 10, 2)  # datasets, files, partitions: the lake beside DataHub's source
PAIRS = 3  # Lumos' whole run and Dagster's floor, in turn: the ratio the issue's target is on
DELTA_LAKE = (100, 20)
#: the report's sections of benchmarks run on their own, kept from the report being replaced: from the
#: first of these headings to the end
KEPT = ("## Runs on their own",)


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _side_by_side(datasets: int, files: int, partitions: int) -> tuple[list[str], dict]:
    folder = Path(tempfile.mkdtemp(prefix="lumos-bench-"))  # no `_` or `.` folder: DataHub would skip it
    try:
        lake = folder / "lake"
        start = time.perf_counter()
        truth = generate_lake(lake, datasets, files, partitions)
        took = time.perf_counter() - start
        _log(f"lake: {datasets} datasets × {files} files × {partitions} partitions in {took:.1f} s")
        rows = [scan.run_floor(lake, truth)]
        _log(f"floor: {rows[-1]['wall_s']:.1f} s")
        rows.append(scan.run_lumos(lake, folder / "lumos", partitions, truth))
        _log(f"lumos: {rows[-1]['wall_s']:.1f} s")
        if scan.datahub_available():
            rows.append(scan.run_datahub(lake, folder / "datahub", truth))
            _log(f"datahub: {rows[-1]['wall_s']:.1f} s")
        rescan = scan.rescan(lake, folder / "lumos")
        pairs = dagster_floor.paired(lake, datasets, partitions, truth, PAIRS, _log)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    floor, lumos = rows[0], rows[1]
    datahub = rows[2] if len(rows) > 2 else None
    lines = [
        f"### Full scan: {datasets:,} datasets × {files} files × {partitions} partitions "
        f"({datasets * files:,} files; Parquet, ORC, Avro, CSV, JSON lines; nested columns)",
        "",
        "| run | wall (s) | peak memory (MB) | datasets found | fields match the truth |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['tool']} | {r['wall_s']:.1f} | {r['peak_mb']:.0f} | {r['found']:,} / {datasets:,} "
            f"| {r['matching']:,} / {datasets:,} |"
        )
    lines += [
        "",
        "Lumos snapshots the newest partition (every dataset's files of that day), DataHub's source one "
        "file per table; the floor reads every file of the lake. Memory: the peak of the whole process "
        "tree's proportional set size (a page forked workers share counts once).",
        "",
    ]
    ratios = [("Lumos ÷ floor", lumos["wall_s"] / floor["wall_s"], "–")]
    if datahub:
        ratios += [
            ("DataHub ÷ Lumos (speed-up)", datahub["wall_s"] / lumos["wall_s"], "≥ 2×"),
            ("Lumos peak memory ÷ DataHub's", lumos["peak_mb"] / datahub["peak_mb"], "≤ 2×"),
        ]
    else:
        lines.append("DataHub's s3 source was not run: `.venv-datahub` is missing (`make bench` creates it).")
    lines += ["| ratio | value | target |", "|---|---:|---|"]
    lines += [f"| {name} | {value:.2f}× | {target} |" for name, value, target in ratios]
    lines += [
        "",
        f"Unchanged re-scan (a storage sensor tick, nothing changed): {rescan['rescan_s'] * 1000:.0f} ms for "
        f"{rescan['files']:,} files, {rescan['files_read']} file footers read; pure listing "
        f"{rescan['listing_s'] * 1000:.0f} ms: **{rescan['rescan_s'] / rescan['listing_s']:.2f}×** listing "
        "(target ≤ 1.2×).",
    ]
    return lines, {"lumos": lumos, "floor": floor, "datahub": datahub, "rescan": rescan, "pairs": pairs}


def _dagster_floor(datasets: int, lumos: dict, datahub: dict | None, pairs: list[tuple[float, float]]) -> list[str]:
    """What Dagster alone takes to record the side-by-side run's events (benchmarks/dagster_floor.py):
    the least Lumos' run can take while every dataset is a checked, partitioned asset."""
    rows = dagster_floor.measure([datasets], ("metadata", "no_checks", "load"), _log)
    lines = dagster_floor.render(rows)
    floor = rows[0]["wall_s"]
    ratios = sorted(a / b for a, b in pairs)
    lines += [
        "",
        f"Lumos' whole run (discover included) ÷ Dagster's floor: **{statistics.median(ratios):.2f}×**, the median "
        f"of {len(pairs)} pairs run in turn (Lumos, the floor, Lumos, …; {ratios[0]:.2f}× to {ratios[-1]:.2f}×; "
        f"medians {statistics.median(a for a, _ in pairs):.2f} s and {statistics.median(b for _, b in pairs):.2f} s). "
        f"The single runs above: {lumos['wall_s'] / floor:.2f}×. Target: ≤ 1.25×.",
    ]
    if datahub:
        lines.append(
            f"DataHub's source ÷ Dagster's floor: **{datahub['wall_s'] / floor:.2f}×**, the most any Lumos run "
            "of this lake could be faster than DataHub's source while Dagster records these events."
        )
    return lines


def _definitions(sizes: list[int]) -> list[str]:
    lines = [
        "### Code location load",
        "",
        "| datasets | import (s) | build definitions (s) | resolve asset graph (s) | in-process total (s) "
        "| `dagster definitions validate` (s) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for n in sizes:
        r = load_definitions(n)
        total = r["import"] + r["build"] + r["graph"]
        lines.append(
            f"| {n:,} | {r['import']:.2f} | {r['build']:.2f} | {r['graph']:.2f} | {total:.2f} | {r['validate']:.2f} |"
        )
        _log(f"definitions {n}: {total:.1f} s in process, validate {r['validate']:.1f} s")
    return lines + [
        "",
        "The build resolves the asset graph itself (with the cycle collector paused, "
        "lumos_dagster/definitions.py): the graph column is Dagster's cached answer.",
        "Target: a code location with 5,000 datasets loads in ≤ 3 s.",
    ]


def readers(large: bool = False) -> list[str]:
    """The schema readers side by side (benchmarks/readers.py): where the process pool and
    Spark start to pay; `python -m benchmarks.readers` runs it alone."""
    from benchmarks import readers as readers_bench

    return readers_bench.readers_report(readers_bench.SIZES[large])


def engines() -> list[str]:
    """The pool and Spark's engines side by side, schemas and profiles, local files and S3
    (benchmarks/engines.py): where a cluster pays; `python -m benchmarks.engines` runs it alone."""
    from benchmarks import engines as engines_bench

    return engines_bench.engines_report()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    parser.add_argument("--large", action="store_true", help="the issue's target sizes (takes much longer)")
    parser.add_argument("--output", default="docs/benchmarks.md", help="where to write the report")
    args = parser.parse_args(argv)
    info = machine()
    header = [
        "# Benchmarks",
        "",
        f"`python -m benchmarks{' --large' if args.large else ''}` on {info['cores']} cores, "
        f"{info['memory_gib']:.1f} GiB, Python {info['python']}, {info['platform']}; "
        + ", ".join(f"{k} {info[k]}" for k in ("dagster", "pyspark", "acryl-datahub", "pyarrow")),
        "",
    ]
    side, runs = _side_by_side(*LAKE)
    floor = _dagster_floor(LAKE[0], runs["lumos"], runs["datahub"], runs["pairs"])
    scaling = scale.render(scale.measure([100, 1_000, 10_000] if args.large else [100, 1_000], _log))
    storages = instance.measure(500, _log)
    _log("Lumos on Dagster's stock instances beside DataHub…")
    shared = tenancy.side_by_side(LAKE[0], *LAKE[1:], log=_log)
    for n in [1_000, 10_000] if args.large else [1_000]:
        shared += ["", *instance.measure(n, _log, tenancy.MEASURED)]
    _log("store growth…")
    stored = growth.render(growth.measure_all(log=_log))
    _log("short soak of the deployment…")
    soaked = ["### Soak, short: `python -m benchmarks.soak`", "", soak.render(soak.soak(200, 4, 1.0, False, None))]
    definitions = _definitions([1_000, 5_000, 10_000] if args.large else [1_000, 5_000])
    _log("schema readers…")
    reading = readers(args.large)
    _log("engines…")
    engined = engines()
    _log("delta lake…")
    tables = delta.render(delta.measure(*DELTA_LAKE))
    _log("micro benchmarks…")
    rows = micro.run_all(args.large)
    sections = [
        side,
        floor,
        scaling,
        storages,
        shared,
        stored,
        soaked,
        definitions,
        reading,
        engined,
        tables,
        ["### Micro benchmarks", "", micro.render(rows)],
    ]
    report = "\n".join(header + [line for section in sections for line in [*section, ""]])
    output = Path(args.output)
    earlier = output.read_text() if output.exists() else ""
    kept = [earlier.index(h) for h in KEPT if h in earlier]
    if kept:  # benchmarks run on their own keep their sections
        report += "\n" + earlier[min(kept) :]
    output.write_text(report)
    print(report)


if __name__ == "__main__":
    main()
