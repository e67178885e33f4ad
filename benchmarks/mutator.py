"""A lake that keeps changing, and what each change should make the catalog show.

The soak benchmark (benchmarks/soak.py) drives it against a running deployment. The lake holds
daily-partitioned datasets (`<domain>/<name>/dt=YYYY-MM-DD/part-N.<ext>`) whose newest partition is
today's (UTC). Each change is made to today's partition, so the catalog (which shows a dataset's
newest partition) must come to show it. Every change returns an `Expectation`: a test on the
dataset as DataHub Lite holds it (a Lumos snapshot read back), and when the change landed.

Changes: new datasets, new files in today's partition, added, dropped, widened and renamed
columns (nested ones too), deleted datasets, torn files (a CSV written in two halves a few seconds
apart: the half must never become a version), files dated tomorrow (must never fail a tick), and
commits to Delta tables. What writers really do (issue 41): a CSV cut inside its header (the copy
completes seconds later), a header-only CSV as a partition's only file and beside others, a file whose
modification time is hours or a day ahead of the sensor's clock, and a file written in several appends
seconds apart. None of those may become a version: `Lake.partial` names the datasets they touched, whose
columns no other change touches.
"""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import threading
import time
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

import fastavro
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from lumos_dagster.floor.model import Snapshot

ARROW = {"int32": pa.int32(), "int64": pa.int64(), "string": pa.string(), "bool": pa.bool_(), "double": pa.float64()}
AVRO = {"int32": "int", "int64": "long", "string": "string", "bool": "boolean", "double": "double"}
#: what each change type is, and how often the mutator picks it
WEIGHTS = {
    "new_file": 30,
    "add_column": 12,
    "add_nested": 6,
    "drop_column": 8,
    "widen_column": 8,
    "rename_column": 6,
    "new_dataset": 8,
    "delete_dataset": 6,
    "torn_file": 6,
    "tomorrow_file": 4,
    "delta_commit": 6,
    "header_cut": 4,
    "header_only": 3,
    "header_only_beside": 3,
    "future_file": 4,
    "appended_file": 4,
}
#: how far ahead of the sensor's clock a future_file's modification time is (a writer's clock, a copy's)
AHEAD = (2 * 3600, 86400)


def today() -> date:
    return datetime.now(timezone.utc).date()


@dataclass
class Dataset:
    name: str
    fmt: str  # parquet | csv | jsonl | avro | delta
    columns: dict[str, str]  # top-level column → type (int32, int64, string, bool, double, struct)
    nested: dict[str, str] = field(default_factory=dict)  # children of the `info` struct column
    files: int = 1  # files in today's partition
    older: int = 0  # files in its other partitions: the catalog counts the whole table's

    @property
    def total_files(self) -> int:
        return self.older + self.files

    def fields(self) -> list[str]:
        """Flat field paths the catalog should show."""
        out = [c for c in self.columns if c != "info" or not self.nested]
        if "info" in self.columns and self.nested:
            out += ["info"] + [f"info.{n}" for n in self.nested]
        return sorted(out)

    def arrow_schema(self) -> pa.Schema:
        cols = []
        for name, kind in self.columns.items():
            if kind == "struct":
                cols.append((name, pa.struct([(n, ARROW[k]) for n, k in self.nested.items()])))
            else:
                cols.append((name, ARROW[kind]))
        return pa.schema(cols)


@dataclass
class Expectation:
    change: str
    dataset: str
    landed: float  # epoch seconds the change was complete in storage
    test: Callable[[Snapshot | None], bool]
    note: str = ""
    seen: float | None = None  # when the catalog first showed it
    shown: Snapshot | None = None  # what it showed then


def _rows(ds: Dataset, n: int = 5) -> list[dict]:
    def value(kind: str, i: int):
        return {"int32": i, "int64": i * 1000, "string": f"v{i}", "bool": i % 2 == 0, "double": i / 3}[kind]

    out = []
    for i in range(n):
        row = {}
        for name, kind in ds.columns.items():
            row[name] = {k: value(t, i) for k, t in ds.nested.items()} if kind == "struct" else value(kind, i)
        out.append(row)
    return out


