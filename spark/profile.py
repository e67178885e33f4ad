"""Profiling a dataset partition on Spark: row count and, per top-level column, null fraction,
distinct estimate (HyperLogLog), min and max — one aggregation pass over (a sample of) the data.

Local Parquet, ORC, CSV/TSV and JSON lines are read by Spark itself, skipping corrupt files (the
schema pass has reported them already), on a master or a Spark Connect server alike.

Files on an object store (S3, Azure, GCS, HDFS) and Avro files anywhere are read in Spark's Python
workers instead: Spark here has neither the hadoop-aws jars for s3a:// nor spark-avro, and cannot fetch
them. A DataFrame of the paths is mapped (`mapInArrow`, which Spark Connect has too, unlike RDDs) by a
function that opens each file through the file system the source lists it with
(`lumos_dagster.formats.rows`: pyarrow, fastavro) and yields Arrow record batches; the credentials are
each worker's own SDK chain, as for the schema reads, never in the plan. The columns are those of the
first file with rows; another file's columns are cast to them. A file that cannot be read fails the
dataset's profile, naming the file.

Which files are read (within `profile.max_bytes`) is decided before: `lumos_dagster.governance.profiling`.
"""

from __future__ import annotations

import re
from typing import Sequence

from lumos_dagster.floor.errors import NotProfiled
from lumos_dagster.floor.model import ColumnProfile, Profile
from lumos_dagster.formats import FsSpec
from lumos_dagster.spark.schemas import parallelism
from lumos_dagster.spark.session import is_connect

_NATIVE = {
    "parquet": ("parquet", {}),
    "orc": ("orc", {}),
    "csv": ("csv", {"header": "true", "inferSchema": "true"}),
    "tsv": ("csv", {"header": "true", "inferSchema": "true", "sep": "\t"}),
    "json": ("json", {}),
}
PROFILED_FORMATS = (*_NATIVE, "avro")
#: how a worker names the file it could not read, for the driver to find in Spark's error
_UNREADABLE = "lumos: unreadable file "
_UNREADABLE_LINE = re.compile(re.escape(_UNREADABLE) + r"(.+)")


def load_frame(spark, paths: Sequence[str], fmt: str | None, fs: FsSpec | None = None):
    if not paths:
        raise NotProfiled("no readable file in the partition")
    if fmt not in PROFILED_FORMATS:
        raise NotProfiled(f"{fmt or 'unknown'} files are not profiled (profiled: {', '.join(PROFILED_FORMATS)})")
    if fs is None:
        remote = [p for p in paths if "://" in p and not p.startswith("file://")]
        if remote:
            raise NotProfiled(f"{remote[0]}: no file system to read it with (the source's is needed)")
    if fs is None and fmt in _NATIVE:
        kind, options = _NATIVE[fmt]
        return spark.read.options(ignoreCorruptFiles="true", **options).format(kind).load(list(paths))
    return _worker_frame(spark, list(paths), fmt, fs)


def _worker_frame(spark, paths: list[str], fmt: str, fs: FsSpec | None):
    """The files' rows, read by `lumos_dagster.formats.rows` in the Python workers, one task per file (up
    to the cluster's parallelism)."""
    from pyspark.sql.pandas.types import from_arrow_type, to_arrow_schema
    from pyspark.sql.types import StringType, StructField, StructType

    from lumos_dagster.formats.rows import batch_schema, conform, record_batches

    found = None
    for path in paths:  # the columns read: the first file with rows says them
        try:
            found = batch_schema(path, fmt, fs)
        except Exception as exc:
            raise NotProfiled(f"cannot read {path}: {_line(exc)}") from exc
        if found is not None:
            break
    if found is None:
        raise NotProfiled(f"the {fmt} files hold no rows")
    fields = []
    for f in found:
        try:
            kind = from_arrow_type(f.type)
        except Exception:  # a type Spark has no counterpart for (unsigned 64-bit, a UUID extension…): as text
            kind = StringType()
        fields.append(StructField(f.name, kind, True))
    schema = StructType(fields)
    target = to_arrow_schema(schema, timezone="UTC")  # what Spark takes back, exactly

    def read(batches):
        for b in batches:
            for path in b.column(0).to_pylist():
                try:
                    for batch in record_batches(path, fmt, fs):
                        yield conform(batch, target)
                except Exception as exc:
                    raise RuntimeError(f"{_UNREADABLE}{path}: {_line(exc)}") from None

    slices = max(1, min(len(paths), parallelism(spark, is_connect(spark))))
    frame = spark.createDataFrame([(p,) for p in paths], "path string").repartition(slices)
    return frame.mapInArrow(read, schema)


def _line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def profile_frame(df, sample: float, seed: int = 0) -> Profile:
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, BinaryType, MapType, StructType

    if sample < 1:
        df = df.sample(fraction=sample, seed=seed)
    fields = df.schema.fields
    exprs = [F.count(F.lit(1)).alias("rows")]
    ordered = {}
    for i, f in enumerate(fields):
        column = F.col(f"`{f.name}`")
        exprs.append(F.sum(F.when(column.isNull(), 1).otherwise(0)).alias(f"nulls{i}"))
        # nested values have no order or cheap distinct count: nulls only
        ordered[i] = not isinstance(f.dataType, (StructType, ArrayType, MapType, BinaryType))
        if ordered[i]:
            exprs += [
                F.approx_count_distinct(column).alias(f"distinct{i}"),
                F.min(column).alias(f"min{i}"),
                F.max(column).alias(f"max{i}"),
            ]
    row = df.agg(*exprs).first().asDict()
    rows = row["rows"]

    def text(value) -> str | None:
        return None if value is None else str(value)

    columns = tuple(
        ColumnProfile(
            f.name,
            row[f"nulls{i}"] / rows if rows else None,
            row[f"distinct{i}"] if ordered[i] else None,
            text(row[f"min{i}"]) if ordered[i] else None,
            text(row[f"max{i}"]) if ordered[i] else None,
        )
        for i, f in enumerate(fields)
    )
    return Profile(rows, sample, columns)


def profile_files(spark, paths: Sequence[str], fmt: str | None, sample: float, fs: FsSpec | None = None) -> Profile:
    """The profile of all of `paths` (on `fs`; None: local); a file a worker cannot read raises
    `NotProfiled` naming it."""
    frame = load_frame(spark, paths, fmt, fs)
    try:
        return profile_frame(frame, sample)
    except Exception as exc:
        found = _UNREADABLE_LINE.search(str(exc))
        if found is None:
            raise
        raise NotProfiled(f"cannot read {found.group(1).strip()}") from None
