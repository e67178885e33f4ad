"""Lumos on Dagster's stock instances, side by side with DataHub's `s3` source and Dagster's own floor.

    .venv/bin/python -m benchmarks.tenancy [--lake 1000] [--sizes 1000 10000]

One run of each, on one machine: the 1,000-dataset lake (10 files × 2 partitions a dataset) read by
DataHub's `s3` source once, and by Lumos the README's way (`lumos discover`, one `dagster asset
materialize` of the newest partition) on each instance: Dagster's stock SQLite storage (the shipped
dagster.yaml), its stock PostgreSQL storage (dagster-postgres, a fresh database per run, the
server on 127.0.0.1:5432) and the tuned SQLite event log (the shipped dagster.yaml's switch on).
On the same instance, Dagster's floor: the same number of daily-partitioned assets with two checks
each, their events of Lumos' size, and no Lumos work (benchmarks/dagster_floor.py, `metadata`).
Then what a dataset-partition costs at each of `--sizes` on each instance (benchmarks/instance.py:
`dagster job execute` of the daily snapshot job over N datasets and over 1).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import yaml

from benchmarks import dagster_floor, instance, scan
from benchmarks.lake import generate_lake
from benchmarks.scan import ROOT

#: the instances, by their label
KINDS = ("stock SQLite", "stock PostgreSQL", "tuned SQLite")
MEASURED = (
    instance.Instance("stock SQLite (the shipped dagster.yaml)", postgres=False, tuned=False, automation=False),
    instance.Instance("stock PostgreSQL (dagster-postgres)", postgres=True, tuned=False, automation=False),
    instance.Instance("tuned SQLite (dagster.yaml's switch on)", postgres=False, tuned=True, automation=False),
)


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@contextmanager
def instance_yaml(kind: str) -> Iterator[str]:
    """The dagster.yaml of `kind`, on a fresh PostgreSQL database (dropped afterwards) for PostgreSQL."""
    shipped = yaml.safe_load((ROOT / "dagster.yaml").read_text())
    if kind == "stock SQLite":
        yield (ROOT / "dagster.yaml").read_text()
    elif kind == "tuned SQLite":
        yield instance.tuned_sqlite_yaml()
    else:
        name = instance._postgres_database()
        try:
            url = f"postgresql+psycopg2://postgres@127.0.0.1:5432/{name}"  # dagster-postgres' NOTIFY needs psycopg2
            yield yaml.safe_dump({**shipped, "storage": {"postgres": {"postgres_url": url}}})
        finally:
            instance._drop(name)


def side_by_side(datasets: int, files: int = 10, partitions: int = 2, kinds=KINDS, log=_log) -> list[str]:
    folder = Path(tempfile.mkdtemp(prefix="lumos-tenancy-"))  # no `_` or `.` folder: DataHub would skip it
    try:
        lake = folder / "lake"
        truth = generate_lake(lake, datasets, files, partitions)
        datahub = scan.run_datahub(lake, folder / "datahub", truth) if scan.datahub_available() else None
        if datahub:
            log(f"datahub: {datahub['wall_s']:.1f} s")
        rows = []
        for i, kind in enumerate(kinds):
            with instance_yaml(kind) as text:
                lumos = scan.run_lumos(lake, folder / f"lumos-{i}", partitions, truth, text)
            (folder / f"floor-{i}").mkdir()
            with instance_yaml(kind) as text:
                floor = dagster_floor.run_variant(datasets, "metadata", folder / f"floor-{i}", text)
            assert floor["status"] == "SUCCESS", floor
            log(f"{kind}: Lumos {lumos['wall_s']:.1f} s, Dagster's floor {floor['wall_s']:.1f} s")
            rows.append((kind, lumos, floor))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    lines = [
        f"### Lumos on Dagster's instances beside DataHub's `s3` source: {datasets:,} datasets × {files} files "
        f"× {partitions} partitions",
        "",
        "| instance | Lumos (s) | datasets found | DataHub ÷ Lumos (speed-up) | Dagster's floor (s) | Lumos ÷ floor "
        "| Lumos ms per dataset | floor ms per asset |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for kind, lumos, floor in rows:
        speed = f"{datahub['wall_s'] / lumos['wall_s']:.2f}×" if datahub else "–"
        lines.append(
            f"| {kind} | {lumos['wall_s']:.1f} | {lumos['found']:,} / {datasets:,} | {speed} | {floor['wall_s']:.1f} "
            f"| {lumos['wall_s'] / floor['wall_s']:.2f}× | {lumos['wall_s'] / datasets * 1000:.1f} "
            f"| {floor['wall_s'] / datasets * 1000:.1f} |"
        )
    lines += [
        "",
        f"DataHub's `s3` source (`datahub ingest`, file sink): {datahub['wall_s']:.1f} s, one run."
        if datahub
        else "DataHub's s3 source was not run: `.venv-datahub` is missing (`make bench` creates it).",
        "Lumos: `lumos discover` and one `dagster asset materialize` of the newest partition (its planned events "
        "included: a person's run). Dagster's floor: `dagster asset materialize` of as many partitioned assets, "
        "two checks each, events of Lumos' size, no Lumos work, on a fresh instance of the same kind. On the "
        "tuned instance the floor's run is not Lumos' (no `lumos/run` tag): its events are written as Dagster "
        "writes them, as any other code location's are.",
    ]
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tenancy", description=__doc__.split("\n\n")[0])
    parser.add_argument("--lake", type=int, default=1_000, help="datasets of the side-by-side lake (0: skip it)")
    parser.add_argument("--sizes", type=int, nargs="*", default=[1_000], help="N for ms per dataset-partition")
    args = parser.parse_args(argv)
    lines = side_by_side(args.lake) if args.lake else []
    for n in args.sizes:
        lines += ["", *instance.measure(n, _log, MEASURED)]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