def encode(ds: Dataset) -> bytes:
    rows = _rows(ds)
    if ds.fmt == "jsonl":
        return "".join(json.dumps(r) + "\n" for r in rows).encode()
    if ds.fmt == "avro":

        def avro_type(name, kind):
            if kind == "struct":
                return {
                    "type": "record",
                    "name": f"{name}_r",
                    "fields": [{"name": n, "type": AVRO[k]} for n, k in ds.nested.items()],
                }
            return AVRO[kind]

        schema = {
            "type": "record",
            "name": "row",
            "fields": [{"name": n, "type": avro_type(n, k)} for n, k in ds.columns.items()],
        }
        buffer = io.BytesIO()
        fastavro.writer(buffer, fastavro.parse_schema(schema), rows)
        return buffer.getvalue()
    table = pa.Table.from_pylist(rows, schema=ds.arrow_schema())
    sink = pa.BufferOutputStream()
    if ds.fmt == "csv":
        pa_csv.write_csv(table, sink)
    else:
        pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def _later(seconds: float, path: Path, data: bytes, mode: str = "wb") -> None:
    """Write (or append) `data` to `path` `seconds` from now, as a writer still at it does; not when a
    later change removed its folder meanwhile."""

    def write() -> None:
        if path.parent.exists():
            with open(path, mode) as fh:
                fh.write(data)

    threading.Timer(seconds, write).start()


class Lake:
    """The lake and its model: what every dataset holds now."""

    def __init__(self, root: Path, seed: int = 7):
        self.root = root
        self.rng = random.Random(seed)
        self.datasets: dict[str, Dataset] = {}
        self.removed: set[str] = set()
        self.partial: set[str] = set()  # datasets a cut, header-only or appended file touched: never a version
        self.counter = 0
        self.lock = threading.Lock()

    # ------------------------------------------------------------------ building

    def _new(self, fmt: str) -> Dataset:
        self.counter += 1
        kinds = ["int32", "int64", "string", "bool", "double"]
        columns = {f"c{i}": self.rng.choice(kinds) for i in range(self.rng.randint(3, 7))}
        nested = {}
        if fmt in ("parquet", "avro", "jsonl"):
            columns["info"] = "struct"
            nested = {"a": "int64", "b": "string"}
        return Dataset(f"d{self.counter % 20}/ds_{self.counter}", fmt, columns, nested)

    def folder(self, ds: Dataset, day: date) -> Path:
        return self.root / ds.name / f"dt={day.isoformat()}"

    def _write(self, ds: Dataset, day: date, part: int = 0) -> Path:
        path = self.folder(ds, day) / f"part-{part}.{ds.fmt}"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")  # a whole file appears at once (as object stores do)
        tmp.write_bytes(encode(ds))
        tmp.replace(path)
        return path

    def _rewrite_today(self, ds: Dataset) -> None:
        """Today's partition holds the dataset's current schema in all its files."""
        for part in range(ds.files):
            self._write(ds, today(), part)

    def build(self, count: int, days: int = 3, deltas: int = 4) -> None:
        """`count` datasets (formats mixed; `deltas` of them Delta tables), each with `days` daily
        partitions ending today."""
        fmts = ["parquet", "parquet", "jsonl", "avro", "csv"]
        for i in range(count - deltas):
            ds = self._new(fmts[i % len(fmts)])
            for d in range(days):
                self._write(ds, today() - timedelta(days=d))
            ds.older = days - 1
            self.datasets[ds.name] = ds
        for _ in range(deltas):
            self._new_delta()

    def _new_delta(self) -> Dataset:
        from deltalake import write_deltalake

        self.counter += 1
        ds = Dataset(f"tables/delta_{self.counter}", "delta", {"id": "int64", "amount": "double"})
        write_deltalake(str(self.root / ds.name), pa.Table.from_pylist(_rows(ds), schema=ds.arrow_schema()))
        self.datasets[ds.name] = ds
        return ds

    # ------------------------------------------------------------------ changing

    def change(self) -> Expectation | None:
        """One change, chosen by WEIGHTS; its expectation (None: nothing for the catalog to show)."""
        kind = self.rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()))[0]
        with self.lock:
            return getattr(self, kind)()

    def _pick(self, *fmts: str) -> Dataset | None:
        names = [n for n, d in self.datasets.items() if d.fmt in fmts and n not in self.removed]
        return self.datasets[self.rng.choice(names)] if names else None

    def _expect_fields(self, change: str, ds: Dataset, note: str = "") -> Expectation:
        fields = ds.fields()

        def shown(s: Snapshot | None) -> bool:
            return s is not None and not s.removed and sorted(p for p, _ in s.schema.flatten()) == fields

        return Expectation(change, ds.name, time.time(), shown, note)

    def new_file(self) -> Expectation | None:
        ds = self._pick("parquet", "jsonl", "avro", "csv")
        if ds is None:
            return None
        self._write(ds, today(), ds.files)
        ds.files += 1
        files, day = ds.total_files, today().isoformat()

        def shown(s: Snapshot | None) -> bool:  # DataHub holds the whole table's file count, as its s3 source does
            return s is not None and s.partition_key == day and s.stats.file_count >= files

        return Expectation("new_file", ds.name, time.time(), shown)

    def add_column(self) -> Expectation | None:
        ds = self._pick("parquet", "avro")
        if ds is None:
            return None
        ds.columns[f"added_{self.counter}_{self.rng.randint(0, 999)}"] = self.rng.choice(["int64", "string"])
        self._rewrite_today(ds)
        return self._expect_fields("add_column", ds)

    def add_nested(self) -> Expectation | None:
        ds = self._pick("parquet", "avro")
        if ds is None or not ds.nested:
            return None
        ds.nested[f"n{self.rng.randint(0, 10**6)}"] = "string"
        self._rewrite_today(ds)
        return self._expect_fields("add_nested", ds)

    def drop_column(self) -> Expectation | None:
        ds = self._pick("parquet", "avro")
        plain = [c for c, k in ds.columns.items() if k != "struct"] if ds else []
        if len(plain) < 3:
            return None
        del ds.columns[self.rng.choice(plain)]
        self._rewrite_today(ds)
        return self._expect_fields("drop_column", ds)

    def widen_column(self) -> Expectation | None:
        ds = self._pick("parquet", "avro")
        narrow = [c for c, k in ds.columns.items() if k == "int32"] if ds else []
        if not narrow:
            return None
        column = self.rng.choice(narrow)
        ds.columns[column] = "int64"
        self._rewrite_today(ds)

        def shown(s: Snapshot | None) -> bool:
            return s is not None and any(p == column and "int64" in str(f.type) for p, f in s.schema.flatten())

        return Expectation("widen_column", ds.name, time.time(), shown)

    def rename_column(self) -> Expectation | None:
        ds = self._pick("parquet", "avro")
        plain = [c for c, k in ds.columns.items() if k != "struct"] if ds else []
        if not plain:
            return None
        old = self.rng.choice(plain)
        ds.columns = {(f"{old}_renamed" if c == old else c): k for c, k in ds.columns.items()}
        self._rewrite_today(ds)
        return self._expect_fields("rename_column", ds)

    def new_dataset(self) -> Expectation:
        ds = self._new(self.rng.choice(["parquet", "jsonl", "avro"]))
        self._write(ds, today())
        self.datasets[ds.name] = ds
        return self._expect_fields("new_dataset", ds)

    def delete_dataset(self) -> Expectation | None:
        ds = self._pick("parquet", "jsonl", "avro", "csv")
        if ds is None:
            return None
        shutil.rmtree(self.root / ds.name)
        self.removed.add(ds.name)
        return Expectation("delete_dataset", ds.name, time.time(), lambda s: s is not None and s.removed)

    def torn_file(self) -> Expectation | None:
        """A CSV file written in two halves seconds apart: the catalog shows the whole file's schema,
        never the half's (`torn` in the note: the soak checks no version had its cut-off type)."""
        ds = self._pick("csv")
        if ds is None:
            return None
        data, path = encode(ds), self._part(ds)  # today's folder made: a soak may cross midnight
        cut = data.rindex(b"\n", 0, len(data) - 1) + 3  # inside the last row's first values
        path.write_bytes(data[:cut])
        _later(3.0, path, data)
        expected = self._expect_fields("torn_file", ds, note=f"torn:{path}")
        expected.landed += 3.0
        return expected

    def _part(self, ds: Dataset) -> Path:
        """The path of a new file of today's partition."""
        path = self.folder(ds, today()) / f"part-{ds.files}.{ds.fmt}"
        path.parent.mkdir(parents=True, exist_ok=True)
        ds.files += 1
        return path

    def _files_shown(self, change: str, ds: Dataset, delay: float = 0.0, exact: bool = False) -> Expectation:
        """The catalog shows today's partition with the dataset's files (the whole table's: `exact`, no more)
        and fields, its columns unchanged."""
        files, day, fields = ds.total_files, today().isoformat(), ds.fields()

        def shown(s: Snapshot | None) -> bool:
            count = s is not None and (s.stats.file_count == files if exact else s.stats.file_count >= files)
            return (s is not None and count and s.partition_key == day
                    and sorted(p for p, _ in s.schema.flatten()) == fields)  # fmt: skip

        return Expectation(change, ds.name, time.time() + delay, shown)

    def header_cut(self) -> Expectation | None:
        """A CSV cut inside its header (`id,amount,nam`: a copy still in flight), completed seconds later: the
        cut file is unreadable, never a version (it was 2.0.0: fields removed, added, retyped null)."""
        ds = self._pick("csv")
        if ds is None:
            return None
        data, path = encode(ds), self._part(ds)
        header = data.index(b"\n")
        path.write_bytes(data[: max(1, header - 2)])
        _later(4.0, path, data)
        self.partial.add(ds.name)
        return self._files_shown("header_cut", ds, delay=4.0)

    def header_only(self) -> Expectation | None:
        """Today's partition becomes one header-only CSV: its columns keep the types the dataset has (it was
        every column TYPE_NARROWED to null, 2.0.0)."""
        ds = self._pick("csv")
        if ds is None:
            return None
        shutil.rmtree(self.folder(ds, today()), ignore_errors=True)
        ds.files = 0
        path, data = self._part(ds), encode(ds)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(data[: data.index(b"\n") + 1])
        tmp.replace(path)
        self.partial.add(ds.name)
        return self._files_shown("header_only", ds, exact=True)

    def header_only_beside(self) -> Expectation | None:
        """A header-only CSV beside the partition's other files."""
        ds = self._pick("csv")
        if ds is None:
            return None
        path, data = self._part(ds), encode(ds)
        path.write_bytes(data[: data.index(b"\n") + 1])
        self.partial.add(ds.name)
        return self._files_shown("header_only_beside", ds)

    def future_file(self) -> Expectation | None:
        """A whole new file whose modification time is hours or a day ahead (it was never taken)."""
        ds = self._pick("parquet", "jsonl", "avro")
        if ds is None:
            return None
        path = self._write(ds, today(), ds.files)
        ds.files += 1
        ahead = time.time() + self.rng.choice(AHEAD)
        os.utime(path, (ahead, ahead))
        return self._files_shown("future_file", ds)

    def appended_file(self) -> Expectation | None:
        """A CSV or JSON lines file written in four appends two seconds apart, the last one's rows whole."""
        ds = self._pick("csv", "jsonl")
        if ds is None:
            return None
        data, path = encode(ds), self._part(ds)
        lines = data.splitlines(keepends=True)
        chunks = [b"".join(lines[i::4]) for i in range(4)] if ds.fmt == "jsonl" else None
        if chunks is None:  # a CSV's header first, then its rows
            header, rows = lines[0], lines[1:]
            chunks = [header + b"".join(rows[:1])] + [b"".join(rows[i::3]) for i in range(1, 4)]
        path.write_bytes(chunks[0])
        for i, chunk in enumerate(chunks[1:], 1):
            _later(2.0 * i, path, chunk, "ab")
        self.partial.add(ds.name)
        return self._files_shown("appended_file", ds, delay=6.0)

    def tomorrow_file(self) -> None:
        ds = self._pick("parquet")
        if ds is not None:
            self._write(ds, today() + timedelta(days=1))
        return None

    def delta_commit(self) -> Expectation:
        from deltalake import write_deltalake

        ds = self._pick("delta") or self._new_delta()
        ds.columns[f"col_{self.rng.randint(0, 10**6)}"] = "string"
        write_deltalake(str(self.root / ds.name), pa.Table.from_pylist(_rows(ds), schema=ds.arrow_schema()),
                        mode="append", schema_mode="merge")  # fmt: skip
        return self._expect_fields("delta_commit", ds)

    def first(self, since: float) -> list[Expectation]:
        """Every dataset's first snapshot, today's partition, which nobody materializes (issue 41): the
        sensors' first tick requests it, the deployment started at `since` (epoch s)."""
        day = today().isoformat()
        return [Expectation("first_snapshot", name, since, lambda s: s is not None and s.partition_key == day)
                for name in self.datasets]  # fmt: skip

    def truth(self) -> dict[str, list[str]]:
        return {n: d.fields() for n, d in self.datasets.items() if n not in self.removed}
